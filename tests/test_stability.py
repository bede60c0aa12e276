"""The lr experiment's qk-norm comparison (stability): its grid, the attention figures read from a run's stored
norms, the LR sensitivity per seed with its interval, the finding on made-up summaries in both directions; the
command line's JSON and refusals, and the page's URL state on a few short runs."""

from __future__ import annotations

import json
import math

import pytest

from attncore.config import ConfigError
from lab import stats
from lab.experiments import regimes, stability
from lab.store import list_cached

SEEDS = range(6)
LRS = (1e-3, 1e-2, 1e-1, 3e-1)


def test_the_qk_norm_grid_pairs_qk_norm_off_on_and_a_z_loss_over_the_same_seeds_at_every_rate():
    cells = regimes.lr_cells(SEEDS, qk_norm="both", z_loss=1e-4, steps=100)
    assert [c.key["lr"] for c in cells] == list(regimes.QK_LR_GRID) and max(regimes.QK_LR_GRID) >= 3e-1
    for cell in cells:
        off, on, z = cell.groups.values()
        assert list(cell.groups) == ["qk-norm off", "qk-norm on", "z-loss 1e-4"]
        assert [r.train.seed for r in off] == [r.train.seed for r in on] == [r.train.seed for r in z] == list(SEEDS)
        assert not off[0].model.qk_norm and on[0].model.qk_norm and not z[0].model.qk_norm
        assert off[0].train.z_loss == on[0].train.z_loss == 0 and z[0].train.z_loss == 1e-4
        assert all(r.train.lr == cell.key["lr"] for runs in cell.groups.values() for r in runs)
    assert len(regimes.all_runs(cells)) == 3 * len(SEEDS) * len(regimes.QK_LR_GRID)
    two = regimes.lr_cells(SEEDS, qk_norm="both", lrs=LRS)
    assert [list(c.groups) for c in two] == [["qk-norm off", "qk-norm on"]] * len(LRS)
    # the default grid is within the hosted cap of runs one view loads
    from lab.jobs.limits import Limits

    default = regimes.lr_cells(range(regimes.DEFAULT_SEEDS), qk_norm="both")
    assert len(regimes.all_runs(default)) <= Limits().max_compare_runs
    # with the z-loss variant, the 7 seeds its two comparisons need under Holm, over all but the smallest rate
    z = regimes.lr_cells(range(7), qk_norm="both", z_loss=regimes.DEFAULT_Z_LOSS, lrs=regimes.QK_LR_GRID[1:])
    assert len(regimes.all_runs(z)) <= Limits().max_compare_runs and stats.seeds_needed(2) == 7


def test_the_qk_norm_grid_refuses_what_it_would_ignore_or_cannot_train():
    with pytest.raises(ConfigError, match="compares qk-norm off and on itself"):
        regimes.lr_cells(SEEDS, qk_norm="both", pair="norm")
    with pytest.raises(ConfigError, match="give qk-norm both"):
        regimes.lr_cells(SEEDS, z_loss=1e-4)
    with pytest.raises(ConfigError, match="above 0 and below 1"):
        regimes.lr_cells(SEEDS, qk_norm="both", z_loss=0.0)
    pair = regimes.lr_cells(SEEDS, pair="norm", qk_norm=True, lrs=LRS)  # qk-norm on for both variants of a pair
    assert all(r.model.qk_norm for c in pair for runs in c.groups.values() for r in runs)


def test_the_attention_extremes_come_from_the_stored_snapshots_and_leave_out_a_diverged_ones_nan():
    snapshots = [
        {"step": 10, "max_logit": [3.0, 5.0], "entropy": [1.2, 0.9]},
        {"step": 20, "max_logit": [40.0, 7.0], "entropy": [0.2, 0.8]},
        {"step": 30, "max_logit": [math.nan, math.nan], "entropy": [math.nan, math.nan]},  # diverged
    ]
    assert stability.attention_extremes(snapshots) == {"max_attn_logit": 40.0, "min_attn_entropy": 0.2}
    assert stability.attention_extremes(None) == {"max_attn_logit": None, "min_attn_entropy": None}
    assert stability.attention_extremes(snapshots[2:]) == {"max_attn_logit": None, "min_attn_entropy": None}


def made_up(cells, helps: bool, z_helps: bool = False):
    """Summaries of the qk-norm grid: without qk-norm (and with the z-loss unless `z_helps`) the logits grow
    tenfold per decade and the entropy collapses at 1e-1 and above, where the test loss is 2.5; qk-norm, when it
    `helps`, keeps logits near 10, the entropy near 1 and trains at every rate (else it is qk-norm off again,
    shifted by 0.001 so that every seed differs)."""
    out = {}
    for cell in cells:
        lr = cell.key["lr"]
        for label, runs in cell.groups.items():
            good = (label == "qk-norm on" and helps) or (label.startswith("z-loss") and z_helps)
            shift = 0.0 if label == "qk-norm off" else 0.001
            for run in runs:
                s = run.train.seed
                high = lr >= 1e-1 and not good
                loss = 2.5 + s / 100 + shift if high else 0.05 + s / 1000 + shift + 0.01 * (lr == 1e-3)
                logit = 10 + s / 10 + shift if good else 1e4 * lr * (1 + s / 10) + shift
                entropy = 1.0 + s / 50 if good else (1e-3 + shift if high else 1.0 + s / 100 + shift)
                out[run] = {"config": run.to_dict(), "test_loss": loss, "sequence_accuracy": 1 - loss / 3,
                            "max_attn_logit": logit, "min_attn_entropy": entropy}  # fmt: skip
    return out


INITIAL = 3.5  # every run's loss at initialisation (lab.experiments.regimes.initial_loss gives each its own)


def test_the_finding_says_the_runs_agree_when_qk_norm_removes_the_growth_and_widens_the_range():
    cells = regimes.lr_cells(range(7), qk_norm="both", z_loss=1e-4, lrs=LRS)  # two comparisons: Holm needs 7
    summaries = made_up(cells, helps=True)
    rows = regimes.table(cells, summaries, stability.METRICS)
    text = stability.finding(cells, summaries, INITIAL, rows)
    assert "qk-norm off: the largest attention logit over training went from 13.0 at lr 1e-3 to 3,900" in text
    assert "grew 10-fold or more" in text and "collapsed to a tenth or less" in text
    assert "qk-norm on: at lr 3e-1 the logit reached 10.3 (lower on every seed" in text
    assert "qk-norm off 1e-3 to 1e-2; qk-norm on 1e-3 to 3e-1; z-loss 1e-4 1e-3 to 1e-2" in text
    assert "The runs agree with Wortsman et al." in text and "trains at 2 more learning rates" in text
    assert "At this size z-loss 1e-4 does not help against qk-norm off" in text
    table = stability.sensitivity_table(cells, summaries, INITIAL).set_index("variant")
    assert table.loc["qk-norm on", "verdict"] == stats.SHOWN and table.loc["qk-norm on", "delta_mean"] < 0
    assert table.loc["qk-norm off", "sensitivity"] > table.loc["qk-norm on", "sensitivity"]
    assert table.loc["qk-norm on", "qk_norm"] and not table.loc["z-loss 1e-4", "qk_norm"]
    assert table.loc["z-loss 1e-4", "z_loss"] == 1e-4 and table.loc["qk-norm on", "z_loss"] == 0


def test_at_6_seeds_the_interval_of_each_seeds_own_sensitivity_is_their_smallest_and_largest():
    cells = regimes.lr_cells(SEEDS, qk_norm="both", lrs=LRS)
    summaries = made_up(cells, helps=True)
    table = stability.sensitivity_table(cells, summaries, INITIAL).set_index("variant")
    assert table.loc["qk-norm on", "verdict"] == stats.SHOWN  # one comparison: 6 seeds can show it
    # at 6 seeds the 95 % sign-flip interval of the seeds' own sensitivities is their smallest and largest
    own = table.loc["qk-norm off", "seeds"]
    assert (table.loc["qk-norm off", "seeds_low"], table.loc["qk-norm off", "seeds_high"]) == (
        pytest.approx(min(own.values())),
        pytest.approx(max(own.values())),
    )
    t_low, t_high = table.loc["qk-norm off", "t_low"], table.loc["qk-norm off", "t_high"]
    assert t_low < table.loc["qk-norm off", "seeds_mean"] < t_high


def test_the_finding_says_the_runs_do_not_bear_out_the_claim_when_qk_norm_changes_nothing():
    cells = regimes.lr_cells(range(7), qk_norm="both", z_loss=1e-4, lrs=LRS)
    summaries = made_up(cells, helps=False, z_helps=True)
    rows = regimes.table(cells, summaries, stability.METRICS)
    text = stability.finding(cells, summaries, INITIAL, rows)
    assert "The runs agree" not in text
    assert "do not bear out Wortsman et al.'s claim in full: qk-norm on's logit at lr 3e-1 was not shown lower" in text
    assert "qk-norm on neither trained at more learning rates nor was shown less sensitive" in text
    assert "At this size z-loss 1e-4 helps against qk-norm off: it trains at more learning rates" in text


def test_the_finding_says_when_the_logits_did_not_grow_without_qk_norm():
    cells = regimes.lr_cells(SEEDS, qk_norm="both", lrs=LRS)
    summaries = made_up(cells, helps=True)
    for run, s in summaries.items():  # qk-norm off's logits flat, its entropy kept
        if not run.model.qk_norm:
            s["max_attn_logit"], s["min_attn_entropy"] = 12.0 + run.train.seed, 1.0
    text = stability.finding(cells, summaries, INITIAL, regimes.table(cells, summaries, stability.METRICS))
    assert "did not grow 10-fold or more" in text and "did not collapse" in text
    assert "qk-norm off's logits did not grow 10-fold; qk-norm off's entropy did not collapse" in text


def test_the_learning_rates_that_train_are_written_as_a_range_or_a_list():
    assert stability.lr_range([1e-3, 3e-3, 1e-2], regimes.QK_LR_GRID) == "1e-3 to 1e-2"
    assert stability.lr_range([1e-3, 1e-2], regimes.QK_LR_GRID) == "1e-3, 1e-2"
    assert stability.lr_range([], regimes.QK_LR_GRID) == "none"
    assert stability.figure(45065987.2) == "4.51e+07" and stability.figure(None) == "–"


def test_the_page_names_the_command_line_that_trains_the_qk_norm_grid():
    from cli.main import build_parser
    from cli.regimes import options

    chosen = {"task": "sort", "steps": 1500, "qk_norm": "both", "z_loss": 1e-4, "lrs": (1e-2, 3e-1), "n_layers": 2}
    text = regimes.command("lr", 6, chosen)
    assert "--qk-norm both --z-loss 1e-4 --lrs 1e-2 3e-1" in text
    argv = text.split()[3:]
    a = build_parser(argv).parse_args(argv)
    cli_cells = regimes.cells_of(a.experiment, range(a.seeds), **options(a))
    assert [c.groups for c in cli_cells] == [c.groups for c in regimes.cells_of("lr", range(6), **chosen)]
    no_z = regimes.command("lr", 6, chosen | {"z_loss": None})
    assert "--z-loss" not in no_z


def test_the_command_line_offers_the_qk_norm_grid_of_lab_regimes():
    from cli import regimes as cli_regimes

    assert cli_regimes.QK_LR_GRID == regimes.QK_LR_GRID


REFUSALS = {
    "a z-loss without the comparison": (["lr", "--z-loss", "1e-4"], "--z-loss: adds the z-loss variant"),
    "a pair with the comparison": (["lr", "--qk-norm", "both", "--pair", "norm"], "--pair: qk-norm both compares"),
    "a z-loss of 0": (["lr", "--qk-norm", "both", "--z-loss", "0"], "--z-loss: must be a z-loss coefficient above 0"),
    "qk-norm to depth": (["depth", "--qk-norm", "both"], "--qk-norm: is a setting of the lr experiment"),
}


@pytest.mark.slow
@pytest.mark.parametrize("argv, message", REFUSALS.values(), ids=REFUSALS.keys())
def test_cli_refuses_a_bad_qk_norm_comparison_in_one_line_with_exit_2(capsys, cache, argv, message):
    from cli.main import main

    assert main(["regimes", *argv, "--seeds", "1"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert list_cached() == []


def test_the_qk_norm_comparison_trains_on_the_sources_schedule_with_its_warm_up_a_setting():
    """Wortsman et al. 2023 train with a linear warm-up (5e3 of 1e5 steps) and a cosine decay: so does every run of
    the qk-norm comparison, at 5 % of its steps unless told; the variant pairs keep a constant rate."""
    for steps, warmup in ((1500, 75), (100, 5)):
        runs = regimes.all_runs(regimes.lr_cells(range(2), qk_norm="both", z_loss=1e-4, steps=steps))
        assert {(r.train.warmup, r.train.decay, r.train.min_lr_ratio) for r in runs} == {(warmup, "cosine", 0.0)}
    runs = regimes.all_runs(regimes.lr_cells(range(2), qk_norm="both", warmup=0, lrs=(1e-2,)))
    assert {r.train.warmup for r in runs} == {0} and {r.train.decay for r in runs} == {"cosine"}
    pairs = regimes.all_runs(regimes.lr_cells(range(2), pair="norm", lrs=(1e-2,)))
    assert {(r.train.warmup, r.train.decay) for r in pairs} == {(0, "none")}
    with pytest.raises(ConfigError, match="qk-norm comparison's warm-up") as e:
        regimes.lr_cells(range(2), pair="norm", warmup=10)
    assert e.value.field == "warmup"
    for bad in (-1, 1501):
        with pytest.raises(ConfigError, match="must be from 0 to 1,500") as e:
            regimes.lr_cells(range(2), qk_norm="both", warmup=bad)
        assert e.value.field == "warmup"
    options = {"qk_norm": "both", "warmup": 150, "lrs": (1e-1,)}
    assert regimes.command("lr", 6, options).endswith("--qk-norm both --warmup 150 --lrs 1e-1")


@pytest.mark.slow
def test_on_the_sources_schedule_qk_norm_keeps_the_attention_logits_down_and_trains_at_lr_1e_1(cache):
    """The Regimes page's qk-norm comparison at its defaults (2 blocks, sort L = 6, 1,500 steps, a warm-up of 75
    then a cosine decay), its lr 1e-1 cell on 3 seeds. Wortsman et al. 2023 (Fig. 1): without qk-norm the attention
    logits grow by orders of magnitude at high learning rates, the attention entropy collapses and the loss
    stalls; with it they stay of order 10 and the model trains. docs/regimes.md gives the lab's figures."""
    from lab.sweep import run_sweep

    (cell,) = regimes.lr_cells(range(3), qk_norm="both", lrs=(1e-1,))
    off, on = cell.groups.values()
    records = run_sweep(off + on, n_jobs=2)
    summaries = stability.summaries_of(dict(zip(off + on, records, strict=True)))
    for run_off, run_on in zip(off, on, strict=True):
        without, with_qk = summaries[run_off], summaries[run_on]
        assert without["max_attn_logit"] > 1e3 and with_qk["max_attn_logit"] < 50  # about 1e5 against about 8
        assert without["min_attn_entropy"] < 0.01 < 0.3 < with_qk["min_attn_entropy"]  # on one key; not
        assert without["test_loss"] > 1.0 and with_qk["test_loss"] < 0.1  # stalls (ln 20 = 3.0); trains


STEPS, FEW = 100, 2  # 100: one of the page's step counts


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from apptest_helpers import temporary_store

    cells = regimes.lr_cells(range(FEW), qk_norm="both", z_loss=1e-4, steps=STEPS, lrs=(1e-2, 3e-1))
    with temporary_store(tmp_path_factory, regimes.all_runs(cells)):
        yield


@pytest.mark.slow
def test_cli_qk_norm_json_gives_each_variant_its_sensitivity_and_every_runs_attention_figures(store, capsys):
    from cli.main import main

    argv = ["regimes", "lr", "--qk-norm", "both", "--z-loss", "1e-4", "--seeds", str(FEW), "--steps", str(STEPS)]
    assert main([*argv, "--lrs", "1e-2", "3e-1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(v["variant"], v["qk_norm"], v["z_loss"]) for v in out["variants"]] == [
        ("qk-norm off", False, 0.0),
        ("qk-norm on", True, 0.0),
        ("z-loss 1e-4", False, 1e-4),
    ]
    for v in out["variants"]:
        assert v["lr_sensitivity"] >= 0
        own = v["lr_sensitivity_seeds"]
        assert {"mean", "ci_low", "ci_high", "t_low", "t_high", "by_seed"} <= set(own)
        assert [s["seed"] for s in own["by_seed"]] == list(range(FEW))
        assert (v["against_baseline"] is None) == (v["variant"] == "qk-norm off")
        assert [x["lr"] for x in v["lrs"]] == [1e-2, 3e-1]
        for at in v["lrs"]:
            assert [s["seed"] for s in at["seeds"]] == list(range(FEW))
            for s in at["seeds"]:
                assert set(s) == {"seed", "test_loss", "max_attn_logit", "min_attn_entropy"}
                assert s["max_attn_logit"] is None or s["max_attn_logit"] > 0
    assert {c["metric"] for c in out["cells"]} == set(stability.METRICS)
    assert out["finding"].startswith("qk-norm off: the largest attention logit")
    assert main([*argv, "--lrs", "1e-2", "3e-1", "--estimate", "--json"]) == 0
    estimate = json.loads(capsys.readouterr().out)
    assert estimate["runs"] == 3 * 2 * FEW and estimate["missing"] == 0  # every run stored: nothing to train
    assert main([*argv, "--lrs", "1e-2", "3e-1"]) == 0  # the text form
    shown = capsys.readouterr().out
    assert "max attn logit: qk-norm on minus qk-norm off" in shown and "LR sensitivity" in shown


@pytest.mark.slow
def test_the_regimes_page_draws_the_qk_norm_comparison_from_its_runs_with_its_url_state(store):
    from apptest_helpers import charts, texts
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file("../dashboard.py", default_timeout=120)
    query = {"reg_exp": "lr", "reg_pair": "qk_norm", "reg_qklrs": ["1e-2", "3e-1"], "reg_zloss": "1e-4"}
    at.query_params.update(query | {"reg_seeds": str(FEW), "reg_steps": str(STEPS)})
    at.run()
    at.switch_page("app_pages/regimes.py").run()
    assert not at.exception, [e.message for e in at.exception]
    shown = texts(at.markdown)
    assert "What the lab found." in shown and "qk-norm off: the largest attention logit" in shown
    heads = texts(at.subheader)
    for title in ("LR sensitivity per variant", "The largest attention logit over training", "lowest attention"):
        assert title.lower() in heads.lower()
    assert len([c for c in charts(at) if "largest |q·k|/scale" in str(c)]) == 1
    assert not any(b.key == "reg_train" for b in at.button)  # every run from the store
    assert at.selectbox(key="reg_pair").value == regimes.QK_NORM and at.selectbox(key="reg_zloss").value == 1e-4
    assert at.multiselect(key="reg_qklrs").value == [1e-2, 3e-1]
    # the schedule said from the runs; how to read the cells' four tables said once, not under each
    assert "warms up linearly over 5 steps, then decays along a cosine to 0 at step 100" in texts(at.caption)
    assert at.number_input(key="reg_warmup").value == 5
    said = [c.value for c in at.caption]
    assert sum("the shifts the sign-flip test does not reject" in c for c in said) == 1, said


@pytest.mark.slow
def test_at_its_defaults_the_qk_norm_comparison_is_offered_with_an_estimate_within_the_caps(tmp_path, monkeypatch):
    from apptest_helpers import texts
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ATTNCORE_CACHE_DIR", str(tmp_path))
    at = AppTest.from_file("../dashboard.py", default_timeout=120)
    at.query_params.update({"reg_exp": "lr", "reg_pair": "qk_norm"})
    at.run()
    at.switch_page("app_pages/regimes.py").run()
    assert not at.exception and not at.warning and not at.error
    cells = regimes.lr_cells(range(regimes.DEFAULT_SEEDS), qk_norm="both")  # no z-loss variant by default
    n = len(regimes.all_runs(cells))
    assert f"0 of {n} runs cached" in texts(at.info)
    (button,) = [b for b in at.button if b.key == "reg_train"]
    assert f"{n} runs, about" in button.label and "over this server" not in button.label


def test_the_figures_over_training_are_the_means_over_the_seeds_with_a_diverged_snapshot_left_out():
    from types import SimpleNamespace

    cells = regimes.lr_cells(range(2), qk_norm="both", lrs=(1e-2,))

    def record(seed: int, label: str):
        late = [math.nan, math.nan] if (seed, label) == (1, "qk-norm off") else [4.0 + seed, 2.0]
        return SimpleNamespace(norms=[
            {"step": 10, "max_logit": [1.0 + seed, 2.0], "entropy": [0.5, 0.25 + seed]},
            {"step": 20, "max_logit": late, "entropy": [0.1, math.nan if seed else 0.2]},
        ])  # fmt: skip

    by_run = {r: record(r.train.seed, label) for c in cells for label, runs in c.groups.items() for r in runs}
    frame, missing = stability.over_training(cells, by_run)
    assert missing == 0
    off = frame[frame["variant"] == "qk-norm off"].set_index("step")
    assert (
        off.loc[10, "max_logit"] == 2.0 and off.loc[10, "entropy"] == 0.375
    )  # each seed over its layers, then the mean
    assert off.loc[20, "max_logit"] == 4.0  # seed 1 diverged: seed 0's alone
    assert off.loc[20, "entropy"] == 0.1  # seed 1's NaN layer makes its lowest NaN, left out
    by_run[cells[0].groups["qk-norm on"][0]] = SimpleNamespace(norms=None)
    assert stability.over_training(cells, by_run)[1] == 1


def test_the_charts_draw_a_panel_per_variant_and_each_variants_interval():
    from ui.charts import regimes as charts

    cells = regimes.lr_cells(SEEDS, qk_norm="both", lrs=LRS)
    summaries = made_up(cells, helps=True)
    spec = charts.sensitivity_intervals(stability.sensitivity_table(cells, summaries, INITIAL)).to_dict()
    layers = [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in spec["layer"]]
    assert layers == ["rule", "circle", "point", "tick"]
    frame = stability.per_seed(cells, summaries).assign(step=100, seeds=6)
    frame = frame.rename(columns={"max_attn_logit": "max_logit", "min_attn_entropy": "entropy"})
    for figure in ("max_logit", "entropy"):
        spec = charts.attention_over_training(frame, figure).to_dict()
        assert spec["facet"]["column"]["field"] == "variant"
        assert spec["spec"]["layer"][0]["encoding"]["color"]["field"] == "rate"
