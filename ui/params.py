"""Widgets mirrored in the URL, so a copied link restores the exact view.

Every page author uses these instead of bare `st.*` widgets for inputs that change what a page shows:

    from ui.params import url_number, url_select, url_multiselect, url_text, url_toggle

    n = url_number("Keys T", "scal_T", 64, 2, 4096)                  # ?scal_T=128
    mode = url_select("Mask", "mask_mode", ["before", "after"], "before")
    d_ks = url_multiselect("d_k", "scal_dk", [8, 64, 512], [8, 64])  # ?scal_dk=8&scal_dk=512

Rules: `key` is the query-parameter name, so it must be unique in the whole app (prefix it with
the page, e.g. `kv_`, `scal_`); the sidebar owns the short names task, L, seed, scaling, pos, norm,
lr, steps, d, heads, layers, batch. A value equal to the default is left out of the URL, and a
value in the URL that the widget cannot take (out of range, unknown option) is ignored. Built on
Streamlit's own binding (`bind="query-params"`): widgets drawn by dashboard.py keep their
parameters on every page, a page's own parameters are dropped when the visitor leaves the page.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import streamlit as st

BIND = "query-params"


def url_number(label: str, key: str, default, min_value, max_value, *, step=None, fmt: str | None = None, **kw):
    """A number input; int if `default` is an int, float otherwise. A default outside a (capped) range is clamped."""
    default = min(max(default, min_value), max_value)
    return st.number_input(label, min_value, max_value, default, step=step, format=fmt, key=key, bind=BIND, **kw)


def url_select(label: str, key: str, options: Sequence, default=None, *, format_func: Callable = str, **kw):
    """A selectbox; the URL holds format_func(option), so keep labels unique and short."""
    index = list(options).index(default) if default in options else 0
    return st.selectbox(label, options, index=index, format_func=format_func, key=key, bind=BIND, **kw)


def url_radio(label: str, key: str, options: Sequence, default=None, *, format_func: Callable = str, **kw):
    """A horizontal segmented choice (radio buttons)."""
    index = list(options).index(default) if default in options else 0
    return st.radio(label, options, index=index, format_func=format_func, key=key, bind=BIND, horizontal=True, **kw)


def url_multiselect(label: str, key: str, options: Sequence, default: Sequence = (), *, format_func=str, **kw):
    """A multiselect; the URL repeats the key once per chosen option."""
    default = [d for d in default if d in options]  # a cap may have removed a default
    return st.multiselect(label, list(options), default=default, format_func=format_func, key=key, bind=BIND, **kw)


def url_text(label: str, key: str, default: str = "", **kw) -> str:
    """A one-line text input (validate the text in the library, show ConfigError with st.error)."""
    return st.text_input(label, default, key=key, bind=BIND, **kw)


def show_invalid(e: Exception | str, what: str = "input") -> None:
    """One error box for a page input the library rejected (a ConfigError names the field and the range)."""
    st.error(f"**Not a valid {what}**: {e}", icon=":material/error:")


def url_toggle(label: str, key: str, default: bool = False, **kw) -> bool:
    """An on/off switch."""
    return st.toggle(label, default, key=key, bind=BIND, **kw)
