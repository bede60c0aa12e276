"""Science: the lab's explanation of the model, the tasks and every experiment (docs/), with the article's figures."""

import streamlit as st

from ui import docs, science

st.title("Science")
st.caption(
    "What the lab computes and why, in its own words. Where the lab measures what the article reported, its own "
    "figure follows the article's: the √d_k table, the cost against T and the copy run's heads. After the science "
    "come the reference pages: how the lab is built, its command line, its store, hosting, the GPU fit, "
    "reproducibility and measured benchmarks. The same text is in the repository's docs/ folder."
)
for name in docs.FILES:
    docs.render(name, after=science.AFTER)
