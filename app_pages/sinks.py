"""Attention sinks: watch a head park its attention on the first token, and test what a sliding window loses."""

import streamlit as st

from attncore.tasks import N_TEST
from attncore.tasks.bigram_backcopy import BB_RUN, N_SNAPSHOT_TEST, uniform_share
from lab import formats
from lab.experiments import sinks, sinks_text
from ui import compare_view, docs
from ui import sinks_view as view
from ui.charts import sinks as charts
from ui.figure import show_chart
from ui.limits import limits
from ui.plain import plain

st.title("Attention sinks")
st.caption(
    f"Bigram-Backcopy (Guo et al. 2024): a BOS token, then N = {BB_RUN['length']} tokens of V = "
    f"{BB_RUN['bigram_vocab']} drawn from a fixed random bigram table, except that after one of the "
    f"{BB_RUN['triggers']} trigger tokens the next token copies the one before the trigger. Watch a head park its "
    "attention on the first token, a sink, and test what a sliding window loses (StreamingLLM's test). All seeds "
    f"train as one metered sweep; the losses are measured on {N_TEST} fixed held-out sequences."
)
lim = limits()
c1, c2 = st.columns([4, 1])
with c1:
    settings, window = view.controls(lim)
with c2:
    seeds = compare_view.seeds_input("sk_seeds", default=sinks.DEFAULT_SEEDS)
wanted = sinks.runs_of(seeds, **settings)
command = sinks.command(seeds, window, **settings)
by_run = compare_view.ensure_trained(wanted, "Training the sinks experiment", "sk_train", command)
if by_run is None:
    st.stop()
tested = view.final_tests(wanted, by_run, window)
if tested is None:
    st.stop()
records = [by_run[r] for r in wanted]
per_seed = [sinks.seed_figures(by_run[r], tested[r]) for r in wanted]
rows = sinks.comparisons(per_seed)
model = wanted[0].model
shape = f"{formats.count(model.n_layers, 'block')} of width {model.d_model} with {formats.count(model.n_heads, 'head')}"
st.caption(plain(f"Each seed: {shape}, embeddings drawn with std {model.embed_std:g}."))
view.finding(per_seed, rows)

st.subheader("The first token's share of attention over training")
uniform = uniform_share(wanted[0].task)
show_chart(charts.sink_share(sinks.sink_frame(records), uniform), "sink-share", width="content")
st.caption(
    f"Each head's mean attention on position 0 from the bigram queries (tokens that are not triggers) of the first "
    f"{N_SNAPSHOT_TEST} held-out sequences, at every snapshot; a thin line per seed and head, orange for each run's "
    + (
        "sink head (the largest share at the end), blue for its other heads."
        if model.n_layers * model.n_heads > 1
        else "one head, its sink head."
    )
    + " Dashed: a head that spreads its attention uniformly over the keys it may read, the mean of 1/(t + 1) over "
    "the same queries."
)

st.subheader("Each head at the end of training")
view.heads_table(per_seed)
st.caption(plain(
    "Share: as in the chart. Gu importance (Gu et al. 2024): the head's mean attention on key 0 over every query of "
    f"a held-out sequence, averaged over the {N_TEST}; sequences above ε: how many score above ε = 0.3. Copy "
    "attention: the mean weight the copy queries (triggers) put on the token before them, the one the copy brings "
    f"back. {sinks_text.sink_sentence(per_seed)}"
))  # fmt: skip

st.subheader(f"StreamingLLM's test at one cache size: {window + 1} keys")
show_chart(
    charts.window_losses(sinks.window_frame(per_seed), per_seed[0]["bayes_loss"]), "window-losses", width="content"
)
st.caption(plain(
    f"The held-out loss of the final weights over the queries t ≥ {window + 1}, whose window of {window + 1} keys "
    f"no longer holds position 0: full attention; windows (every layer) of {window} and {window + 1} keys; "
    f"{window} keys with key 0 kept (the sink, StreamingLLM's cache), or key 1 or key 2 instead (controls), each a "
    "cache of "
    f"{window + 1} keys. A line joins one seed's losses; ticks are the means; dashed, the loss of the predictor that "
    f"knows the table. {sinks_text.window_sentence(per_seed, rows)}"
))  # fmt: skip

st.subheader("Verdicts over seeds")
view.verdict_table(rows)

st.subheader("Value and residual norms at position 0 against the rest")
show_chart(charts.norms(sinks.norms_frame(records)), "norms", width="content")
st.caption(plain(
    "Of the sink head (the head with the largest share on position 0 at the end): the mean norm of its value vector "
    "at position 0 and at the other positions, and of the residual stream entering its block (what its keys read). "
    f"{sinks_text.norms_sentence(per_seed)}"
))  # fmt: skip
st.download_button("Download the seeds (CSV)", sinks.seeds_csv(per_seed), "sinks-seeds.csv", "text/csv")
st.subheader("What the sources claim")
st.markdown(f"{view.SOURCES} What they found, and where the lab's runs agree, is in the chapter:")
docs.link("what-the-papers-found", "Attention sinks: what the papers found")
docs.link("attention-sinks", "Attention sinks: the task, the window test, what the lab's runs printed")
