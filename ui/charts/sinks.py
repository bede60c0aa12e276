"""Charts of the Attention sinks page as pure functions: sinks frames in, alt.Chart out. Each seed a thin line
or a dot, the uniform causal head's share and the best possible loss dashed rules; sized to fit a 1,280 px main
area."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ui.charts.base import BASE_COLOR, PAD, SEQUENCE_COLOR, TOKEN_COLOR, panel_width
from ui.charts.memo import memo_chart

WHERE = alt.Scale(domain=["position 0", "other positions"], range=[SEQUENCE_COLOR, TOKEN_COLOR])
ROLES = alt.Scale(domain=["sink head", "other heads"], range=[SEQUENCE_COLOR, TOKEN_COLOR])


def _rule(value: float, label: str, width: int) -> alt.LayerChart:
    """A dashed horizontal rule at `value`, labelled at the right end of a plot `width` pixels wide."""
    frame = pd.DataFrame([{"value": value, "label": label}])
    rule = alt.Chart(frame).mark_rule(strokeDash=[5, 4], color=BASE_COLOR, opacity=0.6).encode(y="value:Q")
    text = (
        alt.Chart(frame)
        .mark_text(align="right", dy=-6, color=BASE_COLOR, fontSize=11)
        .encode(y="value:Q", text="label:N", x=alt.value(width - 4))
    )
    return alt.layer(rule, text)


@memo_chart
def sink_share(frame: pd.DataFrame, uniform: float, height: int = 260) -> alt.LayerChart:
    """sinks.sink_frame: each head's share of its bigram queries' attention on position 0 against the step, a
    line per seed and head, the run's sink head orange and the other heads blue, and the uniform causal head's share
    as a dashed rule."""
    width = panel_width(1) - 60  # the plot area, beside its axis's labels
    roles = [r for r in ROLES.domain if r in set(frame["role"])]  # one head per run: no "other heads" to name
    scale = alt.Scale(domain=roles, range=[ROLES.range[ROLES.domain.index(r)] for r in roles])
    color = alt.Color("role:N", title=None, scale=scale, legend=alt.Legend(orient="bottom"))
    lines = (
        alt.Chart(frame)
        .mark_line(strokeWidth=1.2, opacity=0.75)
        .encode(
            x=alt.X("step:Q", title="training step", scale=alt.Scale(nice=False)),
            y=alt.Y("share:Q", title="share on position 0", scale=alt.Scale(zero=True)),
            color=color,
            detail="run:N",
            tooltip=["head:N", "role:N", "seed:O", "step:Q", alt.Tooltip("share:Q", format=".3f")],
        )
        .transform_calculate(run="datum.seed + ' ' + datum.head")
    )
    rule = _rule(uniform, f"uniform causal head: {uniform:.3f}", width)
    return alt.layer(lines, rule).properties(width=width, height=height, autosize=PAD)


@memo_chart
def window_losses(frame: pd.DataFrame, bayes: float, height: int = 280) -> alt.LayerChart:
    """experiments.sinks.window_frame: each seed's held-out loss under full attention, the window and the window + sink,
    joined by a line (the pairs), the means as ticks, and the best possible loss as a dashed rule."""
    conditions = list(dict.fromkeys(frame["condition"]))
    width = min(panel_width(1) - 60, 120 * len(conditions))  # the plot area, beside its axis's labels
    x = alt.X("condition:N", sort=conditions, title=None, axis=alt.Axis(labelAngle=0, labelLimit=200))
    y = alt.Y("loss:Q", title="held-out loss (nats)", scale=alt.Scale(zero=False))
    tooltip = ["condition:N", "seed:O", alt.Tooltip("loss:Q", format=".4f")]
    pairs = alt.Chart(frame).mark_line(color=TOKEN_COLOR, opacity=0.35, strokeWidth=1).encode(x=x, y=y, detail="seed:N")
    dots = alt.Chart(frame).mark_circle(size=45, color=TOKEN_COLOR, opacity=0.8).encode(x=x, y=y, tooltip=tooltip)
    means = frame.groupby("condition", sort=False, as_index=False)["loss"].mean()
    ticks = alt.Chart(means).mark_tick(thickness=3, size=30, color=SEQUENCE_COLOR).encode(x=x, y=y)
    rule = _rule(bayes, f"best possible: {bayes:.3f}", width)
    return alt.layer(pairs, dots, ticks, rule).properties(width=width, height=height, autosize=PAD)


@memo_chart
def norms(frame: pd.DataFrame, height: int = 200) -> alt.FacetChart:
    """sinks.norms_frame: per quantity (value, residual) the mean norm at position 0 and at the others against
    the step, a line per seed."""
    columns = 2
    return (
        alt.Chart(frame)
        .mark_line(strokeWidth=1.2, opacity=0.75)
        .encode(
            x=alt.X("step:Q", title="training step", scale=alt.Scale(nice=False)),
            y=alt.Y("value:Q", title="mean norm", scale=alt.Scale(zero=True)),
            color=alt.Color("where:N", scale=WHERE, title=None, legend=alt.Legend(orient="bottom")),
            detail="seed:N",
            tooltip=["norm:N", "where:N", "seed:O", "step:Q", alt.Tooltip("value:Q", format=".3f")],
        )
        .properties(width=panel_width(columns) - 40, height=height)  # each panel its own y axis: 40 px less
        .facet(facet=alt.Facet("norm:N", title=None, sort=["value", "residual"]), columns=columns)
        .resolve_scale(y="independent")
    )
