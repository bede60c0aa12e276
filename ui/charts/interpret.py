"""Charts of the Patching and Explanations pages: restored fractions, the logit lens, head detection
scores and their course over training, and the attention-is-not-explanation measurements. Arrays in (from
attncore.interpret), alt.Chart out; frames are built here so each chart's input is what the library returns."""

from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from attncore.config import SEP
from ui.charts.base import BASE_COLOR, MAIN_WIDTH, PAD, SEED_COLORS, SEQUENCE_COLOR, WEIGHT_COLOR, WEIGHTS
from ui.charts.memo import memo_chart

# the app's diverging colours on a fixed domain, so a restored fraction of 1 always looks the same
RESTORED = alt.Scale(domain=[-1, 1], range=[WEIGHT_COLOR, "#F4F4F4", SEQUENCE_COLOR], clamp=True)
POSITIONS_WIDTH = MAIN_WIDTH - 200  # a chart across the positions, less its row labels and legend


def cells(df, x: str, y: str, value: str, *, scale, cell=(44, 30), x_sort=None, y_sort=None, x_title=None,
          angle=0, fmt=".2f", fixed_size=True, fit_width: int | None = None) -> alt.LayerChart:  # fmt: skip
    """A labelled heatmap with its axes in the given order (base.heatmap sorts them as text). fit_width: the
    columns narrow (and their labels shorten to one decimal) so that the cells fit that many pixels (the induction
    task's 31 positions)."""
    n_x = df[x].nunique()
    font = 10
    if fit_width and cell[0] * n_x > fit_width:
        cell = (max(16, fit_width // max(n_x, 1)), cell[1])
        fmt, font = (".1f", 9) if cell[0] < 34 else (fmt, font)
    enc = dict(
        x=alt.X(f"{x}:O", sort=x_sort or list(dict.fromkeys(df[x])), title=x_title or x,
                axis=alt.Axis(labelAngle=angle, labelLimit=240)),
        y=alt.Y(f"{y}:O", sort=y_sort or list(dict.fromkeys(df[y])), title=None, axis=alt.Axis(labelLimit=240)),
    )  # fmt: skip
    rect = (
        alt.Chart()
        .mark_rect(stroke="white", strokeWidth=1)
        .encode(color=alt.Color(f"{value}:Q", scale=scale, title=value), tooltip=list(df.columns), **enc)
    )
    contrast = alt.condition(f"abs(datum['{value}']) > 0.6", alt.value("white"), alt.value(BASE_COLOR))
    text = alt.Chart().mark_text(fontSize=font).encode(text=alt.Text(f"{value}:Q", format=fmt), color=contrast, **enc)
    n_y = df[y].nunique()
    chart = alt.layer(rect, text, data=df).properties(width=cell[0] * n_x, height=cell[1] * n_y)
    return chart.properties(autosize=PAD) if fixed_size else chart  # PAD: Streamlit keeps the cells' size


def _token(t: int, sep: bool = True) -> str:
    return "SEP" if sep and int(t) == SEP else str(int(t))


def position_labels(tokens, sep: bool = True) -> list[str]:
    """'3 · 12': position and token, the Attention page's axis labels; sep=False for a task without SEP (induction,
    whose token 20 is a token like the others)."""
    return [f"{i} · {_token(t, sep)}" for i, t in enumerate(tokens)]


def head_grid_frame(grid: np.ndarray, value: str = "restored") -> pd.DataFrame:
    """(n_layers, H) -> rows layer ('L0'), head ('H0'), value (the fraction restored, or destroyed when noising)."""
    nl, H = grid.shape
    return pd.DataFrame(
        [{"layer": f"L{i}", "head": f"H{h}", value: float(grid[i, h])} for i in range(nl) for h in range(H)]
    )


@memo_chart
def patch_heads(grid: np.ndarray, value: str = "restored") -> alt.Chart:
    """Fraction restored (or destroyed) by each head's output patched at every position: layers down, heads across."""
    return cells(head_grid_frame(grid, value), "head", "layer", value, scale=RESTORED, cell=(56, 36))


def components_frame(
    resid: np.ndarray, mlp: np.ndarray, tokens, value: str = "restored", sep: bool = True
) -> pd.DataFrame:
    """resid_by_position (n_layers, T), mlp_by_position (n_layers, T) -> rows component, position, value."""
    labels = position_labels(tokens, sep)
    rows = []
    for name, a in (("residual into block {}", resid), ("MLP of block {}", mlp)):  # y labels, in this order
        for i, row in enumerate(a):
            rows += [
                {"component": name.format(i), "position": labels[t], value: float(v)}
                for t, v in enumerate(row)
                if not np.isnan(v)
            ]
    return pd.DataFrame(rows)


@memo_chart
def patch_components(
    resid: np.ndarray, mlp: np.ndarray, tokens, value: str = "restored", sep: bool = True
) -> alt.Chart:
    """The residual stream entering each block and each MLP's output, patched at one position at a time."""
    df = components_frame(resid, mlp, tokens, value, sep)
    return cells(df, "position", "component", value, scale=RESTORED, x_sort=position_labels(tokens, sep),
                 x_title="position · token", angle=-45, fit_width=POSITIONS_WIDTH)  # fmt: skip


def head_positions_frame(by_position: np.ndarray, tokens, value: str = "restored", sep: bool = True) -> pd.DataFrame:
    """(n_layers, H, T) -> rows head ('L0H1'), position, value (NaN cells, beyond the cap, dropped)."""
    labels = position_labels(tokens, sep)
    nl, H, T = by_position.shape
    return pd.DataFrame(
        [
            {"head": f"L{i}H{h}", "position": labels[t], value: float(by_position[i, h, t])}
            for i in range(nl)
            for h in range(H)
            for t in range(T)
            if not np.isnan(by_position[i, h, t])
        ]
    )


@memo_chart
def patch_head_positions(by_position: np.ndarray, tokens, value: str = "restored", sep: bool = True) -> alt.Chart:
    """Each head's output patched at one position at a time: heads down, positions across."""
    df = head_positions_frame(by_position, tokens, value, sep)
    return cells(df, "position", "head", value, scale=RESTORED, cell=(44, 24), x_sort=position_labels(tokens, sep),
                 x_title="position · token", angle=-45, fit_width=POSITIONS_WIDTH)  # fmt: skip


LENS_INPUTS = {"probe": "this input", "test": "mean over test sequences"}


def lens_frame(found: dict[str, np.ndarray], length: int) -> pd.DataFrame:
    """{'probe': (n_layers + 1, L), 'test': ...} -> rows input, read after, answer, probability."""
    rows = []
    for key, a in found.items():
        for r, row in enumerate(a):
            after = "embedding" if r == 0 else f"block {r - 1}"
            rows += [
                {"input": LENS_INPUTS[key], "read after": after, "answer query": length + j, "p": float(p)}
                for j, p in enumerate(row)
            ]
    return pd.DataFrame(rows)


LENS_MIN_WIDTH = 170  # pixels the header "mean over test sequences" takes


@memo_chart
def logit_lens(found: dict[str, np.ndarray], length: int) -> alt.FacetChart:
    """Probability of the correct token at each answer query, read after each block; one panel per input."""
    df = lens_frame(found, length)
    probe = df[df["input"] == LENS_INPUTS["probe"]]
    # a panel at least as wide as its header and axis title: modular's one answer query made them overlap
    wide = max(44, -(-LENS_MIN_WIDTH // max(probe["answer query"].nunique(), 1)))
    chart = cells(probe, "answer query", "read after", "p", scale=WEIGHTS, cell=(wide, 30), fixed_size=False,
                  fit_width=(MAIN_WIDTH - 160) // 2)  # fmt: skip
    chart.data = alt.Undefined  # the facet below brings the data
    header = alt.Header(labelFontSize=12, labelFontWeight="bold")
    return chart.facet(
        column=alt.Column("input:N", sort=list(LENS_INPUTS.values()), header=header, title=None), data=df
    )


def scores_frame(scores: dict[str, np.ndarray]) -> pd.DataFrame:
    """{pattern: (n_layers, H)} -> rows pattern, head ('L0H1'), score."""
    return pd.DataFrame(
        [
            {"pattern": name, "head": f"L{i}H{h}", "score": float(a[i, h])}
            for name, a in scores.items()
            for i in range(a.shape[0])
            for h in range(a.shape[1])
        ]
    )


@memo_chart
def detection_scores(scores: dict[str, np.ndarray]) -> alt.Chart:
    """Share of attention on each pattern, per head: patterns down, heads across, on [0, 1]."""
    return cells(scores_frame(scores), "head", "pattern", "score", scale=WEIGHTS, cell=(46, 30))


@memo_chart
def scores_over_training(steps: np.ndarray, scores: dict[str, np.ndarray], columns: int = 2) -> alt.FacetChart:
    """{pattern: (S, n_layers, H)} against the step (log scale), one line per head, one panel per pattern."""
    rows = [
        {"pattern": name, "head": f"L{i}H{h}", "step": int(s), "score": float(a[k, i, h])}
        for name, a in scores.items()
        for k, s in enumerate(steps)
        for i in range(a.shape[1])
        for h in range(a.shape[2])
    ]
    df = pd.DataFrame(rows)
    heads = list(dict.fromkeys(df["head"]))
    return (
        alt.Chart(df)
        .mark_line(point=alt.OverlayMarkDef(size=18))
        .encode(
            # the steps stored, first to last: a nice log axis ran to 5,000 past data ending at 1,500
            x=alt.X(
                "step:Q",
                scale=alt.Scale(type="log", domain=[int(min(steps)), int(max(steps))], nice=False),
                title="training step (log)",
            ),
            y=alt.Y("score:Q", scale=alt.Scale(domain=[0, 1]), title="score"),
            color=alt.Color("head:N", sort=heads, scale=alt.Scale(range=SEED_COLORS), title="head"),
            tooltip=["pattern:N", "head:N", "step:Q", alt.Tooltip("score:Q", format=".3f")],
        )
        .properties(width=300, height=170)
        .facet(facet=alt.Facet("pattern:N", sort=list(scores), title=None), columns=columns)
    )


def divergence_frame(result: dict) -> pd.DataFrame:
    """explain's result -> rows what, kind, jsd: each restart's JSD reached and each seed's JSD to this row."""
    rows = [
        {"what": f"restart {k + 1}", "kind": "alternative row (output within TVD 0.01)", "jsd": a["jsd"]}
        for k, a in enumerate(result["adversarial"])
        if a["feasible"]
    ]
    for s in result["seed_jsd"]:
        rows.append({"what": f"seed {s['seed']}: same head", "kind": "another seed's map", "jsd": s["jsd"]})
        rows.append(
            {"what": f"seed {s['seed']}: closest head (H{s['closest_head']})", "kind": "another seed's map",
             "jsd": s["closest_head_jsd"]}
        )  # fmt: skip
    return pd.DataFrame(rows, columns=["what", "kind", "jsd"])


@memo_chart
def divergences(result: dict) -> alt.LayerChart:
    """JSD from the original row: the adversarial rows against other seeds' maps, with the ceiling ln 2."""
    df = divergence_frame(result)
    kinds = [k for k in ("alternative row (output within TVD 0.01)", "another seed's map") if k in set(df["kind"])]
    bars = (
        alt.Chart(df)
        .mark_bar()
        .encode(
            y=alt.Y("what:N", sort=list(df["what"]), title=None, axis=alt.Axis(labelLimit=300)),
            x=alt.X("jsd:Q", scale=alt.Scale(domain=[0, math.log(2)]), title="JSD from the original row (nats)"),
            color=alt.Color("kind:N", scale=alt.Scale(domain=kinds, range=[SEQUENCE_COLOR, WEIGHT_COLOR]), title=None,
                            legend=alt.Legend(orient="bottom", direction="vertical", labelLimit=400)),
            tooltip=["what:N", alt.Tooltip("jsd:Q", format=".4f")],
        )
    )  # fmt: skip
    ceiling = alt.Chart(pd.DataFrame({"jsd": [math.log(2)]})).mark_rule(color=BASE_COLOR, strokeDash=[4, 3])
    chart = alt.layer(bars, ceiling.encode(x="jsd:Q")).properties(width=480, height=max(22 * len(df), 60))
    return chart.properties(autosize=PAD)


@memo_chart
def permutation_tvd(tvds) -> alt.LayerChart:
    """The output's TVD under each permutation of the row, with the 0.01 bound of the adversarial search."""
    df = pd.DataFrame({"tvd": np.asarray(tvds, dtype=float)})
    bars = (
        alt.Chart(df)
        .mark_bar(color=WEIGHT_COLOR)
        .encode(
            x=alt.X("tvd:Q", bin=alt.Bin(extent=[0, 1], step=0.025), title="TVD of the output (0 to 1)"),
            y=alt.Y("count():Q", title="permutations"),
        )
    )
    bound = alt.Chart(pd.DataFrame({"tvd": [0.01]})).mark_rule(color=SEQUENCE_COLOR, strokeDash=[4, 3])
    return alt.layer(bars, bound.encode(x="tvd:Q")).properties(width=480, height=180, autosize=PAD)


def rows_frame(result: dict, tokens, sep: bool = True) -> pd.DataFrame:
    """The original row, the farthest alternative row within the bound, and the closest other-seed row."""
    labels = position_labels(tokens, sep)[: len(result["row"])]
    series = {"original": result["row"]}
    feasible = [a for a in result["adversarial"] if a["feasible"]]
    if feasible:
        series["farthest alternative"] = max(feasible, key=lambda a: a["jsd"])["row"]
    if result["seed_jsd"]:
        s = min(result["seed_jsd"], key=lambda s: s["closest_head_jsd"])
        series[f"seed {s['seed']} H{s['closest_head']}"] = s["closest_row"]
    return pd.DataFrame(
        [{"row": name, "key": labels[j], "weight": float(w)} for name, r in series.items() for j, w in enumerate(r)]
    )


@memo_chart
def rows_chart(result: dict, tokens, sep: bool = True) -> alt.Chart:
    """The rows side by side: weight on each key."""
    df = rows_frame(result, tokens, sep)
    names = list(dict.fromkeys(df["row"]))
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X("key:N", sort=list(dict.fromkeys(df["key"])), title="key (position · token)",
                    axis=alt.Axis(labelAngle=-45)),
            xOffset=alt.XOffset("row:N", sort=names),
            y=alt.Y("weight:Q", scale=alt.Scale(domain=[0, 1]), title="weight"),
            color=alt.Color("row:N", sort=names, scale=alt.Scale(range=[BASE_COLOR, SEQUENCE_COLOR, WEIGHT_COLOR]),
                            title=None, legend=alt.Legend(orient="bottom")),
            tooltip=["row:N", "key:N", alt.Tooltip("weight:Q", format=".3f")],
        )
        .properties(width=640, height=200, autosize=PAD)
    )  # fmt: skip
