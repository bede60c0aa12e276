"""Charts of groups over seeds (Ablations, Compare) as pure functions: lab.compare / lab.factors frames in,
alt.Chart out; no streamlit. The baseline level is black, the others in the variant palette of ui.charts.base.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ui.charts.base import legend_columns, legend_rows
from ui.charts.memo import memo_chart
from ui.charts.runs import BASE_COLOR, METRICS, VARIANT_COLORS, accuracy_axis, accuracy_floor
from ui.frames import thin

BAND_POINTS = 300  # steps per band sent to the browser


def _colors(levels: list[str]) -> alt.Scale:
    return alt.Scale(domain=levels, range=([BASE_COLOR] + VARIANT_COLORS * (1 + len(levels)))[: len(levels)])


def _facet(chart, df: pd.DataFrame, columns: int):
    if "facet" not in df.columns:
        return chart
    order = list(dict.fromkeys(df["facet"]))
    return chart.facet(facet=alt.Facet("facet:N", title=None, sort=order), columns=columns)


def thin_bands(df: pd.DataFrame, max_points: int = BAND_POINTS) -> pd.DataFrame:
    """lab.compare.curve_bands rows at no more than max_points evenly spread steps per curve (first and last kept)."""
    if df.empty:
        return df
    steps = np.sort(df["step"].unique())
    return df[df["step"].isin(steps[thin(len(steps), max_points)])]


@memo_chart
def band_curves(df: pd.DataFrame, log: bool = True, height: int = 300, columns: int = 2, y_title: str | None = None):
    """Columns level, step, seeds, mean, min, max (and facet): the mean over seeds as a line in a min-max band.

    The y axis is the training loss unless `y_title` names another quantity (e.g. accuracy over the snapshots).
    """
    levels = [str(v) for v in dict.fromkeys(df["level"])]
    df = thin_bands(df).assign(level=lambda d: d["level"].astype(str), band=lambda d: d["level"].astype(str))
    if y_title and not log and len(df):  # an accuracy: from a floor to a little above 1, never on the frame
        scale = accuracy_axis(accuracy_floor(df))["scale"]
    else:
        scale = alt.Scale(type="log") if log else alt.Scale(zero=False)
    x = alt.X("step:Q", title="training step", scale=alt.Scale(nice=False))
    columns_ = legend_columns(levels)  # as many as fit a phone, so every level is named there too
    color = alt.Color(
        "level:N",
        title=None,
        sort=levels,
        scale=_colors(levels),
        legend=alt.Legend(orient="bottom", columns=columns_, labelLimit=240),
    )
    # the band fills by a copy of the level, so its scale is not merged with the lines' (which carry the legend)
    fill = alt.Fill("band:N", sort=levels, scale=_colors(levels), legend=None)
    band = alt.Chart().mark_area(opacity=0.18).encode(x=x, y=alt.Y("min:Q", scale=scale), y2="max:Q", fill=fill)
    title = (y_title or "mean training loss") + (" (log scale)" if log else "")
    # Streamlit fits the whole chart, legend included, into `height`: each legend row is added to it, so the plot
    # keeps its height and the y title its room (it was clipped under a two-row legend)
    height += 20 * legend_rows(levels, columns_)
    tooltip = ["level:N", "step:Q", alt.Tooltip("mean:Q", format=".4f"), alt.Tooltip("min:Q", format=".4f")]
    tooltip += [alt.Tooltip("max:Q", format=".4f"), "seeds:Q"]
    line = (
        alt.Chart()
        .mark_line(strokeWidth=1.8)
        .encode(x=x, y=alt.Y("mean:Q", title=title, scale=scale), color=color, tooltip=tooltip)
    )
    # the fill's legend resolved apart: merged, Vega-Lite let the fill's `legend=None` drop the lines' legend too
    chart = alt.layer(band, line, data=df).resolve_legend(fill="independent")
    if "facet" in df.columns:
        return _facet(chart.properties(height=220, width=300), df, columns)
    return chart.properties(height=height)


def accuracy_long(groups: pd.DataFrame) -> pd.DataFrame:
    """lab.compare.group_summary rows -> columns level, metric ('per-token'/'per-sequence'), mean, min, max, n."""
    keep = ["level", "n"] + (["facet"] if "facet" in groups.columns else [])
    parts = []
    for metric, prefix in (("per-token", "token_accuracy"), ("per-sequence", "sequence_accuracy")):
        part = groups[keep].copy()
        part["metric"] = metric
        for stat in ("mean", "min", "max"):
            part[stat] = groups[f"{prefix}_{stat}"].astype(float)
        parts.append(part)
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    return out.assign(level=out["level"].astype(str)) if len(out) else out


@memo_chart
def accuracy_by_level(groups: pd.DataFrame, factor_label: str, height: int = 320, columns: int = 2):
    """Per-token and per-sequence accuracy at each of the factor's levels (categories, so no line joins them): the
    mean over seeds as a dot, min to max over seeds as an error bar with end ticks, the two metrics side by side."""
    df = accuracy_long(groups)
    levels = [str(v) for v in dict.fromkeys(groups["level"])]
    x = alt.X("level:N", title=factor_label, sort=levels, axis=alt.Axis(labelAngle=0, labelLimit=140))
    offset = alt.XOffset("metric:N", sort=["per-token", "per-sequence"])
    color = alt.Color("metric:N", title=None, scale=METRICS, legend=alt.Legend(orient="bottom"))
    y_axis = accuracy_axis(accuracy_floor(df))
    y = alt.Y("mean:Q", title="accuracy", **y_axis)
    tooltip = ["level:N", "metric:N", alt.Tooltip("mean:Q", format=".3f"), alt.Tooltip("min:Q", format=".3f")]
    tooltip += [alt.Tooltip("max:Q", format=".3f"), alt.Tooltip("n:Q", title="seeds")]
    rule = (
        alt.Chart()
        .mark_errorbar(ticks=alt.MarkConfig(size=10, strokeWidth=2), thickness=2)
        .encode(x=x, xOffset=offset, y=alt.Y("min:Q", title="accuracy", **y_axis), y2="max:Q", color=color)
    )
    dots = (
        alt.Chart()
        .mark_point(size=80, filled=True, opacity=1)
        .encode(x=x, xOffset=offset, y=y, color=color, tooltip=tooltip)
    )
    chart = alt.layer(rule, dots, data=df)
    if "facet" in df.columns:
        return _facet(chart.properties(height=200, width=300), df, columns)
    return chart.properties(height=height)
