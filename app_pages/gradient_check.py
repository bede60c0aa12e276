"""Gradient check: finite differences against the hand-written backward pass, per tensor, pre- and post-LN."""

import streamlit as st

from attncore.mechanisms.gradcheck import gradient_check, gradient_check_summary
from lab.formats import scientific as sci
from lab.jobs.slots import BusyError
from ui import docs
from ui.charts.gradcheck import NORM_LABELS, PASS_MARK, eps_comparison, eps_label, gradcheck_chart, gradcheck_table
from ui.figure import show_chart
from ui.limits import limits
from ui.metered import metered
from ui.params import show_invalid, url_multiselect, url_number

DEFAULT_SEED = 4  # a seed where eps = 1e-4 crosses a ReLU kink under both placements (so the lesson shows)

EPS_OPTIONS = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2]


def check(eps: tuple[float, ...], seed: int, coords: int) -> list[dict]:
    return [r for norm in NORM_LABELS for r in gradient_check(norm, eps, seed, coords)]


st.title("Gradient check")
st.caption(
    "Each sampled weight is moved by ±ε and (loss₊ − loss₋) / 2ε is compared with the gradient of the "
    "hand-written backward pass, in float64 on a small model (d = 16, 2 blocks, 3 sequences). Try a larger ε and "
    "other seeds: whether its step crosses a ReLU kink, and so how much it hurts, depends on the seed."
)
docs.link("gradient-check", "The gradient check explained, and what the article reported")
c1, c2, c3 = st.columns([2, 1, 1])
with c1:
    eps = url_multiselect(
        "ε values",
        "gc_eps",
        EPS_OPTIONS,
        [1e-6, 1e-4],
        format_func=lambda eps: sci(eps, 1),
        max_selections=4,
        placeholder="Pick ε values",
    )
with c2:
    seed = url_number("Seed", "gc_seed", DEFAULT_SEED, 0, 9999, help="Seeds the weights, sequences and coordinates.")
with c3:
    cap = min(64, limits().max_gradcheck_coords)
    coords = url_number("Coordinates per tensor", "gc_coords", 24, 1, cap, help="Sampled among |gradient| > 1e-6.")
if not eps:
    show_invalid("choose at least one ε.")
    st.stop()
key = (tuple(sorted(eps)), seed, coords)
try:
    with st.spinner("Nudging every sampled weight by ±ε..."):
        rows = metered("gradcheck", key, lambda: check(*key), "this gradient check")
except BusyError as e:
    st.warning(str(e), icon=":material/hourglass_top:")
    st.stop()
summary = gradient_check_summary(rows)
verdicts = {v["norm"]: v for v in eps_comparison(rows)}

for col, (norm, label) in zip(st.columns(2), NORM_LABELS.items(), strict=True):
    col.markdown(f"#### {label}")
    worst = [s for s in summary if s["norm"] == norm]
    for m, s in zip(col.columns(len(worst)), worst, strict=True):
        m.metric(
            f"Worst at {eps_label(s['eps'])}",
            f"{sci(s['max_rel_dev'])}",
            s["worst_tensor"],
            delta_color="off",
            delta_arrow="off",
            border=True,
            help=f"Largest relative deviation over {s['n_checked']} coordinates; below it, the tensor it came from.",
        )
    v = verdicts.get(norm)
    if v is None:
        continue
    sizes = f"{eps_label(v['eps_large'])} against {eps_label(v['eps_small'])}"
    counts = f"worse on {v['tensors_worse']} of {v['tensors']} tensors"
    if v["large_is_worse"]:
        times = f"{v['ratio']:,.0f}" if v["ratio"] >= 10 else f"{v['ratio']:.2g}"
        passes = v["worst_small"] < PASS_MARK  # the box's colour follows the figures it reports
        verdict = "under" if passes else "above"
        text = (
            f"At {eps_label(v['eps_small'])} the worst deviation is {sci(v['worst_small'])}, {verdict} the "
            f"{sci(PASS_MARK, 1)} bar{': the backward pass checks out' if passes else ''}. "
            f"At {eps_label(v['eps_large'])} "
            f"it is {sci(v['worst_large'])}, {times}× larger ({counts})"
            + (": the large step, not the backward pass, fails." if v["worst_large"] >= PASS_MARK else ".")
        )
        (col.success if passes else col.warning)(text, icon=":material/check:" if passes else ":material/warning:")
    else:
        col.warning(
            f"With seed {seed}, {sizes} is **not clearly worse** (worst {sci(v['worst_large'])} against "
            f"{sci(v['worst_small'])}, {v['ratio']:.3g}×; {counts}): no sampled coordinate sat near enough to a "
            "ReLU kink for the large step to cross it. Try another seed (the default is one that shows it).",
            icon=":material/warning:",
        )

st.subheader("Per tensor")
show_chart(gradcheck_chart(rows), "per-tensor")
st.caption(
    f"Max of |numeric − analytic| / max(|numeric|, |analytic|) over the sampled coordinates of each tensor, seed "
    f"{seed}; dashed: {sci(PASS_MARK, 1)}, a usual bar for a passing check. A tensor without a coordinate above "
    "1e-6 in gradient has no point."
)
with st.expander("The numbers"):
    table = gradcheck_table(rows)
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        column_config={c: st.column_config.NumberColumn(format="%.2e") for c in table.columns[1:-1]},
    )
