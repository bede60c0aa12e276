"""The app's palette and the building blocks its charts share (heatmaps with readable ticks).

One palette for the whole app: per-token accuracy blue, per-sequence orange, the base run black, the healthy
case blue and the broken or unscaled one orange, attention weights on a single-hue scale fixed to [0, 1].
"""

from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from ui.charts.memo import memo_chart

TOKEN_COLOR = "#4C78A8"
SEQUENCE_COLOR = "#F58518"
BASE_COLOR = "#222222"
SEED_COLORS = ["#72B7B2", "#B279A2", "#9D755D", "#EECA3B", "#54A24B", "#FF9DA6", "#79706E", "#E45756"]
VARIANT_COLORS = ["#E45756", "#54A24B", "#B279A2", "#72B7B2", "#EECA3B", "#9D755D", "#FF9DA6", "#79706E"]
METRICS = alt.Scale(domain=["per-token", "per-sequence"], range=[TOKEN_COLOR, SEQUENCE_COLOR])
SYMBOLS = alt.Scale(domain=["all distinct", "some repeated"], range=["#54A24B", "#E45756"])
WEIGHTS = alt.Scale(domain=[0, 1], scheme="blues")
WEIGHT_COLOR = "#2171B5"  # a dark step of the heatmaps' "blues"
MAIN_WIDTH = 820  # pixels of the main area in a 1,280 px window (wide layout: less the sidebar and the padding)
Y_AXIS_WIDTH = 70  # pixels of a y axis's labels and title, left of the first panel of a facet
FACET_SPACING = 20  # Vega-Lite's default gap between facet panels
GOOD, BAD, MASKED = TOKEN_COLOR, SEQUENCE_COLOR, "#E6E6E6"
DIVERGING = alt.Scale(range=[GOOD, "#F4F4F4", BAD], domainMid=0)  # negative blue, 0 pale, positive orange


def diverging(values) -> alt.Scale:
    """DIVERGING on a domain symmetric about 0 (±the largest magnitude): 0 is pale whatever the data's range,
    and Vega never warns 'domainMid exceeds domain min or max' for a map whose values are all positive."""
    values = np.asarray(values, dtype=float)
    m = float(np.nanmax(np.abs(values))) if values.size else 1.0
    return alt.Scale(domain=[-m, m] if m > 0 else [-1, 1], range=DIVERGING.range)


PAD = alt.AutoSizeParams(type="pad", contains="padding")  # a chart's width and height are its plot area
# a chart stretched to its column: the width fits the column, the height is the plot area's (Streamlit's default
# "fit" squeezes the title, the x axis and a bottom legend into the height: 260 px left a plot of about 80)
FIT_X = alt.AutoSizeParams(type="fit-x", contains="padding")


def log_ticks(values, max_ticks: int = 8) -> list[float]:
    """Ticks of a log axis over the values' range on the 1-2-5 sequence (0.5, 1, 2, 5, 10, …), or on the powers of
    ten alone when those would be more than max_ticks; [] without a positive value."""
    positive = [float(v) for v in values if v is not None and float(v) > 0]
    if not positive:
        return []
    lo, hi = min(positive), max(positive)
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for steps in ((1, 2, 5), (1,)):
        ticks = [float(f"{m * 10.0**e:.12g}") for e in range(first, last + 1) for m in steps]
        ticks = [t for t in ticks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]
        if len(ticks) < 2 < max_ticks:  # a narrow range (0.8 to 1.25): one tick reads no value, take 1, 2, …, 9
            narrow = [float(f"{m * 10.0**e:.12g}") for e in range(first, last + 1) for m in range(1, 10)]
            ticks = [t for t in narrow if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)] or ticks
        if len(ticks) <= max_ticks:
            return ticks
    return ticks[:: -(-len(ticks) // max_ticks)]


def labelled_axis(labels: dict[float, str], **axis) -> alt.Axis:
    """An axis with ticks at exactly these values, each written as given ({0.003: '3e-3'}): Vega's number formats
    cannot write the lab's notations (lab.formats), so the labels are looked up (a relative 1e-9 match)."""
    expr = "".join(f"abs(datum.value - {v!r}) <= {abs(v) * 1e-9!r} ? {text!r} : " for v, text in labels.items())
    return alt.Axis(values=list(labels), labelExpr=expr + "''", **axis)


PHONE_WIDTH = 358  # pixels of the main area on a 390 px phone


def legend_columns(labels, width: int = PHONE_WIDTH, char: float = 6.5, symbol: int = 30) -> int:
    """Columns of a bottom legend that fit `width` (a phone's main area) at the longest label, so no entry runs
    off the chart (6 variants in 4 columns showed 4 of them at 390 px); at least 1, at most 4."""
    labels = [str(label) for label in labels]
    widest = max((len(label) for label in labels), default=1) * char + symbol
    return int(max(1, min(4, len(labels), width // widest)))


def legend_rows(labels, columns: int) -> int:
    return -(-max(len(list(labels)), 1) // max(columns, 1))


def panel_width(columns: int, total: int = MAIN_WIDTH, y_axis: int = Y_AXIS_WIDTH, spacing: int = FACET_SPACING):
    """The width of each of `columns` facet panels so that the row, with its y axis and gaps, fits `total`."""
    columns = max(1, columns)
    return (total - y_axis - spacing * (columns - 1)) // columns


def grid_frame(a: np.ndarray, axes: tuple[str, ...], value: str = "value", keep: np.ndarray | None = None):
    """An n-d array -> one row per element: a column per axis (its index) and the value; only `keep` if given."""
    a = np.asarray(a)
    index = np.indices(a.shape).reshape(a.ndim, -1)
    frame = pd.DataFrame({name: idx for name, idx in zip(axes, index, strict=True)})
    frame[value] = a.reshape(-1)
    if keep is not None:
        frame = frame[np.broadcast_to(keep, a.shape).reshape(-1)].reset_index(drop=True)
    return frame


def tick_values(column: pd.Series, max_labels: int = 16):
    """Every value of an ordinal axis when there are few; else every k-th (the first kept), so that 32 positions
    get 8 labels rather than 32 overlapping ones. Undefined (all values) up to max_labels."""
    values = sorted(pd.unique(column))
    if len(values) <= max_labels:
        return alt.Undefined
    step = -(-len(values) // (max_labels // 2))  # about max_labels / 2 labels
    return [v.item() if hasattr(v, "item") else v for v in values[::step]]


@memo_chart
def heatmap(
    df: pd.DataFrame,
    x: str,
    y: str,
    value: str = "weight",
    *,
    scale: alt.Scale = WEIGHTS,
    text_format: str | None = ".2f",
    cell: int | tuple[int, int] = 34,
    facet: str | None = None,
    title: str | None = None,
    legend: bool | str = True,
    fixed_size: bool = True,
) -> alt.Chart:
    """Cells coloured by `value` (nominal if it is a string column), optionally labelled, faceted by a column.

    legend is True (at the right), False (none) or where it goes ('top', 'bottom': horizontal, taking no width, so a
    heatmap in a narrow column keeps its legend in view).
    cell is the side of a cell in pixels, or (width, height) of a cell; fixed_size keeps it so in Streamlit
    (whose default autosize "fit" squeezes axes and legend into width x height); False inside a concatenation.
    """
    n_x, n_y = df[x].nunique(), df[y].nunique()
    cell_x, cell_y = (cell, cell) if isinstance(cell, int) else cell
    kind = "Q" if pd.api.types.is_numeric_dtype(df[value]) else "N"
    enc = dict(
        x=alt.X(f"{x}:O", title=x, axis=alt.Axis(labelAngle=0, values=tick_values(df[x]))),
        y=alt.Y(f"{y}:O", title=y, axis=alt.Axis(values=tick_values(df[y]))),
    )
    if isinstance(legend, str):
        legend_ = alt.Legend(orient=legend, direction="horizontal", gradientLength=160)
    else:
        legend_ = alt.Legend() if legend else None
    rect = (
        alt.Chart()
        .mark_rect(stroke="white", strokeWidth=1)
        .encode(
            color=alt.Color(f"{value}:{kind}", scale=scale, title=value, legend=legend_),
            tooltip=list(df.columns),
            **enc,
        )
    )
    layers = [rect]
    if text_format and kind == "Q":
        contrast = alt.condition(f"abs(datum['{value}']) > 0.6", alt.value("white"), alt.value(BASE_COLOR))
        text = alt.Chart().mark_text(fontSize=10).encode(text=alt.Text(f"{value}:Q", format=text_format), **enc)
        layers.append(text.encode(color=contrast))
    chart = alt.layer(*layers, data=df).properties(width=cell_x * n_x, height=cell_y * n_y)
    if facet:  # as many panels to a row as fit the main area (with the axis and a legend): more wrap below
        header = alt.Header(labelExpr=f"'{facet} ' + datum.value", labelFontSize=12)
        columns = max(1, (MAIN_WIDTH - Y_AXIS_WIDTH - 80) // (cell_x * n_x + FACET_SPACING))
        return chart.facet(facet=alt.Facet(f"{facet}:O", header=header, title=None), columns=columns)
    if fixed_size:
        chart = chart.properties(autosize=PAD)
    return chart.properties(title=title) if title else chart
