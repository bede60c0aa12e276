"""Induction heads: watch in-context learning switch on over training, and test which heads do it."""

import streamlit as st

from attncore.tasks import N_TEST
from attncore.tasks.induction import INDUCTION_RUN, N_PROBE
from lab.experiments import induction
from ui import compare_view, docs
from ui import induction_view as view
from ui.charts import induction as charts
from ui.figure import show_chart
from ui.limits import limits
from ui.params import url_select
from ui.regimes_view import cell_table

st.title("Induction heads")
st.caption(
    f"T = {INDUCTION_RUN['length']} random tokens of V = {INDUCTION_RUN['vocab']}, whose first k (from "
    f"{INDUCTION_RUN['k_min']} to T/2, per sequence) repeat: the second copy is predictable only by looking back, "
    "and the loss is on every position. Each variant here "
    f"trains over the same seeds as one metered sweep; the losses are measured on {N_TEST} fixed held-out sequences."
)
lim = limits()
c1, c2 = st.columns([3, 1])
with c1:
    chosen = view.variant_picker()
with c2:
    seeds = compare_view.seeds_input("ind_seeds", default=induction.DEFAULT_SEEDS)
settings = view.controls(lim)
if not chosen:
    st.info("Pick at least one variant above.", icon=":material/touch_app:")
    st.stop()
by_variant = induction.runs_of(chosen, seeds, **settings)
wanted = induction.all_runs(by_variant)
command = induction.command(chosen, seeds, **settings)  # what a hosted page names when its caps refuse the sweep
by_run = compare_view.ensure_trained(wanted, "Training the induction experiment", "ind_train", command)
if by_run is None:
    st.stop()
zeroed = view.ablations(wanted, by_run)
if zeroed is None:
    st.stop()
records = {v: [by_run[r] for r in rs] for v, rs in by_variant.items()}
per_run = [induction.run_figures(by_run[r], zeroed[r]) for r in wanted]
rows = induction.comparisons(induction.cells(records, zeroed))
table = induction.phase_table(per_run)
vocab = wanted[0].task.vocab
view.finding(table, rows, vocab)

st.subheader("The repeat loss against the first copy's, each seed's phase change marked")
show_chart(charts.loss_curves(induction.curves_frame(records), induction.phases_frame(per_run)), "loss-curves")
st.caption(
    f"Held-out loss at each snapshot (every {by_run[wanted[0]].snapshots[0].step} steps) on the first "
    f"{induction.figures.N_SNAPSHOT_TEST} held-out sequences: on the repeat's queries k … 2k − 2 (orange) and the "
    f"first copy's 0 … k − 2 (blue), fresh random tokens whose best loss is {view.ln_v(vocab)}. A thin line per seed; "
    "dashed: "
    "its phase step."
)

st.subheader("Verdicts over seeds")
view.phase_table(table, induction.icl_means(per_run))
cell_table(rows, runs_per_seed=len(chosen), seeds_key="ind_seeds", named_by_cell=True)

baseline = chosen[0]
st.subheader(f"Head scores over training: {baseline.label}")
seed = url_select("Seed", "ind_seed", seeds, seeds[0], help="The run whose heads, maps and scores are shown.")
record = by_run[wanted[seeds.index(seed)]]
show_chart(charts.head_scores(induction.head_scores_frame(record)), "head-scores")
heads = induction.heads_of(record)
named = " · ".join(f"{kind}: L{h[0]}H{h[1]}" for kind, h in heads.items())  # opens a sentence: a capital
st.caption(
    f"Mean attention on the probe set ({N_PROBE} sequences of repeated random tokens, k = T/2) from each repeat "
    "query t to t − k + 1, the token after the previous occurrence of its own (induction), and from every query to "
    "t − 1 (previous token). "
    + named[:1].upper()
    + named[1:]
    + " (the highest score of its pattern in its layer at the end; layers and heads numbered from 0, as on every "
    "page and in the docs: L0 is the first layer, L1 the second)."
)

st.subheader("The two heads' maps on the probe, before and after the change")
change = induction.phase(record)
moments = {"before": change.window_start, "at the end": record.config.train.steps}
show_chart(charts.maps(induction.maps_frame(record, heads, moments)), "maps")
st.caption(
    f"Attention of each head on the probe sequence (k = {record.config.task.length // 2}) at the start of the "
    f"largest {induction.figures.WINDOW}-step drop of the repeat loss (step {change.window_start:,}) and at the end. "
    "An induction head's map is a diagonal k − 1 below the main one in the repeat; a previous-token head's, the "
    "line just below it."
)

st.subheader(f"The causal check: zero one head of {baseline.label}")
levels = view.levels(table, chosen, vocab)
show_chart(charts.ablation(induction.ablation_frame(per_run, baseline), levels), "ablation", width="content")
st.caption(
    "The held-out repeat and first-copy losses of the final weights with one head's output zeroed (dots: seeds, "
    "ticks: means); the dashed lines are the level the context cannot help below and the one-layer model's repeat "
    "loss. The verdicts are the last cells of the table above."
)
st.download_button("Download the runs (CSV)", induction.runs_csv(per_run), "induction-runs.csv", "text/csv")
st.subheader("What the sources claim")
st.markdown(f"{view.SOURCES} What they found, and how the lab's runs compare, is in the chapter:")
docs.link("what-olsson-et-al-found", "Induction heads: what Olsson et al. found")
docs.link("induction-heads", "Induction heads: the task, K-composition, what the lab's runs printed")
