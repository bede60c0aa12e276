"""Lessons: a gallery of every lesson of lab.lessons (a page at chosen values, some controls hidden or locked, a
teacher's note and a question), each with its picture, its title, its idea in one line and the link that opens it."""

import streamlit as st

from lab.lessons import LESSONS, picture
from ui import nav
from ui.plain import plain

CARDS_PER_ROW = 3

st.title("Lessons")
st.caption(
    "Each lesson opens a page at chosen values with a teacher's note and a question; some controls are hidden or "
    "locked. Make your own from any page's sidebar: Make a lesson link. docs/lessons.md says how to write one, and "
    "how to store every lesson's runs before a class (`python -m attncore lessons warm`)."
)
specs = {p.url_path: p for p in nav.PAGES}
cols = st.columns(CARDS_PER_ROW)
for i, lesson in enumerate(LESSONS):
    spec = specs[lesson.page]
    with cols[i % CARDS_PER_ROW].container(border=True):
        if picture(lesson).exists():
            st.image(str(picture(lesson)), width="stretch")
        st.markdown(f"**{plain(lesson.title)}** · {plain(spec.title)}")
        st.caption(plain(lesson.idea))
        st.page_link(spec.path, label="Open the lesson", icon=":material/school:", query_params=lesson.query())
st.caption(
    "Each picture is the first chart of the lesson's page (or its top), as a warmed server drew it on the machine "
    "that made the pictures (benchmarks/lesson_pictures.py); a lesson draws its own from this server's runs."
)
