"""Frames and charts of the mechanism pages (scaling, masks, heads and position, cost, gradient check).

Pure functions, no streamlit: attncore's rows and arrays in, a DataFrame or an alt.Chart out. Colours follow
ui.charts: the healthy case blue, the broken or unscaled one orange, theory and limits black.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from attncore.config import ConfigError
from ui.charts import BASE_COLOR, SEQUENCE_COLOR, TOKEN_COLOR, VARIANT_COLORS, WEIGHTS

GOOD, BAD, MASKED = TOKEN_COLOR, SEQUENCE_COLOR, "#E6E6E6"
SCALED, UNSCALED = "q·k / √d_k", "q·k (unscaled)"
SCALING = alt.Scale(domain=[SCALED, UNSCALED], range=[GOOD, BAD])
MASK = alt.Scale(domain=["allowed", "masked"], range=[GOOD, MASKED])
DIVERGING = alt.Scale(range=[GOOD, "#F4F4F4", BAD], domainMid=0)  # negative blue, 0 pale, positive orange
PAD = alt.AutoSizeParams(type="pad", contains="padding")  # a chart's width and height are its plot area
ONE_TOL = 1e-9  # a row "sums to 1" within this


def parse_ints(text: str, field: str, max_count: int = 12) -> list[int]:
    """'5 3 0' or '5, 3, 0' -> [5, 3, 0]; ConfigError(field) for anything else (bounds are the library's)."""
    parts = text.replace(",", " ").split()
    if not parts:
        raise ConfigError(field, "type at least one whole number")
    if len(parts) > max_count:
        raise ConfigError(field, f"at most {max_count} numbers, got {len(parts)}")
    try:
        return [int(p) for p in parts]
    except ValueError:
        raise ConfigError(field, f"whole numbers separated by spaces, got {text!r}") from None


# --- scaling -----------------------------------------------------------------------------------------

STATISTICS = {  # row key -> (label, its limit in the row, the limit's name)
    "sensitivity": ("sensitivity Σp(1−p)", "max_sensitivity", "1 − 1/T"),
    "entropy": ("entropy (nats)", "max_entropy", "ln T"),
    "mean_max_weight": ("mean max weight", "min_max_weight", "1/T"),
}


def scaling_table(rows: list[dict]) -> pd.DataFrame:
    """mechanisms.scaling_statistics rows -> one display row per (d_k, scores), each theory beside its measure.

    Theory: Var(q·k) = d_k; sd of the scores 1 scaled, √d_k not; the limits of uniform weights: mean max
    weight 1/T (its minimum), entropy ln T and sensitivity 1 − 1/T (their maxima).
    """
    return pd.DataFrame(
        {
            "d_k": [r["d_k"] for r in rows],
            "scores": [SCALED if r["scaled"] else UNSCALED for r in rows],
            "Var(q·k)": [r["var_dot"] for r in rows],
            "theory d_k": [r["var_dot_theory"] for r in rows],
            "sd(scores)": [r["sd_scores"] for r in rows],
            "theory sd": [r["sd_scores_theory"] for r in rows],
            "max weight": [r["mean_max_weight"] for r in rows],
            "1/T": [r["min_max_weight"] for r in rows],
            "entropy": [r["entropy"] for r in rows],
            "ln T": [r["max_entropy"] for r in rows],
            "sensitivity": [r["sensitivity"] for r in rows],
            "1 − 1/T": [r["max_sensitivity"] for r in rows],
        }
    )


def scaling_long(rows: list[dict]) -> pd.DataFrame:
    """Columns d_k, scores, statistic, value, se, limit, limit_name: one row per (d_k, scores, statistic)."""
    out = [
        {
            "d_k": r["d_k"],
            "scores": SCALED if r["scaled"] else UNSCALED,
            "statistic": stat,
            "value": r[stat],
            "se": r[f"{stat}_se"],
            "limit": r[limit],
            "limit_name": name,
        }
        for r in rows
        for stat, (_, limit, name) in STATISTICS.items()
    ]
    frame = pd.DataFrame(out, columns=["d_k", "scores", "statistic", "value", "se", "limit", "limit_name"])
    frame["low"], frame["high"] = frame["value"] - 2 * frame["se"], frame["value"] + 2 * frame["se"]
    return frame


def statistic_chart(long: pd.DataFrame, statistic: str, height: int = 260) -> alt.LayerChart:
    """One statistic against d_k (log 2 axis), scaled blue and unscaled orange, ±2 se bars, its limit as a rule."""
    label, _, _ = STATISTICS[statistic]
    df = long[long["statistic"] == statistic]
    d_ks = sorted(int(d) for d in df["d_k"].unique())
    scale = alt.Scale(type="log", base=2, domain=[d_ks[0], d_ks[-1]] if len(d_ks) > 1 else alt.Undefined, nice=False)
    x = alt.X("d_k:Q", title="d_k (log scale)", scale=scale, axis=alt.Axis(values=d_ks))  # ticks on the d_k drawn
    color = alt.Color("scores:N", title=None, scale=SCALING, legend=alt.Legend(orient="bottom"))
    tooltip = [
        "d_k:Q",
        "scores:N",
        alt.Tooltip("value:Q", title=label, format=".4f"),
        alt.Tooltip("se:Q", format=".4f"),
    ]
    base = alt.Chart(df).encode(x=x, color=color)
    line = base.mark_line(point=alt.OverlayMarkDef(size=60)).encode(y=alt.Y("value:Q", title=label), tooltip=tooltip)
    bars = base.mark_rule(strokeWidth=2).encode(y="low:Q", y2="high:Q")
    limit = df.head(1)
    rule = alt.Chart(limit).mark_rule(color=BASE_COLOR, strokeDash=[6, 4]).encode(y="limit:Q")
    text = (
        alt.Chart(limit.assign(text=limit["limit_name"] + " = " + limit["limit"].map("{:.4f}".format)))
        .mark_text(align="left", dx=4, dy=-7, color=BASE_COLOR)
        .encode(y="limit:Q", x=alt.value(0), text="text:N")
    )
    return alt.layer(bars, line, rule, text).properties(height=height)


# --- masks -------------------------------------------------------------------------------------------


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
    legend: bool = True,
    fixed_size: bool = True,
) -> alt.Chart:
    """Cells coloured by `value` (nominal if it is a string column), optionally labelled, faceted by a column.

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
    if facet:
        header = alt.Header(labelExpr=f"'{facet} ' + datum.value", labelFontSize=12)
        return chart.facet(column=alt.Column(f"{facet}:O", header=header, title=None))
    if fixed_size:
        chart = chart.properties(autosize=PAD)
    return chart.properties(title=title) if title else chart


def mask_frame(mask: np.ndarray, axes: tuple[str, ...]) -> pd.DataFrame:
    """A boolean mask -> grid_frame with a column 'key is' = 'allowed' | 'masked'."""
    frame = grid_frame(mask, axes, "allowed")
    frame["key is"] = np.where(frame.pop("allowed"), "allowed", "masked")
    return frame


def mask_heatmap(mask: np.ndarray, axes: tuple[str, ...], cell: int = 22, facet: str | None = None) -> alt.Chart:
    """Allowed cells blue, masked ones grey."""
    return heatmap(mask_frame(mask, axes), axes[-1], axes[-2], "key is", scale=MASK, cell=cell, facet=facet)


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


def weights_with_row_sums(
    weights: np.ndarray, sums: np.ndarray, title: str, mask: np.ndarray | None = None, cell: int = 34
) -> alt.HConcatChart:
    """A (T, T) weight heatmap (cells outside `mask` blank) and beside it a bar per row: its sum against 1."""
    heat = heatmap(
        grid_frame(weights, ("query", "key"), "weight", mask), "key", "query", cell=cell, legend=False, fixed_size=False
    )
    frame = row_sum_frame(sums)
    y = alt.Y("query:O", title=None, axis=alt.Axis(labels=False, ticks=False))
    scale = alt.Scale(domain=["= 1", "≠ 1"], range=[GOOD, BAD])
    bars = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("row sum:Q", title="row sum", scale=alt.Scale(domain=[0, 1.3]), axis=alt.Axis(values=[0, 0.5, 1])),
            y=y,
            color=alt.Color("sums to 1:N", scale=scale, legend=alt.Legend(orient="bottom", title="row sum")),
            tooltip=["query:O", alt.Tooltip("row sum:Q", format=".4f")],
        )
    )
    labels = bars.mark_text(align="left", dx=3, fontSize=10, color=BASE_COLOR).encode(
        text=alt.Text("row sum:Q", format=".3f"), color=alt.value(BASE_COLOR)
    )
    one = alt.Chart(pd.DataFrame({"one": [1.0]})).mark_rule(color=BASE_COLOR, strokeDash=[4, 3]).encode(x="one:Q")
    sums_chart = alt.layer(bars, labels, one).properties(width=120, height=cell * len(frame))
    return alt.hconcat(heat, sums_chart, spacing=6).properties(title=title, autosize=PAD)


# --- heads and position ------------------------------------------------------------------------------


def param_table(rows: list[dict]) -> pd.DataFrame:
    """mechanisms.attention_param_counts rows with display names, each count beside its formula."""
    names = {"n_heads": "heads h", "d_head": "d_head = d/h", "attention_params": "attention (counted)"}
    names |= {"attention_theory": "4d² + 4d", "block_params": "block (counted)", "block_theory": "12d² + 13d"}
    return pd.DataFrame(rows).rename(columns=names)[list(names.values())]


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
                legend=alt.Legend(orient="bottom", title=None, labelLimit=300),
            ),
            tooltip=["position:N", "measure:N", alt.Tooltip("value:Q", format=".3g")],
        )
        .properties(height=height)
    )


def encoding_lines(table: np.ndarray, columns: list[int], value: str = "value", height: int = 220) -> alt.Chart:
    """Chosen columns of a (T, D) table as curves against position."""
    frame = grid_frame(np.asarray(table)[:, columns], ("position", "column"), value)
    frame["dimension"] = np.asarray(columns)[frame.pop("column")].astype(str)
    palette = [GOOD, BAD] + VARIANT_COLORS
    return (
        alt.Chart(frame)
        .mark_line(strokeWidth=2)
        .encode(
            x=alt.X("position:Q", scale=alt.Scale(domain=[0, len(table) - 1], nice=False)),  # the positions drawn
            y=alt.Y(f"{value}:Q", title=value),
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


# --- cost --------------------------------------------------------------------------------------------

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


def _log(field: str, title: str, values: list | None = None) -> dict:
    """A log axis fitted to the data; `values` puts the ticks exactly on them (e.g. the lengths T timed)."""
    spec = {"field": field, "type": "quantitative", "title": title, "scale": {"type": "log", "nice": False}}
    return spec | ({"axis": {"values": [int(v) for v in values], "format": ","}} if values is not None else {})


def time_chart(frame: pd.DataFrame, slope: float | None, height: int = 300) -> alt.LayerChart:
    """Milliseconds against T on log-log axes, with the power-law fit (a straight line) dashed."""
    x = alt.X(**_log("T", "sequence length T (log scale)", list(frame["T"])))
    y = alt.Y(**_log("ms", "milliseconds (log scale)"))
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
    return alt.layer(points, fit).properties(height=height, title=title)


def memory_chart(frame: pd.DataFrame, height: int = 300) -> alt.Chart:
    """MiB of the T × T scores (orange) against Q, K, V together (blue), log-log."""
    long = frame.melt("T", ["T × T scores (MiB)", "Q, K, V (MiB)"], var_name="tensor", value_name="MiB")
    long["tensor"] = long["tensor"].str.removesuffix(" (MiB)")
    return (
        alt.Chart(long)
        .mark_line(point=alt.OverlayMarkDef(size=60))
        .encode(
            x=alt.X(**_log("T", "sequence length T (log scale)", list(frame["T"]))),
            y=alt.Y(**_log("MiB", "MiB (log scale)")),
            color=alt.Color("tensor:N", scale=MEMORY, title=None, legend=alt.Legend(orient="bottom")),
            tooltip=["T:Q", "tensor:N", alt.Tooltip("MiB:Q", format=".3f")],
        )
        .properties(height=height, title="memory per head and sequence, float64")
    )


# --- gradient check ----------------------------------------------------------------------------------

NORM_LABELS = {"pre": "pre-LN", "post": "post-LN"}
PASS_MARK = 1e-4  # a usual bar for a passing check at eps = 1e-6
CLEARLY_WORSE = 2.0  # the large eps counts as worse when its worst deviation is this many times the small one's


def eps_label(eps: float) -> str:
    return f"ε = {eps:.0e}"


def gradcheck_table(rows: list[dict]) -> pd.DataFrame:
    """gradcheck rows -> one row per tensor (model order), a column per (norm, ε), and coordinates checked."""
    df = pd.DataFrame(rows)
    df["column"] = df["norm"].map(NORM_LABELS) + ", " + df["eps"].map(eps_label)
    table = df.pivot_table(index="tensor", columns="column", values="max_rel_dev", sort=False, dropna=False)
    checked = df.groupby("tensor", sort=False)["n_checked"].first()
    order = list(dict.fromkeys(df["tensor"]))
    columns = list(dict.fromkeys(df["column"]))
    return table.loc[order, columns].assign(checked=checked.loc[order]).reset_index()


def gradcheck_chart(rows: list[dict]) -> alt.FacetChart:
    """Max relative deviation per tensor (log axis), a colour per ε, one panel per LayerNorm placement."""
    df = pd.DataFrame(rows).dropna(subset=["max_rel_dev"])
    df["LayerNorm"] = df["norm"].map(NORM_LABELS)
    df["ε"] = df["eps"].map(eps_label)
    eps_order = [eps_label(e) for e in sorted(df["eps"].unique())]
    palette = [GOOD, BAD] + VARIANT_COLORS
    points = (
        alt.Chart()
        .mark_point(filled=True, size=70, opacity=0.9)
        .encode(
            x=alt.X(
                "max_rel_dev:Q",
                title="max relative deviation (log scale)",
                scale=alt.Scale(type="log"),
                axis=alt.Axis(format=".0e"),
            ),
            y=alt.Y("tensor:N", sort=list(dict.fromkeys(df["tensor"])), title=None, axis=alt.Axis(labelLimit=220)),
            color=alt.Color("ε:N", sort=eps_order, scale=alt.Scale(domain=eps_order, range=palette[: len(eps_order)])),
            tooltip=["LayerNorm:N", "tensor:N", "ε:N", alt.Tooltip("max_rel_dev:Q", format=".2e"), "n_checked:Q"],
        )
    )
    mark = alt.Chart().mark_rule(color=BASE_COLOR, strokeDash=[4, 3]).encode(x=alt.datum(PASS_MARK))
    return (
        alt.layer(points, mark, data=df)
        .properties(width=330, height=16 * df["tensor"].nunique())
        .facet(column=alt.Column("LayerNorm:N", sort=["pre-LN", "post-LN"], title=None))
    )


def eps_comparison(rows: list[dict]) -> list[dict]:
    """Per norm, the smallest against the largest ε: worst deviation of each, their ratio, whether the large ε is
    clearly worse (ratio > CLEARLY_WORSE) and on how many tensors it is worse at all."""
    out = []
    for norm in dict.fromkeys(r["norm"] for r in rows):
        mine = [r for r in rows if r["norm"] == norm and not np.isnan(r["max_rel_dev"])]
        eps = sorted({r["eps"] for r in mine})
        if len(eps) < 2:
            continue
        small = {r["tensor"]: r["max_rel_dev"] for r in mine if r["eps"] == eps[0]}
        large = {r["tensor"]: r["max_rel_dev"] for r in mine if r["eps"] == eps[-1]}
        both = [t for t in small if t in large]
        worst_small, worst_large = max(small.values()), max(large.values())
        out.append(
            {
                "norm": norm,
                "eps_small": eps[0],
                "eps_large": eps[-1],
                "worst_small": worst_small,
                "worst_large": worst_large,
                "ratio": worst_large / worst_small,
                "large_is_worse": worst_large > CLEARLY_WORSE * worst_small,
                "tensors_worse": sum(large[t] > small[t] for t in both),
                "tensors": len(both),
            }
        )
    return out
