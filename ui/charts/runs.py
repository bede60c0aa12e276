"""Charts of the run pages (Train, Results, Attention, Length, Ablations): a long DataFrame (ui.frames) in, an
alt.Chart out; no streamlit. Colours from ui.charts.base.
"""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

from lab import formats
from ui.charts.base import (
    BASE_COLOR,
    FACET_SPACING,
    FIT_X,
    MAIN_WIDTH,
    METRICS,
    SEED_COLORS,
    SEQUENCE_COLOR,
    SYMBOLS,
    TOKEN_COLOR,
    VARIANT_COLORS,
    WEIGHT_COLOR,
    WEIGHTS,
    labelled_axis,
    panel_width,
)
from ui.charts.memo import memo_chart


def _loss_axis(log: bool = True) -> alt.Y:
    scale = alt.Scale(type="log") if log else alt.Scale(zero=False)
    return alt.Y("loss:Q", title="training loss" + (" (log scale)" if log else ""), scale=scale)


@memo_chart
def loss_curve(df: pd.DataFrame, log: bool = True, height: int = 280, steps: int | None = None) -> alt.Chart:
    """One curve: columns step, loss; `steps` fixes the x axis to the whole run, so a live curve grows into it."""
    x_scale = alt.Scale(domain=[0, steps]) if steps else alt.Undefined
    return (
        alt.Chart(df)
        .mark_line(color=TOKEN_COLOR, strokeWidth=1.8)
        .encode(
            x=alt.X("step:Q", title="training step", scale=x_scale),
            y=_loss_axis(log),
            tooltip=[alt.Tooltip("step:Q"), alt.Tooltip("loss:Q", format=".4f")],
        )
        .properties(height=height)
    )


SEED_CURVES_WIDTH = MAIN_WIDTH  # pixels of the main area the facets share (ui.charts.base.MAIN_WIDTH)


@memo_chart
def seed_curves(df: pd.DataFrame, log: bool = True, columns: int = 3) -> alt.FacetChart:
    """Columns run, seed, step, loss: per run a pale min-max band over seeds, every seed its own colour, the mean
    dashed black; the panels share the main area's width (no empty quarter at its right)."""
    x = alt.X("step:Q", title="training step", scale=alt.Scale(nice=False))
    scale = alt.Scale(type="log") if log else alt.Scale(zero=False)
    band = (
        alt.Chart()
        .mark_area(opacity=0.12, color=TOKEN_COLOR)
        .encode(x=x, y=alt.Y("min(loss):Q", title="training loss", scale=scale), y2=alt.Y2("max(loss):Q"))
    )
    seeds = (
        alt.Chart()
        .mark_line(strokeWidth=1.4, opacity=0.9)
        .encode(
            x=x,
            y=alt.Y("loss:Q", scale=scale),
            color=alt.Color(
                "seed:N", title="seed", scale=alt.Scale(range=SEED_COLORS), legend=alt.Legend(orient="bottom")
            ),
            tooltip=["run:N", "seed:N", "step:Q", alt.Tooltip("loss:Q", format=".4g")],
        )
    )
    mean = (
        alt.Chart()
        .mark_line(color=BASE_COLOR, strokeWidth=1.8, strokeDash=[5, 3])
        .encode(x=x, y=alt.Y("mean(loss):Q", scale=scale))
    )
    n_runs = max(1, df["run"].nunique()) if len(df) else 1
    columns = min(columns, n_runs)
    width = panel_width(columns, SEED_CURVES_WIDTH, y_axis=105)  # the y axis (labels to 0.0001) and the gaps
    return (
        alt.layer(band, seeds, mean, data=df)
        .properties(width=width, height=200)
        .facet(facet=alt.Facet("run:N", title=None, header=alt.Header(labelFontSize=13)), columns=columns)
    )


def accuracy_floor(df: pd.DataFrame, step: float = 0.05) -> float:
    """The bottom of an accuracy axis: a multiple of `step` below every mean and min, at most 1 - step (so a
    chart of perfect runs still has a range, not one "1.000000" tick)."""
    values = pd.concat([df["mean"], df["min"]]).astype(float) if len(df) else pd.Series([1.0])
    # rounded: 17 * 0.05 is 0.8500000000000001, above the 0.85 tick, which then fell outside the axis and left the
    # plot's bottom edge unmarked (the axes seemed to float)
    return max(0.0, min(1 - step, round(math.floor((float(values.min()) - step / 10) / step) * step, 10)))


ACCURACY_HEADROOM = 0.07  # of the axis span, above 1.0: a point at a perfect accuracy sits inside the frame


def accuracy_axis(floor: float, top: float = 1.0) -> dict:
    """y scale and axis for an accuracy from `floor` to `top`: a little room beyond both ends (a point at 0 or at 1
    sits inside the plot, not on its frame), ticks counted down from top (so 1.00 is always named, however the
    floor falls), none below floor and one at it (the plot's bottom edge), two decimals."""
    pad = (top - floor) * ACCURACY_HEADROOM
    step = 0.05 if top - floor <= 0.25 else (0.1 if top - floor <= 0.5 else 0.2)
    ticks = sorted(round(top - i * step, 4) for i in range(int((top - floor) / step + 1e-9) + 1))
    if ticks[0] > floor + 1e-9:  # the floor is a tick too: between two (0.1, ticks 0.2 apart) the plot's bottom
        ticks.insert(0, round(floor, 4))  # edge went unmarked, and the axes seemed to float apart
    scale = alt.Scale(domain=[floor - (pad if floor <= 0 else 0), top + pad], nice=False, zero=False)
    return {"scale": scale, "axis": alt.Axis(format=".2f", values=ticks, labelOverlap=False)}  # every tick named


@memo_chart
def accuracy_vs_length(df: pd.DataFrame, height: int = 200) -> alt.LayerChart:
    """Columns task, length, metric, mean, min: mean over seeds as lines (sort: dashed, squares), ▼ the worst seed;
    `height`: the plot area's (FIT_X: the width the column's, the axis and legend below it).

    Per-token is drawn wide and pale beneath per-sequence, so it stays visible where the two coincide."""
    x = alt.X("length:O", title="sequence length L", axis=alt.Axis(labelAngle=0))
    color = alt.Color("metric:N", title=None, scale=METRICS, legend=alt.Legend(orient="bottom"))
    dash = alt.StrokeDash("task:N", title=None, legend=None)  # tasks are named at the end of their lines
    shape = alt.Shape("task:N", title=None, legend=None)
    tooltip = [
        "task:N",
        "length:O",
        "metric:N",
        alt.Tooltip("mean:Q", format=".3f"),
        alt.Tooltip("min:Q", format=".3f", title="worst seed"),
        "seeds:Q",
    ]
    y = alt.Y("mean:Q", title="accuracy", **accuracy_axis(accuracy_floor(df)))
    layers = []
    for metric, width, size, opacity in (("per-token", 6, 170, 0.45), ("per-sequence", 2, 60, 1.0)):
        line = alt.Chart(df[df["metric"] == metric] if len(df) else df).mark_line(
            strokeWidth=width, opacity=opacity, point=alt.OverlayMarkDef(size=size, filled=True, opacity=opacity)
        )
        layers.append(line.encode(x=x, y=y, color=color, strokeDash=dash, shape=shape, tooltip=tooltip))
    worst = alt.Chart(df).mark_point(shape="triangle-down", filled=True, size=45, opacity=0.7)
    # the same scale as the lines': a layer left to its own (nice, data-driven) scale widened the shared one below
    # the last tick, and the axes floated apart from the plot
    at_worst = alt.Y("min:Q", title="accuracy", **accuracy_axis(accuracy_floor(df)))
    layers.append(worst.encode(x=x, y=at_worst, color=color, tooltip=tooltip))
    # every task named at the end of its per-sequence line (copy, reverse, sort: 13 px apart, top to bottom, so
    # that lines ending at the same accuracy keep every name readable)
    last = df[(df["length"] == df["length"].max()) & (df["metric"] == "per-sequence")] if len(df) else df
    tasks = sorted(pd.unique(df["task"])) if len(df) else []
    names = []
    for i, task in enumerate(tasks):
        dy = round((i - (len(tasks) - 1) / 2) * 13)
        at = last[last["task"] == task]
        text = alt.Chart(at).mark_text(align="left", dx=10, dy=dy, fontSize=12, color=BASE_COLOR)
        names.append(text.encode(x=x, y=y, text="task:N"))
    return alt.layer(*layers, *names).properties(height=height, autosize=FIT_X)  # 260 in all left a plot of 110


@memo_chart
def loss_overlay(df: pd.DataFrame, log: bool = True, height: int = 340) -> alt.Chart:
    """Columns label, step, loss; the first label (the base) black, the variants in the palette."""
    labels = list(dict.fromkeys(df["label"]))
    colors = [BASE_COLOR] + VARIANT_COLORS * (1 + len(labels) // len(VARIANT_COLORS))
    return (
        alt.Chart(df)
        .mark_line(strokeWidth=1.6)
        .encode(
            x=alt.X("step:Q", title="training step", scale=alt.Scale(nice=False)),  # ends at the last step
            y=_loss_axis(log),
            color=alt.Color("label:N", title="run", sort=labels, scale=alt.Scale(domain=labels, range=colors)),
            tooltip=["label:N", "step:Q", alt.Tooltip("loss:Q", format=".4f")],
        )
        .properties(height=height)
    )


@memo_chart
def breakdown_bars(df: pd.DataFrame) -> alt.Chart:
    """Columns variant, symbols, accuracy, n: per-sequence accuracy split by distinct vs repeated symbols, a row
    of two bars per variant (rows, not columns: at a phone's width every variant keeps its name; side by side,
    6 variants showed 3 names)."""
    variants = list(dict.fromkeys(df["variant"]))
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            y=alt.Y("variant:N", title=None, sort=variants, axis=alt.Axis(labelLimit=200, labelOverlap=False)),
            yOffset=alt.YOffset("symbols:N", sort=SYMBOLS.domain),
            x=alt.X(
                "accuracy:Q",
                title="per-sequence accuracy",
                scale=alt.Scale(domain=[0, 1]),
                axis=alt.Axis(values=[0, 0.25, 0.5, 0.75, 1], format=".2f"),  # five ticks, readable at any width
            ),
            color=alt.Color("symbols:N", title=None, scale=SYMBOLS, legend=alt.Legend(orient="bottom")),
            tooltip=["variant:N", "symbols:N", alt.Tooltip("accuracy:Q", format=".3f"), "n:Q"],
        )
        # 14 px a bar, two a variant beside its name: a step, not a total height that the axis and the legend
        # share (with four variants that squeezed the rows until half their names were dropped)
        .properties(height=alt.Step(14))
    )


HEATMAPS_PER_ROW = 4  # more heads than this wrap onto further rows, so 8 or 16 heads still fit the main area
HEATMAP_CELL = (13, 30)  # pixels of a heatmap cell: 13 leaves room for every label, 30 is plenty
HEATMAP_Y_AXIS = 90  # the query labels ('11 · 7') and their title, left of the first column
HEATMAP_SPACING = 6
KEY_TITLE_WIDTH = 140  # pixels "key (position · token)" takes at the axis title's font


def heatmap_columns(n_heads: int, n_keys: int = 1, width: int = MAIN_WIDTH) -> int:
    """Heatmaps per row: every head of a layer when there are at most HEATMAPS_PER_ROW and they fit `width` at the
    smallest cell, else the largest divisor of n_heads that does (8 heads: rows of 4), so each row holds heads of
    one layer; 1 when even one hardly fits."""

    def fits(c: int) -> bool:
        return HEATMAP_Y_AXIS + c * n_keys * HEATMAP_CELL[0] + (c - 1) * HEATMAP_SPACING <= width

    limit = min(max(n_heads, 1), HEATMAPS_PER_ROW)
    return next((c for c in range(limit, 1, -1) if n_heads % c == 0 and fits(c)), 1)


@memo_chart
def attention_heatmaps(df: pd.DataFrame, width: int = MAIN_WIDTH) -> alt.FacetChart:
    """ui.frames.attention_frame rows -> one heatmap per layer and head, layer by layer, as many to a row as fit
    `width` (the main area; at most HEATMAPS_PER_ROW, 8 heads wrap into two rows of 4), each titled
    'layer l · head h', the colour legend (weight 0 to 1) above them, so nothing runs off the page at the right."""
    keys = list(df.sort_values("key")["key_label"].unique())
    queries = list(df.sort_values("query")["query_label"].unique())
    n_keys = max(len(keys), 1)
    columns = heatmap_columns(df["head"].nunique(), n_keys, width)
    room = (width - HEATMAP_Y_AXIS - (columns - 1) * HEATMAP_SPACING) // (columns * n_keys)
    cell = min(max(room, HEATMAP_CELL[0]), HEATMAP_CELL[1])
    size = cell * n_keys
    axis = {"labelOverlap": False, "labelFontSize": 9 if cell < 16 else 11}  # every row and column named
    # under each panel: the long title would run into the next panel's below a panel narrower than it (3 keys)
    key_title = "key (position · token)" if size >= KEY_TITLE_WIDTH else "key"
    panels = df.assign(panel="layer " + df["layer"].astype(str) + " · head " + df["head"].astype(str))
    order = list(dict.fromkeys(panels.sort_values(["layer", "head"], kind="stable")["panel"]))
    legend = alt.Legend(orient="top", direction="horizontal", gradientLength=160, title="attention weight")
    return (
        alt.Chart(panels)
        .mark_rect(stroke="white", strokeWidth=0.5)
        .encode(
            x=alt.X("key_label:O", sort=keys, title=key_title, axis=alt.Axis(labelAngle=-90, **axis)),
            y=alt.Y("query_label:O", sort=queries, title="query (position · token)", axis=alt.Axis(**axis)),
            color=alt.Color("weight:Q", scale=WEIGHTS, title="weight", legend=legend),
            tooltip=[
                alt.Tooltip("layer:O"),
                alt.Tooltip("head:O"),
                alt.Tooltip("query:O", title="query position"),
                alt.Tooltip("query_token:N", title="query token"),
                alt.Tooltip("key:O", title="key position"),
                alt.Tooltip("key_token:N", title="key token"),
                alt.Tooltip("weight:Q", format=".3f"),
            ],
        )
        .properties(width=size, height=size)
        .facet(
            facet=alt.Facet("panel:N", sort=order, header=alt.Header(labelFontSize=13), title=None),
            columns=columns,
            spacing=HEATMAP_SPACING,
        )
    )


@memo_chart
def head_effects(df: pd.DataFrame) -> alt.Chart:
    """Columns head, mean max weight, drop: per head, how sharp its weights look beside what zeroing it costs."""
    measures = {"mean max weight": "mean max weight (how sharp it looks)", "drop": "per-seq accuracy lost when zeroed"}
    long = df.melt(id_vars="head", value_vars=list(measures), var_name="measure", value_name="value")
    long["measure"] = long["measure"].map(measures)
    low = min(0.0, float(long["value"].min())) if len(long) else 0.0
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("head:N", title=None, sort=list(df["head"]), axis=alt.Axis(labelAngle=0)),
            xOffset=alt.XOffset("measure:N", sort=list(measures.values())),
            y=alt.Y("value:Q", title=None, scale=alt.Scale(domain=[low, 1])),
            color=alt.Color(
                "measure:N",
                title=None,
                scale=alt.Scale(domain=list(measures.values()), range=[WEIGHT_COLOR, SEQUENCE_COLOR]),
                legend=alt.Legend(orient="bottom", direction="vertical", labelLimit=400),
            ),
            tooltip=["head:N", "measure:N", alt.Tooltip("value:Q", format=".3f")],
        )
        .properties(height=260)
    )


STEP_CHARTS_Y_EXTENT = 45  # pixels of y axis labels on both step charts, so their step axes line up


def _step_axis(steps: int) -> alt.X:
    """Training steps 1..steps on a log scale: the snapshots are spaced evenly on it, and the early fall shows."""
    scale = alt.Scale(type="log", domain=[1, steps], nice=False)
    return alt.X("step:Q", title="training step (log scale)", scale=scale, axis=alt.Axis(format=",d"))


def _step_rule(step: int, steps: int) -> alt.Chart:
    """A vertical line at `step` (the training step chosen on the page)."""
    rule = alt.Chart(pd.DataFrame({"step": [step]})).mark_rule(color=BASE_COLOR, strokeDash=[4, 3])
    return rule.encode(x=_step_axis(steps))


def live_loss_curve(df: pd.DataFrame, steps: int, height: int = 240) -> alt.Chart:
    """The loss so far (columns step, loss) on the axes of loss_curve_at, both log: the curve grows into the whole
    run's step axis, and looks the same while training as after."""
    return (
        alt.Chart(df)
        .mark_line(color=TOKEN_COLOR, strokeWidth=1.8)
        .encode(
            x=_step_axis(steps),
            y=_loss_axis(True).axis(minExtent=STEP_CHARTS_Y_EXTENT),
            tooltip=[alt.Tooltip("step:Q"), alt.Tooltip("loss:Q", format=".4g")],
        )
        .properties(height=height)
    )


def loss_curve_at(df: pd.DataFrame, step: int, steps: int, height: int = 240) -> alt.LayerChart:
    """The loss (columns step, loss) over steps 1..steps on a log step axis, a dashed marker at `step`: the live
    curve's chart, finished."""
    return alt.layer(live_loss_curve(df, steps, height), _step_rule(step, steps)).properties(height=height)


def learning_rate_curve(df: pd.DataFrame, step: int, steps: int, height: int = 190) -> alt.LayerChart:
    """The learning rate of each step (columns step, lr: ui.frames.schedule_frame) on the step axis of
    loss_curve_at, with the same marker at `step`, so it reads under the loss curve. Ticks at 0, half the peak
    and the peak, written as the lab writes rates (3e-3, lab.formats.learning_rate); `height` is the whole chart
    (Streamlit fits the axes into it), so the plot keeps about 110 px and the y title its length."""
    peak = float(df["lr"].max())
    ticks = {0.0: "0"} | {v: formats.learning_rate(float(f"{v:.3g}")) for v in (peak / 2, peak) if v > 0}
    axis = labelled_axis(ticks, minExtent=STEP_CHARTS_Y_EXTENT)
    line = (
        alt.Chart(df)
        .mark_line(color=BASE_COLOR, strokeWidth=1.5)
        .encode(
            x=_step_axis(steps),
            y=alt.Y("lr:Q", title="learning rate", axis=axis),
            tooltip=[alt.Tooltip("step:Q"), alt.Tooltip("lr:Q", format=".3g")],
        )
    )
    return alt.layer(line, _step_rule(step, steps)).properties(height=height)


def snapshot_accuracy(df: pd.DataFrame, step: int, steps: int, height: int = 200) -> alt.LayerChart:
    """Columns step, metric, accuracy (ui.frames.snapshot_frame): one line per metric with a point per snapshot,
    on the step axis of loss_curve_at, with the same marker at `step`."""
    lines = (
        alt.Chart(df)
        .mark_line(point=True, strokeWidth=1.8)
        .encode(
            x=_step_axis(steps),
            y=alt.Y("accuracy:Q", title="accuracy", scale=alt.Scale(domain=[0, 1])).axis(
                minExtent=STEP_CHARTS_Y_EXTENT
            ),
            color=alt.Color("metric:N", title=None, scale=METRICS, legend=alt.Legend(orient="top-left")),
            tooltip=["step:Q", "metric:N", alt.Tooltip("accuracy:Q", format=".3f")],
        )
    )
    return alt.layer(lines, _step_rule(step, steps)).properties(height=height)  # a bottom legend would squash it


@memo_chart
def length_curves(
    df: pd.DataFrame, trained: int, longest: int, columns: int = 4, trained_range: tuple[int, int] | None = None
) -> alt.FacetChart:
    """Columns encoding, length, metric, mean, min, max, seeds (ui.frames.length_frame): per encoding a panel,
    per metric the mean over seeds with a min-max band (per-token blue, per-sequence orange: no legend, which a
    facet squeezes out; the page names them); a dashed rule at the trained length. The x axis runs
    to `longest` (the longest length tested), so a length without a number shows as a gap. With trained_range
    (MIN, MAX) the lengths trained on are shaded grey, the rule at MAX."""
    scale = alt.Scale(domain=[0, longest], nice=False)
    x = alt.X("length:Q", title="test length L′", scale=scale, axis=alt.Axis(tickMinStep=1))
    y = alt.Y("mean:Q", title="accuracy", **accuracy_axis(0.0))  # a point at 0 sits above the axis, not on it
    color = alt.Color("metric:N", title=None, scale=METRICS, legend=None)  # named in the caption
    tooltip = ["encoding:N", "length:Q", "metric:N", alt.Tooltip("mean:Q", format=".3f")]
    tooltip += [alt.Tooltip("min:Q", format=".3f"), alt.Tooltip("max:Q", format=".3f"), "seeds:Q"]
    shade = alt.Fill("metric:N", scale=METRICS, legend=None)  # fill, not color: the lines' legend stays whole
    band = alt.Chart().mark_area(opacity=0.2).encode(x=x, y="min:Q", y2="max:Q", fill=shade)
    line = alt.Chart().mark_line(point=True, strokeWidth=1.8).encode(x=x, y=y, color=color, tooltip=tooltip)
    rule = alt.Chart().mark_rule(color=BASE_COLOR, strokeDash=[4, 3]).encode(x=alt.datum(trained))
    encodings = list(dict.fromkeys(df["encoding"]))
    layers = [band, line, rule]
    if trained_range is not None:
        lo, hi = trained_range
        one_row = alt.Chart().transform_aggregate(n="count()")  # one rectangle per panel, not one per data row
        shaded = one_row.mark_rect(opacity=0.12, color=BASE_COLOR).encode(x=alt.datum(lo), x2=alt.datum(hi))
        layers.insert(0, shaded)
    return (
        alt.layer(*layers, data=df)
        .properties(
            width=panel_width(min(columns, len(encodings)), y_axis=95) if len(encodings) > 1 else 520, height=220
        )
        .facet(facet=alt.Facet("encoding:N", title=None, sort=encodings), columns=columns, spacing=FACET_SPACING)
    )
