"""Patching: change one input symbol, then copy each component's activation from one run into the other (clean into
corrupted: denoising; corrupted into clean: noising) and measure how much of the answer difference it carries; and
the logit lens, the answer read after each block."""

import streamlit as st

from attncore import ConfigError
from attncore.interpret import patching
from attncore.task import task_of
from lab import formats
from ui import docs, interpret, plain, probe, runs, sidebar
from ui.charts import interpret as charts
from ui.figure import show_chart
from ui.params import url_select

st.title("Patching")
run = sidebar.selected_run()
st.caption(sidebar.describe(run))
record = runs.require(run, sidebar.describe(run))
task, words, sep = task_of(run.task), probe.words(run), probe.has_sep(run)
queries, first = task.answer_queries(run.task), task.input_count(run.task)  # the symbols a user types
tokens = probe.chosen_tokens(run, record, key="pat_seq")
st.markdown(probe.answer_line(run, record, tokens))

st.subheader("Activation patching: which component carries the changed symbol")
left, middle, right = st.columns(3)
with left:
    positions = list(patching.positions(run))
    at = url_select("Change the input symbol at position", "pat_at", positions, positions[0])
with middle:
    symbols = list(patching.symbols(run))
    default = patching.default_symbol(tokens, first, at, len(symbols))
    symbol = url_select(f"to (the clean input has {int(tokens[at])})", "pat_sym", symbols, default)
with right:
    direction = url_select(
        "Direction",
        "pat_dir",
        list(patching.DIRECTIONS),
        "denoise",
        help="; ".join(f"{name}: {what}" for name, what in patching.DIRECTIONS.items()),
    )
denoise = direction == "denoise"
value = "restored" if denoise else "destroyed"
try:
    c = patching.contrast(run, tokens, at, symbol)
except ConfigError as e:
    st.info(f"**Nothing to patch:** {plain.plain(e.message)}. Pick another symbol.", icon=":material/info:")
    c = None
result = interpret.patch(record, c, direction) if c is not None else None
if result is not None:
    corrupted = " ".join(charts.position_labels(c.corrupted, sep)).replace(" · ", ":")
    m1, m2, m3 = st.columns(3)
    m1.metric("Logit difference, clean", formats.with_spec(result.clean_metric, ".2f"))  # '−13.29': the lab's minus
    m2.metric("Logit difference, corrupted", formats.with_spec(result.corrupted_metric, ".2f"))
    m3.metric("p(clean answer)", f"{result.clean_prob:.3f} → {result.corrupted_prob:.3f}")
    st.caption(
        f"Corrupted input (position:token) `{corrupted}`. Metric: logit of the clean answer {c.clean_token} minus "
        f"logit of the corrupted answer {c.corrupted_token} at query {c.query} "
        + words.contrast.format(answer=c.answer_index + 1, position=c.position, before=c.position - 1, query=c.query)
        + " "
        + (
            "**Denoising**: clean activations copied into the corrupted run, is the component *sufficient* to restore "
            "the answer? Fraction restored = (patched − corrupted) / (clean − corrupted): 1 (orange) brings the clean "
            "metric back, 0 (white) changes nothing, negative (blue) pushes further toward the corrupted answer. "
            if denoise
            else "**Noising**: corrupted activations copied into the clean run, is the component *necessary* for the "
            "answer? Fraction destroyed = (clean − patched) / (clean − corrupted): 1 (orange) takes the clean answer's "
            "lead away entirely, 0 (white) changes nothing, negative (blue) strengthens the clean answer. "
        )
        + "The colour scale stops at ±1. As Heimersheim & Nanda advise, read both directions: a small fraction "
        "alone does not show a component is unused."
    )
    show_chart(charts.patch_heads(result.head, value), "heads", width="content")
    mlp = ", ".join(f"block {i}: {formats.with_spec(v, '.2f')}" for i, v in enumerate(result.mlp))
    st.caption(f"Each head's output (z, before W_O) copied at every position. Each MLP at every position: {mlp}.")
    resid, mlp_pos = result.resid_by_position, result.mlp_by_position
    show_chart(charts.patch_components(resid, mlp_pos, c.clean, value, sep), "components-by-position", width="content")
    st.caption(
        "The residual stream entering each block, and each MLP's output, copied at one position at a time. "
        "Entering block 0 the stream is the embedding: only the changed position can matter there."
    )
    show_chart(
        charts.patch_head_positions(result.head_by_position, c.clean, value, sep), "heads-by-position", width="content"
    )
    capped = len(result.positions) < len(c.clean)
    st.caption(
        "Each head's output copied at one position at a time. Positions after the query cannot matter (causal)."
        + (f" Only the first {len(result.positions)} positions are patched on this server." if capped else "")
    )

st.subheader("Logit lens: the answer read after each block")
found = interpret.logit_lens(record, tokens)
if found is not None:
    show_chart(charts.logit_lens(found, int(queries[0])), "logit-lens", width="content")
    st.caption(
        "The residual stream after each block put through the final LayerNorm and the output head, as if the "
        f"model stopped there: the probability of the correct token at the answer's {probe.query_list(queries)} "
        f"(teacher-forced), on this input and as the mean over {words.lens_over}. The last row is the model's output."
    )
docs.link("interventions", "Interventions: patching, the logit lens, head scores, attention as explanation")
