"""Regimes: the sizes, schedules and learning rates where √d_k scaling, the LayerNorm's place and qk-norm matter,
each judged over seeds."""

import streamlit as st

from lab.compare import curve_bands
from lab.experiments import regimes, stability
from ui import compare_view, docs
from ui import regimes_view as view
from ui.charts import compare as compare_charts
from ui.charts import regimes as charts
from ui.figure import show_chart
from ui.limits import limits
from ui.params import url_select
from ui.plain import plain

st.title("Regimes")
st.caption(
    "The effects the sources describe, at the depths, head sizes and learning rates where they live "
    f"([the chapter]({docs.href('regimes-depth-wide-heads-and-the-learning-rate')}) says why the article's 2 blocks "
    "showed none). Each "
    "experiment here trains its grid of runs over seeds as one metered sweep and judges every cell by the comparison "
    "rule (paired by seed: interval, exact sign-flip p, verdict) on the held-out test loss and the per-sequence "
    "accuracy."
)
lim = limits()
c1, c2 = st.columns([3, 1])
with c1:
    experiment = url_select("Experiment", "reg_exp", list(regimes.EXPERIMENTS), "depth", format_func=view.NAMES.get)
with c2:
    seeds = compare_view.seeds_input("reg_seeds", default=regimes.DEFAULT_SEEDS)
options = view.controls(experiment, lim)
chosen = all(options.get(k, True) for k in ("depths", "lrs", "sizes"))  # an emptied multiselect: no grid
cells = regimes.cells_of(experiment, seeds, **options) if chosen else []
if not cells:
    st.info("Pick at least one level of each setting above.", icon=":material/touch_app:")
    st.stop()
wanted = regimes.all_runs(cells)
command = regimes.command(experiment, len(seeds), options) if seeds[0] == 0 else None  # the CLI's seeds: 0..N-1
by_run = compare_view.ensure_trained(wanted, f"Training the {experiment} experiment", "reg_train", command)
if by_run is None:
    st.stop()
qk_norm = options.get("qk_norm") == "both"  # the lr experiment's qk-norm comparison: lab.experiments.stability
summaries = stability.summaries_of(by_run) if qk_norm else {run: by_run[run].summary() for run in wanted}
rows = regimes.table(cells, summaries, stability.METRICS if qk_norm else regimes.METRICS)
st.caption(f"{len(wanted)} runs in {len(cells)} cells over {compare_view.seeds_text(seeds)}, all from the run store.")
if qk_norm:
    initial = view.initial_loss(cells)
    st.caption(plain(view.schedule_text(cells)))
    st.markdown(f"**What the lab found.** {plain(stability.finding(cells, summaries, initial, rows))}")
else:
    view.finding(rows)

st.subheader("Verdict per cell")
view.verdicts(rows, experiment)

if experiment == "depth":
    st.subheader("Gradient norms by block at initialisation")
    frame = view.norms_at_init(cells, "Gradient norms at initialisation")
    show_chart(charts.grad_norms(frame), "grad-norms", width="content")
    st.markdown(plain(regimes.gradient_finding(frame)))
    st.caption(
        f"‖∂L/∂W‖ of each block's FFN output matrix, mean over {view.norms.N_BATCHES} fixed batches of the task, "
        "on the first seed's initial weights (the same at every learning rate). `python -m attncore norms` prints "
        "all four "
        "matrices and their spread."
    )
    deepest = max(c.key["layers"] for c in cells)
    st.subheader(f"Training loss at {deepest} blocks")
    for cell in (c for c in cells if c.key["layers"] == deepest):
        groups = {label: [by_run[r] for r in runs] for label, runs in cell.groups.items()}
        st.markdown(f"**{plain(regimes.cell_text(cell.key))}**")
        show_chart(
            compare_charts.band_curves(curve_bands(groups, smooth=25)),
            f"training-loss-{regimes.cell_text(cell.key)}",
            width="stretch",
        )
    st.caption("Training loss (log scale, 25-step moving average): the mean over the seeds in a band from the "
               "lowest to the highest seed; pre-LN black.")  # fmt: skip
elif experiment == "heads":
    st.subheader("Loss and accuracy against the head size")
    show_chart(
        charts.against(regimes.by_variant(cells, summaries), "d_k", "head size d_k", log_x=True),
        "by-head-size",
        width="content",
    )
    st.subheader("Attention entropy and saturation")
    show_chart(
        charts.attention_by_size(view.attention_after(cells, by_run, "Attention figures")),
        "attention-by-size",
        width="content",
    )
    st.caption(
        "At initialisation dashed with triangles, after training solid with dots. Mean over the layers and the fixed "
        "batches of the first seed's run, "
        f"{view.entropy_rows(wanted[0].task.length)}; a row is saturated when one key takes more than 0.99 of its "
        "weight. The Scaling page measures Var(q·k) = d_k on random inputs."
    )
    st.page_link("app_pages/scaling.py", label="Scaling: Var(q·k) = d_k, measured", icon=":material/straighten:")
    st.subheader("The largest attention logit over training")
    logits, missing = view.logits_over_training(cells, by_run)
    if len(logits):
        show_chart(charts.logit_growth(logits), "logit-growth", width="content")
    st.caption(
        f"max |q·k|/scale over the layers, the causal pairs and {view.norms.snapshot_sequences(wanted[0])} fixed "
        "sequences of the task, at each training snapshot of the first seed's run (stored with the run). On the "
        "same initial weights they are √d_k times larger without the scaling."
        + (f" {missing} of the runs were stored before their norms were and are left out." if missing else "")
    )
else:
    st.subheader("Test loss against the learning rate")
    by_lr = regimes.by_variant(cells, summaries)
    show_chart(charts.against(by_lr, "lr", "learning rate", log_x=True, log_y=True), "test-loss-by-lr", width="content")
    if qk_norm:
        view.qk_norm_sections(cells, by_run, summaries, initial)
    else:
        initial = view.initial_loss(cells)
        view.lr_tables(regimes.lr_summary(cells, summaries, initial), regimes.at_best(cells, summaries, initial))

st.subheader("Every cell, paired by seed")
view.cell_table(rows, runs_per_seed=len(wanted) // len(seeds))
st.download_button("Download the cells (CSV)", rows.to_csv(index=False), f"regimes-{experiment}.csv", "text/csv")
st.subheader("What the sources claim")
papers, section = view.SOURCES["qk_norm" if qk_norm else experiment]
st.markdown(f"{papers} What they found, and how the lab's runs compare, is in the chapter:")
docs.link(section, "Regimes: what the sources found")
