"""Frames and charts of the Scaling page: the √d_k statistics of attncore.mechanisms.demos as a table and one
chart per statistic; no streamlit.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from lab.limits import Cap, declare
from ui.charts.base import BAD, BASE_COLOR, GOOD
from ui.charts.memo import memo_chart

# the Scaling page's cap (lab.limits: read by name, ATTNLAB_<NAME> or [limits] as every cap)
(DRAWS,) = declare(Cap("max_scaling_draws", 10**8, "Scaling: Σd_k · T · repetitions of one draw"))

SCALED, UNSCALED = "q·k / √d_k", "q·k"
SCALING = alt.Scale(domain=[SCALED, UNSCALED], range=[GOOD, BAD])


STATISTICS = {  # row key -> (label, its limit in the row, the limit's name)
    "sensitivity": ("sensitivity Σp(1−p)", "max_sensitivity", "1 − 1/T"),
    "entropy": ("entropy (nats)", "max_entropy", "ln T"),
    "mean_max_weight": ("mean max weight", "min_max_weight", "1/T"),
}


LIMIT_BELOW = {"mean_max_weight"}  # statistics whose limit is a minimum: the data lie above it
LABEL_BAND = 0.2  # the share of the data's span kept free beside a limit for its label


# Digits per column of scaling_table (the others: 4): variances and sds to a few percent of their theory at a
# glance, and the table fits a 1,280 px window.
TABLE_FORMATS = {"Var(q·k)": "%.2f", "theory d_k": "%.0f", "sd(scores)": "%.3f", "theory sd": "%.3f"}


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


@memo_chart
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
    # the limit's label on the side of its rule away from the data (below a minimum, above a maximum), in a band
    # of the plot kept free for it, so it never sits on a series (the '1/T' label lay on the blue one)
    below = statistic in LIMIT_BELOW
    ends = [*df["low"], *df["high"], *df["limit"]]
    lo, hi = min(ends), max(ends)
    pad = LABEL_BAND * ((hi - lo) or 1.0)
    domain = [lo - pad, hi] if below else [lo, hi + pad]
    axis = alt.Axis(labelExpr="datum.value < 0 ? '' : datum.label")  # a weight, entropy or sensitivity is >= 0
    y = alt.Y("value:Q", title=label, scale=alt.Scale(domain=domain, nice=False, zero=False), axis=axis)
    base = alt.Chart(df).encode(x=x, color=color)
    line = base.mark_line(point=alt.OverlayMarkDef(size=60)).encode(y=y, tooltip=tooltip)
    bars = base.mark_rule(strokeWidth=2).encode(y="low:Q", y2="high:Q")
    limit = df.head(1)
    rule = alt.Chart(limit).mark_rule(color=BASE_COLOR, strokeDash=[6, 4]).encode(y="limit:Q")
    text = (
        alt.Chart(limit.assign(text=limit["limit_name"] + " = " + limit["limit"].map("{:.4f}".format)))
        .mark_text(align="left", dx=4, dy=9 if below else -7, color=BASE_COLOR)
        .encode(y="limit:Q", x=alt.value(0), text="text:N")
    )
    return alt.layer(bars, line, rule, text).properties(height=height)
