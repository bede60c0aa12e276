"""The URL layer: every query parameter is parsed and checked before the widget bound to it can read it.

Streamlit 1.67 seeds a widget made with `bind="query-params"` from the query string the page was opened
with, at the moment the widget is registered (first visit, a new page, back/forward), and some bad values
make it raise (`?steps=inf`: OverflowError in number_input). ui.params calls `checked()` just before it
creates each widget: a valid value is rewritten in the widget's own spelling (`rope` -> `RoPE`, `1e3` ->
`1000`); an invalid one is removed, so the widget starts at its default, and the page shows one plain-text
notice naming the parameter and what it accepts. Parameters no widget reads are left alone (they do nothing).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from attncore import ConfigError
from attncore.checks import ASCII_NUMBER
from ui.plain import clip, plain

# a parser: the URL's values for one key -> (the Python value, its spelling in the URL); Rejected if invalid
Parser = Callable[[list[str]], tuple[object, str | list[str]]]
NUMBER = ASCII_NUMBER  # the flags' syntax: ASCII digits only ('٤٠٩٦' is not 4096); 'inf' and 'nan' are not finite
TRUE, FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off"}
_collected: ContextVar[list[str] | None] = ContextVar("url_notices", default=None)


class Rejected(ValueError):
    """A URL value a parser does not accept; the message says what is allowed."""


def number(min_value, max_value, integer: bool) -> Parser:
    """A finite number in [min_value, max_value]; a whole one if `integer`."""
    kind = "a whole number" if integer else "a number"
    allowed = (
        f"{kind} from {min_value:,} to {max_value:,}" if integer else f"{kind} from {min_value:,g} to {max_value:,g}"
    )

    def parse(values: list[str]):
        raw = values[-1].strip()
        x = float(raw) if NUMBER.fullmatch(raw) else math.nan  # '1e309' -> inf
        if not (math.isfinite(x) and min_value <= x <= max_value and (x.is_integer() or not integer)):
            raise Rejected(allowed)
        value = int(x) if integer else x
        return value, str(value)

    return parse


def _matches(raw: str, options: Sequence, labels: list[str]) -> list[int]:
    """Indices of the options `raw` names: its label exactly, else label or value case-insensitively, else a
    number equal to a numeric option (lr=3e-3 for 0.003)."""
    if raw in labels:
        return [labels.index(raw)]
    low = raw.strip().lower()
    found = [i for i, (o, lab) in enumerate(zip(options, labels, strict=True)) if low in (lab.lower(), str(o).lower())]
    if not found and NUMBER.fullmatch(raw.strip()):
        x = float(raw)
        found = [i for i, o in enumerate(options) if isinstance(o, int | float) and not isinstance(o, bool) and o == x]
    return found


def _one_of(labels: list[str]) -> str:
    return "one of " + ", ".join(labels)


def choice(options: Sequence, format_func: Callable) -> Parser:
    """One option, named by its label (what the URL holds) or its value, e.g. RoPE or rope."""
    options = list(options)
    labels = [str(format_func(o)) for o in options]

    def parse(values: list[str]):
        found = _matches(values[-1], options, labels)
        if len(found) != 1:
            raise Rejected(_one_of(labels))
        return options[found[0]], labels[found[0]]

    return parse


def choices(options: Sequence, format_func: Callable, max_selections: int | None = None) -> Parser:
    """Any of the options, one per repeated key (?k=a&k=b) or comma-separated (?k=a,b); duplicates dropped."""
    options = list(options)
    labels = [str(format_func(o)) for o in options]
    allowed = ("any of " if max_selections is None else f"up to {max_selections} of ") + ", ".join(labels)

    def parse(values: list[str]):
        picked: list[int] = []
        for raw in values:
            parts = [raw] if _matches(raw, options, labels) else [p for p in raw.split(",") if p.strip()]
            for part in parts:
                found = _matches(part, options, labels)
                if len(found) != 1:
                    raise Rejected(allowed)
                picked += [i for i in found if i not in picked]
        if max_selections is not None and len(picked) > max_selections:
            raise Rejected(allowed)
        return [options[i] for i in picked], [labels[i] for i in picked]

    return parse


def flag(values: list[str]):
    """true or false (also 1/0, yes/no, on/off)."""
    raw = values[-1].strip().lower()
    if raw not in TRUE | FALSE:
        raise Rejected("true or false")
    return raw in TRUE, str(raw in TRUE).lower()


def text(max_chars: int, check: Callable[[str], object] | None = None) -> Parser:
    """Free text of at most max_chars characters that `check` (raising ConfigError) accepts."""

    def parse(values: list[str]):
        raw = values[-1]
        if len(raw) > max_chars:
            raise Rejected(f"at most {max_chars} characters")
        try:
            if check is not None:
                check(raw)
        except ConfigError as e:
            raise Rejected(clip(e.message, 80)) from None  # it may quote the text: the notice quotes it already
        return raw, raw

    return parse


@contextmanager
def _query_params():
    """Streamlit's QueryParams of this session (None outside a script run)."""
    ctx = get_script_run_ctx()
    if ctx is None:
        yield None
        return
    with ctx.session_state.query_params() as qp:
        yield qp


def _rewrite(key: str, url: str | list[str] | None) -> None:
    """Set (or remove, url None) one parameter in the URL *and* in the snapshot Streamlit seeds widgets from.

    st.query_params cannot do it: it only edits the current URL (the seed snapshot keeps the raw value) and
    refuses keys bound to a widget. This uses Streamlit 1.67's QueryParams; tests/test_urls.py fails if a
    Streamlit upgrade changes how binding reads the URL.
    """
    with _query_params() as qp:
        if qp is None:
            return
        if url is None:
            qp._initial_query_params.pop(key, None)
            qp.remove_param(key)
        else:
            qp._initial_query_params[key] = [url] if isinstance(url, str) else list(url)
            qp.set_with_no_forward_msg(key, url)
            qp._send_query_param_msg()


def write(key: str, url: str | list[str] | None) -> None:
    """Put a widget's value (in its own spelling) in the URL, or remove its parameter (None)."""
    _rewrite(key, url)


def raw(key: str) -> list[str] | None:
    """The values the URL the page was opened with holds for `key` (None: no such parameter), unchecked."""
    with _query_params() as qp:
        found = None if qp is None else qp.get_initial_value(key)
    return [found] if isinstance(found, str) else found


def checked(key: str, label: str, parse: Parser, default_text: str) -> tuple[bool, object]:
    """(True, value) if the URL holds a valid value for `key` (rewritten in the widget's spelling), else
    (False, None); an invalid value is removed and noticed once."""
    values = raw(key)
    if values is None:
        return False, None
    try:
        value, url = parse(values)
    except Rejected as e:
        _rewrite(key, None)
        shown = clip(",".join(values))
        notice(f"URL parameter {key}={shown} ignored. {label}: {e}. Using the default, {default_text}.")
        return False, None
    if url != (values[-1] if isinstance(url, str) else values) and url != []:  # [] : leave ?k= to Streamlit
        _rewrite(key, url)
    return True, value


def notice(message: str) -> None:
    """A notice about the URL: shown now, in place, unless `collect_notices` holds it for later."""
    pending = _collected.get()
    if pending is None:
        show([message])
    else:
        pending.append(message)


def show(messages: list[str]) -> None:
    for message in messages:
        st.warning(plain(message), icon=":material/link_off:")


@contextmanager
def collect_notices() -> Iterator[list[str]]:
    """Hold the notices raised inside (e.g. by the sidebar's widgets) so the caller shows them elsewhere."""
    token = _collected.set([])
    try:
        yield _collected.get()
    finally:
        _collected.reset(token)
