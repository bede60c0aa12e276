"""Compare: vary one setting (optionally a second, as panels) over seeds; every other setting from the sidebar."""

import streamlit as st

from attncore import ConfigError
from attncore.snapshots import run_snapshot_steps
from lab.compare import metrics_of
from lab.factors import comparison_runs, faceted, factors_for, snapshot_tables
from lab.factors import tables as grouped_tables
from ui import compare_view, probe, sidebar
from ui.charts import compare as compare_charts
from ui.figure import show_chart
from ui.limits import limits
from ui.params import url_select

st.title("Compare")
st.caption(
    "Vary one setting over several seeds, optionally a second one as side-by-side panels; every other setting "
    "comes from the sidebar. At a given seed the runs start from the same initial values for every tensor of the "
    "same name and shape, and draw their batches from the same random stream: they are compared seed by seed."
)
base = sidebar.selected_run()  # an invalid sidebar shows its message and stops here
lim = limits()
label = compare_view.factor_label
c1, c2, c3 = st.columns([2, 2, 1])
with c1:
    offered = factors_for(base.task.name)  # the induction task: its own settings only
    factor = url_select("Setting to vary", "cmp_factor", offered, "position", format_func=label)
with c2:  # only settings the panels can be by: not the one varied, nor d beside d_k (a d_k level sets d)
    facet = url_select(
        "Panels by (optional)",
        "cmp_facet",
        ["none", *(f for f in offered if f != factor and {f, factor} != {"d", "d_k"})],
        "none",
        format_func=lambda f: f if f == "none" else label(f),
        help="Any setting but the one varied; d and d_k never together (a d_k level sets d).",
    )
with c3:
    seeds = compare_view.seeds_input("cmp_seeds", default=6)
heads = 1 if "heads" in (factor, facet) else base.model.n_heads  # the head count a d_k level keeps
levels = compare_view.level_picker(
    factor, f"{label(factor)}: levels (the first is the baseline)", f"cmp_lv_{factor}", lim, heads
)
facet_levels = []
if facet != "none":
    facet_levels = compare_view.level_picker(facet, f"{label(facet)}: one panel each", f"cmp_fv_{facet}", lim, heads)
facet = facet if facet_levels else None  # no panel levels chosen: one panel
if "d_k" in (factor, facet):
    kept = {"heads": "each level's"}.get(factor) or {"heads": "each panel's"}.get(facet)
    kept = kept or f"the sidebar's {base.model.n_heads}"
    st.caption(
        f"Varying d_k keeps the head count ({kept}) and grows the width with it: d = heads × d_k (and d_ff = 4d), "
        "so a wider head is also a wider model."
    )
if len(levels) < 2:
    st.info(f"Pick at least two levels of {label(factor)} to compare.", icon=":material/touch_app:")
    st.stop()

try:
    wanted = comparison_runs(compare_view.capped(sidebar.make, lim), factor, levels, seeds, facet, facet_levels)
except ConfigError as e:
    compare_view.show_invalid_combination(e)
    st.stop()
by_run = compare_view.ensure_trained(wanted, "Training the comparison", "cmp_train")
if by_run is None:
    st.stop()
parts = faceted(by_run.values(), factor, levels, facet, facet_levels)
summary, comparisons, _ = grouped_tables(parts, curves=False, metrics=metrics_of(base.task.name))
st.caption(f"{len(wanted)} runs over {compare_view.seeds_text(seeds)}, all from the run store.")


st.subheader("Training loss curves")
compare_view.loss_panel(
    "cmp",
    lambda smooth: grouped_tables(parts, smooth=smooth)[2],
    "Training loss: the line is the mean over the seeds, the band runs from the lowest to the highest seed. "
    "The baseline (first level) is black.",
)

st.subheader("Accuracy during training")
snapshots = snapshot_tables(parts)
show_chart(
    compare_charts.band_curves(snapshots, log=False, y_title="mean per-sequence accuracy"),
    "accuracy-during-training",
    width="stretch",
)
st.caption(
    f"Per-sequence accuracy {probe.accuracy_how(base)} at each run's "
    f"{probe.snapshots_how(base, len(run_snapshot_steps(base)))}: the line is the mean over "
    "the seeds, the band the lowest to the highest."
)

st.subheader(f"Accuracy against {label(factor).lower()}")
show_chart(compare_charts.accuracy_by_level(summary, label(factor)), "accuracy-by-level", width="stretch")
st.caption(
    f"Per-token and per-sequence accuracy {probe.accuracy_how(base)} on {probe.words(base).test_set} per run: the "
    "dot is the mean over the seeds, the bar runs from the lowest to the highest seed."
)

st.subheader(f"Each level against {compare_view.format_level(factor)(levels[0])}, paired by seed")
compare_view.show_tables(
    summary,
    comparisons,
    level=factor,
    facet=f"panel: {facet}" if facet else "facet",
    seeds_key="cmp_seeds",
    runs_per_seed=len(wanted) // len(seeds),
)
compare_view.downloads(summary, comparisons, f"compare-{factor}")
