"""The Regimes experiments' grids, tables and LR sensitivity, on summaries made up for the purpose
(the comparison rule itself is tested in test_stats); the CLI end to end on a few short runs."""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest

from attncore.config import ConfigError, make_run
from lab import stats
from lab.experiments import regimes
from lab.store import list_cached


def made_up(cells, loss_of):
    """{run: summary} with test_loss = loss_of(run) and a per-sequence accuracy of 1 - that loss."""
    out = {}
    for run in regimes.all_runs(cells):
        loss = loss_of(run)
        out[run] = {"config": run.to_dict(), "test_loss": loss, "sequence_accuracy": 1 - loss}
    return out


def test_the_depth_grid_pairs_pre_and_post_ln_over_the_same_seeds_in_every_cell():
    cells = regimes.depth_cells([0, 1], steps=100)
    assert len(cells) == len(regimes.DEPTHS) * len(regimes.DEPTH_LRS) * 2
    keys = {(c.key["layers"], c.key["lr"], c.key["warmup"]) for c in cells}
    assert {w for _, _, w in keys} == {0, 20}  # a fifth of the steps
    for cell in cells:
        pre, post = cell.groups.values()
        assert [r.model.norm for r in pre] == ["pre", "pre"] and [r.model.norm for r in post] == ["post", "post"]
        assert [r.train.seed for r in pre] == [r.train.seed for r in post] == [0, 1]
        assert {r.model.n_layers for r in pre + post} == {cell.key["layers"]}
        assert {r.train.warmup for r in pre + post} == {cell.key["warmup"]}


def test_the_heads_grid_varies_the_head_size_at_one_or_four_heads():
    for heads in (1, 4):
        cells = regimes.head_cells([0], heads=heads, sizes=(8, 16))
        for cell in cells:
            on, off = cell.groups.values()
            assert on[0].model.d_head == off[0].model.d_head == cell.key["d_k"]
            assert on[0].model.n_heads == heads and on[0].model.scaling and not off[0].model.scaling


def test_a_warm_up_pair_takes_a_fifth_of_the_steps():
    cell = regimes.lr_cells([0], pair="warmup", steps=50, lrs=(1e-3,))[0]
    assert [runs[0].train.warmup for runs in cell.groups.values()] == [0, 10]
    with pytest.raises(ValueError, match="pair must be one of"):
        regimes.lr_cells([0], pair="bogus")


def test_the_table_shows_a_difference_where_every_seed_differs_and_none_where_they_agree():
    cells = regimes.depth_cells(range(6), steps=100, depths=(2, 8), lrs=(1e-2,))

    # post-LN at 8 blocks without warm-up: worse on every seed by a seed-dependent amount; equal elsewhere
    def loss(run):
        bad = run.model.norm == "post" and run.model.n_layers == 8 and run.train.warmup == 0
        return 0.1 + (0.5 + 0.01 * run.train.seed if bad else 0.0)

    rows = regimes.table(cells, made_up(cells, loss))
    test = rows[rows["metric"] == regimes.LOSS].set_index(["layers", "warmup"])
    assert test.loc[(8, 0), "verdict"] == stats.SHOWN
    assert test.loc[(8, 0), "ci_low"] > 0
    assert test.loc[(8, 0), "variant_mean"] == pytest.approx(0.625)
    assert (test.drop(index=(8, 0))["verdict"] == stats.IDENTICAL).all()
    text = regimes.finding(rows)
    assert "8 blocks, lr 1e-2, no warm-up" in text and "1 cell of 4" in text
    assert "The others: 3 cells: identical on every seed." in text  # what the other cells are, not a guess


def test_the_finding_says_fails_only_where_every_seed_is_past_the_failure_loss_and_worse_where_only_worse():
    cells = [c for c in regimes.depth_cells(range(6), steps=100, depths=(8,), lrs=(3e-3, 1e-2)) if not c.key["warmup"]]
    partly = [0.082, 0.689, 1.583, 3.000, 0.564, 3.000]  # one seed trained, two failed (as in a real rerun)

    def loss(run):
        if run.model.norm == "pre":
            return 0.02 + run.train.seed / 1000
        return partly[run.train.seed] if run.train.lr == 3e-3 else 2.99 + run.train.seed / 1000

    rows = regimes.table(cells, made_up(cells, loss))
    test = rows[rows["metric"] == regimes.LOSS].set_index("lr")
    assert test.loc[3e-3, "variant_failed"] == 2 and test.loc[1e-2, "variant_failed"] == 6
    assert (test["baseline_failed"] == 0).all() and (test["verdict"] == stats.SHOWN).all()
    text = regimes.finding(rows)
    assert "8 blocks, lr 3e-3, no warm-up (Δ +1.46: post-LN worse on every seed)" in text
    assert "8 blocks, lr 1e-2, no warm-up (Δ +2.97: post-LN fails on every seed)" in text
    assert text.count("fails on every seed") == 1 and text.endswith(regimes.FAILED_TEXT)  # the threshold said, once
    assert f"at least {regimes.FAILED_LOSS:.2f}" in regimes.FAILED_TEXT and "ln 20 = 3.00" in regimes.FAILED_TEXT
    # the same gap with the baseline failing too: worse, never "fails"
    rows = regimes.table(cells, made_up(cells, lambda r: loss(r) + (2.8 if r.model.norm == "pre" else 2.8)))
    assert "fails" not in regimes.finding(rows)
    # a difference shown on average, not on every seed (8 seeds: one seed the other way can be shown); and
    # accuracy: lower is worse
    mixed = regimes.depth_cells(range(8), steps=100, depths=(8,), lrs=(1e-2,))[:1]
    deltas = [-0.01] + [0.5] * 7
    rows = regimes.table(mixed, made_up(mixed, lambda r: 0.1 + (deltas[r.train.seed] if r.model.norm == "post" else 0)))
    assert "post-LN worse on average" in regimes.finding(rows)
    assert "post-LN worse on average" in regimes.finding(rows, "sequence_accuracy")


def test_lr_sensitivity_clips_each_run_at_its_own_initial_loss_before_the_mean_over_seeds():
    losses = {1e-3: [0.5], 1e-2: [0.1], 1e-1: [9.0]}  # the last diverged past the initial loss 3.0
    assert regimes.lr_sensitivity(losses, 3.0) == pytest.approx(((0.5 - 0.1) + 0 + (3.0 - 0.1)) / 3)
    assert regimes.lr_sensitivity({1e-3: [math.nan], 1e-2: [0.2]}, 3.0) == pytest.approx((3.0 - 0.2) / 2)
    assert math.isnan(regimes.lr_sensitivity({1e-3: [math.nan]}, 3.0))
    # one diverged seed of two counts as its own ℓ₀ alone: the other seed's loss stays in the mean
    two = {1e-3: [0.5, 0.7], 1e-2: [0.1, math.nan]}
    assert regimes.lr_sensitivity(two, [3.0, 4.0]) == pytest.approx(((0.6 - 0.6) + ((0.1 + 4.0) / 2 - 0.6)) / 2)


def test_one_diverged_seed_does_not_take_its_learning_rate_from_being_best_and_each_variant_has_its_own_l0():
    """Regression: the mean over seeds before the clip turned a learning rate with one diverged seed into ℓ₀,
    and ℓ₀ was the baseline's for both variants."""
    cells = regimes.lr_cells(range(6), pair="norm", steps=100, lrs=(1e-3, 1e-2, 1e-1))

    def loss(run):  # both best at 1e-2, where seed 5 diverged (NaN for pre-LN, far above ℓ₀ for post-LN)
        if run.train.lr == 1e-2:
            return (math.nan if run.model.norm == "pre" else 50.0) if run.train.seed == 5 else 0.1
        return 0.8 if run.train.lr == 1e-3 else 9.0

    def l0(run):  # each run's own loss at initialisation: post-LN's higher than pre-LN's
        return (3.0 if run.model.norm == "pre" else 4.0) + run.train.seed / 100

    initial = regimes.initial_loss(cells, l0)
    assert initial == {"pre-LN": {s: 3.0 + s / 100 for s in range(6)}, "post-LN": {s: 4.0 + s / 100 for s in range(6)}}
    best = regimes.lr_summary(cells, made_up(cells, loss), initial).set_index("variant")
    for variant, base in (("pre-LN", 3.0), ("post-LN", 4.0)):
        row = best.loc[variant]
        l0s = [base + s / 100 for s in range(6)]
        at_best = (5 * 0.1 + l0s[5]) / 6  # the diverged seed as its ℓ₀, the other five as measured
        assert row["best_lr"] == 1e-2 and row["best_loss"] == pytest.approx(at_best)
        assert row["initial_loss"] == pytest.approx(np.mean(l0s))
        assert row["sensitivity"] == pytest.approx(((0.8 - at_best) + 0 + (np.mean(l0s) - at_best)) / 3)
    fair = regimes.at_best(cells, made_up(cells, loss), initial)
    assert (fair["n"] == 6).all()  # compared at 1e-2, the best of both


def test_the_lr_summary_and_the_comparison_at_each_variants_best_learning_rate():
    cells = regimes.lr_cells(range(6), pair="norm", steps=100, lrs=(1e-3, 1e-2, 1e-1))

    def loss(run):  # pre-LN best at 1e-2, post-LN best at 1e-3 and worse there by 0.05 + seed/100
        best = 1e-2 if run.model.norm == "pre" else 1e-3
        return (0.1 if run.train.lr == best else 1.0) + (0.05 + run.train.seed / 100 if run.model.norm == "post" else 0)

    summaries = made_up(cells, loss)
    best = regimes.lr_summary(cells, summaries, initial=3.0).set_index("variant")
    assert best.loc["pre-LN", "best_lr"] == 1e-2 and best.loc["post-LN", "best_lr"] == 1e-3
    assert best.loc["pre-LN", "sensitivity"] == pytest.approx((0.9 + 0 + 0.9) / 3)
    fair = regimes.at_best(cells, summaries, 3.0)
    test = fair[fair["metric"] == regimes.LOSS].iloc[0]
    assert test["delta_mean"] == pytest.approx(0.05 + 0.025) and test["verdict"] == stats.SHOWN


def test_the_gradient_finding_compares_the_last_block_across_depths_with_xiongs_one_over_root_l():
    import pandas as pd

    last = {("pre", 2): 0.995, ("pre", 8): 0.564, ("post", 2): 0.893, ("post", 8): 1.227}
    rows = [{"norm": n, "depth": d, "block": b, "matrix": "ffn_out", "grad_norm": last[n, d] if b == d else 1.4}
            for n, d in last for b in range(1, d + 1)]  # fmt: skip
    text = regimes.gradient_finding(pd.DataFrame(rows))
    assert "pre-LN's is lower at 8 blocks than at 2 (×0.57: 0.995 and 0.564 at 2 and 8 blocks)" in text
    assert "post-LN's is higher at 8 blocks than at 2 (×1.37: 0.893 and 1.23 at 2 and 8 blocks)" in text
    assert "1/√L (×0.50 from 2 to 8 blocks)" in text
    one = pd.DataFrame([r for r in rows if r["depth"] == 2])
    assert "one depth" in regimes.gradient_finding(one)


# --- the command line and the page, on a few short runs ------------------------------------------------------------

SMALL = {"depth": dict(depths=(2,), lrs=(1e-2,)), "heads": dict(sizes=(8, 16)), "lr": dict(lrs=(1e-3, 1e-2))}
SMALL_QUERY = {
    "depth": {"reg_depths": "2", "reg_lrs": "1e-2"},
    "heads": {"reg_sizes": "8,16"},
    "lr": {"reg_lrgrid": "1e-3,1e-2"},
}
STEPS, SEEDS = 100, 2


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from apptest_helpers import temporary_store

    runs = [r for e, o in SMALL.items() for r in regimes.all_runs(regimes.cells_of(e, range(SEEDS), steps=STEPS, **o))]
    with temporary_store(tmp_path_factory, runs):
        yield


@pytest.mark.slow
@pytest.mark.parametrize("experiment", regimes.EXPERIMENTS)
def test_cli_regimes_prints_its_table_verdicts_and_finding(store, capsys, experiment):
    from cli.main import main

    flags = {
        "depth": ["--depths", "2", "--lrs", "1e-2"],
        "heads": ["--sizes", "8", "16"],
        "lr": ["--lrs", "1e-3", "1e-2"],
    }
    argv = ["regimes", experiment, "--seeds", str(SEEDS), "--steps", str(STEPS), "--json", *flags[experiment]]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["experiment"] == experiment and out["seeds"] == SEEDS
    cells = {c["facet"] for c in out["cells"]}
    assert len(cells) == {"depth": 2, "heads": 2, "lr": 2}[experiment]
    for c in out["cells"]:
        assert c["verdict"] in stats.VERDICTS and c["n"] == SEEDS and c["metric"] in regimes.METRICS
    assert out["finding"].startswith({"depth": "post-LN", "heads": "scaling off", "lr": "post-LN"}[experiment])
    if experiment == "lr":
        assert {v["variant"] for v in out["variants"]} == {"pre-LN", "post-LN"}
        assert all(v["sensitivity"] >= 0 for v in out["variants"])


def test_the_command_line_offers_the_experiments_pairs_and_defaults_of_lab_regimes():
    from cli import regimes as cli_regimes

    assert cli_regimes.EXPERIMENTS == regimes.EXPERIMENTS and cli_regimes.PAIRS == tuple(regimes.PAIRS)
    assert cli_regimes.DEFAULT_SEEDS == regimes.DEFAULT_SEEDS
    assert (cli_regimes.DEPTHS, cli_regimes.DEPTH_LRS) == (regimes.DEPTHS, regimes.DEPTH_LRS)
    assert (cli_regimes.HEAD_SIZES, cli_regimes.LR_GRID) == (regimes.HEAD_SIZES, regimes.LR_GRID)


@pytest.mark.slow
def test_regimes_help_describes_each_experiment_and_the_defaults_of_its_lists(capsys):
    """Regression: `regimes --help` described neither experiment nor --lrs' default."""
    from cli.main import main

    with pytest.raises(SystemExit):
        main(["regimes", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for experiment in ("depth: pre-LN (the baseline) against post-LN", "heads: the 1/√d_k scaling", "lr: a variant"):
        assert experiment in shown
    assert (
        "depth: learning rates (default 3e-3 1e-2); lr: the grid (default 1e-4 3e-4 1e-3 3e-3 1e-2 3e-2 1e-1)" in shown
    )
    assert "(default 2 4 8)" in shown and "(default 8 16 32 64 128)" in shown


@pytest.mark.slow
def test_cli_regimes_refuses_bad_input_with_exit_2(capsys):
    from cli.main import main

    assert main(["regimes", "depth", "--seeds", "0"]) == 2
    assert "--seeds" in capsys.readouterr().err
    assert main(["regimes", "depth", "--layers", "3"]) == 2
    assert "--layers" in capsys.readouterr().err


CONTRADICTIONS = {  # each was once accepted (a flag ignored, a cell twice, a run against itself)
    "a flag the pair sets": (["lr", "--pair", "depth", "--layers", "4"], "--layers: the depth pair sets it itself"),
    "a depth twice": (["depth", "--depths", "1", "1"], "--depths: lists 1 twice"),
    "a learning rate twice": (["depth", "--lrs", "1e-2", "0.01"], "--lrs: lists 1e-2 twice"),
    "a head size twice": (["heads", "--sizes", "8", "16", "8"], "--sizes: lists 8 twice"),
    "sizes to depth": (["depth", "--sizes", "8"], "--sizes: is a setting of the heads experiment"),
    "pair to depth": (["depth", "--pair", "norm"], "--pair: is a setting of the lr experiment"),
    "heads to lr": (["lr", "--heads", "4"], "--heads: is a setting of the heads experiment"),
    "lrs to heads": (["heads", "--lrs", "1e-2"], "--lrs: is a setting of the depth and lr experiments"),
    "depths to lr": (["lr", "--depths", "2"], "--depths: is a setting of the depth experiment"),
    "layers to heads": (["heads", "--layers", "2"], "--layers: is a setting of the lr experiment"),
    "a warm-up of 0 steps": (["depth", "--steps", "2"], "--steps: the warm-up is 20% of the steps, which rounds to 0"),
    "a warm-up pair of 0 steps": (["lr", "--pair", "warmup", "--steps", "1"], "--steps: the warm-up is 20% of the"),
    "a learning rate of 1": (["lr", "--lrs", "1e-3", "1"], "--lrs: must be a learning rate from 1e-6 to below 1"),
    # each names its own flag and range (they said the warm-up's rounding, and --layers)
    "0 steps": (["depth", "--steps", "0"], "--steps: must be from 1 to 1,000,000, got 0"),
    "negative steps": (["lr", "--steps", "-5"], "--steps: must be from 1 to 1,000,000, got -5"),
    "0 steps of heads": (["heads", "--steps", "0"], "--steps: must be from 1 to 1,000,000, got 0"),
    "a depth of 0": (["depth", "--depths", "2", "0"], "--depths: must be from 1 to 64, got 0"),
    "a head size of 0": (["heads", "--sizes", "0"], "--sizes: must be from 1 to 4,096, got 0"),
    "a warm-up past the steps": (["lr", "--qk-norm", "both", "--warmup", "2000"], "--warmup: must be from 0 to 1,500"),
    "a warm-up of a pair": (["lr", "--warmup", "10"], "--warmup: is the qk-norm comparison's warm-up"),
    "a warm-up to depth": (["depth", "--warmup", "10"], "--warmup: is a setting of the lr experiment"),
}


@pytest.mark.slow
@pytest.mark.parametrize("argv, message", CONTRADICTIONS.values(), ids=CONTRADICTIONS.keys())
def test_cli_regimes_refuses_a_contradiction_in_one_line_before_training(capsys, cache, argv, message):
    from cli.main import main

    assert main(["regimes", *argv, "--seeds", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and err.count("\n") == 1, err
    assert list_cached() == []


def test_the_lrs_flag_takes_what_it_says_and_the_run_accepts():
    """Regression: '--lrs' said 'from 1e-6 to 1' and then the run refused 1 as '--lr: must be in (0.0, 1.0)'."""
    from cli.regimes import MIN_LR, _lr

    assert _lr("1e-6") == MIN_LR and _lr("0.999") == 0.999
    make_run(lr=MIN_LR), make_run(lr=0.999)  # every value the flag takes is a learning rate a run accepts
    with pytest.raises(argparse.ArgumentTypeError, match="from 1e-6 to below 1"):
        _lr("1")


def test_a_warm_up_that_rounds_to_0_is_refused_and_the_shortest_that_does_not_is_kept():
    with pytest.raises(ConfigError, match="rounds to 0 at 2 steps"):
        regimes.depth_cells(range(1), steps=2, depths=(1,), lrs=(1e-2,))
    with pytest.raises(ConfigError, match="rounds to 0 at 1 step,"):
        regimes.lr_cells(range(1), pair="warmup", steps=1, lrs=(1e-2,))
    cells = regimes.depth_cells(range(1), steps=3, depths=(1,), lrs=(1e-2,))
    assert [c.key["warmup"] for c in cells] == [0, 1]
    assert len(regimes.all_runs(cells)) == 4  # four different runs: no cell compares a run with itself
    pair = regimes.lr_cells(range(1), pair="warmup", steps=3, lrs=(1e-2,))[0]
    assert pair.groups["no warm-up"] != pair.groups["warm-up"]


@pytest.mark.slow
@pytest.mark.parametrize("experiment", regimes.EXPERIMENTS)
def test_the_regimes_page_draws_each_experiment_from_its_runs(store, experiment):
    from apptest_helpers import charts, texts
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file("../dashboard.py", default_timeout=120)
    at.query_params.update({"reg_exp": experiment, "reg_seeds": str(SEEDS), "reg_steps": str(STEPS)})
    at.query_params.update(SMALL_QUERY[experiment])
    at.run()
    at.switch_page("app_pages/regimes.py").run()
    assert not at.exception, [e.message for e in at.exception]
    shown = texts(at.markdown)
    assert "What the lab found." in shown and "What the sources claim" in texts(at.subheader)
    assert len(charts(at)) >= 2
    if experiment == "heads":  # the logits' growth, read from the stored runs' snapshot norms
        assert len([c for c in charts(at) if "largest |q·k|/scale" in str(c)]) == 1
        assert "left out" not in texts(at.caption)
    assert not any(b.key == "reg_train" for b in at.button)  # every run cached: nothing to train
    assert "all from the run store" in texts(at.caption)


@pytest.mark.slow
def test_the_regimes_page_offers_to_train_what_is_missing(tmp_path, monkeypatch):
    from apptest_helpers import texts
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ATTNCORE_CACHE_DIR", str(tmp_path))
    at = AppTest.from_file("../dashboard.py", default_timeout=120)
    at.query_params.update(
        {"reg_exp": "depth", "reg_seeds": "2", "reg_steps": "100", "reg_depths": "2", "reg_lrs": "1e-2"}
    )
    at.run()
    at.switch_page("app_pages/regimes.py").run()
    assert not at.exception
    assert "0 of 8 runs cached" in texts(at.info)
    assert any(b.key == "reg_train" for b in at.button)


@pytest.mark.slow
def test_at_its_defaults_the_depth_experiment_is_offered_with_an_estimate_within_the_caps(tmp_path, monkeypatch):
    """The page's default grid (144 runs) is within the hosted caps and the per-view budget: a Train button that
    says what it will cost, no refusal."""
    from apptest_helpers import texts
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ATTNCORE_CACHE_DIR", str(tmp_path))
    at = AppTest.from_file("../dashboard.py", default_timeout=120)
    at.run()
    at.switch_page("app_pages/regimes.py").run()
    assert not at.exception and not at.warning and not at.error
    n = len(regimes.all_runs(regimes.depth_cells(range(regimes.DEFAULT_SEEDS))))
    assert f"0 of {n} runs cached" in texts(at.info)
    (button,) = [b for b in at.button if b.key == "reg_train"]
    assert f"{n} runs, about" in button.label and "over this server" not in button.label


def test_the_logits_over_training_come_from_the_records_and_old_records_are_counted_out():
    import dataclasses

    from lab.store.record import compute_run
    from ui import regimes_view

    cells = regimes.cells_of("heads", range(1), steps=20, sizes=(8,))
    records = {run: compute_run(run) for run in regimes.all_runs(cells)}
    frame, missing = regimes_view.logits_over_training(cells, records)
    assert missing == 0 and set(frame["variant"]) == set(cells[0].groups)
    on = cells[0].groups["scaling on"][0]
    expected = [max(s["max_logit"]) for s in records[on].norms]
    assert frame[frame["variant"] == "scaling on"]["max_logit"].tolist() == expected
    records[on] = dataclasses.replace(records[on], norms=None)  # stored before records carried their norms
    frame, missing = regimes_view.logits_over_training(cells, records)
    assert missing == 1 and len(frame) == len(expected)


def test_the_page_names_the_command_line_that_trains_the_same_grid():
    """lab.experiments.regimes.command, parsed by the command line, gives the page's cells (what a refusal names)."""
    from cli.main import build_parser
    from cli.regimes import options

    page_options = {
        "depth": {"task": "sort", "steps": 1500, "depths": (2, 8), "lrs": (3e-3, 1e-2)},
        "heads": {"task": "copy", "steps": 500, "sizes": (8, 64), "heads": 4},
        "lr": {"task": "reverse", "steps": 100, "pair": "warmup", "lrs": (1e-4, 1e-1), "n_layers": 4},
    }
    for experiment, chosen in page_options.items():
        text = regimes.command(experiment, 3, chosen)
        argv = text.split()[3:]  # after `python -m attncore`
        a = build_parser(argv).parse_args(argv)
        cli_cells = regimes.cells_of(a.experiment, range(a.seeds), **options(a))
        page_cells = regimes.cells_of(experiment, range(3), **chosen)
        assert [c.groups for c in cli_cells] == [c.groups for c in page_cells], text


@pytest.mark.slow
def test_cli_regimes_estimate_says_what_it_would_cost_and_trains_nothing(tmp_path, monkeypatch, capsys):
    from cli.main import main
    from lab import cost_model
    from lab.store import list_cached

    monkeypatch.setenv("ATTNCORE_CACHE_DIR", str(tmp_path))
    assert main(["regimes", "lr", "--lrs", "1e-3", "1e-2", "--seeds", "2", "--jobs", "2", "--estimate", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"experiment", "runs", "missing", "cpu_seconds", "wall_seconds", "workers"}
    cells = regimes.cells_of("lr", range(2), lrs=(1e-3, 1e-2))
    runs = regimes.all_runs(cells)
    assert out["experiment"] == "lr" and out["runs"] == out["missing"] == len(runs) == 8 and out["workers"] == 2
    assert out["cpu_seconds"] == round(cost_model.model(2).work_seconds(runs), 1)
    assert out["wall_seconds"] >= out["cpu_seconds"] / 2 - 0.1  # two workers at best share it out evenly
    assert list_cached() == []
    assert main(["regimes", "lr", "--lrs", "1e-3", "1e-2", "--seeds", "2", "--estimate"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("lr: 8 runs in 2 cells, 8 to train: about ") and line.endswith(" of computing, on 2 workers")


@pytest.mark.slow
def test_a_hosted_regimes_grid_over_the_budget_names_the_command_line_that_trains_it(tmp_path, monkeypatch):
    from apptest_helpers import texts
    from streamlit.testing.v1 import AppTest
    from test_cost_model import slow_machine

    monkeypatch.setenv("ATTNCORE_CACHE_DIR", str(tmp_path))
    slow_machine(monkeypatch, 10.0)
    at = AppTest.from_file("../dashboard.py", default_timeout=120)
    at.query_params.update({"reg_exp": "lr", "reg_seeds": "2", "reg_steps": "100", "reg_lrgrid": "1e-3,1e-2"})
    at.run()
    at.switch_page("app_pages/regimes.py").run()
    (button,) = [b for b in at.button if b.key == "reg_train"]
    assert button.disabled and "over this server's 60 min 00 s per view" in button.label
    expected = regimes.command("lr", 2, {"task": "sort", "steps": 100, "pair": "norm", "lrs": (1e-3, 1e-2)})
    assert f"`{expected} --layers 2`" in texts(at.info) and "ATTNLAB_MAX_VIEW_CPU_S" in texts(at.info)


def test_the_regimes_charts_tick_the_trained_values_and_tell_the_two_times_apart_in_the_legend():
    """Regression: the d_k axis ticked 10 … 60 (trained: 8, 32, 64); the entropy legend's two entries looked the
    same (a dash alone)."""
    import pandas as pd
    from apptest_helpers import axis_labels

    from ui.charts import regimes as charts

    rows = [{"d_k": d, "variant": v, "when": w, "entropy": 1.0, "saturated": 0.1}
            for d in (8, 32, 64) for v in ("scaling on", "scaling off")
            for w in ("at initialisation", "after training")]  # fmt: skip
    spec = charts.attention_by_size(pd.DataFrame(rows)).to_dict()
    for panel in spec["hconcat"]:
        enc = panel["encoding"]
        assert enc["x"]["axis"]["values"] == [8, 32, 64]
        assert enc["shape"]["field"] == enc["strokeDash"]["field"] == "when"  # one legend, two marks apart
        assert len(set(map(str, enc["shape"]["scale"]["range"]))) == 2
        assert len(set(map(str, enc["strokeDash"]["scale"]["range"]))) == 2
    cells = regimes.lr_cells(range(2), steps=100, lrs=(1e-3, 3e-3, 1e-1))
    frame = regimes.by_variant(cells, made_up(cells, lambda r: 0.1))
    lr_axis = charts.against(frame, "lr", "learning rate", log_x=True).to_dict()["hconcat"][0]["layer"][1]
    assert axis_labels(lr_axis["encoding"]["x"]["axis"]) == {1e-3: "1e-3", 3e-3: "3e-3", 0.1: "1e-1"}
    rows = regimes.table(cells, made_up(cells, lambda r: 0.1 + r.train.seed / 100))
    grid = charts.verdict_grid(rows[rows["metric"] == regimes.LOSS], "lr", "metric", "learning rate", "").to_dict()
    assert axis_labels(grid["layer"][0]["encoding"]["x"]["axis"]) == {1e-3: "1e-3", 3e-3: "3e-3", 0.1: "1e-1"}


@pytest.mark.slow
def test_the_cached_count_leaves_the_page_when_its_sweep_starts(cache, monkeypatch):
    """Regression: '0 of N runs cached' stayed above the sweep's own progress line, stale, while the runs trained."""
    from apptest_helpers import texts
    from streamlit.testing.v1 import AppTest

    started = []

    def sweep(missing, what, cached_before=0):  # the page as it is while its sweep runs (then: cancelled)
        started.append(len(missing))

    monkeypatch.setattr("ui.runs.sweep", sweep)
    at = AppTest.from_file("../dashboard.py", default_timeout=120)
    at.query_params.update(
        {"reg_exp": "depth", "reg_seeds": "2", "reg_steps": "100", "reg_depths": "2", "reg_lrs": "1e-2"}
    )
    at.run()
    at.switch_page("app_pages/regimes.py").run()
    assert "0 of 8 runs cached" in texts(at.info)
    next(b for b in at.button if b.key == "reg_train").click().run()
    assert started == [8] and not at.exception
    assert "runs cached" not in texts(at.info)


def test_the_train_pages_norms_number_blocks_from_0_as_the_patching_page_does():
    from ui.charts.regimes import snapshot_norms_frame

    blocks = [{"block": i, "grad_norm": {"ffn_out": 0.1 * (i + 1)}, "residual_norm": 5.0 + i} for i in range(2)]
    snapshot = {"step": 25, "blocks": blocks, "max_logit": [3.0, 4.0], "entropy": [1.5, 1.2]}
    frame = snapshot_norms_frame([snapshot])
    assert sorted(frame["block"].unique()) == [0, 1]
    first = frame[frame["block"] == 0].set_index("figure")["value"]
    assert first["grad_norm"] == 0.1 and first["residual_norm"] == 5.0 and first["max_logit"] == 3.0
