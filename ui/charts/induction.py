"""Charts of the Induction heads page as pure functions: lab.experiments.induction frames in, alt.Chart out. The
repeat loss orange and the first copy's blue (the app's broken/healthy pair: the repeat is what changes), each
seed a thin line, its phase step a dashed rule; every chart sized to fit a 1,280 px main area."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ui.charts.base import BASE_COLOR, MAIN_WIDTH, PAD, SEQUENCE_COLOR, TOKEN_COLOR, WEIGHTS, panel_width
from ui.charts.memo import memo_chart

LOSSES = alt.Scale(domain=["repeat", "first copy"], range=[SEQUENCE_COLOR, TOKEN_COLOR])
PER_ROW = 3  # facets to a row
CURVES_Y_AXIS = 85  # px left of the first loss panel (labels and title) and the last x label's overhang at the right
SCORES_FRAME = 210  # px of the head scores beside the plot: row names, head names, the legend (204 drawn at 1,280 px)


@memo_chart
def loss_curves(curves: pd.DataFrame, phases: pd.DataFrame, height: int = 220) -> alt.FacetChart:
    """experiments.induction.curves_frame and phases_frame: per variant a panel of the held-out repeat and first-copy
    losses of every seed against the step, with a dashed rule at each seed's phase step."""
    variants = list(dict.fromkeys(curves["variant"]))
    columns = min(PER_ROW, max(1, len(variants)))
    data = pd.concat([curves.assign(kind="curve"), phases.assign(kind="phase")], ignore_index=True)
    x = alt.X("step:Q", title="training step", scale=alt.Scale(nice=False))
    color = alt.Color("loss:N", scale=LOSSES, title=None, legend=alt.Legend(orient="bottom"))
    tooltip = ["variant:N", "seed:O", "step:Q", "loss:N", alt.Tooltip("value:Q", format=".3f")]
    lines = (
        alt.Chart()
        .mark_line(strokeWidth=1.2, opacity=0.8)
        .encode(
            x=x,
            y=alt.Y("value:Q", title="held-out loss (nats)", scale=alt.Scale(zero=True)),
            color=color,
            detail="seed:N",
            tooltip=tooltip,
        )
        .transform_filter(alt.datum.kind == "curve")
    )
    rules = (
        alt.Chart()
        .mark_rule(strokeDash=[4, 3], color=BASE_COLOR, opacity=0.6)
        .encode(x="step:Q", tooltip=["variant:N", "seed:O", alt.Tooltip("step:Q", title="phase step")])
        .transform_filter(alt.datum.kind == "phase")
    )
    width = panel_width(columns, y_axis=CURVES_Y_AXIS)  # at Y_AXIS_WIDTH the row ended 7 px past the main area
    layered = alt.layer(lines, rules, data=data).properties(width=width, height=height)
    return layered.facet(facet=alt.Facet("variant:N", title=None, sort=variants), columns=columns)


@memo_chart
def head_scores(frame: pd.DataFrame, height_per_head: int = 22) -> alt.Chart:
    """experiments.induction.head_scores_frame: per pattern a heatmap of each head's score (0 to 1) at each snapshot."""
    heads = sorted(frame["head"].unique())
    steps = sorted(frame["step"].unique())
    every = max(1, len(steps) // 10)
    ticks = [int(s) for s in steps[every - 1 :: every]]
    width = MAIN_WIDTH - SCORES_FRAME  # panel_width(1) - 60 put the legend 74 px past the main area
    return (
        alt.Chart(frame)
        .mark_rect()
        .encode(
            x=alt.X("step:O", title="training step", axis=alt.Axis(values=ticks, labelAngle=0)),
            y=alt.Y("head:N", title=None, sort=heads),
            color=alt.Color("score:Q", scale=WEIGHTS, title="score", legend=alt.Legend(orient="right")),
            row=alt.Row("pattern:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left")),
            tooltip=["pattern:N", "head:N", "step:O", alt.Tooltip("score:Q", format=".3f")],
        )
        .properties(width=width, height=height_per_head * len(heads), autosize=PAD)
    )


@memo_chart
def maps(frame: pd.DataFrame, columns: int = 2) -> alt.FacetChart:
    """Attention maps as rows panel, query, key, weight (causal pairs only): one heatmap per panel, in order,
    `columns` to a row (two: each head before and after), each as large as fits the main area."""
    panels = list(dict.fromkeys(frame["panel"]))
    n = int(frame["query"].max()) + 1 if len(frame) else 1
    cell = max(3, min(10, (panel_width(columns) - 40) // n))
    ticks = list(range(0, n, 5))
    return (
        alt.Chart(frame)
        .mark_rect()
        .encode(
            x=alt.X("key:O", title="key position", axis=alt.Axis(values=ticks, labelAngle=0)),
            y=alt.Y("query:O", title="query position", axis=alt.Axis(values=ticks)),
            color=alt.Color("weight:Q", scale=WEIGHTS, title="weight", legend=alt.Legend(orient="top")),
            tooltip=["panel:N", "query:O", "key:O", alt.Tooltip("weight:Q", format=".3f")],
        )
        .properties(width=cell * n, height=cell * n)
        .facet(
            facet=alt.Facet("panel:N", title=None, sort=panels, header=alt.Header(labelLimit=260)), columns=columns
        )  # fmt: skip
    )


@memo_chart
def ablation(frame: pd.DataFrame, levels: dict[str, float]) -> alt.LayerChart:
    """induction.ablation_frame: per loss (repeat, first copy) each condition's seeds as dots and their mean as
    a tick; `levels` {label: loss} as dashed rules on the repeat panel (the 1-layer level, ln V)."""
    conditions = list(dict.fromkeys(frame["condition"]))
    x = alt.X("condition:N", sort=conditions, title=None, axis=alt.Axis(labelAngle=0, labelLimit=200))
    y = alt.Y("value:Q", title="held-out loss (nats)", scale=alt.Scale(zero=True))
    color = alt.Color("loss:N", scale=LOSSES, title=None, legend=alt.Legend(orient="bottom"))
    xoff = alt.XOffset("loss:N", sort=["repeat", "first copy"])
    dots = (
        alt.Chart(frame)
        .mark_circle(size=40, opacity=0.7)
        .encode(
            x=x,
            xOffset=xoff,
            y=y,
            color=color,
            tooltip=["condition:N", "loss:N", "seed:O", alt.Tooltip("value:Q", format=".3f")],
        )
    )
    means = frame.groupby(["condition", "loss"], sort=False, as_index=False)["value"].mean()
    ticks = alt.Chart(means).mark_tick(thickness=3, size=26).encode(x=x, xOffset=xoff, y=y, color=color)
    rules_df = pd.DataFrame([{"label": label, "value": value} for label, value in levels.items()])
    rules = alt.Chart(rules_df).mark_rule(strokeDash=[5, 4], color=BASE_COLOR, opacity=0.5).encode(y="value:Q")
    text = (
        alt.Chart(rules_df)
        .mark_text(align="left", dx=4, dy=-6, color=BASE_COLOR, fontSize=11)
        .encode(y="value:Q", text="label:N", x=alt.value(0))
    )
    width = min(panel_width(1), 160 * len(conditions))
    return alt.layer(dots, ticks, rules, text).properties(width=width, height=260)
