"""Grokking: modular addition memorised at once and generalised much later, with weight decay, over seeds."""

import pandas as pd
import streamlit as st

from attncore.tasks.modular import MODULAR_RUN
from lab.experiments import grokking
from ui import compare_view, docs
from ui import grokking_view as view
from ui.charts import grokking as charts
from ui.figure import show_chart
from ui.limits import limits
from ui.params import url_select
from ui.regimes_view import cell_table

st.title("Grokking")
st.caption(
    "(a + b) mod p from the input “a b =”, the answer read at “=”: a fixed random fraction of the p² pairs trains "
    f"and the rest is held out. One layer, AdamW, full batch, d = {MODULAR_RUN['d_model']}; with weight decay "
    "and without, over the same seeds, as one metered sweep. Watch the held-out accuracy rise long after the "
    "training pairs are fitted, or not."
)
lim = limits()
settings, seeds = view.controls(lim)
decay = settings.pop("weight_decay")
by_variant = grokking.runs_of(seeds, decay, **settings)
wanted = grokking.all_runs(by_variant)
command = grokking.command(seeds, decay, **settings)  # what a hosted page names when its caps refuse the sweep
by_run = compare_view.ensure_trained(wanted, "Training the grokking experiment", "grok_train", command)
if by_run is None:
    st.stop()
records = {v: [by_run[r] for r in rs] for v, rs in by_variant.items()}
per_run = [grokking.run_figures(by_run[r]) for r in wanted]
rows, table = grokking.comparisons(records), grokking.variant_table(per_run)
view.finding(table, rows, settings["steps"])
view.cost(wanted)

st.subheader("Training and held-out accuracy over training")
curves, first = grokking.curves_frame(records), table.iloc[0]
window = (int(first["window_from"]), int(first["window_to"]))
show_chart(charts.accuracy_curves(curves, grokking.spikes_frame(per_run), window), "accuracy")
st.caption(
    f"Accuracy on all {wanted[0].task.length ** 2:,} pairs at each snapshot: the training pairs (blue) and the "
    "held-out ones (orange), a thin line per seed, the step axis logarithmic; dotted: 99 %. Shaded: the final window "
    f"({grokking.window_words(first)}), over which the final figures are averaged. Red triangles: the spikes, each "
    f"where a seed's training accuracy fell under {grokking.SPIKE_BELOW * 100:.0f} % after it had reached 99 % ("
    f"{view.spike_count(table)})."
)
view.variant_table(table)

st.subheader("The weight norm and the embedding's frequencies")
show_chart(charts.norm_and_frequencies(curves), "norm-and-frequencies")
st.caption(
    "Left: the norm of all the weights; weight decay pulls it down once the training pairs are fitted. Right: how "
    "many frequencies the embedding's power is spread over (1 / Σ s_k², the shares s_k of its discrete Fourier "
    "transform over the p numbers): about p / 2 for random vectors, a handful once the model adds by rotations."
)

st.subheader("The embedding's Fourier spectrum, before and after")
seed = url_select("Seed", "grok_seed", seeds, seeds[0], help="The run whose spectrum is shown, in each variant.")
spectra = pd.concat(
    [grokking.spectrum_frame(by_run[rs[seeds.index(seed)]]).assign(variant=v) for v, rs in by_variant.items()],
    ignore_index=True,
)
show_chart(charts.spectrum(spectra), "spectrum")
keys = {v: grokking.key_frequencies(by_run[rs[seeds.index(seed)]]) for v, rs in by_variant.items()}
st.caption(
    "Share of the power of the numbers' embedding vectors at each frequency k (k and p − k together, the constant "
    "left out), at initialisation and with the final weights. The five strongest at the end: "
    + "; ".join(f"{v}: {', '.join(map(str, k))}" for v, k in keys.items())
    + "."
)

if len(rows):
    st.subheader("Verdicts over seeds")
    st.caption(
        "Per run: the held-out accuracy (per-token: one answer per pair), the held-out loss and the weight norm, each "
        "averaged over the final window, without weight decay minus with it, paired by seed."
    )
    cell_table(
        rows.assign(facet=f"{rows.iloc[0]['level']} vs {rows.iloc[0]['baseline']}"),
        runs_per_seed=len(records),
        seeds_key="grok_seeds",
    )
st.download_button("Download the runs (CSV)", grokking.runs_csv(per_run), "grokking-runs.csv", "text/csv")
st.subheader("What the sources claim")
st.markdown(f"{view.SOURCES} What they found, and how the lab's runs compare, is in the chapter:")
docs.link("what-the-grokking-papers-found", "Grokking: what the papers found")
docs.link("grokking", "Grokking: the task, the recipe, what the lab's runs printed")
