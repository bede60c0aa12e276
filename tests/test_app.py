"""AppTest for every page: renders, reacts to the sidebar, restores state from the URL, shows bad input as a message.

Runs are short (30 steps) and live in a temporary run store (ATTNCORE_CACHE_DIR).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from apptest_helpers import charts, metric, temporary_store, texts
from streamlit.testing.v1 import AppTest

from attncore import make_run
from attncore.inspect import evaluate_ablated
from lab import formats
from lab.compare import RULE
from lab.stats import compare_paired, n_nonzero, p_floor
from lab.store import get_run, is_cached
from lab.tables import variant_name
from ui.nav import PAGES
from ui.sidebar import describe as sidebar_describe
from ui.variants import base_label

pytestmark = pytest.mark.slow  # AppTests of the pages, which train short runs

STEPS = 30
SHORT = {"steps": str(STEPS)}
TIMEOUT = 120


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A temporary run store with the default configuration (30 steps) and its no-position ablation."""
    with temporary_store(tmp_path_factory, [make_run(steps=STEPS), make_run(steps=STEPS, position="none")]):
        yield


def shows(text: str, x: float) -> bool:
    """A table cell in its column's one format (lab.formats.column_spec) reads as x: its digits, at
    least 3 significant, agree; exactly 0 is '0'."""
    if x == 0:
        return text == "0"
    value = float(text.replace("−", "-"))
    return abs(value - x) <= 5e-3 * abs(x) or abs(value - x) <= 10 ** -len(text.split(".")[-1].split("e")[0])


def app(page: str = "", **query) -> AppTest:
    """The dashboard opened at `page` (a file under app_pages/) with these query parameters."""
    at = AppTest.from_file("../dashboard.py", default_timeout=TIMEOUT)
    at.query_params.update(SHORT | query)
    at.run()
    if page:
        at.switch_page(f"app_pages/{page}.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_no_pages_folder_beside_the_entry_point():
    """A folder named pages/ next to dashboard.py turns on Streamlit's legacy navigation for a server's first run
    (and for every AppTest run): page scripts live in app_pages/ and are registered in ui/nav.py."""
    root = Path(__file__).resolve().parents[1]
    assert not (root / "pages").exists()
    assert all((root / spec.path).is_file() for spec in PAGES)


@pytest.mark.parametrize("spec", [p for p in PAGES if not p.uses_run], ids=lambda p: p.url_path)
def test_other_registered_pages_render_inside_the_dashboard(store, spec):
    """Calculators and mechanism pages under dashboard.py: no exception, and the run configuration folded away."""
    at = app(spec.path.removeprefix("app_pages/").removesuffix(".py"))
    assert at.title and not at.error
    assert "Run configuration (Lab pages)" in [e.label for e in at.sidebar.expander]


# --- Home ----------------------------------------------------------------------------------------


def test_home_renders_cache_state_and_links(store):
    at = app()
    assert at.title[0].value == "Attention Lab"
    assert metric(at, "Runs in the cache") == "2"
    assert metric(at, "Article runs cached") == "0 of 23"
    assert metric(at, "Sidebar run") == "cached"
    links = [link.proto.page for link in at.get("page_link")]
    assert {"train", "results", "ablations", "attention"} <= set(links)


def test_home_reflects_a_sidebar_change(store):
    at = app()
    at.number_input(key="seed").set_value(9).run()
    assert metric(at, "Sidebar run") == "not trained yet"
    assert "seed 9" in texts(at.caption)


def test_home_reproduce_button_runs_the_sweep_with_progress(store, monkeypatch):
    import lab.presets

    short = [make_run("copy", 4, s, steps=STEPS) for s in (0, 1)] + [make_run("copy", 4, 0, steps=STEPS, scaling=False)]
    monkeypatch.setattr(lab.presets, "preset", lambda name: short)  # the article's 23 full runs take minutes
    at = app()
    assert metric(at, "Article runs cached") == "0 of 3"
    at.button(key="reproduce").click().run()
    assert not at.exception
    accuracy, ablation = (d.value for d in at.dataframe[:2])
    assert accuracy[["task", "length", "seeds"]].values.tolist() == [["copy", 4, 2]]
    assert list(ablation["variant"]) == ["full", "no scaling"]
    assert all(is_cached(r) for r in short)
    again = app()  # now from the cache: no button, the same tables at once
    assert metric(again, "Article runs cached") == "3 of 3"
    assert not [b for b in again.button if b.key == "reproduce"]
    assert again.dataframe[0].value.equals(accuracy)


def test_home_invalid_sidebar_shows_error(store):
    at = app(d="30")
    assert "Heads: must divide" in texts(at.error) and not at.exception


# --- Train ---------------------------------------------------------------------------------------


def test_train_cached_run_appears_at_once(store):
    at = app("train")
    record = get_run(make_run(steps=STEPS))
    assert metric(at, "Test loss") == formats.loss(record.test_loss)  # the held-out loss, not the last batch's
    (loss,) = [m for m in at.metric if m.label == "Test loss"]
    assert loss.delta == f"last batch {formats.loss(record.final_loss)}"
    assert metric(at, "Per-sequence accuracy") == f"{record.eval.sequence_accuracy:.3f}"
    assert metric(at, "Parameters") == "27,253"
    assert len(charts(at)) == 3  # the loss curve, accuracy over the snapshots, their norms
    assert "accuracy" in str(charts(at)[1]["layer"][0]["encoding"]["y"])
    assert "largest |q·k|/scale" in str(charts(at)[2]) and "stored before its norms" not in texts(at.info)
    kernel = record.platform["blas_kernel"]
    assert f"{kernel} kernels on 1 thread" in texts(at.caption).replace("\\", "")  # where its numbers came from


def test_train_says_a_record_stored_before_its_norms_has_none(store):
    import dataclasses

    from lab.store import put_run
    from lab.store.record import compute_run

    put_run(dataclasses.replace(compute_run(make_run(seed=7, steps=STEPS)), norms=None))  # as stored before 30.3
    at = app("train", seed="7")
    assert len(charts(at)) == 2 and "stored before its norms were recorded" in texts(at.info)


def test_train_uncached_run_trains_on_demand(store):
    at = app("train", seed="5")
    assert not at.metric and "Not trained yet" in texts(at.info)
    run_line = sidebar_describe(make_run(seed=5, steps=STEPS))
    assert run_line not in texts(at.info) and run_line in texts(at.caption)  # the run is named once
    at.button(key="train").click().run()
    assert not at.exception
    assert is_cached(make_run(seed=5, steps=STEPS))
    record = get_run(make_run(seed=5, steps=STEPS))
    assert metric(at, "Test loss") == formats.loss(record.test_loss)


def test_train_sidebar_change_changes_what_is_shown(store):
    at = app("train")
    before = metric(at, "Test loss")
    at.selectbox(key="pos").set_value("none").run()
    assert "none position" in texts(at.caption)
    assert metric(at, "Test loss") != before  # the no-position run is cached too, with its own loss


def test_train_invalid_combination_shows_error_not_traceback(store):
    at = app("train")
    at.number_input(key="d").set_value(30).run()
    assert not at.exception
    assert "Heads: must divide" in texts(at.error) and "must divide d_model=30" in texts(at.error)
    assert not at.metric


def test_query_params_restore_the_whole_sidebar(store):
    query = dict(task="sort", L="4", seed="2", pos="RoPE", norm="post-LN", scaling="false", lr="0.01")
    query |= dict(d="16", heads="2", layers="1", batch="16")
    at = app("train", **query)
    assert at.radio(key="task").value == "sort" and at.radio(key="norm").value == "post"
    assert at.selectbox(key="pos").value == "rope" and at.selectbox(key="lr").value == 0.01
    assert at.toggle(key="scaling").value is False
    values = {k: at.number_input(key=k).value for k in ("L", "seed", "steps", "d", "heads", "layers", "batch")}
    assert values == dict(L=4, seed=2, steps=STEPS, d=16, heads=2, layers=1, batch=16)
    caption = texts(at.caption)
    # lr=0.01 in the URL (the value) is accepted and shown in the one notation; "1 layer", not "1 layers"
    assert "sort · L=4 · seed 2 · RoPE position · post-LN · scaling off · lr 1e-2" in caption
    assert "d=16, 2 heads, 1 layer · batch 16" in caption


def test_query_params_restore_qk_norm_z_loss_and_weight_decay(store):
    at = app("train", qknorm="true", zloss="0.0001", wd="0.1")
    assert at.toggle(key="qknorm").value is True
    assert (at.number_input(key="zloss").value, at.number_input(key="wd").value) == (1e-4, 0.1)
    caption = texts(at.caption)
    assert "scaling on · qk-norm · lr 3e-3" in caption and "weight decay 0.1 · z-loss 0.0001" in caption
    assert not at.exception


def test_reset_restores_the_defaults(store):
    at = app("train", task="sort", L="4", d="16")
    next(b for b in at.button if b.label == "Reset to defaults").click().run()
    assert at.radio(key="task").value == "copy"
    assert (at.number_input(key="L").value, at.number_input(key="d").value) == (6, 32)


def test_sidebar_settings_persist_across_pages(store):
    at = app("train")
    at.number_input(key="L").set_value(4).run()
    at.switch_page("app_pages/attention.py").run()
    assert at.number_input(key="L").value == 4
    assert "copy · L=4" in texts(at.caption)


def test_hosted_caps_from_environment_and_secrets(store, monkeypatch):
    monkeypatch.setenv("ATTNLAB_MAX_STEPS", "200")
    at = AppTest.from_file("../dashboard.py", default_timeout=TIMEOUT)
    at.secrets["limits"] = {"max_layers": 3}
    at.query_params.update({"steps": "5000", "layers": "4"})  # beyond the caps: ignored
    at.run()
    steps, layers = at.number_input(key="steps"), at.number_input(key="layers")
    assert (steps.max, steps.value) == (200, 200)  # the default 1500 clamped to the cap
    assert (layers.max, layers.value) == (3, 2)


def _hold_all_slots(monkeypatch, seconds: float):
    """Cap trainings at one, take that slot in another thread for `seconds`; returns the thread."""
    import threading

    from ui.slots import training_slot

    monkeypatch.setenv("ATTNLAB_MAX_CONCURRENT", "1")
    monkeypatch.setenv("ATTNLAB_SLOT_WAIT_SECONDS", "1")
    taken = threading.Event()

    def hold():
        with training_slot():
            taken.set()
            threading.Event().wait(seconds)

    thread = threading.Thread(target=hold)
    thread.start()
    assert taken.wait(5)
    return thread


def test_training_slots_cap_concurrent_trainings(monkeypatch):
    from lab.jobs.slots import BusyError
    from ui.slots import training_slot

    thread = _hold_all_slots(monkeypatch, 3)
    with pytest.raises(BusyError, match=r"The server is busy: its 1 slot for heavy jobs stayed taken"):
        with training_slot():
            pass
    thread.join()
    with training_slot():  # free again once the other training is done
        pass


def test_train_when_the_server_is_busy_shows_a_message(store, monkeypatch):
    thread = _hold_all_slots(monkeypatch, 4)
    at = app("train", seed="6")
    at.button(key="train").click().run()
    thread.join()
    assert not at.exception
    assert "The server is busy" in texts(at.error)
    assert not is_cached(make_run(seed=6, steps=STEPS))


# --- Results -------------------------------------------------------------------------------------

RESULTS = {"res_tasks": "copy", "res_L": ["4", "6"], "res_seeds": ["0", "1"]}


def test_results_trains_missing_runs_then_shows_tables_and_charts(store):
    at = app("results", **RESULTS)
    assert re.search(r"\d of 4 runs (is|are) not trained yet", texts(at.info))  # "1 of 4 runs is", "3 of 4 are"
    at.button(key="train_missing").click().run()
    assert not at.exception
    assert not [b for b in at.button if b.key == "train_missing"] and "not trained yet" not in texts(at.info)
    table = at.dataframe[0].value
    assert table[["task", "length", "seeds"]].values.tolist() == [["copy", 4, 2], ["copy", 6, 2]]
    records = [get_run(make_run("copy", L, s, steps=STEPS)) for L in (4, 6) for s in (0, 1)]
    expected = [np.mean([r.eval.sequence_accuracy for r in records[i : i + 2]]) for i in (0, 2)]
    assert np.allclose(table["sequence_accuracy_mean"], expected)
    assert len(charts(at)) == 2
    downloads = [b.proto.label for b in at.get("download_button")]
    tables = [d for d in downloads if not d.startswith(("SVG", "PNG"))]  # each chart's two are in its menu
    assert tables[0].startswith("Download the accuracy table") and len(downloads) == len(tables) + 2 * 2


def test_results_follow_the_sidebar(store):
    at = app("results", **RESULTS)
    at.number_input(key="steps").set_value(40).run()  # other runs: none cached at 40 steps
    assert "4 of 4 runs are not trained yet" in texts(at.info)
    assert not at.main.dataframe


def test_results_say_which_sidebar_settings_apply_and_offer_the_articles(store):
    """Results applies the sidebar's settings but task, L and seed: it names them, and one click restores the
    article's, e.g. after the article was reproduced while the sidebar held other settings."""
    at = app("results", **RESULTS)
    assert "learned position · pre-LN · scaling on · lr 3e-3 · 30 steps" in texts(at.caption)
    assert "differs from the article's settings in: steps" in texts(at.info)
    at.radio(key="norm").set_value("post").run()
    assert "differs from the article's settings in: LayerNorm, steps" in texts(at.info)
    at.button(key="use_article").click().run()
    assert at.session_state["norm"] == "pre" and at.session_state["steps"] == 1500
    assert at.session_state["task"] == "copy" and "differs from" not in texts(at.info)
    assert "30 steps" not in texts(at.caption) and "(the article's settings)" in texts(at.caption)
    assert "18 runs" not in texts(at.info)  # the grid is still this page's: 1 task x 2 L x 2 seeds


def test_results_invalid_sidebar_shows_error(store):
    at = app("results", heads="5", **RESULTS)
    assert "Heads: must divide" in texts(at.error) and not at.exception


# --- Ablations -----------------------------------------------------------------------------------


def test_ablations_table_has_base_first_and_differences(store):
    at = app("ablations", abl_variants="no position", abl_seeds="1")
    table, comparisons = at.dataframe[0].value, at.dataframe[1].value
    assert list(table["variant"]) == [base_label(make_run(steps=STEPS)), "no position"]
    base, ablated = get_run(make_run(steps=STEPS)), get_run(make_run(steps=STEPS, position="none"))
    loss = comparisons[comparisons["metric"] == "test loss"].iloc[0]  # held out, not the last training batch
    assert loss["variant"] == "no position" and shows(loss["Δ mean"], ablated.test_loss - base.test_loss)
    assert loss["p floor"] == "1.00" and loss["interval"] == "(−∞, +∞)"  # one seed: the test rejects no shift
    assert set(comparisons["verdict"]) <= {"too few seeds", "identical on every seed"}
    assert len(charts(at)) == 2  # loss curves and the distinct/repeated breakdown


def test_ablations_default_seeds_can_answer_and_say_so_before_the_click(store):
    """The default view (the five article variants, Holm across them) has the seeds the rule needs, and says before
    any training what it can conclude; at 3 seeds it says that no difference can be shown, and what would."""
    from lab import stats

    at = app("ablations")
    needed = stats.seeds_needed(5)
    assert at.number_input(key="abl_seeds").value == needed and "abl_seeds" not in at.query_params
    said = texts(at.markdown)
    assert "What these seeds can conclude." in said and f"2/2^{needed}" in said and "below 0.05" in said
    assert [b for b in at.button if b.key == "train_missing"]  # said before the click: nothing is trained yet
    at = app("ablations", abl_seeds="3")
    said = texts(at.markdown)
    assert "no difference can be shown" in said and f"take {needed} seeds" in said
    at = app("ablations", abl_variants="no position", abl_seeds="6")  # one variant: 6 seeds can
    assert "What these seeds can conclude." in texts(at.markdown) and "Holm" not in texts(at.markdown)


def test_ablations_follow_the_sidebar_and_train_missing(store):
    at = app("ablations", abl_variants="no scaling", abl_seeds="1")
    assert "1 of 2 runs cached" in texts(at.info)
    at.button(key="train_missing").click().run()
    assert list(at.dataframe[0].value["variant"]) == [base_label(make_run(steps=STEPS)), "no scaling"]
    # what said something was missing is gone once nothing is
    assert not [b for b in at.button if b.key == "train_missing"] and "cached" not in texts(at.info)
    at.radio(key="norm").set_value("post").run()  # a new base: post-LN, nothing cached
    assert "0 of 2 runs cached" in texts(at.info)


def test_ablations_over_seeds_show_bands_paired_differences_and_the_rule(store):
    """Two seeds by default-free URL: the base and no position at seeds 0 and 1, trained as one sweep, compared
    pair by pair: each delta is the stored runs' own difference at that seed, the verdict is the library's."""
    wanted = [make_run(steps=STEPS, seed=s, position=p) for p in ("learned", "none") for s in (0, 1)]
    at = app("ablations", abl_variants="no position", abl_seeds="2")
    assert f"{sum(map(is_cached, wanted))} of 4 runs cached" in texts(at.info)  # seed 1 of no position is not
    at.button(key="train_missing").click().run()
    assert not at.exception
    summary, comparisons = at.dataframe[0].value, at.dataframe[1].value
    assert list(summary["n"]) == [2, 2]
    shown = list(at.dataframe[0].proto.column_order)  # mean and worst seed only: fits 1,280 px without scrolling
    assert shown == ["variant", "n", "test_loss_mean", "test_loss_max", "token_accuracy_mean"] + [
        "token_accuracy_min",
        "sequence_accuracy_mean",
        "sequence_accuracy_min",
    ]
    records = {(p, s): get_run(make_run(steps=STEPS, seed=s, position=p)) for p in ("learned", "none") for s in (0, 1)}
    runs = {key: r.eval for key, r in records.items()}
    deltas = [runs["none", s].sequence_accuracy - runs["learned", s].sequence_accuracy for s in (0, 1)]
    row = comparisons[comparisons["metric"] == "per-sequence"].iloc[0]
    assert shows(row["Δ min"], min(deltas)) and shows(row["Δ max"], max(deltas))
    assert row["verdict"] == compare_paired({"none": deltas})["none"]["verdict"]
    # the floor counts the seeds that differ (a tie has no sign): 0.5 with both, 1 with none
    assert shows(row["p floor"], p_floor(n_nonzero(deltas))) and row["seeds"] == 2
    losses = [records["none", s].test_loss - records["learned", s].test_loss for s in (0, 1)]
    tokens = [runs["none", s].token_accuracy - runs["learned", s].token_accuracy for s in (0, 1)]
    floors = {formats.p_values([p_floor(n_nonzero(d))])[0] for d in (losses, tokens, deltas)}
    if len(floors) == 1:  # one floor for every row: said once under the table, not a column (it fits 1,280 px)
        assert "p floor" not in at.dataframe[1].proto.column_order and "p" in at.dataframe[1].proto.column_order
        assert f"no p can be below **{floors.pop()}**" in texts(at.caption)
    else:
        assert "p floor" in at.dataframe[1].proto.column_order
    assert RULE in texts(at.caption)
    assert "a difference can be shown once 6 seeds differ" in texts(at.markdown)
    assert "What differs, computed from these runs." in texts(at.markdown)
    layers = [layer["mark"]["type"] for layer in charts(at)[0]["layer"]]
    assert layers == ["area", "line"]  # the min-max band under the mean
    # the breakdown's n is the test sequences of each kind, the same 500 for every seed: never summed over seeds
    import pyarrow as pa

    chart = at.get("vega_lite_chart")[1].proto
    data = chart.datasets[0].data.data if chart.datasets else chart.data.data
    bars = pa.ipc.open_stream(data).read_all().to_pandas()
    assert set(bars[bars["symbols"] == "all distinct"]["n"]) == {runs["learned", 0].n_distinct}
    assert "seeds 0-1" in texts(at.caption)
    assert at.number_input(key="abl_seeds").max == 8  # the default hosted cap: 5 variants under Holm need 8


def test_ablations_seeds_and_runs_are_capped(store, monkeypatch):
    monkeypatch.setenv("ATTNLAB_MAX_SEEDS", "2")
    monkeypatch.setenv("ATTNLAB_MAX_SWEEP_RUNS", "3")
    at = app("ablations", abl_variants=["lr 1e-3", "lr 3e-2"], abl_seeds="5")  # 4 runs nobody else trains
    assert at.number_input(key="abl_seeds").value == 2  # 5 is beyond the cap: the default, clamped to it
    assert "more than this server trains at once (3, max_sweep_runs)" in texts(at.info)  # said before any click
    assert "ATTNLAB_MAX_SWEEP_RUNS or max_sweep_runs under [limits]" in texts(at.info)
    assert [b.disabled for b in at.button if b.key == "train_missing"] == [True]


def test_ablations_name_the_base_row_for_what_it_is_and_note_repeats_once():
    """A no-position post-LN base is not 'full'; the variants it already is are listed in one note."""
    assert base_label(make_run()) == "base: the full model"
    assert base_label(make_run(position="none", norm="post")) == "base: no position, post-LN"
    at = app("ablations", pos="none")  # the article's five variants against this base
    at.radio(key="norm").set_value("post").run()
    skipped = [c for c in texts(at.caption).splitlines() if "shown once" in c]
    assert skipped == [
        "Skipped no position; post-LN; post-LN, lr 1e-2: already the base or another variant, shown once."
    ]
    assert "full" not in texts(at.caption).replace("the full model", "")


def test_ablations_skip_impossible_variants_with_a_note(store):
    at = app("ablations", d="12", heads="4", abl_variants=["RoPE position"])  # d_head 3 is odd
    assert "RoPE position: not possible" in texts(at.caption)
    assert not at.exception


def test_ablation_labels_match_the_store_tables():
    base = make_run(steps=STEPS)
    assert variant_name(make_run(steps=STEPS, position="none"), base) == "no position"


# --- Compare -------------------------------------------------------------------------------------


def test_compare_trains_missing_runs_as_one_sweep_then_shows_groups_and_verdicts(store):
    at = app("compare", cmp_factor="scaling", cmp_seeds="2")
    info = texts(at.info)
    assert re.search(r"\d of 4 runs cached", info) and "still to train" in info
    at.button(key="cmp_train").click().run()
    assert not at.exception and not at.info
    summary, comparisons = at.dataframe[0].value, at.dataframe[1].value
    assert list(summary["scaling"]) == ["on", "off"] and list(summary["n"]) == [2, 2]
    assert list(comparisons["metric"]) == ["test loss", "per-token", "per-sequence"]
    assert set(comparisons["baseline"]) == {"on"} and set(comparisons["scaling"]) == {"off"}
    order = list(at.dataframe[1].proto.column_order)
    assert "verdict" in order and "baseline" not in order  # one baseline: named once, in the caption
    assert "scaling" not in order  # one level compared with it: named once too
    assert "Every row is **off** against the baseline **on**, paired by seed." in texts(at.caption)
    on = [get_run(make_run(steps=STEPS, seed=s, scaling=True)).test_loss for s in (0, 1)]
    off = [get_run(make_run(steps=STEPS, seed=s, scaling=False)).test_loss for s in (0, 1)]
    assert shows(comparisons["Δ mean"].iloc[0], np.mean(np.subtract(off, on)))
    assert np.isclose(summary["test_loss_max"].iloc[1], max(off))
    specs = charts(at)
    assert [layer["mark"]["type"] for layer in specs[0]["layer"]] == ["area", "line"]  # loss: mean in a band
    assert [layer["mark"]["type"] for layer in specs[1]["layer"]] == ["area", "line"]  # accuracy during training
    assert specs[1]["layer"][1]["encoding"]["y"]["title"] == "mean per-sequence accuracy"
    assert [layer["mark"]["type"] for layer in specs[2]["layer"]] == ["errorbar", "point"]  # accuracy by level
    downloads = [b.proto.label for b in at.get("download_button")]
    tables = [d for d in downloads if not d.startswith(("SVG", "PNG"))]  # each chart's two are in its menu
    assert tables == ["Download the grouped table (CSV)", "Download the comparisons (CSV)"]
    assert len(downloads) == len(tables) + 2 * len(specs)
    assert RULE in texts(at.caption)


def test_too_few_seeds_offers_one_button_that_adds_the_seeds_a_verdict_needs(store):
    """Two levels over 2 seeds: every verdict is 'too few seeds' (floor 0.5); the button says it takes 6 seeds and
    8 more runs, and pressing it sets the seeds to 6 (the runs are then offered for training)."""
    at = app("compare", cmp_factor="position", cmp_seeds="2")
    if [b for b in at.button if b.key == "cmp_train"]:
        at.button(key="cmp_train").click().run()
    comparisons = at.dataframe[1].value
    assert set(comparisons["verdict"]) <= {"too few seeds", "identical on every seed"}
    assert "+0.0000" not in comparisons.to_string()
    more = at.button(key="cmp_seeds_more")
    assert more.label == "Add seeds up to 6 (8 more runs to train)"
    more.click().run()
    assert at.number_input(key="cmp_seeds").value == 6
    wanted = [make_run(steps=STEPS, seed=s, position=p) for p in ("learned", "none") for s in range(6)]
    assert f"{sum(map(is_cached, wanted))} of 12 runs cached" in texts(at.info)  # seeds 0-1 at least


def test_the_seeds_a_verdict_needs_beyond_the_cap_are_said_not_offered(store, monkeypatch):
    monkeypatch.setenv("ATTNLAB_MAX_SEEDS", "5")
    at = app("compare", cmp_factor="position", cmp_seeds="2")
    if [b for b in at.button if b.key == "cmp_train"]:
        at.button(key="cmp_train").click().run()
    assert "6 seeds is more than this server allows (5)" in texts(at.info)
    assert not [b for b in at.button if b.key == "cmp_seeds_more"]


def test_compare_by_learning_rate_names_its_levels_as_the_sidebar_does(store):
    at = app("compare", cmp_factor="learning rate", cmp_lv_lr=["0.003", "0.01"], cmp_seeds="1")
    at.button(key="cmp_train").click().run()
    assert not at.exception
    summary = at.dataframe[0].value
    assert list(summary["lr"]) == ["3e-3", "1e-2"]  # not 0.003 / 0.01
    assert "Each level against 3e-3, paired by seed" in [h.value for h in at.subheader]


def test_compare_view_is_restored_from_the_url(store):
    at = app("compare", cmp_factor="learning rate", cmp_lv_lr=["0.01", "0.003"], cmp_seeds="4", cmp_facet="LayerNorm")
    assert at.selectbox(key="cmp_factor").value == "lr"
    assert at.multiselect(key="cmp_lv_lr").value == [0.01, 0.003]  # the order too: the first is the baseline
    assert at.number_input(key="cmp_seeds").value == 4
    assert at.multiselect(key="cmp_fv_norm").value == ["pre", "post"]
    assert "of 16 runs cached" in texts(at.info)  # 2 levels x 2 panels x 4 seeds


def test_compare_facets_by_a_second_setting(store):
    at = app("compare", cmp_factor="position", cmp_facet="scaling", cmp_fv_scaling=["on", "off"], cmp_seeds="1")
    if [b for b in at.button if b.key == "cmp_train"]:
        at.button(key="cmp_train").click().run()
    summary = at.dataframe[0].value
    assert list(zip(summary["panel: scaling"], summary["position"], strict=True)) == [
        ("on", "learned"),
        ("on", "none"),
        ("off", "learned"),
        ("off", "none"),
    ]
    assert "facet" in charts(at)[0] and "facet" in charts(at)[1]


def test_compare_invalid_combination_names_the_field_and_the_allowed_values(store):
    at = app("compare", d="12", cmp_factor="heads", cmp_lv_heads=["4", "8"])
    assert not at.exception
    (error,) = at.error
    assert "Heads: must divide d_model=12; allowed: 1, 2, 3, 4, 6, 12 (asked for by heads 8)" in error.value
    assert not at.main.dataframe


def test_compare_view_of_more_runs_than_the_cap_is_refused_before_loading(store, monkeypatch):
    monkeypatch.setenv("ATTNLAB_MAX_COMPARE_RUNS", "5")
    at = app("compare", cmp_factor="scaling", cmp_seeds="3")  # 6 runs
    assert "This view has 6 runs; this server shows at most 5 at once" in texts(at.warning)
    assert "(max_compare_runs)" in texts(at.warning) and "`python -m attncore sweep" in texts(at.warning)
    assert not at.main.dataframe and not [b for b in at.button if b.key == "cmp_train"]


def test_compare_defaults_to_the_six_seeds_two_levels_need_for_a_verdict(store):
    at = app("compare")
    assert at.number_input(key="cmp_seeds").value == 6 and at.number_input(key="cmp_seeds").max == 8
    assert "of 12 runs cached" in texts(at.info)  # learned and no position over seeds 0-5


def test_compare_needs_two_levels(store):
    at = app("compare", cmp_factor="task", cmp_lv_task="copy")
    assert "Pick at least two levels of task" in texts(at.info)


# --- Attention -----------------------------------------------------------------------------------


def test_attention_heatmaps_table_and_head_ablation(store):
    at = app("attention", att_ablate="L0H1")
    record = get_run(make_run(steps=STEPS))
    heads = at.dataframe[0].value
    assert list(heads["head"]) == [f"L{layer}H{h}" for layer in range(2) for h in range(4)]
    spec = charts(at)[0]
    assert spec["facet"]["field"] == "panel" and spec["columns"] == 4  # 4 heads: one layer per row
    ablated = evaluate_ablated(record.params, record.config, [(0, 1)])
    assert metric(at, "Per-sequence") == f"{ablated.sequence_accuracy:.3f}"
    assert metric(at, "Heads zeroed") == "1 of 8"
    assert "Weights are not explanations" in texts(at.info)


def test_attention_typed_sequence_changes_the_input(store):
    at = app("attention")
    at.text_input(key="seq").set_value("1 2 3 4 5 6").run()
    assert "Input `1 2 3 4 5 6 SEP 1 2 3 4 5`" in texts(at.markdown)
    assert not at.error


@pytest.mark.parametrize("text", ["1 2 3", "1 2 3 4 5 99", "a b c d e f"])
def test_attention_invalid_sequence_shows_error(store, text):
    at = app("attention")
    at.text_input(key="seq").set_value(text).run()  # typed; a link's invalid ?seq= is tests/test_urls.py's
    assert not at.exception
    assert "Not a valid input" in texts(at.error) and "sequence" in texts(at.error)


def test_attention_follows_the_sidebar(store):
    at = app("attention")
    assert "Input `17 3 0 12 7 9 SEP" in texts(at.markdown)
    at.selectbox(key="pos").set_value("none").run()
    assert "none position" in texts(at.caption)
    assert (
        at.dataframe[0].value["mean max weight"].tolist()
        != app("attention").dataframe[0].value["mean max weight"].tolist()
    )
