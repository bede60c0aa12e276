"""Every chart of the app, drawn with its downloads: `show_chart` draws a chart as st.altair_chart does and, under
it, a small "Download" menu offering the chart as SVG and as PNG (ui.charts.export), named after the page and the
chart ("masks-combined-mask.svg").

Nothing is rendered while a page runs: each button holds a callable that Streamlit calls only on the click
(st.download_button's deferred data, in a thread of its own, no rerun). Renders are made one at a time per server
(a burst of clicks queues on one core instead of taking every core) and kept per spec in a small server-wide memo.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from pathlib import Path

import altair as alt
import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from lab.jobs.memo import MISSING, Memo, MiB
from ui.charts import export

RENDERS = Memo(64, 48 * MiB)  # (spec digest, format) -> the file's bytes, shared by every session
_ONE_RENDER = threading.Lock()
FORMATS = {"svg": ("SVG", "image/svg+xml"), "png": (f"PNG ({export.PNG_SCALE}×, for slides)", "image/png")}


def show_chart(chart: alt.TopLevelMixin, name: str, *, where=None, downloads: bool = True, **kwargs) -> None:
    """st.altair_chart(chart, **kwargs) in `where` (a column, a container; the page by default), then the chart's
    SVG and PNG downloads. `name` says which chart of the page it is (unique on the page)."""
    where = st if where is None else where
    where.altair_chart(chart, **kwargs)
    if not downloads:
        return
    stem = f"{page_name()}-{slug(name)}"
    stretched = kwargs.get("width", "stretch") == "stretch"
    menu = where.popover("Download", icon=":material/download:", type="tertiary", key=f"figure:{stem}")
    with menu:
        for fmt, (label, mime) in FORMATS.items():
            st.download_button(
                label,
                data=lambda fmt=fmt: rendered(chart, fmt, stretched),
                file_name=f"{stem}.{fmt}",
                mime=mime,
                on_click="ignore",
                icon=":material/image:",
            )


def rendered(chart: alt.TopLevelMixin, fmt: str, stretched: bool = False) -> bytes:
    """The chart as an SVG or PNG file's bytes: from the memo, else rendered (one render at a time)."""
    spec = export.figure_spec(chart, stretched)
    key = (hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest(), fmt)
    found = RENDERS.get(key)
    if found is MISSING:
        with _ONE_RENDER:
            found = RENDERS.get(key)  # another click may have rendered it while this one waited
            if found is MISSING:
                found = export.to_svg(spec).encode() if fmt == "svg" else export.to_png(spec)
                RENDERS.put(key, found, len(found))
    return found


def page_name() -> str:
    """The current page's URL path ('kv-cache'; 'home' for the default page), or its script's name."""
    ctx = get_script_run_ctx()
    if ctx is None:
        return "chart"
    info = ctx.pages_manager.get_pages().get(ctx.pages_manager.current_page_script_hash, {})
    return slug(info.get("url_pathname") or Path(info.get("script_path") or "home").stem) or "home"


def slug(text: str) -> str:
    """Lower-case letters, digits and single dashes: a file name's part on any system."""
    return re.sub(r"[^a-z0-9]+", "-", str(text).casefold()).strip("-")
