"""A lesson view: the URL parameters every page reads besides its own, after TensorFlow Playground's links (each
control can be hidden) and NDIF's workshop design (a teacher's note and a question).

    ?hide=scal_seed,scal_reps   those controls are not drawn; they keep the link's values (or their defaults)
    ?lock=scal_T                drawn, disabled, at the link's value
    ?note=...&question=...&answer=...   a teacher's note at the top, a question under it, its answer folded

The names in hide and lock are the URL keys of the page's controls. ui.params registers each control here as it is
drawn (`control`), so the valid names are known only once the page has run: Streamlit runs a page top to bottom and
a first visit has no earlier run to learn them from, and a list declared beside each page would have to be kept in
step with its widgets by hand. So `begin` (before the page) keeps a place at the top of the page, and `finish`
(after it) fills it: which controls the link hides or locks, a "show all controls" button, and one refusal naming
the page's valid names for any name no control has. A page that ends in st.stop() draws nothing after it, so
st.stop() itself checks the names first (`finish(stopping=True)`, against the controls drawn so far and those this
page drew before). Every text is shown literally (ui.plain).

On a hosted server a lesson whose runs are not all stored (lab.experiments.lesson_runs: the runs the page asks the
store for at the link's values) says so in one line under the note, naming `python -m attncore lessons warm`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from attncore import ConfigError
from lab.experiments import lesson_runs
from lab.store import is_cached
from ui import urls
from ui.limits import headless, limits
from ui.plain import clip, plain

HIDE, LOCK, NOTE, QUESTION, ANSWER = "hide", "lock", "note", "question", "answer"
PARAMS = (HIDE, LOCK, NOTE, QUESTION, ANSWER)
MAX_TEXT = 200  # characters, as for every other text parameter (ui.params.MAX_TEXT)
_STATE = "_attnlab_lesson"  # attribute of the script run context holding this run's state
_SEEN = "_lesson_seen"  # session key: page -> the controls its last run drew, {key: (label, drawn by the sidebar)}
_EVER: dict[str, set[str]] = {}  # page -> every control key any run of it drew in this server, in any session
_EVER_LOCK = threading.Lock()
WARM_COMMAND = "python -m attncore lessons warm"


@dataclass
class _Run:
    """What one script run learnt: the controls drawn (URL key -> label, in order) and the place at the top."""

    cursors: object  # the run context's cursors, a new dict every run: tells this run from the one before
    controls: dict[str, str] = field(default_factory=dict)
    page_from: int = 0  # controls[page_from:] are the page's own (before them: the sidebar's)
    page_started: bool = False
    page: str = ""  # the page's URL path, given by begin()
    previous: dict[str, tuple[str, bool]] = field(default_factory=dict)  # the controls of this page's last run
    top: object | None = None  # an st.empty() drawn by begin(), filled by finish()
    banner: object | None = None  # an st.empty() saying which controls are hidden or locked, as they are drawn


def _run() -> _Run | None:
    ctx = get_script_run_ctx()
    if ctx is None:
        return None
    state = getattr(ctx, _STATE, None)
    if state is None or state.cursors is not ctx.cursors:
        state = _Run(ctx.cursors)
        setattr(ctx, _STATE, state)
    return state


def names(param: str) -> list[str]:
    """The control names a hide or lock parameter lists (comma-separated, repeats allowed); [] if over the cap."""
    raw = urls.raw(param) or []
    text = ",".join(raw)
    if len(text) > MAX_TEXT:
        return []
    return list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))


def control(key: str, label: str) -> tuple[bool, bool]:
    """Register a control drawn by ui.params; returns (hidden, locked) as the URL asks."""
    state = _run()
    hidden = key in names(HIDE)
    locked = not hidden and key in names(LOCK)
    if state is not None:
        state.controls.setdefault(key, label)
        if state.page:  # remembered as it goes: a page may end in st.stop()
            seen = st.session_state.setdefault(_SEEN, {})
            seen.setdefault(state.page, {})
            if len(state.controls) == 1:  # this run's first control: forget the last run's
                seen[state.page] = {}
            seen[state.page][key] = (label, not state.page_started)
            with _EVER_LOCK:
                _EVER.setdefault(state.page, set()).add(key)
        if (hidden or locked) and state.banner is not None:
            _say_hidden(state)
    return hidden, locked


def _say_hidden(state: _Run) -> None:
    """The banner, redrawn as each hidden or locked control is met (a page may end in st.stop(), after which
    nothing more can be drawn)."""
    hide, lock = names(HIDE), names(LOCK)
    found = state.controls
    hidden = [found[n] for n in hide if n in found]
    locked = [found[n] for n in lock if n in found and n not in hide]
    kinds = (("hidden", hidden), ("locked", locked))
    parts = [f"{how} ({', '.join(labels)})" for how, labels in kinds if labels]
    state.banner.caption(plain(f"A lesson view: some controls are {' and '.join(parts)}."))


def page_starts() -> None:
    """The controls registered from now on are the page's own (ui.nav calls it just before the page runs)."""
    state = _run()
    if state is not None:
        state.page_from = len(state.controls)
        state.page_started = True


def known_controls() -> tuple[dict[str, str], set[str]]:
    """Every control of this page known now, URL key -> label, the page's own first, and the keys the sidebar draws:
    this run's so far, then those its last run drew after them (for "Make a lesson link", drawn before the page)."""
    state = _run()
    if state is None:
        return {}, set()
    known = {
        k: (label, i < state.page_from or not state.page_started) for i, (k, label) in enumerate(state.controls.items())
    } | {k: v for k, v in state.previous.items() if k not in state.controls}
    order = sorted(known, key=lambda k: known[k][1])  # stable: the page's own first
    return {k: known[k][0] for k in order}, {k for k in known if known[k][1]}


def controls() -> dict[str, str]:
    """The controls drawn so far this run, URL key -> label: the page's own first, then the sidebar's."""
    state = _run()
    if state is None:
        return {}
    items = list(state.controls.items())
    return dict(items[state.page_from :] + items[: state.page_from])


def in_lesson() -> bool:
    """Whether the URL holds any lesson parameter."""
    return any(urls.raw(p) for p in PARAMS)


def _text(param: str, label: str) -> str:
    in_url, value = urls.checked(param, label, urls.text(MAX_TEXT), "none")
    return str(value) if in_url else ""


def begin(page: str = "") -> None:
    """Before the page (at `page`, its URL path): the teacher's note, the question and its folded answer, and a place
    for what finish() says. Draws nothing on a page opened without lesson parameters."""
    state = _run()
    if state is None:
        return
    state.page = page
    state.previous = dict(st.session_state.get(_SEEN, {}).get(page, {}))
    _check_before_stop()
    if not in_lesson():
        return
    for param in (HIDE, LOCK):  # a list over the cap is refused whole
        raw = urls.raw(param)
        if raw and len(",".join(raw)) > MAX_TEXT:
            urls.notice(f"URL parameter {param}={clip(','.join(raw))} ignored: at most {MAX_TEXT} characters.")
    note, question, answer = _text(NOTE, "Note"), _text(QUESTION, "Question"), _text(ANSWER, "Answer")
    if note:
        st.info(plain(note), icon=":material/school:")
    if question:
        st.markdown(f"**Question:** {plain(question)}")
    if answer:
        with st.expander("Answer (open when you have thought about it)"):
            st.markdown(plain(answer))
    if limits().is_hosted(headless()) and (missing := missing_runs(page)):
        st.info(_missing_line(*missing), icon=":material/cloud_off:")
    if names(HIDE) or names(LOCK):
        state.banner = st.empty()
        st.button("Show all controls", icon=":material/visibility:", on_click=_show_all, key="_lesson_show_all")
    state.top = st.empty()


def _show_all() -> None:
    for param in (HIDE, LOCK):
        urls.write(param, None)


def finish(stopping: bool = False) -> None:
    """After the page, or as it calls st.stop() (`stopping`: Streamlit draws nothing after it): refuse in one line
    the names in hide and lock that no control of this page has. A page that stops has not drawn its later controls
    yet: a name is then refused only if no run of this page on this server has drawn it either, and the line says
    the page stopped before the rest."""
    state = _run()
    if state is None or state.top is None:
        return
    hide, lock = names(HIDE), names(LOCK)
    valid = controls()
    with _EVER_LOCK:
        known = set(valid) | (set(state.previous) | _EVER.get(state.page, set()) if stopping else set())
    unknown = [n for n in dict.fromkeys(hide + lock) if n not in known]
    with state.top.container():
        if unknown:
            params = ",".join(p for p, ns in ((HIDE, hide), (LOCK, lock)) if set(ns) & set(unknown))
            allowed = ", ".join(valid) or "none: it has no controls"
            if stopping:
                urls.show([f"URL parameter {params}: no control of this page drawn so far is named "
                           f"{clip(', '.join(unknown))} (the page stopped before the rest of its controls). "
                           f"Valid names so far: {allowed}."])  # fmt: skip
            else:
                urls.show([f"URL parameter {params}: no control of this page is named {clip(', '.join(unknown))}. "
                           f"Valid names: {allowed}."])  # fmt: skip
    state.top = None  # said once


def _check_before_stop() -> None:
    """Make st.stop() check the lesson's names first (once per process): a page that ends in st.stop() draws
    nothing after it, so the check after the page (ui.nav.run) would never run."""
    if getattr(st.stop, "_lesson_checked", False):
        return
    original = st.stop

    def stop():
        finish(stopping=True)
        original()

    stop._lesson_checked = True
    st.stop = stop


def _missing_line(missing: int, total: int) -> str:
    """One line naming the command that stores what is missing (no visitor's text in it: markdown is safe)."""
    if total == 1:
        said = "The run this lesson needs is not stored"
    elif missing == total:
        said = f"None of the {total} runs this lesson needs are stored"
    else:
        said = f"{missing} of the {total} runs this lesson needs {'is' if missing == 1 else 'are'} not stored"
    return f"{said} on this server; `{WARM_COMMAND}` stores every lesson's runs."


def missing_runs(page: str) -> tuple[int, int] | None:
    """(how many are not stored, how many there are) of the runs this page asks the store for at the URL's values
    (lab.experiments.lesson_runs); None when all are stored, or for a page whose runs it cannot tell (the sidebar's
    settings changed)."""
    params = {k: ",".join(st.query_params.get_all(k)) for k in st.query_params}
    try:
        wanted = lesson_runs.runs_of(page, params)
    except (ValueError, ConfigError):
        return None
    missing = sum(not is_cached(run) for run in wanted)
    return (missing, len(wanted)) if missing else None
