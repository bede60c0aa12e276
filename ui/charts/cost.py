"""Frames and charts of the Cost page: time and memory of attention against T on log-log axes; no streamlit."""

from __future__ import annotations

import altair as alt
import pandas as pd

from lab.limits import Cap, declare
from ui.charts.base import BAD, BASE_COLOR, FIT_X, GOOD, log_ticks
from ui.charts.memo import memo_chart

# the Cost page's cap (lab.limits: read by name, ATTNLAB_<NAME> or [limits] as every cap)
(LONGEST_T,) = declare(Cap("max_cost_t", 2048, "Cost: longest sequence timed"))

MEMORY = alt.Scale(domain=["T × T scores", "Q, K, V"], range=[BAD, GOOD])


def cost_frame(rows: list[dict]) -> pd.DataFrame:
    """time_attention or attention_memory rows -> columns T, [ms,] T × T scores (MiB), Q, K, V (MiB)."""
    frame = pd.DataFrame(
        {
            "T": [r["T"] for r in rows],
            "T × T scores (MiB)": [r["scores_mib"] for r in rows],
            "Q, K, V (MiB)": [r["qkv_mib"] for r in rows],
        }
    )
    if rows and "seconds" in rows[0]:  # timed rows; attention_memory rows have no time
        frame.insert(1, "ms", [1e3 * r["seconds"] for r in rows])
    return frame


def _log(field: str, title: str, values: list | None = None, data=None) -> dict:
    """A log axis fitted to the data; `values` puts the ticks exactly on them (e.g. the lengths T timed), `data`
    on the 1-2-5 sequence over its range (ui.charts.base.log_ticks; Vega's own gave 0.4, 3, 20)."""
    spec = {"field": field, "type": "quantitative", "title": title, "scale": {"type": "log", "nice": False}}
    if values is not None:
        return spec | {"axis": {"values": [int(v) for v in values], "format": ","}}
    return spec | ({"axis": {"values": log_ticks(data), "format": ",~g"}} if data is not None else {})


PLOT_HEIGHT = 240  # pixels of the plot area, the axes and the legend below it (FIT_X)


@memo_chart
def time_chart(frame: pd.DataFrame, slope: float | None, height: int = PLOT_HEIGHT) -> alt.LayerChart:
    """Milliseconds against T on log-log axes, with the power-law fit (a straight line) dashed; `height`: the plot
    area's, the width the column's."""
    x = alt.X(**_log("T", "sequence length T (log scale)", list(frame["T"])))
    y = alt.Y(**_log("ms", "milliseconds (log scale)", data=frame["ms"]))
    points = (
        alt.Chart(frame)
        .mark_line(point=alt.OverlayMarkDef(size=70), color=GOOD)
        .encode(x=x, y=y, tooltip=["T:Q", alt.Tooltip("ms:Q", format=".3f")])
    )
    fit = (
        alt.Chart(frame)
        .transform_regression("T", "ms", method="pow")
        .mark_line(color=BASE_COLOR, strokeDash=[6, 4])
        .encode(x=x, y=y)
    )
    title = "time" if slope is None else f"time: fitted log-log slope {slope:.2f} (2 = quadratic)"
    return alt.layer(points, fit).properties(height=height, title=title, autosize=FIT_X)


@memo_chart
def memory_chart(frame: pd.DataFrame, height: int = PLOT_HEIGHT) -> alt.Chart:
    """MiB of the T × T scores (orange) against Q, K, V together (blue), log-log; `height`: the plot area's, the
    width the column's."""
    long = frame.melt("T", ["T × T scores (MiB)", "Q, K, V (MiB)"], var_name="tensor", value_name="MiB")
    long["tensor"] = long["tensor"].str.removesuffix(" (MiB)")
    return (
        alt.Chart(long)
        .mark_line(point=alt.OverlayMarkDef(size=60))
        .encode(
            x=alt.X(**_log("T", "sequence length T (log scale)", list(frame["T"]))),
            y=alt.Y(**_log("MiB", "MiB (log scale)", data=long["MiB"])),
            color=alt.Color("tensor:N", scale=MEMORY, title=None, legend=alt.Legend(orient="bottom")),
            tooltip=["T:Q", "tensor:N", alt.Tooltip("MiB:Q", format=".3f")],
        )
        .properties(height=height, title="memory per head and sequence, float64", autosize=FIT_X)
    )
