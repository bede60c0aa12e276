"""Masks: the causal mask before vs after the softmax, padding combined with causality, and the padding trap on a
trained model."""

import numpy as np
import pandas as pd
import streamlit as st

from attncore import ConfigError
from attncore.config import N_SYMBOLS
from attncore.mechanisms.demos import mask_order_demo, padding_demo
from attncore.mechanisms.padding import CASES, padding_trap, same_losses
from attncore.task import get as get_task
from lab import formats
from lab.experiments import padding
from ui import docs, runs, tables
from ui.charts.base import grid_frame, heatmap
from ui.charts.masks import mask_heatmap, padding_summary, row_sum_summary, weights_with_row_sums
from ui.figure import show_chart
from ui.frames import parse_ints
from ui.params import show_invalid, url_number, url_text

MAX_PAD_T = 16


def check_lengths(text: str) -> list[int]:
    """Up to 6 lengths, each from 0 to the largest padded length (the library checks them against T)."""
    lengths = parse_ints(text, "lengths", max_count=6)
    if not all(0 <= n <= MAX_PAD_T for n in lengths):
        raise ConfigError("lengths", f"each length must be from 0 to {MAX_PAD_T}")
    return lengths


st.title("Masks")
st.caption(
    "The causal mask applied to random scores before the softmax, against the weights zeroed after it; a padded "
    "batch's masks combined; then a trained model's losses in padded batches. Try more positions, another seed, "
    "sequences of length 0."
)
docs.link("masks", "Masks explained: why before the softmax, and padding")

st.subheader("Causal mask: before or after the softmax")
c1, c2, _ = st.columns([1, 1, 2])
with c1:
    t = url_number("Positions T", "mask_T", 6, 2, 12)
with c2:
    seed = url_number("Seed", "mask_seed", 0, 0, 9999, help="Seeds the random scores of both demos.")
demo = mask_order_demo(t, seed)
left, right = st.columns(2)
for col, when, title in (
    (left, "before", "Masked before the softmax (correct)"),
    (right, "after", "Zeroed after the softmax (the bug)"),
):
    summary = row_sum_summary(demo[f"row_sums_{when}"])
    chart = weights_with_row_sums(demo[f"weights_{when}"], demo[f"row_sums_{when}"], title, demo["causal"])
    show_chart(chart, f"weights-{when}", where=col, width="content")
    a, b = col.columns(2)
    a.metric("Rows summing to 1", f"{summary['ones']} of {summary['rows']}", border=True)
    b.metric("Smallest row sum", f"{summary['smallest']:.3f}", border=True)
st.caption(
    "Same random scores on both sides. Row = query, column = key; the bars are the row sums. Zeroed after the "
    f"softmax, the first query keeps only its own weight out of all {t} (here {demo['row_sums_after'][0]:.3f}; "
    "it depends on the random scores), and only the last row, which may see every key, is untouched."
)

st.subheader("Padding and causality in one batch")
c1, c2, _ = st.columns([2, 1, 1])
with c1:
    text = url_text(
        "Sequence lengths", "mask_lengths", "5 3 0", check=check_lengths, help="One length per sequence, from 0 to T."
    )
with c2:
    t_pad = url_number("Padded length T", "mask_pad_T", 6, 1, MAX_PAD_T)
try:
    pad = padding_demo(check_lengths(text), t_pad, seed)
except ConfigError as e:
    show_invalid(e)
    st.stop()
summary = padding_summary(pad)
m1, m2, m3, m4 = st.columns(4)
m1.metric("Query rows (B · T)", summary["rows"], border=True)
m2.metric("Rows summing to 1", summary["ones"], border=True)
m3.metric("Rows with no key at all", summary["fully_masked"], border=True)
m4.metric("All weights finite", "yes" if summary["all_finite"] else "no (NaN)", border=True)
masks, causal, sums = st.columns(3)
masks.markdown("**Padding mask (B, T)**: which keys are real")
small = max(8, min(22, 200 // t_pad))  # a third of the main area holds T cells and the axis (T up to 16)
show_chart(
    mask_heatmap(pad["padding"], ("sequence", "key"), small, legend="bottom"),
    "padding-mask",
    where=masks,
    width="content",
)
causal.markdown("**Causal mask (T, T)**: key ≤ query")
show_chart(
    mask_heatmap(pad["causal"], ("query", "key"), small, legend="bottom"), "causal-mask", where=causal, width="content"
)
sums.markdown("**Row sums (B, T)** of the weights below")
row_sums = grid_frame(pad["row_sums"], ("sequence", "query"), "row sum")
cell = max(8, min(28, 200 // t_pad))
text = ".2f" if cell >= 28 else None  # the sums written in the cells while they have room (else: the tooltip)
show_chart(
    heatmap(row_sums, "query", "sequence", "row sum", cell=cell, legend=False, text_format=text),
    "row-sums",
    where=sums,
    width="content",
)
st.markdown("**Combined mask (B, T, T)** = padding AND causal, one panel per sequence")
show_chart(
    mask_heatmap(pad["combined"], ("sequence", "query", "key"), facet="sequence"), "combined-mask", width="content"
)
st.markdown("**Weights (B, T, T)**: the softmax of random scores under the combined mask")
weights = grid_frame(pad["weights"], ("sequence", "query", "key"), "weight")
show_chart(heatmap(weights, "key", "query", cell=28, facet="sequence"), "weights", width="content")
st.caption(
    "A query row whose keys are all masked (every row of a length-0 sequence) gets weights 0 and a row sum of 0, "
    "not the NaN of 0/0."
)

st.subheader("The trap on a trained model: does a sequence's loss depend on its batch?")
trap_run, trap_lengths = padding.trap_run(), (5, 2, 4, 1)  # what `lessons warm` stores for the Masks lesson
st.caption(
    f"A model trained on mixed lengths {'–'.join(map(str, trap_run.task.train_lengths))} in right-padded batches "
    f"(copy, {trap_run.train.steps:,} steps). Test sequences of lengths {', '.join(map(str, trap_lengths))} in one "
    f"batch; each sequence's mean cross-entropy over its own answer, computed {len(CASES)} ways. Same as batched: "
    f"equal to {trap_run.model.dtype} rounding (within 64 units in the last place)."
)
trap_record = runs.require(trap_run, "copy, mixed lengths 1-6 in padded batches")
rng = np.random.default_rng(0)
trap_seqs = [get_task("copy").make_sequences(rng.integers(0, N_SYMBOLS, (1, n)))[0] for n in trap_lengths]
losses = padding_trap(trap_record.params, trap_run.model, trap_seqs)
base = losses["as batched"]
rows = [
    {"case": case}
    | {f"seq {i + 1} (n={len(s) // 2})": float(v) for i, (s, v) in enumerate(zip(trap_seqs, losses[case], strict=True))}
    | {"same as batched": same_losses(losses[case], base, trap_run.model.dtype)}
    for case, _ in CASES
]
trap_table = pd.DataFrame(rows)
loss_text = {c: formats.loss for c in trap_table.columns if c.startswith("seq ")}  # the lab's one rule for losses
st.dataframe(tables.styled(trap_table, loss_text), hide_index=True)
st.caption("; ".join(f"{case}: {what}" for case, what in CASES) + ".")  # under the table, so it fits 1,280 px
changed = [case for case, _ in CASES if not same_losses(losses[case], base, trap_run.model.dtype)]
st.markdown(
    f"Computed now from the trained weights: the losses change in {len(changed)} of the {len(CASES) - 1} "
    f"variations ({', '.join(changed) or 'none'}). With right padding a real query at position i reads only keys "
    "j ≤ i, all real; with left padding every real query reads the padding keys unless they are masked."
)
