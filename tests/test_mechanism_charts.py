"""The mechanism pages' frames and charts (ui.charts: scaling, masks, position, cost, gradcheck): right numbers in,
right encodings out, no browser."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from attncore.config import ConfigError
from attncore.mechanisms import demos as mech
from attncore.mechanisms.attention_cost import attention_memory
from attncore.mechanisms.gradcheck import gradient_check
from ui import frames
from ui.charts import base, cost, gradcheck, masks, position, scaling


def spec(chart) -> dict:
    return chart.to_dict()


def data(chart) -> list[list[dict]]:
    """Every inline dataset of a chart, in order."""
    return list(spec(chart).get("datasets", {}).values())


def marks(node) -> list[str]:
    """Mark types anywhere in a spec."""
    found = []
    if isinstance(node, dict):
        mark = node.get("mark")
        if mark is not None:
            found.append(mark if isinstance(mark, str) else mark["type"])
        for value in node.values():
            found += marks(value)
    elif isinstance(node, list):
        for value in node:
            found += marks(value)
    return found


def test_parse_ints_accepts_spaces_and_commas_and_names_the_field():
    assert frames.parse_ints("5 3 0", "lengths") == [5, 3, 0]
    assert frames.parse_ints(" 5, 3,0 ", "lengths") == [5, 3, 0]
    for bad in ("", "   ", "5 x", "2.5", "1 2 3 4 5 6 7"):
        with pytest.raises(ConfigError) as err:
            frames.parse_ints(bad, "lengths", max_count=6)
        assert err.value.field == "lengths"


# --- scaling -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scaling_rows():
    return mech.scaling_statistics((4, 64), n_keys=32, repetitions=50, seed=1)


def test_scaling_table_puts_each_theory_beside_its_measure(scaling_rows):
    table = scaling.scaling_table(scaling_rows)
    assert len(table) == 4 and list(table["d_k"]) == [4, 4, 64, 64]
    assert list(table["scores"]) == [scaling.UNSCALED, scaling.SCALED] * 2
    columns = list(table.columns)
    for measured, theory in [("Var(q·k)", "theory d_k"), ("sd(scores)", "theory sd"), ("max weight", "1/T")]:
        assert columns.index(theory) == columns.index(measured) + 1
    assert columns.index("ln T") == columns.index("entropy") + 1
    assert columns.index("1 − 1/T") == columns.index("sensitivity") + 1
    for (_, row), r in zip(table.iterrows(), scaling_rows, strict=True):
        assert row["Var(q·k)"] == r["var_dot"] and row["theory d_k"] == r["d_k"]
        assert row["theory sd"] == (1.0 if r["scaled"] else math.sqrt(r["d_k"]))
        assert row["sensitivity"] == r["sensitivity"] and row["1 − 1/T"] == pytest.approx(1 - 1 / 32)
        assert row["ln T"] == pytest.approx(math.log(32)) and row["1/T"] == 1 / 32


def test_scaling_long_has_every_statistic_with_its_limit_and_error_bar(scaling_rows):
    long = scaling.scaling_long(scaling_rows)
    assert len(long) == 3 * len(scaling_rows)
    sens = long[(long["statistic"] == "sensitivity") & (long["d_k"] == 64) & (long["scores"] == scaling.UNSCALED)]
    row = next(r for r in scaling_rows if r["d_k"] == 64 and not r["scaled"])
    assert sens["value"].item() == row["sensitivity"] and sens["limit"].item() == row["max_sensitivity"]
    np.testing.assert_allclose(long["high"] - long["low"], 4 * long["se"])
    assert set(long["limit_name"]) == {"1 − 1/T", "ln T", "1/T"}


def test_a_limits_label_sits_in_a_band_the_data_leave_free(scaling_rows):
    """Regression: '1/T' (a minimum) was written above its rule, on the blue series; now below it, in a band of the
    y domain below every point, and a maximum's label above its rule in a band above every point."""
    long = scaling.scaling_long(scaling_rows)
    for statistic, below in (("mean_max_weight", True), ("entropy", False), ("sensitivity", False)):
        chart = scaling.statistic_chart(long, statistic)
        s = spec(chart)
        line = next(layer for layer in s["layer"] if layer["mark"]["type"] == "line")
        text = next(layer for layer in s["layer"] if layer["mark"]["type"] == "text")
        low, high = line["encoding"]["y"]["scale"]["domain"]
        df = long[long["statistic"] == statistic]
        limit = df["limit"].iloc[0]
        if below:
            assert text["mark"]["dy"] > 0 and low < min(df["low"].min(), limit) and limit <= df["low"].min()
        else:
            assert text["mark"]["dy"] < 0 and high > max(df["high"].max(), limit) and limit >= df["high"].max() - 1e-9


def test_cost_charts_tick_log_axes_on_one_two_five():
    """Regression: the memory axis ticked 0.4, 3 and 20."""
    from ui.charts import cost

    rows = [
        {"T": t, "scores_mib": t * t * 8 / 2**20, "qkv_mib": 3 * t * 64 * 8 / 2**20} for t in (256, 512, 1024, 2048)
    ]
    y = spec(cost.memory_chart(cost.cost_frame(rows)))["encoding"]["y"]
    assert y["axis"]["values"] == [0.5, 1, 2, 5, 10, 20]
    assert base.log_ticks([0.02, 900]) == [0.1, 1, 10, 100]  # too many on 1-2-5: the powers of ten


def test_a_narrow_log_axis_gets_more_than_one_tick():
    """Regression: the Regimes page's gradient norms at initialisation (0.80 to 1.25) were ticked at 1 alone."""
    assert base.log_ticks([0.804, 0.995, 1.25]) == [0.9, 1]
    assert base.log_ticks([0.3, 40]) == [0.5, 1, 2, 5, 10, 20]  # a wide range keeps its 1-2-5 ticks


def test_statistic_chart_draws_both_cases_on_a_log_axis_with_the_limit(scaling_rows):
    long = scaling.scaling_long(scaling_rows)
    chart = scaling.statistic_chart(long, "entropy")
    s = spec(chart)
    line = next(layer for layer in s["layer"] if layer["mark"]["type"] == "line")
    assert line["encoding"]["x"]["scale"] == {"type": "log", "base": 2, "domain": [4, 64], "nice": False}
    assert line["encoding"]["x"]["axis"]["values"] == [4, 64]  # ticks on the d_k measured, no others
    assert data(chart)[-1][0]["text"] == "ln T = 3.4657"  # four decimals, like the page's metrics and table
    assert line["encoding"]["color"]["scale"]["domain"] == [scaling.SCALED, scaling.UNSCALED]
    assert line["encoding"]["color"]["scale"]["range"] == [base.GOOD, base.BAD]
    drawn = [d for d in data(chart) if d and "statistic" in d[0]]
    assert all(r["statistic"] == "entropy" for d in drawn for r in d)
    rule = [d for d in data(chart) if len(d) == 1][0][0]
    assert rule["limit"] == pytest.approx(math.log(32))


# --- masks ---------------------------------------------------------------------------------------


def test_grid_frame_round_trips_and_keeps_only_what_is_asked():
    a = np.arange(24).reshape(2, 3, 4)
    frame = base.grid_frame(a, ("b", "q", "k"), "v")
    assert len(frame) == 24
    rebuilt = np.zeros_like(a)
    rebuilt[frame["b"], frame["q"], frame["k"]] = frame["v"]
    np.testing.assert_array_equal(rebuilt, a)
    causal = np.tri(3, 4, dtype=bool)
    kept = base.grid_frame(a, ("b", "q", "k"), "v", keep=causal)
    assert len(kept) == 2 * causal.sum() and (kept["k"] <= kept["q"]).all()


def test_heatmap_sizes_cells_and_picks_the_colour_type():
    frame = base.grid_frame(np.eye(3), ("query", "key"), "weight")
    s = spec(base.heatmap(frame, "key", "query", cell=20))
    assert (s["width"], s["height"]) == (60, 60) and s["autosize"]["type"] == "pad"
    assert s["layer"][0]["encoding"]["color"]["type"] == "quantitative"
    assert [layer["mark"]["type"] for layer in s["layer"]] == ["rect", "text"]
    s = spec(base.heatmap(frame, "key", "query", cell=(5, 10), text_format=None))
    assert (s["width"], s["height"]) == (15, 30) and len(s["layer"]) == 1
    faceted = spec(
        masks.mask_heatmap(np.tri(3, dtype=bool)[None].repeat(2, 0), ("sequence", "query", "key"), facet="sequence")
    )
    assert faceted["facet"]["field"] == "sequence"
    color = faceted["spec"]["layer"][0]["encoding"]["color"]
    assert color["type"] == "nominal" and color["scale"]["domain"] == ["allowed", "masked"]


def test_faceted_heatmaps_wrap_to_fit_the_main_area():
    """Six padded sequences of 16 positions: 6 panels of 16 cells in one row ran far past the page."""
    from ui.charts.base import MAIN_WIDTH

    weights = np.full((6, 16, 16), 1 / 16)
    s = spec(
        base.heatmap(
            base.grid_frame(weights, ("sequence", "query", "key"), "weight"), "key", "query", cell=28, facet="sequence"
        )
    )
    panel = s["spec"]["width"]
    assert s["columns"] >= 1 and 70 + s["columns"] * (panel + 20) + 80 <= MAIN_WIDTH or s["columns"] == 1


def test_mask_frame_labels_allowed_and_masked():
    frame = masks.mask_frame(np.array([[True, False]]), ("sequence", "key"))
    assert list(frame["key is"]) == ["allowed", "masked"]


def test_row_sums_before_and_after_the_softmax():
    demo = mech.mask_order_demo(t=5, seed=2)
    before, after = masks.row_sum_summary(demo["row_sums_before"]), masks.row_sum_summary(demo["row_sums_after"])
    assert before == {"ones": 5, "rows": 5, "smallest": pytest.approx(1.0)}
    assert after["ones"] == 1 and after["smallest"] == demo["row_sums_after"].min() < 1
    frame = masks.row_sum_frame(demo["row_sums_after"])
    assert list(frame["sums to 1"]) == ["≠ 1"] * 4 + ["= 1"]


def test_weights_with_row_sums_leaves_masked_cells_blank():
    demo = mech.mask_order_demo(t=4, seed=0)
    chart = masks.weights_with_row_sums(demo["weights_after"], demo["row_sums_after"], "after", demo["causal"])
    s = spec(chart)
    assert len(s["hconcat"]) == 2 and s["title"] == "after"
    cells, sums = sorted(data(chart), key=len, reverse=True)[:2]
    assert len(cells) == 4 * 5 // 2 and all(c["key"] <= c["query"] for c in cells)
    assert [r["row sum"] for r in sums] == pytest.approx(list(demo["row_sums_after"]))


def test_row_sum_labels_stand_right_of_the_dashed_line_and_large_t_fits_half_the_page():
    """Regression: a label beside a bar reaching 1 sat on the dashed line at 1."""
    demo = mech.mask_order_demo(t=12, seed=0)
    s = spec(masks.weights_with_row_sums(demo["weights_before"], demo["row_sums_before"], "before", demo["causal"]))
    heat, sums = s["hconcat"]
    bars, labels, one = sums["layer"]
    assert labels["mark"]["type"] == "text" and labels["encoding"]["x"]["datum"] > 1
    assert labels["encoding"]["x"]["datum"] < sums["layer"][0]["encoding"]["x"]["scale"]["domain"][1] - 0.3
    cell = heat["width"] / 12
    assert 30 + heat["width"] + 6 + sums["width"] <= 820 / 2 and cell >= 16


def test_padding_summary_counts_rows_without_keys():
    demo = mech.padding_demo(lengths=(5, 3, 0), t=6, seed=0)
    assert masks.padding_summary(demo) == {"rows": 18, "ones": 12, "fully_masked": 6, "all_finite": True}


# --- heads and position --------------------------------------------------------------------------


def test_param_table_and_chart_show_the_same_count_for_every_h():
    rows = mech.attention_param_counts(32)
    table = position.param_table(rows)
    assert list(table["heads h"]) == [1, 2, 4, 8, 16, 32]
    assert (table["attention (counted)"] == table["4d² + 4d"]).all() and table["4d² + 4d"].iloc[0] == 4 * 32**2 + 4 * 32
    s = spec(position.param_chart(rows))
    assert [layer["mark"]["type"] for layer in s["layer"]] == ["bar", "rule"]
    assert s["layer"][1]["encoding"]["y"]["field"] == "attention_theory"


def test_permutation_frame_and_chart():
    rows = mech.permutation_test(t=6, d_model=16, n_heads=2, seed=3)
    frame = position.permutation_frame(rows)
    assert list(frame["position"]) == ["none", "sinusoidal", "learned", "RoPE", "none + causal mask"]
    assert list(frame["equivariant"]) == [True, False, False, False, False]
    assert list(frame[position.EQUIVARIANCE]) == [r["equivariance_error"] for r in rows]
    chart = position.permutation_chart(frame)
    (long,) = data(chart)
    assert len(long) == 10 and {r["measure"] for r in long} == set(position.MEASURES.values())
    assert spec(chart)["encoding"]["x"]["scale"] == {"type": "log"}


def test_encoding_lines_draw_the_chosen_columns():
    table = mech.position_encodings(t=10, d_model=8)["sinusoidal"]
    (frame,) = data(position.encoding_lines(table, [0, 2], "added value"))
    assert len(frame) == 20 and {r["dimension"] for r in frame} == {"0", "2"}
    x = spec(position.encoding_lines(table, [0, 2]))["encoding"]["x"]
    assert x["scale"] == {"domain": [0, 9], "nice": False}  # positions 0..9, not a 0..10 axis
    for r in frame:
        assert r["added value"] == table[r["position"], int(r["dimension"])]


def test_encoding_lines_keep_the_peaks_off_the_plots_edges():
    """Regression: the sinusoids' peaks at 1 touched the top edge."""
    table = mech.position_encodings(t=10, d_model=8)["sinusoidal"]
    y = spec(position.encoding_lines(table, [0, 2]))["encoding"]["y"]
    low, high = y["scale"]["domain"]
    values = table[:, [0, 2]]
    assert low < values.min() and high > values.max() and y["scale"]["nice"] is False
    assert (high - values.max()) == pytest.approx(0.08 * (values.max() - values.min()))


def test_rope_offset_table_shows_constant_diagonals():
    out = mech.rope_relative_dots(t=16, d_head=16, offsets=(0, 1, 3, -2), seed=0)
    table = position.rope_offset_table(out["rows"])
    assert list(table["m − n"]) == [0, 1, 3, -2] and list(table["pairs"]) == [16, 15, 13, 14]
    np.testing.assert_allclose(table["RoPE: min"], table["RoPE: max"], rtol=1e-12)
    assert (table["added: max"] - table["added: min"] > 1e-3).all()


# --- cost ----------------------------------------------------------------------------------------


def test_cost_frame_with_and_without_times():
    memory = cost.cost_frame([attention_memory(t, 64) for t in (128, 2048)])
    assert list(memory.columns) == ["T", "T × T scores (MiB)", "Q, K, V (MiB)"]
    assert list(memory["T × T scores (MiB)"]) == [0.125, 32.0] and memory["Q, K, V (MiB)"].iloc[1] == 3.0
    timed = cost.cost_frame([{"seconds": 0.002, **attention_memory(64, 8)}])
    assert timed["ms"].item() == pytest.approx(2.0) and list(timed.columns)[1] == "ms"


def test_time_and_memory_charts_are_log_log():
    frame = pd.DataFrame({"T": [64, 128, 256], "ms": [1.0, 4.0, 16.0], "T × T scores (MiB)": [1, 2, 3]})
    frame["Q, K, V (MiB)"] = [0.1, 0.2, 0.3]
    s = spec(cost.time_chart(frame, 2.0))
    assert "slope 2.00" in s["title"]
    fit = s["layer"][1]
    assert fit["transform"][0] == {"regression": "ms", "on": "T", "method": "pow"}
    assert fit["encoding"]["x"]["scale"]["type"] == fit["encoding"]["y"]["scale"]["type"] == "log"
    memory = cost.memory_chart(frame)
    (long,) = data(memory)
    assert len(long) == 6 and {r["tensor"] for r in long} == {"T × T scores", "Q, K, V"}
    assert spec(memory)["encoding"]["y"]["scale"]["type"] == "log"


def test_stretched_cost_charts_keep_their_plot_height():
    """Stretched to a column, the width fits it and the height is the plot area's: under Streamlit's default "fit"
    the title, the x axis and the bottom legend took most of 260 px and left the Science page a strip of a plot."""
    frame = pd.DataFrame({"T": [256, 512], "ms": [1.0, 4.0], "T × T scores (MiB)": [0.5, 2], "Q, K, V (MiB)": [0.4, 1]})
    for chart in (cost.time_chart(frame, 2.0), cost.memory_chart(frame)):
        s = spec(chart)
        assert s["autosize"] == {"type": "fit-x", "contains": "padding"} and s["height"] >= 200


def test_log_axes_use_one_notation_and_ticks_on_the_lengths():
    """Deviations span 1e-16 to 1: one notation (".0e"), not "1e-7" beside "0.000001"; the time and memory
    axes tick exactly at the lengths timed, over a range that fits them."""
    rows = mech.permutation_test(t=6, d_model=16, n_heads=2)
    perm = spec(position.permutation_chart(position.permutation_frame(rows)))
    assert perm["encoding"]["x"]["axis"]["format"] == ".0e"
    grad = spec(gradcheck.gradcheck_chart(fake_rows({("pre", 1e-6): [1e-7, 1e-6], ("pre", 1e-4): [1e-3, 1e-2]})))
    assert grad["spec"]["layer"][0]["encoding"]["x"]["axis"]["format"] == ".0e"
    frame = pd.DataFrame({"T": [256, 512, 1024, 2048], "ms": [1.0, 4.0, 16.0, 64.0]})
    frame["T × T scores (MiB)"], frame["Q, K, V (MiB)"] = [0.5, 2, 8, 32], [0.375, 0.75, 1.5, 3]
    for chart in (cost.time_chart(frame, 2.0), cost.memory_chart(frame)):
        s = spec(chart)
        x = (s["layer"][0] if "layer" in s else s)["encoding"]["x"]
        assert x["axis"]["values"] == [256, 512, 1024, 2048] and x["scale"] == {"type": "log", "nice": False}


def test_heatmap_labels_at_most_16_positions_on_an_axis():
    """32 positions: every 4th labelled, not 32 overlapping labels; a short axis keeps every label."""
    table = mech.position_encodings(t=32, d_model=16)["sinusoidal"]
    s = spec(base.heatmap(base.grid_frame(table.T, ("dimension", "position"), "v"), "position", "dimension", "v"))
    enc = s["layer"][0]["encoding"]
    assert enc["x"]["axis"]["values"] == list(range(0, 32, 4))
    assert "values" not in enc["y"]["axis"]  # 16 dimensions: all labelled


# --- gradient check ------------------------------------------------------------------------------


def fake_rows(devs: dict[tuple[str, float], list[float]]) -> list[dict]:
    """gradcheck-shaped rows: (norm, eps) -> one max_rel_dev per tensor t0, t1, ..."""
    return [
        {"norm": norm, "tensor": f"t{i}", "eps": eps, "n_checked": 4, "n_eligible": 9, "max_rel_dev": d}
        for (norm, eps), values in devs.items()
        for i, d in enumerate(values)
    ]


def test_eps_comparison_says_when_the_large_eps_is_worse_and_when_not():
    rows = fake_rows(
        {
            ("pre", 1e-6): [1e-6, 2e-6, 1e-7],
            ("pre", 1e-4): [1e-2, 1e-7, 1e-8],  # worse overall, on one tensor of three
            ("post", 1e-6): [3e-5, 1e-6, 1e-6],
            ("post", 1e-4): [4e-5, 1e-8, np.nan],  # 1.33x: not clearly worse; the NaN tensor is left out
        }
    )
    pre, post = gradcheck.eps_comparison(rows)
    assert (pre["norm"], pre["eps_small"], pre["eps_large"]) == ("pre", 1e-6, 1e-4)
    assert pre["worst_small"] == 2e-6 and pre["worst_large"] == 1e-2 and pre["ratio"] == pytest.approx(5000)
    assert pre["large_is_worse"] and (pre["tensors_worse"], pre["tensors"]) == (1, 3)
    assert not post["large_is_worse"] and post["ratio"] == pytest.approx(4 / 3)
    assert (post["tensors_worse"], post["tensors"]) == (1, 2)
    assert gradcheck.eps_comparison(fake_rows({("pre", 1e-6): [1e-6]})) == []


def test_gradcheck_table_and_chart_follow_the_library_rows():
    rows = gradient_check("post", eps_values=(1e-6, 1e-4), seed=0, max_per_tensor=2)
    table = gradcheck.gradcheck_table(rows)
    names = list(dict.fromkeys(r["tensor"] for r in rows))
    assert list(table["tensor"]) == names
    assert list(table.columns) == ["tensor", "post-LN, ε = 1e-6", "post-LN, ε = 1e-4", "checked"]
    for r in rows:
        column = f"post-LN, {gradcheck.eps_label(r['eps'])}"
        assert table.set_index("tensor").loc[r["tensor"], column] == r["max_rel_dev"]
    chart = gradcheck.gradcheck_chart(rows + fake_rows({("pre", 1e-6): [np.nan]}))
    s = spec(chart)
    assert s["facet"]["column"]["field"] == "LayerNorm"
    assert s["spec"]["layer"][0]["encoding"]["x"]["scale"] == {"type": "log"}
    (drawn,) = data(chart)
    assert len(drawn) == len(rows)  # the NaN row has no point
