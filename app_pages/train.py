"""Train: the sidebar's configuration, from the cache at once or trained live, then its numbers."""

import streamlit as st

from attncore.interpret.norms import snapshot_sequences
from attncore.optim import lr_schedule
from attncore.task import task_of
from lab import formats, provenance
from ui import frames, probe, runs, sidebar
from ui.charts import regimes as regime_charts
from ui.charts import runs as charts
from ui.figure import show_chart
from ui.params import url_select_slider
from ui.plain import plain

st.title("Train")
run = sidebar.selected_run()
st.caption(sidebar.describe(run))
was_cached = runs.cached(run) is not None
record = runs.require(run, "the configuration above")
words = probe.words(run)

e = record.eval
cols = st.columns(5)
cols[0].metric(
    "Test loss",
    formats.loss(record.test_loss),
    f"last batch {formats.loss(record.final_loss)}",
    delta_color="off",
    delta_arrow="off",
    help=f"{words.held_out_loss}: the held-out loss every comparison uses. Below it, the training loss of the last "
    "step's batch (one noisy batch).",
)
cols[1].metric("Per-token accuracy", f"{e.token_accuracy:.3f}")
cols[2].metric("Per-sequence accuracy", f"{e.sequence_accuracy:.3f}")
cols[3].metric("Parameters", f"{record.n_params:,}")
cols[4].metric(
    "Training time",
    formats.seconds(record.train_seconds),
    "from the cache" if was_cached else "just trained",
    delta_color="off",
    delta_arrow="off",
)
st.caption(
    f"{words.measured} "
    f"Evaluation took {e.eval_seconds:.2f} s. Computed on {plain(provenance.describe(record.platform))}."
)

st.subheader("Loss curve, and accuracy during training")
curve, steps = frames.history_frame(record.loss_history), run.train.steps
snapshot_steps = [s.step for s in record.snapshots]
step = url_select_slider("Training step", "train_step", snapshot_steps, steps, format_func=str)
show_chart(charts.loss_curve_at(curve, step, steps), "loss-curve", width="stretch")
st.caption(f"{words.loss}. Both axes log scale: on the loss, a straight fall is a power law.")
if (lrs := lr_schedule(run.train)) is not None:
    show_chart(charts.learning_rate_curve(frames.schedule_frame(lrs), step, steps), "learning-rate", width="stretch")
    low, high = (formats.learning_rate(float(f"{v:.3g}")) if v else "0" for v in (min(lrs), max(lrs)))
    st.caption(
        f"The learning rate of each step{plain(sidebar.schedule_text(run.train).replace(' · ', ': ', 1))}; it runs "
        f"from {low} to {high} (Adam's step size before its bias correction). Same step axis as the loss curve above."
    )
show_chart(
    charts.snapshot_accuracy(frames.snapshot_frame(record.snapshots), step, steps), "snapshot-accuracy", width="stretch"
)
at = next(s for s in record.snapshots if s.step == step)
st.caption(
    f"Accuracy ({probe.accuracy_how(run)}) at the {probe.snapshots_how(run, len(snapshot_steps))} (the final "
    f"numbers above use {words.test_set}). After step {step:,}: per-token "
    f"{at.token_accuracy:.3f}, per-sequence {at.sequence_accuracy:.3f}. The Attention page shows the maps of "
    "each of these steps."
)

perfect = e.distinct_accuracy == 1 and e.repeated_accuracy == 1
st.subheader("Distinct vs repeated: none wrong" if perfect else "Where it goes wrong")
left, right = st.columns(2)
left.metric(f"{words.distinct} ({e.n_distinct:,} held out)", f"{e.distinct_accuracy:.3f}")
right.metric(f"{words.repeated} ({e.n_repeated:,} held out)", f"{e.repeated_accuracy:.3f}")
st.caption(words.distinct_why)

st.subheader("Norms by block during training")
n, queries = run.task.n_inputs, task_of(run.task).answer_queries(run.task)
if record.norms is None:
    st.info(
        "This run was stored before its norms were recorded with it; `python -m attncore norms` with the sidebar's "
        "settings measures them by training it again, bit for bit.",
        icon=":material/history:",
    )
else:
    show_chart(
        regime_charts.snapshot_norms(regime_charts.snapshot_norms_frame(record.norms)),
        "snapshot-norms",
        width="content",
    )
    st.caption(
        f"At each of the {len(record.norms)} snapshots, on {snapshot_sequences(run):,} fixed "
        "sequences of the task (the same for every run of this task and length): the gradient norm of each block's "
        "FFN output matrix, the residual stream's mean norm after the block, the largest attention logit "
        f"|q·k|/scale and the mean attention entropy over the query rows 1 to {n - 1} of the {n} input positions "
        f"(row 0 sees one key only; on the probe, {words.answer}: {probe.query_list(queries)}). The Regimes page sets "
        "them beside each other across depths and head sizes. All four matrices and the initial figures, on the "
        "command line:  \n`python -m attncore norms --json`"  # on a line of its own: a command is never split
    )
