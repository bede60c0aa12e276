"""The dashboard's pure pieces without a browser: frames (shaping) and charts (DataFrame -> Altair spec)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from apptest_helpers import axis_labels

from attncore import make_run
from attncore.config import SEP
from attncore.evaluate import EvalResult
from attncore.inspect import attention_maps, head_summary
from attncore.model import init_params
from attncore.task import task_of
from ui import frames
from ui.charts import runs as charts
from ui.charts.base import MAIN_WIDTH


@pytest.fixture(scope="module")
def maps_and_tokens():
    run = make_run(length=4, n_layers=2, n_heads=2, d_model=16)
    params = init_params(run.model, np.random.default_rng(0))
    tokens = task_of(run.task).probe(run.task)  # (2L,)
    return attention_maps(params, run, tokens), tokens  # (n_layers, H, T, T)


def _eval(distinct: float, repeated: float) -> EvalResult:
    return EvalResult(0.9, 0.5, distinct, 220, repeated, 280, 0.01)


# --- frames --------------------------------------------------------------------------------------


@pytest.mark.parametrize("n, cap", [(5, 10), (1500, 400), (401, 400)])
def test_thin_keeps_first_and_last_and_stays_under_the_cap(n, cap):
    keep = frames.thin(n, cap)
    assert keep[0] == 0 and keep[-1] == n - 1
    assert len(keep) <= cap and np.all(np.diff(keep) > 0)
    assert len(keep) == min(n, cap)


def test_history_frame_smooths_with_a_trailing_mean():
    losses = np.array([4.0, 2.0, 6.0, 0.0, 2.0])
    raw = frames.history_frame(losses)
    assert raw["step"].tolist() == [1, 2, 3, 4, 5] and raw["loss"].tolist() == losses.tolist()
    smooth = frames.history_frame(losses, smooth=2)
    assert smooth["loss"].tolist() == [4.0, 3.0, 4.0, 3.0, 1.0]


def test_loss_frame_keeps_label_order():
    df = frames.loss_frame({"full": np.ones(3), "no position": np.ones(3) * 2})
    assert list(dict.fromkeys(df["label"])) == ["full", "no position"]
    assert df.groupby("label")["loss"].first().to_dict() == {"full": 1.0, "no position": 2.0}


def test_attention_frame_drops_masked_keys_and_rows_sum_to_one(maps_and_tokens):
    maps, tokens = maps_and_tokens
    n_layers, H, T, _ = maps.shape
    df = frames.attention_frame(maps, tokens)
    assert len(df) == n_layers * H * T * (T + 1) // 2  # causal: keys 0..query only
    assert (df["key"] <= df["query"]).all()
    sums = df.groupby(["layer", "head", "query"])["weight"].sum()
    assert np.allclose(sums, 1.0, atol=1e-5)
    row = df[(df["layer"] == 1) & (df["head"] == 0) & (df["query"] == 5) & (df["key"] == 2)].iloc[0]
    assert row.weight == pytest.approx(float(maps[1, 0, 5, 2]))
    assert row.query_token == str(tokens[5]) and row.key_label == f"2 · {tokens[2]}"
    assert (df.loc[df.key == 4, "key_token"] == "SEP").all() and tokens[4] == SEP


def test_accuracy_long_maps_both_metrics():
    table = pd.DataFrame(
        {
            "task": ["copy", "sort"],
            "length": [4, 4],
            "seeds": [3, 3],
            "token_accuracy_mean": [1.0, 0.99],
            "token_accuracy_min": [1.0, 0.98],
            "sequence_accuracy_mean": [1.0, 0.95],
            "sequence_accuracy_min": [1.0, 0.9],
        }
    )
    long = frames.accuracy_long(table)
    sort_seq = long[(long.task == "sort") & (long.metric == "per-sequence")].iloc[0]
    assert (sort_seq["mean"], sort_seq["min"]) == (0.95, 0.9)
    assert sorted(long.metric.unique()) == ["per-sequence", "per-token"] and len(long) == 4


def test_heads_frame_drop_is_base_minus_zeroed(maps_and_tokens):
    maps, _ = maps_and_tokens
    summary = head_summary(maps, 4)
    zeroed = {(s["layer"], s["head"]): 0.25 * i for i, s in enumerate(summary)}
    df = frames.heads_frame(summary, zeroed, base_accuracy=0.9)
    assert df["head"].tolist() == ["L0H0", "L0H1", "L1H0", "L1H1"]
    assert np.allclose(df["drop"], [0.9 - 0.25 * i for i in range(4)])
    assert df["mean max weight"].tolist() == [s["mean_max_weight"] for s in summary]


def test_heads_frame_shows_a_constant_offset_signed_and_otherwise_says_it_varies():
    summary = [
        {"layer": 0, "head": 0, "keys": [0, 1], "offsets": [-6, -6], "constant_offset": -6, "mean_max_weight": 0.9},
        {"layer": 0, "head": 1, "keys": [3, 1], "offsets": [-3, -6], "constant_offset": None, "mean_max_weight": 0.4},
    ]
    df = frames.heads_frame(summary, {}, base_accuracy=1.0)
    assert df["constant offset"].tolist() == ["-6", "varies"]  # no raw None or <NA> on the page


def test_breakdown_frame_has_both_groups_per_variant():
    df = frames.breakdown_frame({"full": _eval(1.0, 1.0), "no position": _eval(0.246, 0.170)})
    row = df[(df.variant == "no position") & (df.symbols == "some repeated")].iloc[0]
    assert (row.accuracy, row.n) == (0.170, 280)
    assert len(df) == 4


# --- charts --------------------------------------------------------------------------------------


def _layers(spec: dict) -> list[dict]:
    inner = spec.get("spec", spec)
    return inner.get("layer", [inner])


def test_loss_curve_is_a_log_scale_line():
    spec = charts.loss_curve(frames.history_frame(np.linspace(3, 0.01, 50))).to_dict()
    assert spec["mark"]["type"] == "line"
    assert spec["encoding"]["y"]["scale"]["type"] == "log"
    assert charts.loss_curve(frames.history_frame(np.ones(5)), log=False).to_dict()["encoding"]["y"]["scale"] == {
        "zero": False
    }


def test_loss_overlay_draws_the_base_in_black_first():
    df = frames.loss_frame({"full": np.ones(4), "no scaling": np.ones(4), "no position": np.ones(4)})
    color = charts.loss_overlay(df).to_dict()["encoding"]["color"]
    assert color["scale"]["domain"] == ["full", "no scaling", "no position"]
    assert color["scale"]["range"][:3] == [charts.BASE_COLOR, *charts.VARIANT_COLORS[:2]]


def test_seed_curves_band_min_to_max_and_mean_line():
    records_like = pd.DataFrame(
        {"run": ["copy, L=4"] * 6, "seed": [0, 0, 0, 1, 1, 1], "step": [1, 2, 3] * 2, "loss": [3, 2, 1, 4, 3, 2.0]}
    )
    spec = charts.seed_curves(records_like).to_dict()
    assert spec["facet"]["field"] == "run"
    band, seeds, mean = _layers(spec)
    assert (band["encoding"]["y"]["aggregate"], band["encoding"]["y2"]["aggregate"]) == ("min", "max")
    assert seeds["encoding"]["color"]["field"] == "seed"
    assert mean["encoding"]["y"]["aggregate"] == "mean"


def _marks(spec: dict) -> dict[str, dict]:
    """Every leaf chart of a (nested) layer spec, by mark type (a shape-specific key for points)."""
    found = {}
    for layer in spec.get("layer", []):
        if "layer" in layer:
            found |= _marks(layer)
        else:
            mark = layer["mark"]
            found[mark["type"] + ("-" + mark["shape"] if "shape" in mark else "")] = layer
    return found


def test_accuracy_vs_length_colours_metrics_consistently():
    long = pd.DataFrame(
        {"task": ["copy"] * 2 + ["sort"] * 2, "length": [4, 4, 4, 4], "seeds": 3}
        | {"metric": ["per-token", "per-sequence"] * 2, "mean": [1.0, 0.9, 0.95, 0.8], "min": [1.0, 0.8, 0.9, 0.7]}
    )
    marks = _marks(charts.accuracy_vs_length(long).to_dict())
    line, worst, names = marks["line"], marks["point-triangle-down"], marks["text"]
    assert line["encoding"]["color"]["scale"] == {
        "domain": ["per-token", "per-sequence"],
        "range": [charts.TOKEN_COLOR, charts.SEQUENCE_COLOR],
    }
    assert line["encoding"]["strokeDash"]["field"] == "task"
    assert worst["encoding"]["y"]["field"] == "min"
    assert names["encoding"]["text"]["field"] == "task"  # tasks named at the line ends


def test_accuracy_vs_length_with_one_perfect_run_has_a_range_and_both_metrics_visible():
    """One copy run at one L: every value is 1. The axis must still span a range with fixed decimals (not a
    single "1.000000" tick), and per-token must not hide under per-sequence."""
    long = pd.DataFrame(
        {"task": ["copy"] * 2, "length": [6, 6], "seeds": 1}
        | {"metric": ["per-token", "per-sequence"], "mean": [1.0, 1.0], "min": [1.0, 1.0]}
    )
    spec = charts.accuracy_vs_length(long).to_dict()
    lines = [layer for layer in spec["layer"] if layer.get("mark", {}).get("type") == "line"]
    assert len(lines) == 2
    token, sequence = lines  # per-token first, so it is drawn beneath, and wider
    assert token["mark"]["strokeWidth"] > sequence["mark"]["strokeWidth"]
    assert {r["metric"] for r in spec["datasets"][token["data"]["name"]]} == {"per-token"}
    y = sequence["encoding"]["y"]
    # the axis ends at 1 with room above it, so a line at 1.0 is not drawn on the plot's frame
    assert y["scale"]["domain"][0] == 0.95 and y["scale"]["domain"][1] > 1 and y["axis"]["format"] == ".2f"
    assert y["axis"]["values"][0] == 0.95 and y["axis"]["values"][-1] == 1


def test_accuracy_vs_length_names_copy_above_and_sort_below_their_line_ends():
    long = pd.DataFrame(
        {"task": ["copy"] * 2 + ["sort"] * 2, "length": [8] * 4, "seeds": 3}
        | {"metric": ["per-token", "per-sequence"] * 2, "mean": [1.0] * 4, "min": [1.0] * 4}
    )
    spec = charts.accuracy_vs_length(long).to_dict()
    names = [layer for layer in spec["layer"] if layer["mark"]["type"] == "text"]
    offsets = {spec["datasets"][n["data"]["name"]][0]["task"]: n["mark"]["dy"] for n in names}
    assert offsets["copy"] < 0 < offsets["sort"]  # both at 1.0: still two readable names


def test_accuracy_vs_length_names_every_task_reverse_too():
    """Regression: the reverse line ended unlabelled; three lines ending together keep three names apart."""
    long = pd.DataFrame(
        {"task": [t for t in ("copy", "reverse", "sort") for _ in range(2)], "length": [8] * 6, "seeds": 3}
        | {"metric": ["per-token", "per-sequence"] * 3, "mean": [1.0] * 6, "min": [1.0] * 6}
    )
    spec = charts.accuracy_vs_length(long).to_dict()
    names = [layer for layer in spec["layer"] if layer["mark"]["type"] == "text"]
    offsets = {spec["datasets"][n["data"]["name"]][0]["task"]: n["mark"]["dy"] for n in names}
    assert set(offsets) == {"copy", "reverse", "sort"}
    assert sorted(offsets.values()) == [offsets["copy"], offsets["reverse"], offsets["sort"]]
    assert min(b - a for a, b in zip(sorted(offsets.values()), sorted(offsets.values())[1:], strict=False)) >= 12


def test_seed_curves_fill_the_main_area_and_tell_seeds_apart():
    df = pd.DataFrame(
        {"run": ["a"] * 6 + ["b"] * 6, "seed": [0, 0, 0, 1, 1, 1] * 2, "step": [1, 2, 3] * 4, "loss": [3, 2, 1.0] * 4}
    )
    spec = charts.seed_curves(df).to_dict()
    assert spec["columns"] == 2  # two runs: two panels sharing the width, not a third empty column
    width = spec["spec"]["width"]
    assert 105 + 2 * width + 20 <= MAIN_WIDTH == charts.SEED_CURVES_WIDTH  # the y axis, two panels and their gap
    band, seeds, mean = spec["spec"]["layer"]
    assert seeds["mark"]["opacity"] >= 0.9 and seeds["mark"]["strokeWidth"] > 1
    assert mean["mark"]["strokeDash"]  # the mean is dashed, not one more solid line among the seeds


def test_live_loss_curve_has_the_axes_of_the_finished_one():
    live = charts.live_loss_curve(frames.history_frame(np.linspace(3, 0.1, 40)), steps=200).to_dict()
    done = charts.loss_curve_at(frames.history_frame(np.linspace(3, 0.1, 200)), 200, 200).to_dict()["layer"][0]
    for axis in ("x", "y"):
        assert live["encoding"][axis]["scale"] == done["encoding"][axis]["scale"]
    assert live["encoding"]["x"]["scale"]["type"] == "log" and live["encoding"]["y"]["scale"]["type"] == "log"


def test_length_curves_keep_a_point_at_zero_inside_the_plot():
    df = pd.DataFrame(
        {"encoding": ["none"] * 2, "length": [4, 6], "metric": ["per-token"] * 2, "seeds": 1}
        | {"mean": [0.0, 0.5], "min": [0.0, 0.4], "max": [0.0, 0.6]}
    )
    spec = charts.length_curves(df, trained=6, longest=8).to_dict()
    line = next(layer for layer in spec["spec"]["layer"] if layer["mark"]["type"] == "line")
    low, high = line["encoding"]["y"]["scale"]["domain"]
    assert low < 0 and high > 1 and line["encoding"]["y"]["axis"]["values"][0] == 0


def test_attention_heatmaps_name_every_row_and_column(maps_and_tokens):
    maps, tokens = maps_and_tokens
    spec = charts.attention_heatmaps(frames.attention_frame(maps, tokens)).to_dict()
    for axis in ("x", "y"):
        assert spec["spec"]["encoding"][axis]["axis"]["labelOverlap"] is False
    assert spec["spec"]["width"] >= 13 * len(tokens)


@pytest.mark.parametrize("n_heads, columns", [(1, 1), (4, 4), (8, 4), (6, 3), (16, 4)])
def test_attention_heatmaps_of_many_heads_wrap_into_rows_that_fit_the_main_area(n_heads, columns):
    """Regression: the grid ended at 1,421 px of a 1,280 px window (head 3 hidden) and its legend with it."""
    run = make_run(length=6, n_layers=2, n_heads=n_heads, d_model=16 * n_heads)
    params = init_params(run.model, np.random.default_rng(0))
    tokens = task_of(run.task).probe(run.task)
    spec = charts.attention_heatmaps(frames.attention_frame(attention_maps(params, run, tokens), tokens)).to_dict()
    assert spec["columns"] == columns and n_heads % columns == 0  # a row never mixes two layers
    width = charts.HEATMAP_Y_AXIS + columns * spec["spec"]["width"] + (columns - 1) * spec["spacing"]
    assert width <= MAIN_WIDTH  # the main area of a 1,280 px window, not the window
    assert spec["spec"]["width"] >= 13 * len(tokens)  # still a named cell per token
    legend = spec["spec"]["encoding"]["color"]["legend"]
    assert legend["orient"] == "top"  # the colour legend above the grid: it takes no width


@pytest.mark.parametrize("task", ["modular", "copy"])
def test_attention_heatmaps_key_title_fits_under_its_panel(task):
    """Regression: on modular's 3 keys the panels were 90 px wide and each "key (position · token)" ran into the
    next panel's."""
    run = make_run(task)
    params = init_params(run.model, np.random.default_rng(0))
    tokens = task_of(run.task).probe(run.task)
    spec = charts.attention_heatmaps(frames.attention_frame(attention_maps(params, run, tokens), tokens)).to_dict()
    title, width = spec["spec"]["encoding"]["x"]["title"], spec["spec"]["width"]
    assert width >= charts.KEY_TITLE_WIDTH or title == "key"
    assert title == ("key" if task == "modular" else "key (position · token)")


@pytest.mark.parametrize("length", [8, 12, 16])
def test_attention_heatmaps_of_long_sequences_take_fewer_columns_not_more_width(length):
    run = make_run(length=length, n_layers=2, n_heads=4)
    params = init_params(run.model, np.random.default_rng(0))
    tokens = task_of(run.task).probe(run.task)
    spec = charts.attention_heatmaps(frames.attention_frame(attention_maps(params, run, tokens), tokens)).to_dict()
    columns = spec["columns"]
    width = charts.HEATMAP_Y_AXIS + columns * spec["spec"]["width"] + (columns - 1) * spec["spacing"]
    assert width <= MAIN_WIDTH or columns == 1
    assert 4 % columns == 0 and spec["spec"]["width"] >= 13 * len(tokens)


@pytest.mark.parametrize("floor", [0.0, 0.1, 0.35, 0.9])
def test_accuracy_axis_names_1_whatever_the_floor_and_no_tick_below_it(floor):
    ticks = charts.accuracy_axis(floor)["axis"].to_dict()["values"]
    assert ticks[-1] == 1.0 and ticks[0] >= floor and ticks == sorted(ticks)


def test_accuracy_floor_sits_below_the_data_on_a_round_step():
    frame = pd.DataFrame({"mean": [0.97, 0.99], "min": [0.918, 1.0]})
    assert charts.accuracy_floor(frame) == pytest.approx(0.9)
    assert charts.accuracy_floor(frame.assign(min=0.3, mean=0.656)) == pytest.approx(0.25)


def test_attention_heatmaps_facet_layers_by_heads_with_tooltips(maps_and_tokens):
    maps, tokens = maps_and_tokens
    spec = charts.attention_heatmaps(frames.attention_frame(maps, tokens)).to_dict()
    assert spec["facet"]["field"] == "panel" and spec["columns"] == 2  # two heads: one layer per row
    assert spec["facet"]["sort"] == ["layer 0 · head 0", "layer 0 · head 1", "layer 1 · head 0", "layer 1 · head 1"]
    enc = spec["spec"]["encoding"]
    assert enc["color"]["scale"]["domain"] == [0, 1]  # every heatmap on the same scale
    tips = {t["field"] for t in enc["tooltip"]}
    assert {"query", "key", "query_token", "key_token", "weight"} <= tips
    assert enc["x"]["sort"][:2] == [f"0 · {tokens[0]}", f"1 · {tokens[1]}"]  # positions in order, not text order


def test_breakdown_bars_and_head_effects_build(maps_and_tokens):
    bars = charts.breakdown_bars(frames.breakdown_frame({"full": _eval(1, 1)})).to_dict()
    assert bars["encoding"]["x"]["scale"]["domain"] == [0, 1] and bars["encoding"]["yOffset"]["field"] == "symbols"
    assert bars["encoding"]["y"]["field"] == "variant"  # one row per variant: every name shown at a phone's width
    maps, _ = maps_and_tokens
    heads = frames.heads_frame(head_summary(maps, 4), {}, 1.0)
    spec = charts.head_effects(heads.assign(drop=[0.5, -0.1, 0.0, 0.2])).to_dict()
    assert spec["encoding"]["xOffset"]["field"] == "measure"
    assert spec["encoding"]["y"]["scale"]["domain"] == [-0.1, 1]  # a head whose removal helps stays visible
    assert spec["encoding"]["color"]["scale"]["range"] == [charts.WEIGHT_COLOR, charts.SEQUENCE_COLOR]


# --- training dynamics and length generalisation ------------------------------------------------


def test_snapshot_frame_and_accuracy_chart_share_the_loss_curves_step_axis():
    from attncore.snapshots import Snapshot

    snaps = [Snapshot(s, t, q, np.zeros((1, 1, 2, 2))) for s, t, q in ((1, 0.1, 0.0), (10, 0.6, 0.2), (50, 1.0, 1.0))]
    df = frames.snapshot_frame(snaps)
    assert df.values.tolist() == [
        [1, "per-token", 0.1], [1, "per-sequence", 0.0], [10, "per-token", 0.6],
        [10, "per-sequence", 0.2], [50, "per-token", 1.0], [50, "per-sequence", 1.0],
    ]  # fmt: skip
    acc = charts.snapshot_accuracy(df, 10, 50).to_dict()
    loss = charts.loss_curve_at(frames.history_frame(np.linspace(3, 0.1, 50)), 10, 50).to_dict()
    for spec in (acc, loss):
        line, rule = spec["layer"]
        assert line["encoding"]["x"]["scale"] == {"type": "log", "domain": [1, 50], "nice": False}  # one step axis
        assert rule["mark"]["type"] == "rule" and spec["datasets"][rule["data"]["name"]] == [{"step": 10}]
    assert acc["layer"][0]["encoding"]["color"]["scale"]["range"] == [charts.TOKEN_COLOR, charts.SEQUENCE_COLOR]
    assert acc["layer"][0]["encoding"]["y"]["scale"]["domain"] == [0, 1]


def test_the_learning_rate_chart_has_room_for_its_title_and_writes_rates_as_the_lab_does():
    """Regression: the y title was cut to 'learning rat' in a ~40 px plot, the ticks '0e+0 / 2e-3'."""
    from attncore.optim import lr_schedule

    run = make_run(steps=300, warmup=60, decay="cosine", min_lr_ratio=0.1)
    spec = charts.learning_rate_curve(frames.schedule_frame(lr_schedule(run.train)), 300, 300).to_dict()
    assert spec["height"] >= 180  # Streamlit fits the axes into it: a plot of about 110 px
    axis = spec["layer"][0]["encoding"]["y"]["axis"]
    assert axis_labels(axis) == {0.0: "0", 0.0015: "1.5e-3", 0.003: "3e-3"}
    assert "format" not in axis


def test_length_frame_averages_seeds_and_leaves_a_gap_where_there_is_no_number():
    from attncore.evaluate import LengthResult

    seeds = [[LengthResult(2, 0.5, 0.25), LengthResult(8, None, None, "past the table")], [LengthResult(2, 0.7, 0.75)]]
    df = frames.length_frame({"learned": seeds, "RoPE": [[LengthResult(8, 0.3, 0.0)]]})
    rows = df.set_index(["encoding", "length", "metric"])
    assert rows.loc[("learned", 2, "per-sequence")][["mean", "min", "max", "seeds"]].tolist() == [0.5, 0.25, 0.75, 2]
    assert rows.loc[("learned", 2, "per-token")]["mean"] == pytest.approx(0.6)
    assert ("learned", 8, "per-token") not in rows.index  # no number: no point, a gap in the curve
    assert rows.loc[("RoPE", 8, "per-token")]["mean"] == 0.3
    spec = charts.length_curves(df, trained=6, longest=8).to_dict()
    assert spec["facet"]["field"] == "encoding" and spec["facet"]["sort"] == ["learned", "RoPE"]
    band, line, rule = spec["spec"]["layer"]
    assert band["mark"]["type"] == "area" and band["encoding"]["y"]["field"] == "min"
    assert band["encoding"]["y2"]["field"] == "max"
    assert line["encoding"]["y"]["field"] == "mean" and rule["encoding"]["x"]["datum"] == 6
    assert line["encoding"]["x"]["scale"]["domain"] == [0, 8]  # up to the longest length tested: learned's gap shows


def test_length_curves_shade_the_trained_range_once_per_panel():
    from attncore.evaluate import LengthResult

    df = frames.length_frame({"ALiBi": [[LengthResult(n, 0.5, 0.1) for n in range(1, 13)]]})
    spec = charts.length_curves(df, trained=8, longest=16, columns=5, trained_range=(1, 8)).to_dict()
    shaded, band, line, rule = spec["spec"]["layer"]
    assert shaded["mark"]["type"] == "rect" and shaded["encoding"]["x"]["datum"] == 1
    assert shaded["encoding"]["x2"]["datum"] == 8
    assert shaded["transform"] == [{"aggregate": [{"op": "count", "as": "n"}]}]  # one row: one rectangle
    assert rule["encoding"]["x"]["datum"] == 8


def test_length_findings_average_inside_and_past_the_range_and_rank_past_it():
    from attncore.evaluate import LengthResult

    def curve(inside, past):
        return [LengthResult(n, 0.5, inside) for n in range(1, 5)] + [LengthResult(n, past + 0.3, past) for n in (5, 6)]

    df = frames.length_frame(
        {
            "none": [curve(0.4, 0.2), curve(0.6, 0.0)],  # past: mean 0.1, spread 0.2
            "RoPE": [curve(0.9, 0.3)],
            "learned": [[LengthResult(n, 1.0, 1.0) for n in range(1, 5)]],  # no number past the range
        }
    )
    found = frames.length_findings(df, (1, 4)).set_index("encoding")
    assert found.loc["none", "inside"] == pytest.approx(0.5) and found.loc["none", "beyond"] == pytest.approx(0.1)
    assert found.loc["none", "spread"] == pytest.approx(0.2)
    assert found.loc["none", "token_beyond"] == pytest.approx(0.4)
    assert found["rank"].to_dict() == {"RoPE": 1, "none": 2, "learned": 3}  # no number: last
    assert np.isnan(found.loc["learned", "beyond"])


def test_a_bottom_legend_has_as_many_columns_as_fit_a_phone():
    """Regression: at 390 px a 4-column legend of 6 variants showed 4 of them."""
    from ui.charts.base import PHONE_WIDTH, legend_columns

    labels = ["base: 1,500 steps", "no scaling", "no position", "post-LN", "pre-LN, lr 1e-2", "post-LN, lr 1e-2"]
    columns = legend_columns(labels)
    assert columns * (max(map(len, labels)) * 6.5 + 30) <= PHONE_WIDTH and columns >= 1
    assert legend_columns(["a", "b"]) == 2


def test_band_curves_add_the_legends_rows_to_the_height_and_keep_accuracy_off_the_frame():
    from ui.charts import compare as compare_charts

    levels = ["base: 1,500 steps", "no scaling", "no position", "post-LN", "pre-LN, lr 1e-2", "post-LN, lr 1e-2"]
    bands = pd.DataFrame(
        {"level": [lv for lv in levels for _ in range(2)], "step": [1, 2] * 6, "seeds": 3}
        | {"mean": [0.5, 1.0] * 6, "min": [0.4, 1.0] * 6, "max": [0.6, 1.0] * 6}
    )
    two = compare_charts.band_curves(bands.head(4)).to_dict()["height"]
    six = compare_charts.band_curves(bands).to_dict()["height"]
    assert six > two  # the plot keeps its height under a taller legend: the y title is not clipped
    acc = compare_charts.band_curves(bands, log=False, y_title="mean per-sequence accuracy").to_dict()
    low, high = acc["layer"][0]["encoding"]["y"]["scale"]["domain"]
    assert high > 1.0 and low <= 0.4  # a curve at 1.0 is drawn inside the plot, not on its top edge


def test_scores_over_training_axis_ends_at_the_last_stored_step():
    """Regression: the log axis ran to 5,000 steps when the data stop at 1,500."""
    from ui.charts import interpret

    steps = np.array([1, 10, 100, 1500])
    spec = interpret.scores_over_training(steps, {"previous token": np.zeros((4, 1, 2))}).to_dict()
    scale = spec["spec"]["encoding"]["x"]["scale"]
    assert scale["domain"] == [1, 1500] and scale["nice"] is False


@pytest.mark.parametrize("columns", [4, 5])
def test_length_curves_panels_share_the_main_area(columns):
    """Regression: the Length page's facets ran past 1,280 px (ALiBi hidden) on both tabs."""
    names = ["none", "learned", "sinusoidal", "RoPE", "ALiBi"]
    df = pd.DataFrame(
        {"encoding": names, "length": 4, "metric": "per-token", "seeds": 1, "mean": 0.5, "min": 0.4, "max": 0.6}
    )
    spec = charts.length_curves(df, trained=4, longest=8, columns=columns).to_dict()
    shown = min(columns, len(names))
    assert 95 + shown * spec["spec"]["width"] + (shown - 1) * spec["spacing"] <= MAIN_WIDTH


def test_an_accuracy_axis_marks_its_bottom_edge():
    """The floor is a tick: 17 × 0.05 computed as 0.8500000000000001 put the 0.85 tick outside the domain, the plot's
    bottom edge went unmarked and the axes seemed to float (Results' accuracy against L)."""
    df = pd.DataFrame({"mean": [0.95, 1.0], "min": [0.902, 1.0]})
    floor = charts.accuracy_floor(df)
    assert floor == 0.85
    axis = charts.accuracy_axis(floor)
    assert min(axis["axis"].values) >= axis["scale"].domain[0] and floor in axis["axis"].values


def test_the_breakdown_gives_every_variant_its_row_whatever_their_number():
    """A step per bar, not a total height the axis and legend share: four variants kept all four names."""
    frame = frames.breakdown_frame({name: _eval(1, 1) for name in ("base", "no scaling", "no position", "post-LN")})
    spec = charts.breakdown_bars(frame).to_dict()
    assert spec["height"] == {"step": 14} and spec["encoding"]["y"]["axis"]["labelOverlap"] is False


@pytest.mark.parametrize("floor", [0.0, 0.1, 0.35, 0.85, 0.9, 0.95])
def test_an_accuracy_axis_ends_on_a_tick(floor):
    """Compare's accuracy against position: a floor of 0.1 with ticks 0.2 apart ended the axis between ticks."""
    axis = charts.accuracy_axis(floor)
    values, bottom = axis["axis"].values, axis["scale"].domain[0]
    assert min(values) == floor and 1.0 in values
    assert bottom == floor or (floor == 0.0 and bottom < 0)  # at 0: a little room below it


def test_induction_charts_fit_the_main_area():
    """Regression: at 1,280 px the loss panels ended 7 px past the main area and the head scores' legend 74 px
    (drawn: 85 px of y axis and overhang beside three panels, 204 px of names and legend beside the scores)."""
    from ui.charts import induction

    variants = ["2 layers, RoPE", "1 layer, RoPE", "2 layers, no positions"]
    curves = pd.DataFrame(
        [(v, 0, step, loss, 3.0) for v in variants for step in (25, 50) for loss in ("repeat", "first copy")],
        columns=["variant", "seed", "step", "loss", "value"],
    )
    phases = pd.DataFrame({"variant": variants[:1], "seed": [0], "step": [25]})
    spec = induction.loss_curves(curves, phases).to_dict()
    assert induction.CURVES_Y_AXIS >= 85 and induction.SCORES_FRAME >= 204
    assert induction.CURVES_Y_AXIS + 3 * spec["spec"]["width"] + 2 * 20 <= MAIN_WIDTH
    heads = ["L0H0", "L0H1", "L1H0", "L1H1"]
    scores = pd.DataFrame(
        [(p, h, s, 0.5) for p in ("induction", "previous token") for h in heads for s in (25, 50)],
        columns=["pattern", "head", "step", "score"],
    )
    assert induction.SCORES_FRAME + induction.head_scores(scores).to_dict()["width"] <= MAIN_WIDTH


def test_accuracy_vs_length_keeps_its_plot_height_when_stretched():
    """Its height is the plot area's (fit-x): 260 px shared with the axis and the legend below left a plot of 110."""
    long = pd.DataFrame(
        {"task": ["copy"] * 2, "length": [6, 6], "seeds": 1}
        | {"metric": ["per-token", "per-sequence"], "mean": [0.9, 0.8], "min": [0.9, 0.8]}
    )
    spec = charts.accuracy_vs_length(long).to_dict()
    assert spec["autosize"] == {"type": "fit-x", "contains": "padding"} and spec["height"] >= 200
