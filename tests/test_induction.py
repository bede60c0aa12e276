"""The induction task (docs/induction.md): its sequences built exactly, the repeat and first-copy masks, the head
scores on hand-built attention maps, the phase-change detector on made-up curves, the config's keys and refusals,
and short trainings (the repeat loss below the first copy's; the store, the CLI and the page end to end)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from attncore.config import ConfigError, RunConfig, make_run
from attncore.task import task_of
from attncore.tasks import induction
from attncore.tasks.induction import (
    INDUCTION_RUN,
    induction_probe_set,
    induction_sequences,
    induction_test_set,
    make_induction,
    repeat_queries,
)

# --- the task ----------------------------------------------------------------------------------------------


def test_each_sequence_repeats_its_first_k_tokens_once_with_k_drawn_per_sequence():
    task = make_induction(length=20, vocab=7, k_min=3).task
    seqs, ks = induction_sequences(task, 4000, np.random.default_rng(0))
    assert seqs.shape == (4000, 20) and seqs.dtype == np.int64 and ((0 <= seqs) & (seqs < 7)).all()
    assert set(ks.tolist()) == set(range(3, 11))  # U{k_min .. T/2}: every k drawn, no other
    for row, k in zip(seqs, ks, strict=True):
        assert (row[k : 2 * k] == row[:k]).all()
    # the tokens outside the repeat stay uniform: no token is preferred (6 sigma on 4000 x ~6 free tokens)
    counts = np.bincount(seqs[:, 0], minlength=7)
    assert abs(counts - 4000 / 7).max() < 6 * math.sqrt(4000 / 7)


def test_the_training_batch_is_the_tasks_sequences_and_the_held_out_set_is_fixed():
    task = make_induction().task
    a = task_of(task).sample_batch(task, 8, np.random.default_rng(5))
    b, _ = induction_sequences(task, 8, np.random.default_rng(5))
    assert (a == b).all()
    seqs, ks = induction_test_set(task)
    again, ks2 = induction_test_set(task)
    assert seqs.shape == (500, 32) and (seqs == again).all() and (ks == ks2).all()
    other, _ = induction_test_set(make_induction(vocab=16).task)
    assert not (other == seqs).all()  # its own set for another V


def test_the_probe_repeats_its_first_half_of_distinct_tokens():
    task = make_induction().task
    seqs, ks = induction_probe_set(task)
    assert (ks == 16).all() and (seqs[:, 16:] == seqs[:, :16]).all()
    assert all(len(set(row[:16].tolist())) == 16 for row in seqs)  # no token twice in the first copy
    assert (task_of(task).probe(task) == seqs[0, :-1]).all()  # the model input: T - 1 positions
    assert task_of(task).answer_queries(task).tolist() == list(range(16, 31))
    answers = task_of(task).answer_tokens(task, seqs[:1, :-1])[0]
    assert (answers == seqs[0, 17:32]).all()  # each repeat query's next token


def test_the_distinct_subset_is_of_the_first_copy():
    task = make_induction().task
    seqs, ks = induction_test_set(task)
    distinct = task_of(task).test_distinct(task)
    assert distinct.tolist() == [len(set(r[:k].tolist())) == k for r, k in zip(seqs, ks, strict=True)]


def test_repeat_and_first_copy_queries():
    repeat, first = induction.query_masks(np.array([3, 2]), 7)
    assert np.flatnonzero(repeat[0]).tolist() == [3, 4] and np.flatnonzero(first[0]).tolist() == [0, 1]
    assert np.flatnonzero(repeat[1]).tolist() == [2] and np.flatnonzero(first[1]).tolist() == [0]
    assert repeat_queries(16).tolist() == list(range(16, 31))


# --- head scores and the phase change ----------------------------------------------------------------------


def _maps(T: int, k: int) -> np.ndarray:
    """(2, 2, T, T): L1H0 an induction head in the repeat (uniform elsewhere), L0H1 a previous-token head,
    the other two uniform over the keys they may see."""
    uniform = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    maps = np.broadcast_to(uniform, (2, 2, T, T)).copy()
    for t in repeat_queries(k):
        maps[1, 0, t] = 0
        maps[1, 0, t, t - k + 1] = 1
    for t in range(1, T):
        maps[0, 1, t] = 0
        maps[0, 1, t, t - 1] = 1
    return maps


def test_the_scores_find_the_induction_and_the_previous_token_head():
    T, k = 31, 16
    s = induction.head_scores(_maps(T, k), k)
    assert s["induction"][1, 0] == 1.0 and s["previous token"][0, 1] == 1.0
    uniform_induction = np.mean([1 / (t + 1) for t in repeat_queries(k)])  # a uniform row puts 1/(t+1) on each key
    assert s["induction"][0, 0] == pytest.approx(uniform_induction)
    assert s["previous token"][0, 0] == pytest.approx(np.mean([1 / (t + 1) for t in range(1, T)]))
    outside = [1 / (t + 1) for t in range(1, k)] + [1 / (t + 1) for t in range(2 * k - 1, T)]
    assert s["previous token"][1, 0] == pytest.approx(np.mean(outside + [0.0] * (k - 1)))  # 0 in the repeat


def test_the_interpret_detector_scores_the_same_on_the_task():
    from attncore.interpret import heads

    task = make_induction().task
    maps = _maps(31, 16)
    assert heads.task_scores(maps, task_of(task).probe(task), task)["induction"][1, 0] == 1.0
    assert heads.task_pattern(make_induction()) == "induction"


def test_the_phase_change_is_found_at_half_of_the_largest_drop():
    steps = np.arange(25, 2001, 25)
    losses = 3.0 - 2.0 / (1 + np.exp(-(steps - 1000) / 40))  # a sharp sigmoid from 3 to 1 centred at 1000
    change = induction.phase_change(steps, losses)
    assert change.step == pytest.approx(1000, abs=13) and change.largest_drop > 1.5
    assert change.window_start <= change.step <= change.window_start + induction.WINDOW
    assert change.drop_before > 0.9 and change.drop_earlier < 0.1  # the fall is in the 200 steps before it


def test_a_slow_decline_or_a_short_curve_is_no_phase_change():
    steps = np.arange(25, 2001, 25)
    slow = induction.phase_change(steps, 3.5 - 0.0004 * steps)  # 0.08 nats per 200 steps
    assert slow.step is None and slow.largest_drop == pytest.approx(0.08)
    assert induction.phase_change([25, 50, 75], [3.0, 1.0, 0.5]).step is None  # shorter than one window
    edge = induction.phase_change(steps, np.where(steps < 1000, 3.0, 3.0 - induction.PHASE_THRESHOLD))
    assert edge.step is None  # a drop of exactly the threshold is not more than it


def test_the_snapshot_steps_are_every_25_at_most_80():
    assert induction.snapshot_steps(2000) == list(range(25, 2001, 25))
    assert induction.snapshot_steps(3000) == list(range(50, 3001, 50))
    assert induction.snapshot_steps(110) == [25, 50, 75, 100, 110] and induction.snapshot_steps(10) == [10]
    assert len(induction.snapshot_steps(1_000_000)) <= induction.MAX_SNAPSHOTS + 1


def test_the_in_context_score_is_the_late_token_minus_the_early_one():
    early, late = induction.icl_positions(32)
    assert (early, late) == (7, 23)
    nll = np.zeros((3, 31))
    nll[:, early], nll[:, late] = 3.0, 0.5
    assert induction.icl_score(nll, 32) == -2.5


# --- the config -------------------------------------------------------------------------------------------


def test_the_induction_key_holds_its_task_and_the_others_keep_theirs():
    d = make_induction().to_dict()
    assert d["task"] == {"name": "induction", "length": 32, "vocab": 32, "k_min": 4}
    assert d["model"]["vocab_size"] == 32 and d["model"]["embed_std"] == 1.0 and d["model"]["max_len"] == 32
    assert RunConfig.from_dict(d) == make_induction()
    assert "embed_std" not in make_run().to_dict()["model"]  # the article's default: left out of its key
    assert make_run(embed_std=0.1) == make_run() and make_run(embed_std=1).to_dict()["model"]["embed_std"] == 1.0
    assert "vocab" not in make_run("sort").to_dict()["task"]


@pytest.mark.parametrize(
    "overrides, field, says",
    [
        ({"length": 3}, "T", "from 4 to 256"),
        ({"length": 300}, "T", "from 4 to 256"),
        ({"vocab": 1}, "vocab", "from 2 to 1,024"),
        ({"k_min": 17}, "k_min", "T/2 = 16"),
        ({"k_min": 1}, "k_min", "from 2"),
        ({"embed_std": 0}, "embed_std", "above 0"),
        ({"position": "learned", "train_min": 2}, "train_lengths", "induction"),
    ],
)
def test_bad_induction_settings_are_refused_naming_the_field_and_range(overrides, field, says):
    with pytest.raises(ConfigError) as e:
        make_induction(**overrides)
    assert e.value.field == field and says in e.value.message


def test_the_article_tasks_refuse_the_induction_fields():
    with pytest.raises(ConfigError, match="induction"):
        make_run("copy", vocab=8)


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["train", "--task", "induction", "--T", "300"], "--T: must be from 4 to 256"),
        (["train", "--task", "induction", "--k-min", "20"], "--k-min: must be from 2 to T/2 = 16"),
        (["train", "--task", "induction", "--V", "1"], "--V: must be from 2"),
        (["train", "--task", "copy", "--V", "8"], "--V: is a setting of --task induction"),
        (["induction", "--T", "3"], "--T: must be from 4"),
        (["induction", "--seeds", "-1"], "--seeds"),
        (["induction", "--layers", "0"], "--layers"),
    ],
)
def test_the_command_line_refuses_bad_induction_input_with_one_line_and_exit_2(capsys, argv, flag):
    from cli.main import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert flag in err and len(err.strip().splitlines()) == 1


def test_train_with_the_induction_task_takes_its_defaults_unless_typed():
    from cli.flags import Parser, add_model_args, run_of

    p = Parser()
    add_model_args(p)
    assert run_of(p.parse_args(["--task", "induction"])) == make_induction()
    typed = run_of(p.parse_args(["--task", "induction", "--heads", "4", "--T", "16", "--embed-std", "0.1"]))
    assert typed == make_induction(n_heads=4, length=16, embed_std=0.1)


# --- the every-position loss and short trainings -------------------------------------------------------------


def test_the_loss_is_on_every_position_and_equals_the_held_out_losses_mean(random_params):
    from attncore.model import loss_and_grads

    run = make_induction(length=12, vocab=9, dtype="float64", n_layers=1)
    params = random_params(run.model, 3)
    seqs, _ = induction_test_set(run.task)
    loss, _ = loss_and_grads(params, seqs[:50], run.model, run.task.answer_len)
    nll, _ = induction.token_losses(params, run, seqs[:50])
    assert nll.shape == (50, 11) and loss == pytest.approx(nll.mean(), rel=1e-12)


SMALL = dict(length=16, vocab=64, k_min=4, lr=3e-3)


@pytest.mark.slow
def test_a_short_training_predicts_the_repeat_better_than_the_first_copy():
    """Within a few hundred steps the model prefers tokens it has seen in the context: the held-out repeat loss
    falls below the first copy's, which stays at about ln V."""
    from attncore.train import train

    result = train(make_induction(0, steps=300, **SMALL))
    last = result.snapshots[-1].figures
    assert last["repeat_loss"] < last["first_loss"] - 0.3
    assert abs(last["first_loss"] - math.log(64)) < 0.5
    assert last["icl_score"] < 0


STEPS, SEEDS = 100, 2


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from apptest_helpers import temporary_store

    from lab.experiments import induction as lab_induction

    chosen = [lab_induction.Variant(n, p) for n, p in lab_induction.PAGE_VARIANTS]
    runs = lab_induction.all_runs(lab_induction.runs_of(chosen, range(SEEDS), steps=STEPS))
    with temporary_store(tmp_path_factory, runs):
        yield runs


@pytest.mark.slow
def test_an_induction_record_round_trips_through_the_store_with_its_figures(store):
    from lab.store import get_run
    from lab.store.record import compute_run

    run = store[0]
    record = get_run(run)
    assert set(record.figures) == {"repeat_loss", "first_loss", "icl_score"}
    assert [s.step for s in record.snapshots] == induction.snapshot_steps(STEPS)
    assert record.probe_attention.shape == (2, 2, 31, 31)
    fresh = compute_run(run)  # the same bits computed again
    assert fresh.figures == record.figures and fresh.summary()["repeat_loss"] == record.summary()["repeat_loss"]
    for a, b in zip(fresh.snapshots, record.snapshots, strict=True):
        assert a.figures["repeat_loss"] == b.figures["repeat_loss"]
        assert (a.figures["induction_score"] == b.figures["induction_score"]).all()


def test_the_codec_refuses_an_induction_record_without_its_figures(store):
    from lab.store import codec, get_run
    from lab.store.record import NUMERICS_VERSION

    meta, data = codec.encode(get_run(store[0]))
    meta["numerics_version"] = NUMERICS_VERSION
    codec.check_values(meta, store[0])
    del meta["summary"]["repeat_loss"]
    with pytest.raises(codec.RecordError, match="repeat_loss is missing"):
        codec.check_values(meta, store[0])


@pytest.mark.slow
def test_the_command_prints_the_runs_comparisons_and_finding_as_json(store, capsys):
    from cli.main import main

    assert main(["induction", "--seeds", "0", "1", "--steps", str(STEPS), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    order = [(r["layers"], r["position"], r["seed"]) for r in out["runs"]]
    assert order == [(2, "rope", 0), (2, "rope", 1), (1, "rope", 0), (1, "rope", 1)]
    r = out["runs"][0]
    assert set(r) >= {"phase_step", "largest_drop", "repeat_loss", "first_loss_final", "icl_score_final",
                      "induction_score", "previous_token_score", "ablation"}  # fmt: skip
    assert set(r["repeat_loss"]) >= {"start", "final"} and np.shape(r["induction_score"]["final"]) == (2, 2)
    # the JSON's shape: "ablation" is the induction head zeroed, {"head": [layer, head], "repeat_loss", ...}
    assert set(r["ablation"]) == {"head", "repeat_loss", "first_loss"} and r["ablation"]["head"][0] == 1
    assert r["previous_token_ablation"]["head"][0] == 0
    one = out["runs"][2]
    assert one["ablation"]["head"][0] == 0 and one["previous_token_ablation"] is None  # one layer: no pair to break
    assert r["phase_step"] is None or isinstance(r["phase_step"], int)
    cells = {c["facet"] for c in out["comparisons"]}
    assert cells == {"1 vs 2 layers, RoPE", "induction head zeroed vs intact, 2 layers, RoPE",
                     "previous-token head zeroed vs intact, 2 layers, RoPE"}  # fmt: skip
    assert all(c["verdict"] == "too few seeds" for c in out["comparisons"])  # 2 seeds can show nothing
    assert out["finding"].startswith("2 layers, RoPE: ")


def test_the_ablation_zeroes_the_head_it_names(store):
    from attncore.inspect import head_mask_for
    from lab.experiments import induction as lab_induction
    from lab.store import get_run

    record = get_run(store[0])
    heads = lab_induction.heads_of(record)
    zeroed = lab_induction.ablate(record, heads["induction head"])
    mask = head_mask_for(record.config, [heads["induction head"]])
    assert zeroed["repeat_loss"] == induction.held_out(record.params, record.config, head_mask=mask).repeat_loss
    assert heads["induction head"][0] == 1 and heads["previous-token head"][0] == 0


def test_the_command_a_page_names_trains_the_pages_runs():
    """The page's train button names the command line that does the same work (a hosted page's refusal shows it):
    parsed by the CLI, it trains every run of the page's variants, the page's baseline first."""
    import shlex

    from cli.induction import settings_of
    from cli.main import build_parser
    from lab.experiments import induction as lab_induction

    chosen = [lab_induction.Variant(n, p) for n, p in lab_induction.PAGE_VARIANTS]
    for settings in (
        {"steps": 500, "embed_std": 0.1},
        {"steps": INDUCTION_RUN["steps"]},
        {"steps": 500, "norm": "post"},
    ):
        text = lab_induction.command(chosen, [0, 3], **settings)
        assert text.startswith("python -m attncore induction --layers 2 1 --position rope none --seeds 0 3")
        assert ("--steps" in text) == (settings["steps"] != INDUCTION_RUN["steps"])  # defaults left out
        assert ("--norm post" in text) == (settings.get("norm") == "post")
        argv = shlex.split(text)[3:]
        a = build_parser(argv).parse_args(argv)
        named = lab_induction.runs_of(lab_induction.variants(a.layers, a.position), a.seeds, **settings_of(a))
        named = lab_induction.all_runs(named)
        wanted = lab_induction.all_runs(lab_induction.runs_of(chosen, [0, 3], **settings))
        assert set(wanted) <= set(named) and named[0] == wanted[0]


def test_compare_pairs_the_repeat_and_first_copy_losses_and_offers_the_tasks_own_settings(store):
    from lab.compare import metrics_of
    from lab.factors import FACTORS, faceted, factors_for, tables
    from lab.store import get_run

    records = [get_run(r) for r in store if r.model.position == "rope"]
    _, comparisons, _ = tables(faceted(records, "layers", [2, 1], None), curves=False, metrics=metrics_of("induction"))
    assert list(comparisons["metric"]) == ["test_loss", "token_accuracy", "sequence_accuracy", "repeat_loss",
                                           "first_loss"]  # fmt: skip
    repeat = comparisons[comparisons["metric"] == "repeat_loss"].iloc[0]
    by_layers = {n: [r.figures["repeat_loss"] for r in records if r.config.model.n_layers == n] for n in (2, 1)}
    assert repeat["delta_mean"] == pytest.approx(np.mean(np.subtract(by_layers[1], by_layers[2])))
    assert metrics_of("copy") == ("test_loss", "token_accuracy", "sequence_accuracy")
    offered = factors_for("induction")
    assert {"layers", "position", "norm", "lr"} <= set(offered) and not {"task", "length", "range"} & set(offered)
    assert factors_for("copy") == list(FACTORS)


def assert_the_losses_are_compared(at) -> None:
    """The comparison table's metric column and the finding name the repeat and first-copy losses, in words."""
    from apptest_helpers import texts

    metrics = {m for frame in at.dataframe if "metric" in frame.value for m in frame.value["metric"]}
    assert {"repeat loss", "first-copy loss"} <= metrics, metrics
    said = texts(at.markdown)
    assert "repeat loss" in said and "first-copy loss" in said and "repeat_loss" not in said


@pytest.mark.slow
def test_the_compare_page_varies_layers_on_the_induction_task(store):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file("../dashboard.py", default_timeout=120)
    at.query_params.update({"task": "induction", "steps": str(STEPS), "cmp_factor": "layers",
                            "cmp_lv_layers": ["2", "1"], "cmp_seeds": str(SEEDS)})  # fmt: skip
    at.run()
    at.switch_page("app_pages/compare.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert not any(b.key == "cmp_train" for b in at.button)  # the store's runs: nothing to train
    assert_the_losses_are_compared(at)
    options = at.selectbox(key="cmp_factor").options
    assert "layers" in options and "position" in options and "task" not in options


def test_the_command_line_and_lab_share_the_default_seeds():
    from cli import induction as cli_induction
    from lab.experiments import induction as lab_induction

    assert cli_induction.DEFAULT_SEEDS == lab_induction.DEFAULT_SEEDS
    assert INDUCTION_RUN["steps"] == 2000


@pytest.mark.slow
def test_the_page_draws_the_experiment_from_its_runs(store):
    from apptest_helpers import charts, texts
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file("../dashboard.py", default_timeout=120)
    at.query_params.update({"ind_seeds": str(SEEDS), "ind_steps": str(STEPS)})
    at.run()
    at.switch_page("app_pages/induction.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert not any(b.key == "ind_train" for b in at.button)  # every run cached: nothing to train
    shown = texts(at.markdown)
    assert "What the lab found." in shown and "2 layers, RoPE:" in shown
    assert "What the sources claim" in texts(at.subheader)
    assert len(charts(at)) == 4  # curves, head scores, maps, causal check
    # the in-context score on the page too (the command line's icl column), each variant's mean over its seeds
    from lab.formats import signed_loss
    from lab.store import get_run

    # written with the lab's one minus sign, as a difference ('−3.19')
    (variants,) = [f.value for f in at.dataframe if "in-context score" in f.value]
    per_variant = {}
    for run in store:
        record = get_run(run)
        per_variant.setdefault((run.model.n_layers, run.model.position), []).append(record.figures["icl_score"])
    assert sorted(variants["in-context score"]) == sorted(signed_loss(float(np.mean(v))) for v in per_variant.values())
    # in view at 1,280 px: its widest cells added up to 138 characters (921 px in an 818 px frame) when two headers
    # said "at the end", and the in-context score was scrolled out of sight; 107 at the default view, in view
    widest = sum(max(len(str(c)), *(len(str(v)) for v in variants[c])) for c in variants.columns)
    assert widest <= 110, (widest, list(variants.columns))
    # the verdict tables name each cell's two groups in words: no level or baseline columns (they fit 1,280 px)
    verdicts = [list(f.proto.column_order) for f in at.dataframe if "cell" in f.value]
    assert verdicts and all("cell" in v and "level" not in v and "baseline" not in v for v in verdicts), verdicts
    assert "L0 is the first layer" in texts(at.caption)
    assert "(previous token). Induction head: L1H" in texts(at.caption)  # the heads named open a sentence


@pytest.mark.slow
def test_the_page_offers_to_train_what_is_missing_with_an_estimate(tmp_path, monkeypatch):
    from apptest_helpers import texts
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ATTNCORE_CACHE_DIR", str(tmp_path))
    at = AppTest.from_file("../dashboard.py", default_timeout=120)
    at.run()
    at.switch_page("app_pages/induction.py").run()
    assert not at.exception and not at.error
    n = 3 * 6  # three variants over six seeds
    assert f"0 of {n} runs cached" in texts(at.info)
    (button,) = [b for b in at.button if b.key == "ind_train"]
    assert f"{n} runs, about" in button.label and "over this server" not in button.label


@pytest.mark.slow
@pytest.mark.parametrize(
    ("page", "query"),
    [
        ("attention", {}),
        ("patching", {}),
        ("explanations", {}),
        ("ablations", {"abl_variants": ["1 layer", "no position"], "abl_seeds": str(SEEDS)}),
    ],
)
def test_the_other_pages_work_on_the_induction_task(store, page, query):
    """The sidebar's induction run (2 layers, RoPE, seed 0, from the store) on the pages that read one run or vary it:
    no exception, no error, the maps of T - 1 = 31 positions; Ablations pairs the repeat loss."""
    from apptest_helpers import charts
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file("../dashboard.py", default_timeout=120)
    at.query_params.update({"task": "induction", "steps": str(STEPS)} | query)
    at.run()
    at.switch_page(f"app_pages/{page}.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert not [b for b in at.button if b.key in ("train_missing", "train")]  # the store's runs: nothing to train
    assert charts(at)
    if page == "ablations":
        assert_the_losses_are_compared(at)


@pytest.mark.slow
def test_a_link_naming_only_the_induction_task_opens_its_experiments_run():
    """?task=induction and nothing else: the sidebar's position, heads, lr, steps and embedding take the induction
    defaults (they were the article's, so such a link trained another model than the page's); another task's link
    keeps the article's."""
    from streamlit.testing.v1 import AppTest

    from ui import sidebar

    for task, want in (("induction", make_induction(0)), ("sort", make_run("sort", 6, 0))):
        at = AppTest.from_file("../dashboard.py", default_timeout=120)
        at.query_params.update({"task": task})
        at.run()
        at.switch_page("app_pages/train.py").run()
        assert not at.exception, [e.message for e in at.exception]
        kw = {arg: at.session_state[key] for key, (arg, _) in sidebar.DEFAULTS.items() if key in at.session_state}
        got = {"position": kw["position"], "n_heads": kw["n_heads"], "lr": kw["lr"], "steps": kw["steps"]}
        assert got == {"position": want.model.position, "n_heads": want.model.n_heads, "lr": want.train.lr,
                       "steps": want.train.steps}, task  # fmt: skip
        assert kw["embed_std"] == want.model.embed_std
