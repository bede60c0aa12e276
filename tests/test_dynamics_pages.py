"""Training dynamics on the pages: the training-step control of Train and Attention, and the Length generalisation page.

Runs are short (30 steps) and live in a temporary run store (ATTNCORE_CACHE_DIR), as in test_app.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from apptest_helpers import temporary_store, texts
from streamlit.testing.v1 import AppTest

from attncore import make_run
from attncore.config import POSITIONS
from attncore.evaluate import evaluate_lengths
from attncore.snapshots import snapshot_steps
from lab.stats import format_delta
from lab.store import get_run, is_cached
from ui.limits import limits

pytestmark = pytest.mark.slow  # AppTests of pages that train

STEPS = 30
TIMEOUT = 180


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A temporary run store holding the sidebar's default run at 30 steps."""
    with temporary_store(tmp_path_factory, [make_run(steps=STEPS)]):
        yield


def app(page: str, **query) -> AppTest:
    at = AppTest.from_file("../dashboard.py", default_timeout=TIMEOUT)
    at.query_params.update({"steps": str(STEPS)} | query)
    at.run()
    at.switch_page(f"app_pages/{page}.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def chart_data(at: AppTest) -> list[list[pd.DataFrame]]:
    """Per chart on the page, the data frames it was sent (Streamlit ships them as Arrow, beside the spec)."""
    return [
        [pa.ipc.open_stream(d.data.data).read_pandas() for d in c.proto.datasets] for c in at.get("vega_lite_chart")
    ]


def frames_with(at: AppTest, column: str) -> list[pd.DataFrame]:
    return [df for chart in chart_data(at) for df in chart if column in df.columns]


def weights(at: AppTest) -> np.ndarray:
    """The weights the attention heatmaps draw, in the order of ui.frames.attention_frame."""
    (frame,) = frames_with(at, "weight")
    return frame["weight"].to_numpy()


def causal(maps: np.ndarray) -> np.ndarray:
    return maps[np.broadcast_to(np.tril(np.ones(maps.shape[-2:], bool)), maps.shape)]


def test_attention_step_control_shows_the_maps_of_that_step(store):
    record = get_run(make_run(steps=STEPS))
    at = app("attention")
    slider = at.select_slider(key="attn_step")
    assert list(slider.options) == [str(s) for s in snapshot_steps(STEPS)] and slider.value == STEPS
    final = weights(at)
    np.testing.assert_allclose(final, causal(record.probe_attention), rtol=1e-6)  # the final step: the final maps
    early = record.snapshots[1]
    at.select_slider(key="attn_step").set_value(early.step).run()
    assert not at.exception
    np.testing.assert_allclose(weights(at), causal(early.probe_attention), rtol=1e-6)
    assert not np.allclose(weights(at), final)
    assert f"After step {early.step} of {STEPS}" in texts(at.caption)
    linked = app("attention", attn_step=str(early.step))  # a link restores the step
    np.testing.assert_allclose(weights(linked), causal(early.probe_attention), rtol=1e-6)


def test_train_step_control_marks_the_loss_curve_and_shows_accuracy_over_snapshots(store):
    record = get_run(make_run(steps=STEPS))
    at = app("train", train_step=str(record.snapshots[2].step))
    assert at.select_slider(key="train_step").value == record.snapshots[2].step
    rules = [df for df in frames_with(at, "step") if df.columns.tolist() == ["step"]]
    assert [df["step"].tolist() for df in rules] == [[record.snapshots[2].step]] * 2  # on the loss and accuracy
    (acc,) = frames_with(at, "accuracy")
    assert acc["step"].tolist()[::2] == snapshot_steps(STEPS)
    assert acc["accuracy"].tolist()[:2] == [record.snapshots[0].token_accuracy, record.snapshots[0].sequence_accuracy]
    assert "first 100 of the 500 test sequences" in texts(at.caption)


def test_length_page_shows_the_sidebar_run_at_each_test_length(store):
    run = make_run(steps=STEPS)
    at = app("lengths", len_L=["2", "6", "7"])
    table = at.dataframe[0].value
    expected = evaluate_lengths(get_run(run).params, run, [2, 6, 7])
    assert table["test L′"].tolist() == [2, 6, 7]
    curve = {(r["metric"], r["length"]): r["mean"] for r in frames_with(at, "encoding")[0].to_dict("records")}
    assert curve[("per-token", 6)] == get_run(run).eval.token_accuracy  # L' = L: the run's own numbers, exactly
    assert curve[("per-sequence", 2)] == expected[0].sequence_accuracy
    assert ("per-sequence", 7) not in curve  # learned: a table of 13 rows cannot reach L' = 7 (a gap)
    assert table["token_accuracy"].iloc[1] == f"{get_run(run).eval.token_accuracy:.3f}"  # shown as in the curve
    assert table["sequence_accuracy"].iloc[2] == "–"  # out of reach: a dash, never "None"
    assert "note" not in table.columns  # the note is read in full below the table
    assert any(c.value.startswith("L′ = 7: ") and "cannot reach past its rows" in c.value for c in at.caption)
    assert "Compare the encodings over 3 seeds" in [b.label for b in at.button]


def test_length_page_default_lengths_and_bad_url_value(store):
    at = app("lengths", len_L="99")
    assert "Test lengths" in texts(at.warning)  # the URL's value is named and replaced by the default
    assert at.dataframe[0].value["test L′"].tolist() == list(range(1, 13))  # 1..2L (L = 6), the default


def test_length_page_compares_the_four_encodings_in_one_click(store):
    at = app("lengths", len_L=["3", "6", "9"], len_seeds="1")
    assert at.button(key="len_compare").proto.type == "primary"  # styled as every page's train button
    at.button(key="len_compare").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert all(is_cached(make_run(steps=STEPS, position=p)) for p in POSITIONS)
    rows = frames_with(at, "encoding")[-1].to_dict("records")
    rope = get_run(make_run(steps=STEPS, position="rope"))
    (far,) = evaluate_lengths(rope.params, rope.config, [9])
    assert {r["encoding"] for r in rows} == {"learned", "sinusoidal", "RoPE", "ALiBi", "none"}
    got = [r["mean"] for r in rows if r["encoding"] == "RoPE" and r["length"] == 9 and r["metric"] == "per-sequence"]
    assert got == [far.sequence_accuracy]  # RoPE: a number past the trained length
    assert not [r for r in rows if r["encoding"] == "learned" and r["length"] == 9]  # learned: a gap
    at.run()  # a rerun keeps the comparison without another click
    assert len(at.get("vega_lite_chart")) == 2


def test_length_page_compares_each_encoding_with_a_baseline_at_each_test_length(store):
    """Seeds 0-1: at L' = 3 (within the learned table) the baseline is learned; at L' = 9 (past it) sinusoidal.
    Each row's deltas are the runs' own differences; two seeds are too few for any verdict but 'identical'."""
    at = app("lengths", len_L=["3", "9"], len_seeds="2")
    at.button(key="len_compare").click().run()
    assert not at.exception, [e.message for e in at.exception]
    per_metric = [d.value for d in at.dataframe if "encoding" in d.value.columns]  # one table per metric
    assert [set(t["metric"]) for t in per_metric] == [{"per-token"}, {"per-sequence"}]
    table = pd.concat(per_metric, ignore_index=True)
    assert set(table[table["test L′"] == 3]["baseline"]) == {"learned"}
    assert set(table[table["test L′"] == 9]["baseline"]) == {"sinusoidal"}
    assert set(table[table["test L′"] == 9]["encoding"]) == {"RoPE", "ALiBi", "none"}
    assert set(table["verdict"]) <= {"too few seeds", "identical on every seed"}
    assert "+0.0000" not in table.to_string()
    runs = {(p, s): get_run(make_run(steps=STEPS, position=p, seed=s)) for p in ("sinusoidal", "rope") for s in (0, 1)}
    far = {k: evaluate_lengths(r.params, r.config, [9])[0].sequence_accuracy for k, r in runs.items()}
    deltas = [far["rope", s] - far["sinusoidal", s] for s in (0, 1)]
    row = table[(table["test L′"] == 9) & (table["encoding"] == "RoPE") & (table["metric"] == "per-sequence")]
    shown, delta = row.iloc[0]["Δ min"], min(deltas)  # in the column's one format
    assert shown == "0" if delta == 0 else abs(float(shown.replace("−", "-")) - delta) <= 5e-3 * abs(delta)
    assert "Holm's correction across the encodings, per test length and metric" in texts(at.caption)
    # four encodings against learned (at L′ = 3) need 8 differing seeds under Holm (more where seeds tie): more
    # seeds or runs than this server allows, with the cap every page has (max_seeds), and a control to act on it
    cap = limits().max_seeds
    assert f"more than this server allows ({cap})" in texts(at.info) or "would take" in texts(at.info)
    assert at.number_input(key="len_seeds").max == cap  # one seed cap on every page
    assert at.multiselect(key="len_enc").value == list(POSITIONS)  # fewer encodings: fewer comparisons


def test_length_page_trains_five_encodings_on_a_range_and_reports_from_the_runs(store):
    at = app("lengths", lit_seeds="1", lit_task="reverse")  # the sidebar's steps (30), changed from the default
    assert "0 of 5 runs cached" in texts(at.info)  # the notice and the button of every page
    assert at.button(key="lit_train").proto.type == "primary"
    at.button(key="lit_train").click().run()
    assert not at.exception, [e.message for e in at.exception]
    # trained: the page says so at once, without a reload ('15 of 15 runs are not trained yet' once stayed)
    assert "runs cached" not in texts(at.info) and "lit_train" not in [b.key for b in at.button]
    runs = {p: make_run("reverse", 8, steps=STEPS, position=p, train_min=1) for p in ("none", "learned", "alibi")}
    assert all(is_cached(r) for r in runs.values())
    (rows,) = [df for df in frames_with(at, "encoding") if "ALiBi" in set(df["encoding"])]
    assert set(rows["encoding"]) == {"none", "learned", "sinusoidal", "RoPE", "ALiBi"}
    alibi = get_run(runs["alibi"])
    expected = evaluate_lengths(alibi.params, alibi.config, list(range(1, 17)))
    got = rows[(rows["encoding"] == "ALiBi") & (rows["metric"] == "per-sequence")].sort_values("length")
    assert got["mean"].tolist() == [r.sequence_accuracy for r in expected]  # every length 1..16, from the run
    learned = rows[(rows["encoding"] == "learned")]
    assert learned["length"].max() == 8  # 17 rows: nothing past the trained range
    beyond = np.mean([r.token_accuracy for r in expected[8:]])
    text = " ".join(m.value for m in at.markdown)
    assert "What the lab found here" in text and f"ALiBi {beyond:.2f}" in text  # the text computed from the runs
    # the comparison rule past the range: every encoding with a number there against no position, paired by seed
    table = next(d.value for d in at.dataframe if "encoding" in d.value.columns and "verdict" in d.value.columns)
    assert set(table["encoding"]) == {"sinusoidal", "RoPE", "ALiBi"}  # learned has no number past its table
    assert set(table["verdict"]) <= {"too few seeds", "identical on every seed"}  # one seed: nothing can be shown
    none = get_run(runs["none"])
    base = np.mean([r.sequence_accuracy for r in evaluate_lengths(none.params, none.config, list(range(9, 17)))])
    delta = np.mean([r.sequence_accuracy for r in expected[8:]]) - base
    seq = table[(table["encoding"] == "ALiBi") & (table["metric"] == "per-sequence")].iloc[0]
    assert f"ALiBi {seq['verdict']} (Δ {format_delta(delta)}" in text.split("per token,")[0]  # then its interval
    assert "Against none, on the mean accuracy at test lengths 9 to 16" in text


def test_length_page_chooses_its_encodings_and_caps_seeds_like_every_page(store):
    at = app("lengths", lit_seeds="1", lit_enc=["none", "alibi"])
    assert at.multiselect(key="lit_enc").value == ["none", "alibi"]
    assert any(b.label.startswith("Train the missing: 2 runs") for b in at.button)  # two encodings, one seed
    assert at.number_input(key="lit_seeds").max == limits().max_seeds
    at = app("lengths", lit_seeds="1", lit_enc="alibi")
    assert "Pick at least two encodings" in texts(at.info)


def test_length_page_randomized_positions_toggle_trains_other_runs(store):
    at = app("lengths", lit_seeds="1", lit_rand="true")
    assert any(
        re.fullmatch(r"Train the missing: 5 runs, (about .+|under a second) here, .+ of computing", b.label)
        for b in at.button
    )
    assert at.toggle(key="lit_rand_eval").value is False  # offered only with randomized positions
    assert "lit_rand_eval" not in [t.key for t in app("lengths", lit_seeds="1").toggle]


def test_length_notes_group_consecutive_lengths_with_one_note():
    from attncore.evaluate import LengthResult
    from ui.frames import length_notes

    far = "past the table"
    rows = [LengthResult(n, None if n > 6 else 1.0, None, far if n > 6 else None) for n in (2, 6, 7, 8, 9, 12)]
    assert length_notes(rows) == ["L′ = 7–9: past the table", "L′ = 12: past the table"]  # 12 is not next to 9
    assert length_notes(rows[:2]) == []


def test_length_page_says_before_the_click_what_its_seeds_can_conclude(store):
    """Both comparisons say, before any training, whether their seeds can show a difference under Holm across the
    encodings compared with the first: at the default 3 seeds none can (2/2³ = 0.25), and the seeds that would."""
    from lab import stats

    at = app("lengths")
    said = texts(at.markdown)
    assert said.count("no difference can be shown") == 2, said  # the range tab and the sidebar-length tab
    # past the trained range learned has no number: 3 encodings against none; at the sidebar's length all 4
    assert f"take {stats.seeds_needed(3)} seeds" in said and f"take {stats.seeds_needed(4)} seeds" in said
    assert any(b.key == "lit_train" for b in at.button) and any(b.key == "len_compare" for b in at.button)
    at = app("lengths", lit_seeds=str(stats.seeds_needed(3)), lit_enc=["none", "alibi", "rope", "learned"])
    said = texts(at.markdown)
    assert "An encoding can be shown to differ from the first encoding with a number past the range" in said
    assert "times 2 encodings (Holm)" in said  # learned left out: two against none
