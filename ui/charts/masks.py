"""Frames and charts of the Masks page: mask heatmaps, row sums and the padding demo; no streamlit."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ui.charts.base import BAD, BASE_COLOR, GOOD, MASKED, PAD, grid_frame, heatmap
from ui.charts.memo import memo_chart

MASK = alt.Scale(domain=["allowed", "masked"], range=[GOOD, MASKED])
ONE_TOL = 1e-9  # a row "sums to 1" within this
LABEL_AT = 1.02  # the row sums' labels start just right of the dashed line at 1 (the axis runs to 1.45)


def mask_frame(mask: np.ndarray, axes: tuple[str, ...]) -> pd.DataFrame:
    """A boolean mask -> grid_frame with a column 'key is' = 'allowed' | 'masked'."""
    frame = grid_frame(mask, axes, "allowed")
    frame["key is"] = np.where(frame.pop("allowed"), "allowed", "masked")
    return frame


@memo_chart
def mask_heatmap(
    mask: np.ndarray, axes: tuple[str, ...], cell: int = 22, facet: str | None = None, legend: bool | str = True
) -> alt.Chart:
    """Allowed cells blue, masked ones grey; the legend at the right, or above/below ('top', 'bottom') in a
    narrow column, where one at the right ran out of it."""
    frame = mask_frame(mask, axes)
    return heatmap(frame, axes[-1], axes[-2], "key is", scale=MASK, cell=cell, facet=facet, legend=legend)


def row_sum_frame(sums: np.ndarray) -> pd.DataFrame:
    """Row sums (T,) -> columns query, row sum, sums to 1 ('= 1' | '≠ 1')."""
    sums = np.asarray(sums, dtype=float)
    ok = np.abs(sums - 1) < ONE_TOL
    return pd.DataFrame({"query": np.arange(len(sums)), "row sum": sums, "sums to 1": np.where(ok, "= 1", "≠ 1")})


def row_sum_summary(sums: np.ndarray) -> dict:
    """How many rows sum to 1, out of how many, and the smallest sum."""
    frame = row_sum_frame(sums)
    return {"ones": int((frame["sums to 1"] == "= 1").sum()), "rows": len(frame), "smallest": float(sums.min())}


def padding_summary(demo: dict) -> dict:
    """mechanisms.padding_demo -> query rows, rows summing to 1, rows with no key at all, all weights finite."""
    ones = row_sum_summary(np.asarray(demo["row_sums"]).ravel())
    fully = int(np.count_nonzero(demo["fully_masked_rows"]))
    return {"rows": ones["rows"], "ones": ones["ones"], "fully_masked": fully, "all_finite": bool(demo["all_finite"])}


@memo_chart
def weights_with_row_sums(
    weights: np.ndarray, sums: np.ndarray, title: str, mask: np.ndarray | None = None, cell: int | None = None
) -> alt.HConcatChart:
    """A (T, T) weight heatmap (cells outside `mask` blank) and beside it a bar per row: its sum against 1.

    The cell shrinks with T so that both fit half the main area (T = 12 too); the weights are written in the
    cells while they have room."""
    cell = cell or min(32, max(16, 200 // max(len(sums), 1)))
    frame = grid_frame(weights, ("query", "key"), "weight", mask)
    text = ".2f" if cell >= 28 else None
    heat = heatmap(frame, "key", "query", cell=cell, text_format=text, legend=False, fixed_size=False)
    frame = row_sum_frame(sums)
    y = alt.Y("query:O", title=None, axis=alt.Axis(labels=False, ticks=False))
    scale = alt.Scale(domain=["= 1", "≠ 1"], range=[GOOD, BAD])
    bars = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("row sum:Q", title="row sum", scale=alt.Scale(domain=[0, 1.45]), axis=alt.Axis(values=[0, 0.5, 1])),
            y=y,
            color=alt.Color("sums to 1:N", scale=scale, legend=alt.Legend(orient="bottom", title="row sum")),
            tooltip=["query:O", alt.Tooltip("row sum:Q", format=".4f")],
        )
    )
    # each sum written right of the dashed line at 1, in a column of its own: beside its bar's end, the label of a
    # bar reaching 1 sat on the line
    labels = bars.mark_text(align="left", dx=4, fontSize=10, color=BASE_COLOR).encode(
        x=alt.datum(LABEL_AT), text=alt.Text("row sum:Q", format=".3f"), color=alt.value(BASE_COLOR)
    )
    one = alt.Chart(pd.DataFrame({"one": [1.0]})).mark_rule(color=BASE_COLOR, strokeDash=[4, 3]).encode(x="one:Q")
    sums_chart = alt.layer(bars, labels, one).properties(width=130, height=cell * len(frame))
    return alt.hconcat(heat, sums_chart, spacing=6).properties(title=title, autosize=PAD)
