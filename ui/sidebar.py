"""The shared sidebar: the run configuration every Lab page reads, mirrored in the URL.

dashboard.py draws it once per script run (before the page), so its values persist across pages
and its query parameters (task, L, seed, scaling, pos, norm, lr, steps, d, heads, layers, batch, range, mixed,
nmax, warmup, decay, minlr, emb; the induction task's T, V, kmin)
stay in the URL on every page. Pages call `selected_run()` or `make(**overrides)`. Choosing the induction task
sets the fields its experiment needs to its defaults (Task.defaults); leaving it, to the article's.
"""

from __future__ import annotations

from functools import partial

import streamlit as st

from attncore import ConfigError, RunConfig, make_run
from attncore import task as tasks
from attncore.config import DECAYS, MAX_EMBED_STD, POSITIONS
from attncore.tasks.induction import INDUCTION_RUN  # the defaults of the T, V and k_min fields
from lab import formats
from ui import plain, urls
from ui.limits import limits
from ui.params import folded, url_number, url_radio, url_select, url_toggle

POSITION_LABELS = {"learned": "learned", "sinusoidal": "sinusoidal", "rope": "RoPE", "alibi": "ALiBi", "none": "none"}
NORM_LABELS = {"pre": "pre-LN", "post": "post-LN"}
DECAY_LABELS = {"none": "none (constant)", "linear": "linear", "cosine": "cosine"}
LEARNING_RATES = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2]
# query-parameter key -> (make_run argument, default)
DEFAULTS = {
    "task": ("task", "copy"),
    "L": ("length", 6),
    "seed": ("seed", 0),
    "scaling": ("scaling", True),
    "pos": ("position", "learned"),
    "norm": ("norm", "pre"),
    "lr": ("lr", 3e-3),
    "steps": ("steps", 1500),
    "d": ("d_model", 32),
    "heads": ("n_heads", 4),
    "layers": ("n_layers", 2),
    "batch": ("batch_size", 32),
    "range": ("train_range", False),  # train on lengths 1..L (make() turns it into train_min=1)
    "mixed": ("mixed_lengths", False),
    "nmax": ("randomized_positions", 0),  # 0: off
    "warmup": ("warmup", 0),  # steps of linear warm-up, 0: none
    "decay": ("decay", "none"),
    "minlr": ("min_lr_ratio", 0.0),
    "emb": ("embed_std", 0.1),  # the token embedding's initial std (SPEC §4: 0.1)
    "T": ("induction_length", INDUCTION_RUN["length"]),  # the induction task's T, V and k_min
    "V": ("vocab", INDUCTION_RUN["vocab"]),
    "kmin": ("k_min", INDUCTION_RUN["k_min"]),
}
INDUCTION_KEYS = ("T", "V", "kmin")  # shown for a task with its own fields (Task.fields: the induction task) only
# the fields choosing the induction task sets to its experiment's defaults (and leaving it, back to the article's)
TASK_DEFAULTED = {"pos": "position", "heads": "n_heads", "lr": "lr", "steps": "steps", "emb": "embed_std"}
ADVANCED = "sidebar_advanced"  # session-state key of the Advanced expander
ADVANCED_FIELDS = {"lr", "steps", "d_model", "n_heads", "n_layers", "batch_size", "mixed_lengths"}
ADVANCED_FIELDS |= {"randomized_positions", "warmup", "decay", "min_lr_ratio", "embed_std"}  # under Advanced
MAX_NMAX = 1024  # the sidebar's largest N_MAX of randomized positions


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


def has_fields(task: str) -> bool:
    """Whether a task takes the T, V and k_min fields (Task.fields, the induction task's) in place of L and a range."""
    return task in tasks.names() and bool(tasks.get(task).fields)


def _task_changed() -> None:
    """The task radio's callback: into or out of the induction task, its fields take the new task's defaults."""
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


def _lr_label(v: float) -> str:
    return formats.learning_rate(v)  # 3e-3; a URL's lr=0.003 (the value) is accepted too


def _advanced(lim, task: str) -> dict:
    """The folded fields: query key -> a call drawing its widget (or, with peek=True, returning its value)."""
    return {
        "lr": partial(url_select, "Learning rate", "lr", LEARNING_RATES, default("lr", task), format_func=_lr_label),
        "steps": partial(url_number, "Training steps", "steps", default("steps", task), 10, lim.max_steps, step=100),
        "d": partial(url_number, "Model width d", "d", 32, 4, lim.max_d_model, step=4),
        "heads": partial(url_number, "Heads", "heads", default("heads", task), 1, lim.max_heads, help="Must divide d."),
        "layers": partial(url_number, "Layers (blocks)", "layers", 2, 1, lim.max_layers),
        "batch": partial(url_number, "Batch size", "batch", 32, 1, lim.max_batch, step=8),
        "mixed": partial(
            url_toggle,
            "Mix lengths in a batch",
            "mixed",
            False,
            help="With a range: right-padded batches, the loss averaged over every answer token, so a long sequence "
            "counts more than a short one. Off: one length per batch, each length weighted equally.",
        ),
        "nmax": partial(
            url_number,
            "Randomized positions N_MAX (0 = off)",
            "nmax",
            0,
            0,
            MAX_NMAX,
            help="Each batch's positions drawn from [0, N_MAX), sorted (Ruoss et al.); at least 2L.",
        ),
        "warmup": partial(
            url_number,
            "Warm-up steps (0 = none)",
            "warmup",
            0,
            0,
            lim.max_steps,
            step=50,
            help="The learning rate rises linearly from lr/W to lr over the first W steps. At most the steps.",
        ),
        "decay": partial(
            url_select,
            "Learning-rate decay",
            "decay",
            DECAYS,
            "none",
            format_func=DECAY_LABELS.get,
            help="After the warm-up: constant, or down to the ratio below times lr at the last step.",
        ),
        "minlr": partial(
            url_number,
            "Decay to (fraction of lr)",
            "minlr",
            0.0,
            0.0,
            1.0,
            step=0.05,
            help="Where the decay ends at the last step (0 to 1); unused without a decay.",
        ),
        "emb": partial(
            url_number,
            "Embedding init std",
            "emb",
            default("emb", task),
            0.01,
            MAX_EMBED_STD,
            step=0.1,
            help="The token embedding's (and learned position table's) initial standard deviation: 0.1 in the "
            "article's model, 1 for the induction task (PyTorch's nn.Embedding).",
        ),
    }


def _widgets(check: bool) -> None:
    lim = limits()
    task = url_radio(
        "Task",
        "task",
        tasks.names(),
        "copy",
        on_change=_task_changed,
        help="copy: repeat the L symbols; sort: in order; reverse: backwards; induction: T random tokens whose "
        "first k repeat, predicted at every position (choosing it sets its experiment's position, heads, lr, steps "
        "and embedding std).",
    )
    st.session_state["_task_before"] = task
    if has_fields(task):
        url_number("Sequence length T", "T", INDUCTION_RUN["length"], 4, lim.max_induction_length,
                   help="Tokens per sequence; k ~ U{k_min .. T/2} of them repeat.")  # fmt: skip
        url_number("Vocabulary V", "V", INDUCTION_RUN["vocab"], 2, lim.max_vocab, help="Tokens drawn uniformly.")
        url_number("Shortest repeat k_min", "kmin", INDUCTION_RUN["k_min"], 2, lim.max_induction_length // 2,
                   help="The repeated prefix k is drawn from k_min to T/2 per sequence.")  # fmt: skip
    else:
        url_number("Sequence length L", "L", 6, 1, lim.max_length, help="Symbols before the separator.")
        url_toggle(
            "Train on lengths 1..L", "range", False, help="One length per batch, drawn each step (Ruoss et al.)."
        )
    url_number("Seed", "seed", 0, 0, 9999, help="Seeds the initial weights and the training batches.")
    url_select("Position encoding", "pos", POSITIONS, default("pos", task), format_func=POSITION_LABELS.get)
    url_radio("LayerNorm", "norm", ("pre", "post"), "pre", format_func=NORM_LABELS.get)
    url_toggle("Scale scores by 1/√d_k", "scaling", True)
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
    """The sidebar's RunConfig with some fields replaced (make_run names); raises ConfigError. The induction task
    takes its T, V and k_min (length in `overrides` is its T) and never a range of lengths."""
    kw = settings() | overrides
    induction_length, vocab, k_min = kw.pop("induction_length"), kw.pop("vocab"), kw.pop("k_min")
    if has_fields(kw["task"]):
        kw |= {"length": overrides.get("length", induction_length), "vocab": vocab, "k_min": k_min}
    if not tasks.get(kw["task"]).lengths_vary:
        kw["train_range"] = False  # the toggle is not shown for it
    if kw.pop("train_range") and "train_lengths" not in kw and kw.get("train_min") is None:
        kw["train_min"] = 1
    kw["randomized_positions"] = kw["randomized_positions"] or None
    if kw.get("train_lengths") is None and kw.get("train_min") is None:
        kw["mixed_lengths"] = False  # mixing needs a range; the toggle alone does nothing
    if kw["decay"] == "none":
        kw["min_lr_ratio"] = 0.0  # the end of a decay: nothing without one
    return make_run(kw.pop("task"), kw.pop("length"), kw.pop("seed"), **kw)


def selected_run(**overrides) -> RunConfig:
    """Like make(), but an invalid combination shows one clear message in place and stops the page."""
    try:
        return make(**overrides)
    except ConfigError as e:
        show_config_error(e)
        st.stop()


# config field -> the sidebar's label for it, so the message names what the visitor can change
FIELD_LABELS = {
    "task": "Task",
    "length": "Sequence length L",
    "seed": "Seed",
    "position": "Position encoding",
    "norm": "LayerNorm",
    "lr": "Learning rate",
    "steps": "Training steps",
    "d_model": "Model width d",
    "n_heads": "Heads",
    "n_layers": "Layers",
    "batch_size": "Batch size",
    "train_lengths": "Train on lengths 1..L",
    "mixed_lengths": "Mix lengths in a batch",
    "randomized_positions": "Randomized positions N_MAX",
    "warmup": "Warm-up steps",
    "decay": "Learning-rate decay",
    "min_lr_ratio": "Decay to (fraction of lr)",
    "embed_std": "Embedding init std",
    "T": "Sequence length T",
    "vocab": "Vocabulary V",
    "vocab_size": "Vocabulary V",
    "k_min": "Shortest repeat k_min",
}


def show_config_error(e: ConfigError) -> None:
    """The library's message, shown literally; the field is in view (render unfolds Advanced for it)."""
    where = "the sidebar's Advanced section" if e.field in ADVANCED_FIELDS else "the sidebar"
    plain.error(
        "This configuration is not valid.", f"{FIELD_LABELS.get(e.field, e.field)}: {e.message}. Change it in {where}."
    )


def describe(run: RunConfig, seed: bool = True) -> str:
    """One line naming a run, e.g. for captions and titles; seed=False leaves the seed out (a view over seeds)."""
    m, t, k = run.model, run.train, run.task
    lengths = tasks.get(k.name).describe(k)
    lengths += " mixed" if k.mixed_lengths else ""
    lengths += f" · randomized positions < {t.randomized_positions}" if t.randomized_positions else ""
    return (
        f"{k.name} · {lengths} · {f'seed {t.seed} · ' if seed else ''}{POSITION_LABELS[m.position]} position · "
        f"{NORM_LABELS[m.norm]} · scaling {'on' if m.scaling else 'off'} · lr {formats.learning_rate(t.lr)} · "
        f"{t.steps:,} steps · d={m.d_model}, {formats.count(m.n_heads, 'head')}, "
        f"{formats.count(m.n_layers, 'layer')} · batch {t.batch_size}{schedule_text(t)}"
        + (f" · embedding std {m.embed_std:g}" if m.embed_std != DEFAULTS["emb"][1] else "")
    )


def schedule_text(t) -> str:
    """' · warm-up 300 steps, cosine decay to 0.1 lr' for a TrainConfig with a schedule, else ''."""
    parts = [f"warm-up {t.warmup:,} steps"] if t.warmup else []
    if t.decay != "none":
        parts.append(f"{t.decay} decay to {t.min_lr_ratio:g} lr")
    return " · " + ", ".join(parts) if parts else ""
