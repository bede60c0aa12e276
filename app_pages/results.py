"""Results: accuracy by task and length over seeds (SPEC §7), loss curves of every seed, CSV export."""

import streamlit as st

from attncore import ConfigError
from attncore.config import TASKS
from lab.tables import accuracy_table, runs_frame
from ui import charts, frames, runs, sidebar, tables
from ui.limits import limits
from ui.params import url_multiselect, url_number

st.title("Results")
st.caption(
    "The sidebar's settings (position, LayerNorm, scaling, learning rate, model size, steps) for every "
    "task, length and seed chosen here. Tasks, lengths and seeds below replace the sidebar's own."
)
c1, c2, c3 = st.columns(3)
with c1:
    tasks = url_multiselect("Tasks", "res_tasks", TASKS, TASKS)
with c2:
    lengths = url_multiselect("Lengths L", "res_L", range(1, limits().max_length + 1), [4, 6, 8])
with c3:
    seeds = url_multiselect("Seeds", "res_seeds", range(10), [0, 1, 2])
try:
    grid = [sidebar.make(task=t, length=L, seed=s) for t in tasks for L in sorted(lengths) for s in sorted(seeds)]
except ConfigError as e:
    sidebar.show_config_error(e)
    st.stop()
if not grid:
    st.info("Choose at least one task, one length and one seed.")
    st.stop()

records, missing = runs.cached_many(grid)
if missing:
    st.info(f"**{len(missing)} of {len(grid)} runs are not trained yet**; the tables below use the cached ones.")
    if st.button(f"Train the {len(missing)} missing runs", type="primary", key="train_missing"):
        if runs.sweep(missing, "Training the missing runs") is not None:
            records, missing = runs.cached_many(grid)
if not records:
    st.stop()

table = accuracy_table(records, base=grid[0])
st.subheader("Accuracy over seeds")
tables.show(table)
st.caption(
    "Mean and minimum over the seeds of the per-token accuracy and of the per-sequence accuracy (a sequence "
    "counts only if every symbol is right), by greedy generation on 500 test sequences."
)
st.subheader("Accuracy against L")
st.altair_chart(charts.accuracy_vs_length(frames.accuracy_long(table)), width="stretch")
st.caption(
    "Lines: mean over seeds (dashed: sort); ▼: the worst seed. Per-sequence accuracy compounds per-token errors "
    "(L tokens each right with probability p make a right sequence about p^L of the time), so it sits below "
    "per-token accuracy and shows a weaker model first."
)

st.subheader("Loss curves of every seed")
smooth = url_number("Smoothing (steps)", "res_smooth", 25, 1, 500, help="Trailing moving average.", width=200)
st.altair_chart(charts.seed_curves(frames.seed_loss_frame(records, smooth)))
st.caption("Thin lines: one seed each; black: their mean; shaded: the band between the best and the worst seed.")

d1, d2 = st.columns(2)
d1.download_button("Download the accuracy table (CSV)", table.to_csv(index=False), "accuracy.csv", "text/csv")
d2.download_button("Download every run (CSV)", runs_frame(records).to_csv(index=False), "runs.csv", "text/csv")
