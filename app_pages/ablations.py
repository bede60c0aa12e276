"""Ablations: the sidebar's run as the base against any set of variants, each over N seeds, paired by seed."""

import streamlit as st

from attncore.task import task_of
from attncore.tasks import N_TEST
from lab import compare, formats
from lab.factors import tables as grouped_tables
from ui import compare_view, docs, frames, sidebar
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
    f"Base: {sidebar.describe(base, seed=False)}, over {compare_view.seeds_text(seeds)}. Each variant changes one "
    "to three settings of the base. At a given seed every variant starts from the same initial values as the base "
    "for every tensor they share, and trains on the same batches, so a paired difference isolates the change."
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
m = base.model
size = f"d_head {m.d_model // m.n_heads}, {formats.count(m.n_layers, 'block')}"
st.caption(
    f"Test loss: teacher-forced cross-entropy over the answer tokens of the {N_TEST} fixed test sequences, the same "
    "for every variant and seed (the last training batch differs between variants whose batch streams differ). "
    "Per-token and per-sequence accuracy by greedy generation on those sequences; Δ is variant minus base at the "
    "same seed."
    + (
        " On the induction task the test loss is over every position, and the accuracies are of the most likely "
        "token at each repeat query, reading the true tokens (the Induction heads page compares the repeat loss)."
        if not task_of(base.task).generates
        else ""
    )  # fmt: skip
)
st.caption(
    f"The article, at d_head 8 and 2 blocks (this base: {size}) on one seed, found that only removing position "
    "information matters. What these runs show is said above, computed from them: a difference shown is measured, "
    "not judged; read its size beside the losses and accuracies in the table. The variants at 8 layers and at "
    "d_k × 4 reach the depth and head widths where the Regimes page compares the LayerNorm's place and the scaling."
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
    f"Per-sequence accuracy, mean over {compare_view.seeds_text(seeds)}, on test sequences whose symbols are all "
    f"distinct vs those with a repeat (n: how many of the {N_TEST} test sequences are of that kind; the same sequences "
    "serve every seed). Without position information two equal symbols look the same wherever they "
    "sit: expect the 'no position' run to fail more often when a symbol repeats (the article, one seed: 0.246 on "
    "224 all-distinct sequences, 0.170 on 276 with a repeat)."
)
