"""Ablations: the sidebar's run as the base against any set of variants, each over N seeds, paired by seed."""

import streamlit as st

from attncore.task import task_of
from attncore.tasks import N_TEST
from lab import compare, formats
from lab.factors import tables as grouped_tables
from ui import compare_view, docs, frames, probe, sidebar
from ui.charts import runs as charts
from ui.figure import show_chart
from ui.limits import limits
from ui.params import url_multiselect
from ui.variants import DEFAULT, DEFAULT_SEEDS, VARIANTS, variant_runs

st.title("Ablations")
base = sidebar.selected_run()
caption = st.empty()  # filled once the seeds are chosen: the base is shown over them, not at one seed
docs.link("ablations", "What the article's ablations showed")
c1, c2 = st.columns([5, 1])
with c1:
    names = url_multiselect("Variants", "abl_variants", list(VARIANTS), DEFAULT, placeholder="Pick variants to compare")
with c2:
    seeds = compare_view.seeds_input("abl_seeds", DEFAULT_SEEDS)
caption.caption(
    f"Base: {sidebar.describe(base, seed=False)}, over {compare_view.seeds_text(seeds)}. Each variant changes a "
    "few settings of the base and is paired with it by seed: the same batches, the same initial values of every "
    "tensor they share."
)
chosen, notes = variant_runs(base, names, compare_view.capped(sidebar.make, limits()))  # 8 layers, d_k × 4: capped
for note in notes:
    st.caption(f"Skipped {note}.")

st.markdown(compare.before_text(len(seeds), len(chosen) - 1))  # the variants against the base, said before the click
wanted = [compare_view.with_seed(run, s) for run in chosen.values() for s in seeds]
by_run = compare_view.ensure_trained(wanted, "Training the variants", "train_missing")
if by_run is None:
    st.stop()
groups = compare_view.grouped(by_run, chosen, seeds)
summary, comparisons, _ = grouped_tables([(None, groups)], curves=False, metrics=compare.metrics_of(base.task.name))


st.subheader("Training loss curves")
compare_view.loss_panel(
    "abl",
    lambda smooth: compare.curve_bands(groups, smooth=smooth),
    f"Training loss over {compare_view.seeds_text(seeds)}: the line is the mean, the band runs from the lowest "
    "to the highest seed. The base is black.",
)

st.subheader("Test loss and accuracy over seeds, and each variant against the base")
compare_view.show_tables(summary, comparisons, level="variant", seeds_key="abl_seeds", runs_per_seed=len(chosen))
m, held_out = base.model, probe.words(base).held_out_loss
size = f"d_head {m.d_model // m.n_heads}, {formats.count(m.n_layers, 'block')}"
st.caption(
    f"Test loss: {held_out[0].lower()}{held_out[1:]}; accuracy {probe.accuracy_how(base)}; Δ is variant minus base "
    f"at the same seed. This base: {size}. To try: the 8-layer and d_k × 4 variants, the depth and head width where "
    "the Regimes page compares the LayerNorm's place and the scaling."
)
compare_view.downloads(summary, comparisons, "ablations")

st.subheader("Distinct vs repeated symbols")
per_seed = [frames.breakdown_frame({label: rs[i].eval for label, rs in groups.items()}) for i in range(len(seeds))]
breakdown = compare_view.breakdown_over_seeds(per_seed)
show_chart(charts.breakdown_bars(breakdown), "breakdown", width="stretch")
if not task_of(base.task).generates:
    st.caption(
        f"Sequences whose repeat is all right (most likely token, reading the true tokens), mean over "
        f"{compare_view.seeds_text(seeds)}, on the {N_TEST} held-out sequences whose first copy's tokens all differ "
        "vs those where one repeats (after a repeated token the next one is ambiguous)."
    )
    st.stop()
st.caption(
    f"Per-sequence accuracy, mean over {compare_view.seeds_text(seeds)}, on the test sequences whose symbols are all "
    f"distinct vs those with a repeat (n: how many of the {N_TEST}, the same for every seed)."
    + (
        " Without position information two equal symbols look alike wherever they sit."
        if "no position" in chosen
        else ""
    )  # fmt: skip
)
