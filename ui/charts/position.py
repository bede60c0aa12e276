"""Frames and charts of the Heads & position page: parameter counts, permutation equivariance, encodings and
RoPE's relative dot products; no streamlit.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ui.charts.base import BAD, BASE_COLOR, GOOD, VARIANT_COLORS, grid_frame
from ui.charts.memo import memo_chart


def param_table(rows: list[dict]) -> pd.DataFrame:
    """mechanisms.attention_param_counts rows with display names, each count beside its formula."""
    names = {"n_heads": "heads h", "d_head": "d_head = d/h", "attention_params": "attention (counted)"}
    names |= {"attention_theory": "4d² + 4d", "block_params": "block (counted)", "block_theory": "12d² + 13d"}
    return pd.DataFrame(rows).rename(columns=names)[list(names.values())]


@memo_chart
def param_chart(rows: list[dict], height: int = 240) -> alt.LayerChart:
    """mechanisms.attention_param_counts rows: one bar per head count, the formula 4d² + 4d as a rule."""
    df = pd.DataFrame(rows)
    df["h (d_head)"] = df["n_heads"].astype(str) + " (" + df["d_head"].astype(str) + ")"
    x = alt.X("h (d_head):N", sort=list(df["h (d_head)"]), axis=alt.Axis(labelAngle=0))
    bars = (
        alt.Chart(df)
        .mark_bar(color=GOOD, opacity=0.85)
        .encode(x=x, y=alt.Y("attention_params:Q", title="attention parameters"), tooltip=list(df.columns))
    )
    rule = alt.Chart(df.head(1)).mark_rule(color=BASE_COLOR, strokeDash=[6, 4]).encode(y="attention_theory:Q")
    return alt.layer(bars, rule).properties(height=height)


PERMUTATION_LABELS = {("none", False): "none", ("sinusoidal", False): "sinusoidal", ("learned", False): "learned"}
PERMUTATION_LABELS |= {("rope", False): "RoPE", ("none", True): "none + causal mask"}
EQUIVARIANCE, CHANGE = "equivariance error", "change"
MEASURES = {EQUIVARIANCE: "max |attn(ΠX) − Π attn(X)|", CHANGE: "max |attn(ΠX) − attn(X)|"}


def permutation_frame(rows: list[dict]) -> pd.DataFrame:
    """mechanisms.permutation_test rows -> columns position, equivariance error, change, equivariant (< 1e-12)."""
    return pd.DataFrame(
        {
            "position": [PERMUTATION_LABELS[(r["position"], r["causal"])] for r in rows],
            EQUIVARIANCE: [r["equivariance_error"] for r in rows],
            CHANGE: [r["change"] for r in rows],
            "equivariant": [r["equivariance_error"] < 1e-12 for r in rows],
        }
    )


@memo_chart
def permutation_chart(frame: pd.DataFrame, height: int = 260) -> alt.Chart:
    """Both deviations per position kind on a log axis: equivariance error blue, output change orange."""
    long = frame.melt("position", list(MEASURES), var_name="measure", value_name="value")
    long["measure"] = long["measure"].map(MEASURES)
    return (
        alt.Chart(long)
        .mark_point(filled=True, size=110)
        .encode(
            x=alt.X(
                "value:Q",
                title="max absolute deviation (log scale)",
                scale=alt.Scale(type="log"),
                axis=alt.Axis(format=".0e"),  # one notation: 1e-16 ... 1e+0, never "0.000001" beside "1e-7"
            ),
            y=alt.Y("position:N", sort=list(frame["position"]), title=None),
            color=alt.Color(
                "measure:N",
                scale=alt.Scale(domain=list(MEASURES.values()), range=[GOOD, BAD]),
                # one label per line: side by side they ran out of a half-width column
                legend=alt.Legend(orient="bottom", direction="vertical", title=None, labelLimit=300),
            ),
            tooltip=["position:N", "measure:N", alt.Tooltip("value:Q", format=".3g")],
        )
        .properties(height=height)
    )


@memo_chart
def encoding_lines(table: np.ndarray, columns: list[int], value: str = "value", height: int = 220) -> alt.Chart:
    """Chosen columns of a (T, D) table as curves against position."""
    frame = grid_frame(np.asarray(table)[:, columns], ("position", "column"), value)
    frame["dimension"] = np.asarray(columns)[frame.pop("column")].astype(str)
    palette = [GOOD, BAD] + VARIANT_COLORS
    lo, hi = float(frame[value].min()), float(frame[value].max())
    pad = 0.08 * ((hi - lo) or 1.0)  # room above the peaks and below the troughs: a sinusoid's 1 touched the edge
    return (
        alt.Chart(frame)
        .mark_line(strokeWidth=2)
        .encode(
            x=alt.X("position:Q", scale=alt.Scale(domain=[0, len(table) - 1], nice=False)),  # the positions drawn
            y=alt.Y(f"{value}:Q", title=value, scale=alt.Scale(domain=[lo - pad, hi + pad], nice=False)),
            color=alt.Color("dimension:N", sort=[str(c) for c in columns], scale=alt.Scale(range=palette)),
            tooltip=["position:Q", "dimension:N", alt.Tooltip(f"{value}:Q", format=".3f")],
        )
        .properties(height=height)
    )


def rope_offset_table(rows: list[dict]) -> pd.DataFrame:
    """rope_relative_dots rows -> per distance m − n: how many pairs, the min and max dot with RoPE and added."""
    df = pd.DataFrame(rows)
    agg = df.groupby("m_minus_n", sort=False).agg(
        pairs=("m", "size"),
        rope_min=("dot_rope", "min"),
        rope_max=("dot_rope", "max"),
        added_min=("dot_additive", "min"),
        added_max=("dot_additive", "max"),
    )
    names = {"m_minus_n": "m − n", "rope_min": "RoPE: min", "rope_max": "RoPE: max"}
    return agg.reset_index().rename(columns=names | {"added_min": "added: min", "added_max": "added: max"})
