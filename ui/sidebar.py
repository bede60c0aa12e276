"""The shared sidebar: the run configuration every Lab page reads, mirrored in the URL.

dashboard.py draws it once per script run (before the page), so its values persist across pages
and its query parameters (each setting's URL key, attncore.settings) stay in the URL on every page. Its widgets are
read from the settings' records, and a task's own length and fields from its Task. Pages call `selected_run()` or
`make(**overrides)`. Choosing a task with an experiment of its own sets the fields that experiment needs to its
defaults (Task.defaults); leaving it, to the article's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial
from types import SimpleNamespace

import streamlit as st

from attncore import ConfigError, RunConfig, make_run
from attncore import task as tasks
from attncore.settings import LEARNING_RATES, SETTINGS, without_unused
from lab import phrases
from lab.jobs.limits import LIMIT_RANGE
from lab.phrases import SEP
from ui import plain, urls
from ui.limits import limits
from ui.params import folded, url_number, url_radio, url_select, url_toggle

POSITION_LABELS = SETTINGS["position"].labels
NORM_LABELS = SETTINGS["norm"].labels
LEARNING_RATES = list(LEARNING_RATES)
# the sidebar's value of a setting where it differs from the config's: a toggle for a range of lengths 1..L
# (make() turns it into train_min=1), and 0 for off where a number's default is None (N_MAX: '0 = off')
SIDEBAR_ARGS = {"range": ("train_range", False)}


def _sidebar_settings() -> list:
    return [s for s in SETTINGS.values() if s.url and s.name != "length"]


def _tasks() -> list:
    return [tasks.get(name) for name in tasks.names()]


def _own_lengths() -> dict:
    """{query key: task} of the tasks whose length has its own name (the induction task's T): each keeps its value."""
    return {t.length_name: t for t in _tasks() if t.length_name != SETTINGS["length"].url}


class Live(Mapping):
    """A table read from the settings' records and the registered tasks, derived again when either changes (a task
    registered later, in its module or a test, is in it as the tasks imported first are)."""

    def __init__(self, build: Callable[[], dict]):
        self._build, self._made = build, (None, {})

    def _table(self) -> dict:
        made_for = (tasks.names(), tuple(SETTINGS.values()))
        if self._made[0] != made_for:
            self._made = (made_for, self._build())
        return self._made[1]

    def __getitem__(self, key):
        return self._table()[key]

    def __iter__(self) -> Iterator:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())

    def __or__(self, other: Mapping) -> Live:
        return Live(lambda: dict(self) | dict(other))


def _defaults() -> dict:
    """query-parameter key -> (make_run argument, default): every setting with a URL key (attncore.settings), a task's
    own length as `<task>_length` and its fields (Task.fields) with its experiment's defaults where it sets them (the
    modular task's training fraction)."""
    out = {"task": ("task", SETTINGS["task"].default), "L": ("length", SETTINGS["length"].default)}
    out |= {
        s.url: SIDEBAR_ARGS.get(s.url, (s.name, 0 if s.name in OFF_AT_ZERO else s.default))
        for s in _sidebar_settings()
        if s.name != "task"
    }
    out |= {s.url: (s.name, t.defaults.get(s.name, s.default)) for t in _tasks() for s in t.fields}
    return out | {key: (f"{t.name}_length", t.defaults["length"]) for key, t in _own_lengths().items()}


OFF_AT_ZERO = [s.name for s in _sidebar_settings() if s.section != "task" and s.default is None and s.kind is int]
DEFAULTS = Live(_defaults)
# the query keys shown for one task only: a task's own length and its fields
TASK_KEYS = Live(lambda: dict.fromkeys([*_own_lengths(), *(s.url for t in _tasks() for s in t.fields)]))
# the fields a task's experiment sets to its own defaults (and leaving it, back to the article's)
TASK_DEFAULTED = {
    s.url: s.name
    for s in _sidebar_settings()
    if s.section != "task" and any(t.defaults.get(s.name, s.default) != s.default for t in _tasks())
}
ADVANCED = "sidebar_advanced"  # session-state key of the Advanced expander
ADVANCED_FIELDS = {s.name for s in SETTINGS.values() if s.advanced}  # under Advanced
UNBOUNDED = LIMIT_RANGE[1]  # a field with no maximum, cap or task cap: the widget's top (the task's check refuses more)


def task_label(name: str) -> str:
    """A task's label on the pages (Task.label; its name when it has none)."""
    return SETTINGS["task"].format(name)  # the task record's labels read the registry (attncore.settings.TaskLabels)


def task_help() -> str:
    """The task choice's help, from each registered task's summary; a task with an experiment of its own says which
    settings choosing it sets (Task.defaults)."""
    lines = []
    for t in _tasks():
        own = [SETTINGS[k].label for k in t.defaults if k in SETTINGS and SETTINGS[k].section != "task"]
        sets = f" (choosing it sets its experiment's {', '.join(own)})" if own else ""
        lines.append(f"- **{t.shown_name()}**: {t.summary or 'no summary declared'}{sets}.")
    return "\n".join(lines)


def _reset() -> None:
    for key, (_, default) in DEFAULTS.items():
        st.session_state[key] = default


def task_defaults(task: str) -> dict:
    """{query key: value} of the TASK_DEFAULTED fields for a task: its experiment's (Task.defaults: the induction
    task's), else the article's."""
    own = tasks.get(task).defaults if task in tasks.names() else {}
    return {key: own.get(arg, DEFAULTS[key][1]) for key, arg in TASK_DEFAULTED.items()}


def default(key: str, task: str):
    """A setting's default under a task: the TASK_DEFAULTED fields take the induction experiment's with the induction
    task (so a link that says task=induction and nothing else opens that experiment's run), the rest DEFAULTS'."""
    return task_defaults(task)[key] if key in TASK_DEFAULTED else DEFAULTS[key][1]


def _task_changed() -> None:
    """The task radio's callback: into or out of a task with an experiment of its own, its settings take the new
    task's defaults."""
    task, before = st.session_state.get("task"), st.session_state.get("_task_before", DEFAULTS["task"][1])
    if task_defaults(task) != task_defaults(before):
        st.session_state.update(task_defaults(task))
    st.session_state["_task_before"] = task


def set_values(**values) -> None:
    """Set sidebar settings by query-parameter key (e.g. pos="learned"), e.g. as a button's on_click callback."""
    for key, value in values.items():
        if key not in DEFAULTS:
            raise KeyError(f"no sidebar setting {key!r}")
        st.session_state[key] = value


def _widget(s, lim, task: str, key: str | None = None, label: str | None = None, low=None, high=None, **kw):
    """The call drawing a setting's widget (with peek=True, returning its value), read from its record."""
    key, label = key or s.url, label or s.widget_label
    kw |= {"help": s.help} if s.help else {}
    value = default(key, task)
    if s.widget == "toggle":
        return partial(url_toggle, label, key, value, **kw)
    if s.widget in ("select", "radio"):
        options = s.choices or s.levels
        draw = url_radio if s.widget == "radio" else url_select
        return partial(draw, label, key, list(options) if s.levels else options, value, format_func=s.format, **kw)
    ui_low, ui_high = s.ui_range
    low = ui_low if low is None else low
    t = tasks.get(task) if task in tasks.names() else None
    cap = getattr(lim, s.cap) // s.cap_divisor if s.cap and high is None else None  # a task's length: its own
    own = t.defaults.get(s.name) if t else None
    if cap is not None and isinstance(own, int) and own > cap:  # its experiment's own value (the modular task's
        cap = own  # full batch) stays open: a link naming the task opens that run; its cost is metered
    high = min((x for x in (ui_high, high, cap) if x is not None), default=UNBOUNDED)
    kw |= {"fmt": s.fmt} if s.fmt else {}
    return partial(url_number, label, key, value, type(value)(low), type(value)(high), step=s.step, **kw)


def _advanced(lim, task: str) -> dict:
    """The folded fields: query key -> a call drawing its widget (or, with peek=True, returning its value)."""
    return {s.url: _widget(s, lim, task) for s in _sidebar_settings() if s.advanced}


def _widgets(check: bool) -> None:
    lim = limits()
    task = url_radio(
        "Task",
        "task",
        tasks.names(),
        DEFAULTS["task"][1],
        on_change=_task_changed,
        format_func=task_label,
        help=task_help(),
    )
    st.session_state["_task_before"] = task
    t = tasks.get(task)
    label = t.length_label or f"Sequence length {t.length_name}"
    _widget(SETTINGS["length"], lim, task, t.length_name, label, t.length_range[0],
            min(t.length_range[1], getattr(lim, t.length_cap)), help=t.length_help)()  # fmt: skip
    for s in t.fields:
        _widget(s, lim, task)()
    if t.lengths_vary:
        _widget(SETTINGS["train_lengths"], lim, task)()
    for s in _sidebar_settings():  # the main settings of a run (the task's are above, the Advanced ones below)
        if s.section != "task" and not s.advanced:
            _widget(s, lim, task)()
    advanced = _advanced(lim, task)

    def check_config() -> None:  # with the folded fields' values before their widgets exist
        make(**{DEFAULTS[key][0]: draw(peek=True) for key, draw in advanced.items()})

    with folded("Advanced", ADVANCED, check_config if check else None, ADVANCED_FIELDS):
        for draw in advanced.values():
            draw()
    st.button("Reset to defaults", on_click=_reset, width="stretch")
    st.caption("The URL holds these settings: copy it to share this exact view.")


def render(expanded: bool = True) -> None:
    """Draw the run configuration in the sidebar; folded into an expander on pages that don't use it.

    Notices about invalid URL values are shown at the top of the page, where the visitor looks."""
    with urls.collect_notices() as notices, st.sidebar:
        if expanded:
            st.header("Run configuration")
            _widgets(check=True)
        else:
            with st.expander("Run configuration (Lab pages)", expanded=False):
                _widgets(check=False)
    urls.show(notices)


def settings() -> dict:
    """The sidebar's values as make_run keyword arguments."""
    task = st.session_state.get("task", DEFAULTS["task"][1])
    return {arg: st.session_state.get(key, default(key, task)) for key, (arg, _) in DEFAULTS.items()}


def make(**overrides) -> RunConfig:
    """The sidebar's RunConfig with some fields replaced (make_run names); raises ConfigError. A task with a length
    of its own (the induction task's T) takes it (length in `overrides` is its length), and its fields (Task.fields);
    a task whose lengths do not vary never a range of lengths."""
    kw = settings() | overrides
    task = tasks.get(kw["task"])
    # its experiment's defaults of settings the sidebar has no widget for (the modular task's Adam β2)
    kw = {k: v for k, v in task.defaults.items() if k in SETTINGS and not SETTINGS[k].url and k != "length"} | kw
    own_lengths = {f"{t.name}_length": t for t in _own_lengths().values()}
    lengths = {arg: kw.pop(arg) for arg in own_lengths}
    fields = {f: kw.pop(f) for t in _tasks() for f in t.field_names() if f in kw}
    if f"{task.name}_length" in lengths:
        kw["length"] = overrides.get("length", lengths[f"{task.name}_length"])
    kw |= {f: value for f, value in fields.items() if f in task.field_names()}
    if not task.lengths_vary:
        kw["train_range"] = False  # the toggle is not shown for it
    if kw.pop("train_range") and "train_lengths" not in kw and kw.get("train_min") is None:
        kw["train_min"] = 1
    if kw.get("train_min") is not None and "train_lengths" not in kw:
        kw["train_lengths"] = (kw.pop("train_min"), kw["length"])
    kw |= {name: kw[name] or None for name in OFF_AT_ZERO}
    kw = without_unused(kw)  # a toggle or a number whose setting needs another that is off does nothing
    return make_run(kw.pop("task"), kw.pop("length"), kw.pop("seed"), **kw)


def selected_run(**overrides) -> RunConfig:
    """Like make(), but an invalid combination shows one clear message in place and stops the page."""
    try:
        return make(**overrides)
    except ConfigError as e:
        show_config_error(e)
        st.stop()


# config field -> the sidebar's label for it, so the message names what the visitor can change
FIELD_LABELS = Live(
    lambda: (
        {s.config_field: s.label for s in SETTINGS.values()}
        | {s.name: s.label for s in SETTINGS.values()}
        | {t.length_name: t.length_label or f"Sequence length {t.length_name}" for t in _tasks()}
        | {"length": "Sequence length L", "vocab_size": "Vocabulary size"}
    )
)


def show_config_error(e: ConfigError) -> None:
    """The library's message, shown literally; the field is in view (render unfolds Advanced for it)."""
    where = "the sidebar's Advanced section" if e.field in ADVANCED_FIELDS else "the sidebar"
    plain.error(
        "This configuration is not valid.", f"{FIELD_LABELS.get(e.field, e.field)}: {e.message}. Change it in {where}."
    )


def describe(run: RunConfig, seed: bool = True) -> str:
    """One line naming a run, e.g. for captions and titles; seed=False leaves the seed out (a view over seeds).
    Each value is written as its setting's record says (lab.phrases), the lengths as the task does."""
    return phrases.describe(run, () if seed else ("seed",))


def schedule_text(t) -> str:
    """' · warm-up 300 steps, cosine decay to 0.1 lr' for a TrainConfig with a schedule, else '' (the description's
    schedule group, lab.phrases)."""
    text = phrases.group_text(SimpleNamespace(train=t), "schedule")
    return SEP + text if text else ""
