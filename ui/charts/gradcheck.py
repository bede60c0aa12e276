"""Frames and charts of the Gradient check page: deviations per tensor and ε; no streamlit."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from lab import formats
from lab.limits import Cap, declare
from ui.charts.base import BAD, BASE_COLOR, GOOD, VARIANT_COLORS
from ui.charts.memo import memo_chart

# the Gradient check page's cap (lab.limits: read by name, ATTNLAB_<NAME> or [limits] as every cap)
(COORDS,) = declare(Cap("max_gradcheck_coords", 64, "Gradient check: sampled coordinates per tensor"))

NORM_LABELS = {"pre": "pre-LN", "post": "post-LN"}
PASS_MARK = 1e-4  # a usual bar for a passing check at eps = 1e-6
CLEARLY_WORSE = 2.0  # the large eps counts as worse when its worst deviation is this many times the small one's


def eps_label(eps: float) -> str:
    return f"ε = {formats.scientific(eps, 1)}"


def gradcheck_table(rows: list[dict]) -> pd.DataFrame:
    """gradcheck rows -> one row per tensor (model order), a column per (norm, ε), and coordinates checked."""
    df = pd.DataFrame(rows)
    df["column"] = df["norm"].map(NORM_LABELS) + ", " + df["eps"].map(eps_label)
    table = df.pivot_table(index="tensor", columns="column", values="max_rel_dev", sort=False, dropna=False)
    checked = df.groupby("tensor", sort=False)["n_checked"].first()
    order = list(dict.fromkeys(df["tensor"]))
    columns = list(dict.fromkeys(df["column"]))
    return table.loc[order, columns].assign(checked=checked.loc[order]).reset_index()


@memo_chart
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
        .properties(width=250, height=16 * df["tensor"].nunique())  # two facets and the legend fit 1,280 px
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
