"""Explanations: what kind of head each one looks like (detection scores, and over training), and whether its
map explains the output: the permutation test, Jain & Wallace's adversarial rows, other seeds' maps."""

import streamlit as st

from attncore.interpret import explain, heads
from attncore.task import task_of
from lab import formats
from ui import docs, interpret, probe, runs, sidebar, tables
from ui.charts import interpret as charts
from ui.figure import show_chart
from ui.limits import limits
from ui.params import url_multiselect, url_number, url_select

st.title("Explanations")
run = sidebar.selected_run()
st.caption(sidebar.describe(run))
record = runs.require(run, sidebar.describe(run))
lim, words, sep = limits(), probe.words(run), probe.has_sep(run)
queries = [int(q) for q in task_of(run.task).answer_queries(run.task)]
tokens = probe.chosen_tokens(run, record, key="exp_seq")
st.markdown(probe.answer_line(run, record, tokens))

st.subheader("Head types: where each head's attention falls")
found = interpret.head_scores(record, tokens)
if found is not None:
    for key, what in (("probe", "this input"), ("test", "the mean over the first 100 held-out inputs")):
        show_chart(charts.detection_scores(found[key]), f"detection-scores-{key}", width="content")
        st.caption(f"Score on {what}.")
    st.caption(
        f"Score = Σ(A ⊙ D) / ΣA over {words.score_rows}: the share of a head's weight on a 0/1 pattern D. "
        + " · ".join(f"**{n}**: {d}" for n, d in heads.patterns_of(run.task).items())
        + "."
    )
    show_chart(charts.scores_over_training(found["steps"], found["training"]), "scores-over-training")
    st.caption("The same scores on the probe sequence at each stored training snapshot.")

st.subheader("Attention is not explanation, measured on this model")
# an operator's cap above the search's own bound is clamped to it, and said
max_restarts = min(lim.max_explain_restarts, explain.MAX_RESTARTS)
max_steps = min(lim.max_explain_steps, explain.MAX_STEPS)
if (max_restarts, max_steps) != (lim.max_explain_restarts, lim.max_explain_steps):
    st.info(
        f"This server's limits allow {lim.max_explain_restarts:,} restarts and {lim.max_explain_steps:,} Adam steps; "
        f"the search itself stops at {explain.MAX_RESTARTS:,} and {explain.MAX_STEPS:,}: those are used.",
        icon=":material/settings:",
    )
labels = [f"L{i}H{h}" for i in range(run.model.n_layers) for h in range(run.model.n_heads)]
best = "L{}H{}".format(*heads.best_head(record.params, run, tokens))
c1, c2, c3, c4 = st.columns(4)
with c1:
    picked = url_select("Head", "exp_head", labels, best, help="Default: the map that best matches the task's pattern.")
with c2:
    query = url_select("Answer query", "exp_query", queries, queries[-1])
with c3:
    restarts = url_number("Restarts", "exp_restarts", 5, 1, max_restarts)
with c4:
    steps = url_number("Adam steps", "exp_steps", 500, 10, max_steps, step=50)
seeds = url_multiselect("Baseline seeds (Wiegreffe & Pinter)", "exp_seeds", list(range(10)), [0, 1, 2])
layer, head = labels.index(picked) // run.model.n_heads, labels.index(picked) % run.model.n_heads
others, missing = interpret.baselines(run, seeds)
if missing and st.button(f"Train the {formats.count(len(missing), 'missing baseline seed run')}", key="exp_train"):
    if runs.sweep(missing, "Training the baseline seeds") is not None:
        others, missing = interpret.baselines(run, seeds)
result = interpret.explanation(record, others, tokens, layer, head, query, restarts, steps)
if result is not None:
    st.info(result["finding"], icon=":material/lightbulb:")
    show_chart(charts.permutation_tvd(result["permutation_tvd"]), "permutation-tvd", width="content")
    st.caption(
        f"(a) {picked}'s row at query {query} shuffled among the keys it may see, 100 times: the total variation "
        "distance of the output distribution at that query (orange: 0.01)."
    )
    show_chart(charts.divergences(result), "divergences", width="content")
    st.caption(
        f"(b) {restarts} searches (Adam, lr 1e-2, {steps} steps, from uniform plus noise) for the row farthest "
        "from the original (Jensen–Shannon divergence, at most ln 2: dashed) with the output within TVD 0.01. "
        "(c) The same input in models trained from other seeds: the same-numbered head and the closest head."
        + (f" Not trained yet: seeds {', '.join(str(r.train.seed) for r in missing)}." if missing else "")
    )
    show_chart(charts.rows_chart(result, tokens, sep), "rows", width="content")
    st.caption(interpret.rows_caption(result))
table = interpret.shuffle_table(record, tokens, query)
if table is not None:
    st.markdown(f"**Every head at query {query}: how readable its map is, beside what shuffling it does**")
    tables.show(table, text={c: formats.accuracy for c in table.columns[1:-1]})  # scores 0-1: fixed decimals
    n_heads = run.model.n_layers * run.model.n_heads
    if len(table) < n_heads:
        st.caption(f"Only the first {len(table)} of {n_heads} heads are shuffled one by one on this server.")
docs.link("interventions", "Interventions: patching, the logit lens, head scores, attention as explanation")
