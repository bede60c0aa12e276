"""The "Make a lesson link" control: the page's controls with hide and lock boxes, a note, a question and its answer,
and the link they make (ui.lesson reads it), shown as plain code. Drawn in the sidebar before the page runs (a page
may end in st.stop(), after which nothing more is drawn), so it lists the controls the page's last run drew; opening
it reruns the page, so an open one lists them all. A closed one draws nothing inside (its table and text areas
are drawn only while it is open)."""

from __future__ import annotations

import zlib
from urllib.parse import urlencode, urlsplit

import pandas as pd
import streamlit as st

from ui import lesson, urls

HIDE_COL, LOCK_COL = "Hide", "Lock"


def _origin() -> str:
    """scheme://host of the page in the visitor's browser ('' where unknown, as in a test)."""
    try:
        parts = urlsplit(st.context.url or "")
    except Exception:  # noqa: BLE001 - outside a browser session st.context has no URL
        return ""
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""


def _current(key: str) -> list[str]:
    """A control's value in the URL now (a widget writes it when it differs from its default), else the link's."""
    now = st.query_params.get_all(key)
    return now if now else urls.raw(key) or []


def link(url_path: str, params: dict[str, list[str] | str], origin: str = "") -> str:
    """The URL of a page with these query parameters (each repeated key once per value)."""
    query = urlencode([(k, v) for k, vs in params.items() for v in ([vs] if isinstance(vs, str) else vs)])
    return f"{origin}/{url_path}" + (f"?{query}" if query else "")


def draw(url_path: str) -> None:
    """The expander in the sidebar; the link keeps every control's current value."""
    controls, sidebar = lesson.known_controls()
    with st.sidebar:
        box = st.expander("Make a lesson link", icon=":material/school:", key=f"_lesson_maker_{url_path}",
                          on_change="rerun")  # fmt: skip
    if not box.open:  # closed, it costs nothing: opening it reruns the page, which draws the body
        return
    with box:
        if not controls:
            st.caption("This page has no controls to hide or lock; a note and a question can still be linked.")
            table = pd.DataFrame(columns=["Control", HIDE_COL, LOCK_COL])
        else:
            hide, lock = set(lesson.names(lesson.HIDE)), set(lesson.names(lesson.LOCK))
            table = pd.DataFrame(
                {"Control": [label + (" (sidebar)" if k in sidebar else "") for k, label in controls.items()],
                 HIDE_COL: [k in hide for k in controls], LOCK_COL: [k in lock for k in controls]}
            )  # fmt: skip
            # the labels only, to fit the sidebar (the link names each control by its URL key); a key per list of
            # controls, so that ticks made against one list are not applied to another's rows
            rows = zlib.crc32(" ".join(controls).encode())
            table = st.data_editor(
                table, hide_index=True, disabled=["Control"], key=f"_lesson_controls_{url_path}_{rows}",
                column_config={"Control": st.column_config.TextColumn(width=120),
                               HIDE_COL: st.column_config.CheckboxColumn(width=40),
                               LOCK_COL: st.column_config.CheckboxColumn(width=40)},
            )  # fmt: skip
        texts = {
            param: st.text_area(param.capitalize(), max_chars=lesson.MAX_TEXT, key=f"_lesson_{param}", height=68)
            for param in (lesson.NOTE, lesson.QUESTION, lesson.ANSWER)
        }
        params = {k: _current(k) for k in controls if _current(k)}
        for param, col in ((lesson.HIDE, HIDE_COL), (lesson.LOCK, LOCK_COL)):
            chosen = [k for k, on in zip(controls, table[col], strict=True) if on]
            if chosen:
                params[param] = ",".join(chosen)
        params |= {param: text.strip() for param, text in texts.items() if text.strip()}
        st.caption("The link (copy it; the controls keep the values they have now):")
        st.code(link(url_path, params, _origin()), language=None, wrap_lines=True)
