"""Widgets mirrored in the URL, so a copied link restores the exact view.

Every page author uses these instead of bare `st.*` widgets for inputs that change what a page shows:

    from ui.params import url_number, url_select, url_multiselect, url_select_slider, url_text, url_toggle

    n = url_number("Keys T", "scal_T", 64, 2, 4096)                  # ?scal_T=128
    mode = url_select("Mask", "mask_mode", ["before", "after"], "before")
    d_ks = url_multiselect("d_k", "scal_dk", [8, 64, 512], [8, 64])  # ?scal_dk=8&scal_dk=512 or ?scal_dk=8,512

Rules: `key` is the query-parameter name, so it must be unique in the whole app (prefix it with
the page, e.g. `kv_`, `scal_`); the sidebar owns the short names: each setting's URL key (attncore.settings:
task, L, seed, pos, lr, ...) and a task's own length (T). A value equal to the default is
left out of the URL. Before a widget is created, ui.urls checks its URL value: a choice may be named by its
label or its value (`RoPE` or `rope`), a number must be finite and in range; anything else is replaced by the default
and the page says so in one plain-text notice. Built on Streamlit's own binding (`bind="query-params"`):
widgets drawn by dashboard.py keep their parameters on every page, a page's own parameters are
dropped when the visitor leaves the page. `peek=True` returns the value a widget will show without
drawing it (the sidebar checks its configuration before it draws the section holding a field).

Every widget made here also answers a lesson link (ui.lesson): `?hide=key,...` leaves it undrawn at the link's
value (the value is still returned), `?lock=key,...` draws it disabled; the keys they name are the widgets' keys.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

import streamlit as st

from attncore import ConfigError
from ui import lesson, plain, urls

BIND = "query-params"
MAX_TEXT = 200  # characters in a typed or linked text input
PENDING = "_url_pending"  # session key: widget keys whose value code set, to be written to the URL when drawn


def write_to_url(keys) -> None:
    """Have these widgets' values written to the URL when they are next drawn. A value set in code (a file read into
    a page's fields) reaches the URL through Streamlit's binding only for a widget drawn in the run before; one
    drawn for the first time would keep its value out of a copied link."""
    st.session_state[PENDING] = set(st.session_state.get(PENDING, set())) | set(keys)


def _sync(key: str, value, default, spelled) -> None:
    """Write a pending widget's value to the URL in its own spelling (the default: no parameter)."""
    pending = st.session_state.get(PENDING)
    if pending and key in pending:
        pending.discard(key)
        urls.write(key, None if value == default else spelled(value))


def _view(key: str, label: str, kw: dict) -> bool:
    """Register the widget with the lesson view; True if the link hides it. A locked widget is drawn disabled."""
    hidden, locked = lesson.control(key, label)
    if locked:
        kw["disabled"] = True
    return hidden


def _checked(key: str, parse: urls.Parser, label: str, default, default_text: str):
    """Check the URL's value for `key` (ui.urls); returns the value the widget will show (its state wins)."""
    in_url, value = urls.checked(key, label, parse, default_text)
    return st.session_state[key] if key in st.session_state else value if in_url else default


def url_number(label: str, key: str, default, min_value, max_value, *, step=None, fmt=None, peek=False, **kw):
    """A number input; int if `default` is an int, float otherwise. A default outside a (capped) range is clamped."""
    default = min(max(default, min_value), max_value)
    integer = all(isinstance(v, int) for v in (default, min_value, max_value, step or 1))
    parse = urls.number(min_value, max_value, integer)
    value = _checked(key, parse, label, default, f"{default:,}" if integer else f"{default:,g}")
    if peek or _view(key, label, kw):
        return value
    value = st.number_input(label, min_value, max_value, default, step=step, format=fmt, key=key, bind=BIND, **kw)
    _sync(key, value, default, str)
    return value


def _default(options: Sequence, default):
    return default if default in options else list(options)[0]


def url_select(label: str, key: str, options: Sequence, default=None, *, format_func: Callable = str, peek=False, **kw):
    """A selectbox; the URL holds format_func(option) (a choice's value is accepted too), so keep labels unique."""
    default = _default(options, default)
    value = _checked(key, urls.choice(options, format_func), label, default, str(format_func(default)))
    if peek or _view(key, label, kw):
        return value
    index = list(options).index(default)
    value = st.selectbox(label, options, index=index, format_func=format_func, key=key, bind=BIND, **kw)
    _sync(key, value, default, lambda v: str(format_func(v)))
    return value


def url_select_slider(label: str, key: str, options: Sequence, default=None, *, format_func: Callable = str, **kw):
    """A slider over the given options (e.g. training steps); the URL holds format_func(option)."""
    default = _default(options, default)
    value = _checked(key, urls.choice(options, format_func), label, default, str(format_func(default)))
    if _view(key, label, kw):
        return value
    return st.select_slider(label, list(options), value=default, format_func=format_func, key=key, bind=BIND, **kw)


def url_radio(label: str, key: str, options: Sequence, default=None, *, format_func: Callable = str, **kw):
    """A horizontal segmented choice (radio buttons)."""
    default = _default(options, default)
    value = _checked(key, urls.choice(options, format_func), label, default, str(format_func(default)))
    if _view(key, label, kw):
        return value
    index = list(options).index(default)
    return st.radio(label, options, index=index, format_func=format_func, key=key, bind=BIND, horizontal=True, **kw)


def url_multiselect(label: str, key: str, options: Sequence, default: Sequence = (), *, format_func=str, **kw):
    """A multiselect; the URL repeats the key once per chosen option (a comma list is accepted too)."""
    default = [d for d in default if d in options]  # a cap may have removed a default
    parse = urls.choices(options, format_func, kw.get("max_selections"))
    value = _checked(key, parse, label, default, ", ".join(str(format_func(d)) for d in default) or "none")
    if _view(key, label, kw):
        return list(value)
    value = st.multiselect(label, list(options), default=default, format_func=format_func, key=key, bind=BIND, **kw)
    _sync(key, value, default, lambda vs: [str(format_func(v)) for v in vs])
    return value


def url_text(label: str, key: str, default: str = "", *, check: Callable[[str], object] | None = None, **kw) -> str:
    """A one-line text input. A URL value that `check(text)` rejects (ConfigError) is replaced by the default;
    validate typed text in the library too and show its ConfigError with show_invalid."""
    value = _checked(key, urls.text(MAX_TEXT, check), label, default, repr(default))
    if _view(key, label, kw):
        return value
    return st.text_input(label, default, max_chars=MAX_TEXT, key=key, bind=BIND, **kw)


def show_invalid(e: Exception | str, what: str = "input") -> None:
    """One error box for a page input the library rejected (a ConfigError names the field and the range).

    The message may quote the visitor's text: it is shown literally, never as markdown."""
    plain.error(f"Not a valid {what}:", e)


def url_toggle(label: str, key: str, default: bool = False, *, peek=False, **kw) -> bool:
    """An on/off switch (the URL says true or false; 1/0, yes/no, on/off are accepted too)."""
    value = _checked(key, urls.flag, label, default, str(default).lower())
    if peek or _view(key, label, kw):
        return value
    value = st.toggle(label, default, key=key, bind=BIND, **kw)
    _sync(key, value, default, lambda v: str(v).lower())
    return value


def folded(label: str, key: str, check: Callable[[], object] | None = None, fields: Collection[str] = ()):
    """A folded expander that unfolds itself when check() raises a ConfigError naming one of `fields` (the
    fields inside it), so the field an error names is in view; once per distinct error, so it can be folded
    again. Call it before the expander's widgets exist: check() reads them with peek=True."""
    opened_for = f"_{key}_opened_for"
    try:
        if check is not None:
            check()
        st.session_state.pop(opened_for, None)
    except ConfigError as e:
        if e.field in fields and st.session_state.get(opened_for) != str(e):
            st.session_state[opened_for] = str(e)
            st.session_state[key] = True
    return st.expander(label, key=key, on_change="rerun")
