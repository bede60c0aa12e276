"""Science: the lab's explanation of the model, the tasks and every experiment (docs/), with the article's figures."""

import streamlit as st

from ui import docs

st.title("Science")
st.caption(
    "What the lab computes and why, in its own words, with the figures the article reported beside where the "
    "lab measures the same thing. The same text is in the repository's docs/ folder."
)
for name in docs.FILES:
    docs.render(name)
