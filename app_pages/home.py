"""Home: what the lab is, what is cached, the article's sweep in one click, run bundles, links to every page.

The page lays out its sections first and fills the figures last, so after a reproduce or an upload every
metric, button and table in the same view shows the store as it now is.
"""

import streamlit as st

from attncore import ConfigError
from attncore import task as tasks
from attncore.tasks import N_TEST
from lab import provenance
from lab.experiments.regimes import DEPTHS
from lab.presets import preset
from lab.store import list_cached
from lab.tables import ablation_table, accuracy_table, runs_frame, seeds_text
from ui import bundles, docs, nav, runs, sidebar, sweeps, tables
from ui.limits import headless, limits
from ui.plain import plain

st.title("Attention Lab")
st.markdown(
    f"A Transformer decoder written in NumPy ({tables.count(sidebar.DEFAULTS['layers'][1], 'block')} by default; "
    f"the Regimes page's depth experiment goes to {max(DEPTHS)}), with its backward pass by hand, learns "
    f"{tables.count(len(tasks.names()), 'task')}. A training is a pure function of its configuration: it runs "
    "once and is served from the cache after. Pick a task and a configuration in the sidebar, then train it, compare "
    "it across seeds and ablations, and look inside its attention heads."
)
st.markdown("\n".join(f"- **{t.shown_name()}**: {t.summary}." for t in map(tasks.get, tasks.names())))
metrics = st.container()
article = preset("article")
st.header("Reproduce the article")
st.caption(
    f'The {len(article)} runs of the article "Attention, Derived in Full" ([which, and what it reported]'
    f"({docs.href('the-experiments')})): cached runs load at once, the others train here."
)
button, results = st.empty(), st.container()
st.header("Share runs")
share = st.container()

with share:  # an upload lands in the store before anything below is counted
    st.caption("Every stored run in one file (JSON and plain arrays, no pickle), to load on another machine.")
    bundles.share_section()
_, missing = runs.cached_summaries(article)
swept = None
if missing:
    results.caption(
        "The button estimates the missing runs' time and CPU time by a cost model timed on this server, "
        f"{sweeps.workers()} at a time."
    )
clicked = missing and sweeps.train_button(
    "Reproduce the article: train ", missing, "reproduce", "python -m attncore sweep --preset article", place=button
)
if clicked:
    with results:  # the progress shows under the button
        swept = runs.sweep(article, "Article sweep")
    if swept is not None:
        button.empty()

summaries = list_cached()  # after any action: the figures below are the store's state now
done, missing = runs.cached_summaries(article)
if swept and missing:  # trained but not stored (a full or read-only store): show what was computed
    done = swept
if warm_error := bundles.warm_start():
    metrics.warning(warm_error, icon=":material/warning:")
if unverified := runs.unverified_notice():  # a changed ATTNCORE_CACHE_KEY: runs kept, not served
    metrics.warning(unverified, icon=":material/key:")
if foreign := provenance.foreign(summaries):
    metrics.info(
        f"**{tables.count(sum(foreign.values()), 'stored run')} came from another BLAS kernel family than this "
        f"machine's** ({plain(provenance.here())}): {plain(', '.join(f'{k} ({n})' for k, n in foreign.items()))}. "
        "They are served as they are; trained here they would land elsewhere within the seed spread. The Train page "
        "shows each run's platform.",
        icon=":material/memory:",
    )
metrics.caption(limits().mode_text(headless()))  # a headless server is hosted unless told: say so, and how to change
c1, c2, c3 = metrics.columns(3)
c1.metric("Runs in the cache", f"{len(summaries):,}")
c2.metric("Article runs cached", f"{len(done)} of {len(article)}")
try:
    current = sidebar.make()
    c3.metric("Sidebar run", "cached" if runs.cached(current) else "not trained yet")
    metrics.caption(f"Sidebar run: {sidebar.describe(current)}")
except ConfigError as e:
    with metrics:
        sidebar.show_config_error(e)
if done:
    with results:
        st.subheader("Accuracy by task and length")
        accuracy = accuracy_table(done)
        tables.show(accuracy)
        st.caption(f"Mean and minimum over {seeds_text(done)}: per token, and per sequence (all L symbols right).")
        st.subheader("Ablations: copy, L = 6, seed 0")
        tables.show(ablation_table(done)[["variant", "test_loss", "token_accuracy", "sequence_accuracy"]])
        st.caption(
            f"Test loss (teacher-forced, on the {N_TEST} fixed test sequences; '–' for a run stored before it was "
            "kept) and accuracies of the full model and its ablations (the Ablations page compares them over seeds)."
        )

st.header("Pages")
nav.page_links()

with st.expander(f"What is cached ({tables.count(len(summaries), 'run')})"):
    if summaries:
        frame = runs_frame(summaries)
        settings = ["position", "norm", "scaling", "lr", "steps", "batch_size", "d_model", "n_heads", "n_layers"]
        varied = [c for c in settings if frame[c].nunique() > 1]  # what every run shares goes in the caption
        columns = ["task", "length", "seed", *varied, "test_loss", "token_accuracy", "sequence_accuracy"]
        tables.show(frame[columns + ["train_seconds"]])
        shared = [tables.setting_text(c, frame[c].iloc[0]) for c in settings if c not in varied]
        if shared:
            st.caption(f"Every stored run has {', '.join(shared)}.")
    else:
        st.info("Nothing yet: train a run on the Train page, or reproduce the article above.")
