"""Lessons: every lesson of lab.lessons (a page at chosen values, some controls hidden or locked, a teacher's note
and a question), each with a link that opens it."""

import streamlit as st

from lab.lessons import LESSONS
from ui import nav
from ui.plain import plain

st.title("Lessons")
st.caption(
    "Each lesson opens a page at chosen values with a teacher's note and a question; some controls are hidden or "
    "locked. Make your own from any page's sidebar: Make a lesson link. docs/lessons.md says how to write one."
)
titles = {p.url_path: p for p in nav.PAGES}
for lesson in LESSONS:
    spec = titles[lesson.page]
    with st.container(border=True):
        st.markdown(f"**{plain(lesson.title)}** · {plain(spec.title)}")
        st.caption(plain(lesson.note))
        st.page_link(spec.path, label="Open the lesson", icon=":material/school:", query_params=lesson.query())
