"""Ablations: the sidebar's run as the base against any set of variants."""

import streamlit as st

from lab.tables import ablation_table, variant_name
from ui import charts, docs, frames, runs, sidebar, tables
from ui.params import url_multiselect, url_number, url_toggle
from ui.variants import DEFAULT, VARIANTS, base_label, variant_runs

st.title("Ablations")
base = sidebar.selected_run()
st.caption(f"Base: {sidebar.describe(base)}. Each variant changes one or two settings of the base.")
docs.link("ablations", "What the article's ablations showed")
names = url_multiselect("Variants", "abl_variants", list(VARIANTS), DEFAULT, placeholder="Pick variants to compare")
chosen, notes = variant_runs(base, names, sidebar.make)
for note in notes:
    st.caption(f"Skipped {note}.")

records, missing = runs.cached_many(list(chosen.values()))
if missing:
    st.info(
        f"**{len(missing)} of {tables.count(len(chosen), 'run')} {'is' if len(missing) == 1 else 'are'} not trained "
        "yet**; only the cached ones are shown."
    )
    if st.button(f"Train the {tables.count(len(missing), 'missing run')}", type="primary", key="train_missing"):
        if runs.sweep(missing, "Training the variants") is not None:
            records, missing = runs.cached_many(list(chosen.values()))
labels = {run: label for label, run in chosen.items()}
named = {labels[r.config]: r for r in records}
if not named:
    st.stop()


@st.fragment
def loss_panel() -> None:
    c1, c2 = st.columns([1, 4])
    with c1:
        log = url_toggle("Log scale", "abl_log", True)
        smooth = url_number("Smoothing (steps)", "abl_smooth", 25, 1, 500, help="Trailing moving average.")
    with c2:
        curves = frames.loss_frame({label: r.loss_history for label, r in named.items()}, smooth=smooth)
        st.altair_chart(charts.loss_overlay(curves, log=log), width="stretch")
    st.caption("Training loss of the base (black) and each variant on the same batches (same seed).")


st.subheader("Loss curves")
loss_panel()

st.subheader("Final loss and accuracy, with the difference to the base")
table = ablation_table(records, base=base)
table["variant"] = table["variant"].replace({variant_name(base, base): base_label(base)})  # lab names it "full"
tables.show(table)
st.caption(
    "Per-token and per-sequence accuracy by greedy generation on 500 test sequences; Δ columns are "
    "variant minus base. At this size (d_head 8, two blocks) the article found that only removing position "
    "information matters: a finding, not a bug."
)

st.subheader("Distinct vs repeated symbols")
st.altair_chart(charts.breakdown_bars(frames.breakdown_frame({k: r.eval for k, r in named.items()})), width="stretch")
st.caption(
    "Per-sequence accuracy on test sequences whose symbols are all distinct vs those with a repeat. "
    "Without position information two equal symbols look the same wherever they sit: expect the 'no position' "
    "run to fail more often when a symbol repeats (the article: 0.246 on 224 all-distinct sequences, 0.170 on "
    "276 with a repeat)."
)
