"""Charts of the Regimes page as pure functions: lab.experiments.regimes / attncore.interpret.norms frames in,
alt.Chart out. The baseline variant is black, the others the variant colours in order; every chart is sized to fit a
1,280 px main area (facets at most three to a row)."""

from __future__ import annotations

import altair as alt
import pandas as pd

from lab import formats
from ui.charts.base import BASE_COLOR, PAD, VARIANT_COLORS, diverging, labelled_axis, log_ticks, panel_width
from ui.charts.memo import memo_chart

METRIC_TITLES = {"test_loss": "test loss", "sequence_accuracy": "per-sequence accuracy"}
MATRIX_NAMES = {"attn_in": "attention in (W_QKV)", "attn_out": "attention out (W_O)", "ffn_in": "FFN in (W₁)"}
MATRIX_NAMES |= {"ffn_out": "FFN out (W₂)"}


def _variant_colors(variants: list[str]) -> alt.Scale:
    return alt.Scale(domain=variants, range=[BASE_COLOR, *VARIANT_COLORS][: len(variants)])


def _legend() -> alt.Legend:
    return alt.Legend(orient="bottom", title=None, labelLimit=240)


def _cell_axis(x: str, values) -> alt.Axis:
    """Ticks at the cells' own values only: the d_k trained (8, 32, 64, not 10 … 60), the learning rates as the
    lab writes them (3e-3)."""
    values = sorted({float(v) for v in values})
    if x == "lr":
        return labelled_axis({v: formats.learning_rate(v) for v in values})
    return alt.Axis(values=values, format="d")


@memo_chart
def verdict_grid(rows: pd.DataFrame, x: str, y: str, x_title: str, y_title: str) -> alt.Chart:
    """experiments.regimes.table rows of one metric: a cell per (x, y) coloured by the mean Δ (variant minus baseline;
    diverging, 0 pale) with the verdict written in it."""
    df = rows.assign(
        verdict_short=rows["verdict"]
        .map({"difference shown": "shown", "no difference shown": "not shown", "too few seeds": "too few seeds"})
        .fillna("identical"),
        delta=rows["delta_mean"].astype(float),
    )
    x_axis = alt.Axis(labelAngle=0)
    if x == "lr":  # rates as the lab writes them (3e-3), not 0.003
        x_axis = labelled_axis({float(v): formats.learning_rate(float(v)) for v in df[x].unique()}, labelAngle=0)
    enc = dict(
        x=alt.X(f"{x}:O", title=x_title, axis=x_axis),
        y=alt.Y(f"{y}:O", title=y_title or None, axis=alt.Axis(labelLimit=220)),
    )
    tooltip = [x, y] + [alt.Tooltip(f"{c}:Q", format=".3~g") for c in ("baseline_mean", "variant_mean", "delta")]
    tooltip += [alt.Tooltip(f"{c}:Q", format=".3~g") for c in ("ci_low", "ci_high")]
    tooltip += [alt.Tooltip("p_value:Q", format=".4~g"), "verdict"]  # as the CLI: 3 digits, p 0.03125
    rect = (
        alt.Chart()
        .mark_rect(stroke="white", strokeWidth=2)
        .encode(
            color=alt.Color("delta:Q", scale=diverging(df["delta"]), title="mean Δ", legend=alt.Legend(orient="right")),
            tooltip=tooltip,
            **enc,
        )
    )
    text = alt.Chart().mark_text(fontSize=12, color=BASE_COLOR).encode(text="verdict_short:N", **enc)
    n_x, n_y = df[x].nunique(), df[y].nunique()
    size = {"width": min(130 * n_x, 600), "height": 46 * n_y, "autosize": PAD}  # its own size: not squeezed
    return alt.layer(rect, text, data=df).properties(**size)


@memo_chart
def against(frame: pd.DataFrame, x: str, x_title: str, *, log_x: bool = False, log_y: bool = False) -> alt.Chart:
    """experiments.regimes.by_variant rows: for each metric a panel, each variant's mean over seeds as a line with dots
    and its min-max over seeds as a band, against the cells' `x`."""
    variants = list(dict.fromkeys(frame["variant"]))
    scale_x = alt.Scale(type="log", base=2 if x == "d_k" else 10, nice=False) if log_x else alt.Scale(zero=False)
    panels = []
    for metric, title in METRIC_TITLES.items():
        df = frame[frame["metric"] == metric].assign(band=lambda d: d["variant"])  # see below
        if df.empty:
            continue
        log = log_y and metric == "test_loss"
        y_scale = alt.Scale(type="log") if log else alt.Scale(zero=False)
        y_axis = alt.Axis(values=log_ticks([*df["min"], *df["max"]]), format="~g") if log else alt.Axis()
        ex = alt.X(f"{x}:Q", title=x_title, scale=scale_x, axis=_cell_axis(x, df[x]))
        color = alt.Color("variant:N", scale=_variant_colors(variants), sort=variants, legend=_legend())
        # the band fills by a copy of the variant, so its scale (no legend) is not merged with the lines' legend
        fill = alt.Fill("band:N", scale=_variant_colors(variants), sort=variants, legend=None)
        band = (
            alt.Chart(df).mark_area(opacity=0.15).encode(x=ex, y=alt.Y("min:Q", scale=y_scale), y2="max:Q", fill=fill)
        )
        tooltip = [x, "variant", alt.Tooltip("mean:Q", format=".4g"), alt.Tooltip("min:Q", format=".4g")]
        tooltip += [alt.Tooltip("max:Q", format=".4g"), alt.Tooltip("n:Q", title="seeds")]
        y = alt.Y("mean:Q", title=f"{title} (mean over seeds)", scale=y_scale, axis=y_axis)
        line = alt.Chart(df).mark_line(point=True).encode(x=ex, y=y, color=color, tooltip=tooltip)
        layered = alt.layer(band, line).resolve_legend(fill="independent")  # merged, the fill's None dropped both
        panels.append(layered.properties(width=panel_width(2) - 40, height=240))
    return alt.hconcat(*panels)


def norms_frame(by_setting: dict[tuple[str, int], dict]) -> pd.DataFrame:
    """{(norm, depth): attncore.interpret.norms.measure output} -> long rows: norm, depth, block (1-based, from
    the input), matrix, grad_norm, spread."""
    rows = []
    for (norm, depth), figures in by_setting.items():
        for b in figures["blocks"]:
            for matrix, value in b["grad_norm"].items():
                spread = b["grad_norm_spread"][matrix]
                rows.append({"norm": norm, "depth": depth, "block": b["block"] + 1, "matrix": matrix,
                             "grad_norm": value, "spread": spread})  # fmt: skip
    return pd.DataFrame(rows)


@memo_chart
def grad_norms(df: pd.DataFrame, matrix: str = "ffn_out") -> alt.Chart:
    """One matrix's gradient norm at initialisation against the block (1 = nearest the input), pre-LN black and
    post-LN coloured, a panel per depth (Xiong et al. 2020, Fig. 3)."""
    df = df[df["matrix"] == matrix]
    norms = ["pre-LN", "post-LN"]
    df = df.assign(variant=df["norm"].map({"pre": "pre-LN", "post": "post-LN"}))
    color = alt.Color("variant:N", scale=_variant_colors(norms), sort=norms, legend=_legend())
    tooltip = [
        "variant",
        "depth",
        "block",
        alt.Tooltip("grad_norm:Q", format=".3g"),
        alt.Tooltip("spread:Q", format=".2g"),
    ]
    chart = (
        alt.Chart()
        .mark_line(point=True)
        .encode(
            x=alt.X("block:O", title="block (1 = nearest the input)", axis=alt.Axis(labelAngle=0)),
            y=alt.Y(
                "grad_norm:Q",
                title=f"‖∂L/∂W‖ of {MATRIX_NAMES[matrix]}",
                scale=alt.Scale(type="log"),
                axis=alt.Axis(values=log_ticks(df["grad_norm"]), format="~g"),
            ),  # 1-2-5, not 0.3 / 4
            color=color,
            tooltip=tooltip,
        )
        .properties(width=panel_width(min(3, df["depth"].nunique())), height=220)
    )
    header = alt.Header(labelExpr="datum.value + ' blocks'", labelFontSize=12)
    faceted = alt.layer(chart, data=df).facet(column=alt.Column("depth:O", header=header, title=None), columns=3)
    return faceted.resolve_scale(x="independent")  # each panel's blocks only


@memo_chart
def attention_by_size(df: pd.DataFrame) -> alt.Chart:
    """ui.regimes_view.attention_after rows: the attention entropy and the saturated share against d_k, each
    variant a colour, at initialisation dashed with triangles and after training solid with dots."""
    variants = list(dict.fromkeys(df["variant"]))
    color = alt.Color("variant:N", scale=_variant_colors(variants), sort=variants, legend=_legend())
    when = ["at initialisation", "after training"]
    # the two times told apart by dash and by point shape, one legend for both: a legend of dashes alone drew two
    # identical symbols
    legend = alt.Legend(orient="bottom", title=None, symbolFillColor=BASE_COLOR, symbolStrokeWidth=0)
    dash = alt.StrokeDash("when:N", sort=when, scale=alt.Scale(domain=when, range=[[5, 4], [1, 0]]), legend=legend)
    shape = alt.Shape("when:N", sort=when, scale=alt.Scale(domain=when, range=["triangle-up", "circle"]), legend=legend)
    scale = alt.Scale(type="log", base=2, nice=False)
    x = alt.X("d_k:Q", title="head size d_k", scale=scale, axis=_cell_axis("d_k", df["d_k"]))
    panels = []
    for field, title in (("entropy", "attention entropy (nats)"), ("saturated", "share of saturated rows")):
        tooltip = ["variant", "when", "d_k", alt.Tooltip(f"{field}:Q", format=".3g")]
        panels.append(
            alt.Chart(df)
            .mark_line(point=True)
            .encode(x=x, y=alt.Y(f"{field}:Q", title=title), color=color, strokeDash=dash, shape=shape, tooltip=tooltip)
            .properties(width=panel_width(2) - 40, height=220)
        )
    return alt.hconcat(*panels)


NORM_FIGURES = {  # the figures a record stores at each snapshot (attncore.interpret.norms), as the panels name them
    "grad_norm": "‖∂L/∂W₂‖ of the FFN out matrix",
    "residual_norm": "residual norm after the block",
    "max_logit": "largest |q·k|/scale",
    "entropy": "attention entropy (nats)",
}


def snapshot_norms_frame(snapshots: list[dict]) -> pd.DataFrame:
    """A record's norms (one dict per snapshot) -> long rows: step, block (numbered from 0 at the input, as the
    Patching page and the heads' names L0H0 number them), figure, value."""
    rows = []
    for s in snapshots:
        for b in s["blocks"]:
            i = b["block"]
            values = {"grad_norm": b["grad_norm"]["ffn_out"], "residual_norm": b["residual_norm"]}
            values |= {k: s[k][i] for k in ("max_logit", "entropy")}
            rows += [{"step": s["step"], "block": i, "figure": k, "value": v} for k, v in values.items()]
    return pd.DataFrame(rows, columns=["step", "block", "figure", "value"])


@memo_chart
def snapshot_norms(df: pd.DataFrame) -> alt.Chart:
    """snapshot_norms_frame rows: a panel per figure (two to a row), each block a line against the step (both
    log scales but the entropy's), from light (nearest the input) to dark (nearest the output)."""
    blocks = sorted(df["block"].unique())
    color = alt.Color(
        "block:O", scale=alt.Scale(scheme="viridis", reverse=True), sort=blocks, legend=alt.Legend(orient="right")
    )
    x = alt.X("step:Q", title="training step (log scale)", scale=alt.Scale(type="log", nice=False))
    panels = []
    for figure, title in NORM_FIGURES.items():
        part = df[(df["figure"] == figure) & (df["value"] > 0)] if figure != "entropy" else df[df["figure"] == figure]
        y_scale = alt.Scale(type="log") if figure in ("grad_norm", "max_logit") else alt.Scale(zero=False)
        tooltip = ["block", "step", alt.Tooltip("value:Q", title=title, format=".3g")]
        panels.append(
            alt.Chart(part)
            .mark_line(point=alt.OverlayMarkDef(size=18))
            .encode(x=x, y=alt.Y("value:Q", title=title, scale=y_scale), color=color, tooltip=tooltip)
            .properties(width=panel_width(2) - 75, height=190)  # each panel has its own y axis
        )
    return alt.vconcat(alt.hconcat(*panels[:2]), alt.hconcat(*panels[2:]))


@memo_chart
def logit_growth(df: pd.DataFrame) -> alt.Chart:
    """ui.regimes_view.logits_over_training rows (variant, d_k, step, max_logit): the largest attention logit
    over the layers against the step, a line per d_k, a panel per variant (shared y: the panels compare)."""
    sizes = sorted(df["d_k"].unique())
    color = alt.Color("d_k:O", title="d_k", scale=alt.Scale(scheme="viridis", reverse=True), sort=sizes)
    tooltip = ["variant", "d_k", "step", alt.Tooltip("max_logit:Q", format=".3g")]
    chart = (
        alt.Chart()
        .mark_line(point=alt.OverlayMarkDef(size=18))
        .encode(
            x=alt.X("step:Q", title="training step (log scale)", scale=alt.Scale(type="log", nice=False)),
            y=alt.Y("max_logit:Q", title="largest |q·k|/scale (log scale)", scale=alt.Scale(type="log")),
            color=color,
            tooltip=tooltip,
        )
        .properties(width=panel_width(2) - 45, height=220)  # room for the legend
    )
    variants = list(dict.fromkeys(df["variant"]))
    column = alt.Column("variant:N", sort=variants, title=None, header=alt.Header(labelFontSize=12))
    return alt.layer(chart, data=df).facet(column=column)


TRAINING_FIGURES = {"max_logit": "largest |q·k|/scale (log scale)", "entropy": "lowest attention entropy (nats)"}


@memo_chart
def attention_over_training(df: pd.DataFrame, figure: str) -> alt.Chart:
    """stability.over_training rows (variant, lr, step, seeds, max_logit, entropy): one figure against the step,
    a line per learning rate (light: small, dark: large), a panel per variant (shared y: the panels compare)."""
    lrs = sorted(df["lr"].unique())
    df = df[df[figure] > 0] if figure == "max_logit" else df  # a log scale
    df = df.assign(rate=[formats.learning_rate(x) for x in df["lr"]])
    rates = [formats.learning_rate(x) for x in lrs]
    color = alt.Color("rate:O", title="lr", scale=alt.Scale(scheme="viridis", reverse=True), sort=rates)
    y_scale = alt.Scale(type="log") if figure == "max_logit" else alt.Scale(zero=True)
    tooltip = ["variant", "rate", "step", alt.Tooltip(f"{figure}:Q", format=".3g"), alt.Tooltip("seeds:Q")]
    variants = list(dict.fromkeys(df["variant"]))
    chart = (
        alt.Chart()
        .mark_line(point=alt.OverlayMarkDef(size=14))
        .encode(
            x=alt.X("step:Q", title="training step (log scale)", scale=alt.Scale(type="log", nice=False)),
            y=alt.Y(f"{figure}:Q", title=TRAINING_FIGURES[figure], scale=y_scale),
            color=color,
            tooltip=tooltip,
        )
        .properties(width=panel_width(max(1, len(variants))) - 30, height=200)  # room for the legend
    )
    column = alt.Column("variant:N", sort=variants, title=None, header=alt.Header(labelFontSize=12))
    return alt.layer(chart, data=df).facet(column=column)


@memo_chart
def sensitivity_intervals(df: pd.DataFrame) -> alt.Chart:
    """stability.sensitivity_table rows: per variant (a row), each seed's own LR sensitivity (small dots), their
    mean (a large dot) with its interval (a bar), and Wortsman et al.'s LR sensitivity of the seeds' mean curve
    (a tick)."""
    variants = list(dict.fromkeys(df["variant"]))
    row = {v: float(i) for i, v in enumerate(variants)}  # a quantitative row: the layers share one y scale
    color = alt.Color("variant:N", scale=_variant_colors(variants), sort=variants, legend=None)
    axis = labelled_axis({i: v for v, i in row.items()}, labelLimit=200, grid=False)
    y = alt.Y("row:Q", title=None, axis=axis, scale=alt.Scale(domain=[-0.5, len(variants) - 0.5], reverse=True))
    seeds = pd.DataFrame(
        [{"variant": r["variant"], "row": row[r["variant"]], "seed": s, "value": v}
         for _, r in df.iterrows() for s, v in r["seeds"].items()]
    )  # fmt: skip
    x = alt.X("value:Q", title="LR sensitivity (nats)", scale=alt.Scale(zero=True))
    dots = (
        alt.Chart(seeds)
        .mark_circle(size=30, opacity=0.5)
        .encode(x=x, y=y, color=color, tooltip=["variant", "seed", alt.Tooltip("value:Q", format=".3g")])
    )
    frame = df[["variant", "seeds_mean", "seeds_low", "seeds_high", "sensitivity"]].assign(
        row=[row[v] for v in df["variant"]]
    )
    tooltip = ["variant"] + [alt.Tooltip(f"{c}:Q", format=".3g") for c in frame.columns[1:5]]
    bar = alt.Chart(frame).mark_rule(strokeWidth=2).encode(x="seeds_low:Q", x2="seeds_high:Q", y=y, color=color)
    mean = (
        alt.Chart(frame)
        .mark_point(size=110, filled=True, opacity=1)
        .encode(x="seeds_mean:Q", y=y, color=color, tooltip=tooltip)
    )
    pooled = (
        alt.Chart(frame)
        .mark_tick(thickness=2, size=22, color=BASE_COLOR)
        .encode(x="sensitivity:Q", y=y, tooltip=tooltip)
    )
    size = {"width": panel_width(1) - 200, "height": 45 * len(variants), "autosize": PAD}  # its own size: not squeezed
    return alt.layer(bar, dots, mean, pooled).properties(**size)
