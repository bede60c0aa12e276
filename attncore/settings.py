"""A run's settings, declared once: one record per setting, read by the configs' defaults and checks, the store's
key, the sidebar's widgets and the URL, the command line's flags, Compare's factors and the tables.

A record says which RunConfig field it sets, its default (a task may set its own: Task.defaults), its range or
choices, its URL key, flag and label, how a value is written (and its phrase in a run's description and a variant's
name: lab.phrases), the levels a comparison offers, the setting it needs or follows, whether a sweep shares it, and
whether it enters a run's key only when it differs from its default (a setting added after runs were stored keeps
their keys). A new setting is one record here, its config field and the code where it acts (the model or the
trainer). A task's own field (the induction task's V) is such a record declared on its Task (Task.fields): the
registry puts it into SETTINGS when the task registers (sync_task_fields), so every consumer reads it here too.
Standard library only: the bottom of attncore, under config.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .checks import ConfigError, check_choice, check_float, check_int
from .task import get as task_get
from .task import names as task_names
from .task import on_change

POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "none")
NORMS = ("pre", "post")
DTYPES = ("float32", "float64")
DECAYS = ("none", "linear", "cosine")  # the learning rate after warm-up (attncore.optim.lr_multiplier)
LEARNING_RATES = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2)  # the sidebar's and Compare's choices
MAX_RANDOMIZED = 4096  # largest N_MAX of randomized positions
MAX_EMBED_STD = 10.0  # the largest initial std of the embeddings


class TaskLabels(Mapping):
    """The task setting's labels: each registered task's own (Task.shown_name), read from the registry when asked,
    so a task registered later (in its module, or in a test) is written by its label too."""

    def __getitem__(self, name: str) -> str:
        if name not in task_names():
            raise KeyError(name)
        return task_get(name).shown_name()

    def __iter__(self) -> Iterator[str]:
        return iter(task_names())

    def __len__(self) -> int:
        return len(task_names())


def learning_rate(lr: float) -> str:
    """A learning rate in one notation: 3e-3, 1e-2, 2.5e-4 (mantissa without trailing zeros, plain exponent)."""
    mantissa, exponent = f"{lr:e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def on_off(value: bool) -> str:
    return "on" if value else "off"


@dataclass(frozen=True)
class Setting:
    """One setting of a run. `name` is its make_run keyword (and, unless `field` says otherwise, the field it sets
    in RunConfig's `section`)."""

    name: str
    section: str  # model, train or task: where it lives in RunConfig
    default: Any
    kind: type  # int, float, bool or str
    label: str  # what the pages call it
    low: float | None = None  # the range a config accepts (inclusive; None: unbounded)
    high: float | None = None
    open_low: bool = True  # a number's range excludes `low` (and always `high`), unless closed here
    choices: tuple = ()  # a str setting's values
    labels: dict | None = None  # a choice's label on the pages ({value: label})
    field: str | None = None  # the RunConfig field, if not `name`
    url: str | None = None  # the sidebar's query-parameter key (None: not in the sidebar)
    flag: str | None = None  # the command line's flag (None: none)
    help: str = ""
    advanced: bool = False  # in the sidebar's folded Advanced section
    cap: str | None = None  # the operator limit (ui.limits) that bounds it on a hosted server
    cap_divisor: int = 1  # the widget's largest value is the cap divided by this (k_min: at most half of T)
    optional: bool = False  # in a run's key only when it is not the default (added after runs were stored)
    factor: str | None = None  # its name as a comparison factor (Compare, --group-by); None: not a factor
    factor_label: str | None = None  # the factor's short label (Compare's URL holds it); default: its name
    levels: tuple = ()  # the levels Compare offers, then the ones it preselects
    preselected: tuple = ()
    column: int | None = None  # its place among the runs table's config columns (lab.tables); None: not one
    swept: bool = False  # a sweep takes several values of it (one grid axis)
    metavar: str | tuple | None = None  # the flag's placeholder in --help
    flag_help: str = ""  # the flag's --help text, where the sidebar's help does not fit a command line
    # the sidebar's widget: a number input unless a radio, a select or a toggle; its own range where narrower
    widget: str = "number"
    step: float | None = None
    fmt: str | None = None  # the number input's printf format where Streamlit's default (%0.2f) hides the value
    hint: str = ""  # said after the label in the widget: 'Warm-up steps (0 = none)'
    ui_low: float | None = None
    ui_high: float | None = None
    # how a run's one-line description and a variant's name write it (lab.phrases); "": neither names it
    phrase: str = ""  # a template of the written value ('lr {}', '{} position'); a bool's without {} names it when on
    variant: str | None = None  # the template in a variant's name where it differs ('d {}' beside 'd={}')
    words: dict | None = None  # a value's own words in a variant's name ({False: 'no scaling'}); a bool: 'no <phrase>'
    noun: str = ""  # a count's noun, its plural right ('1 layer', '4 layers'), for the phrase's {}
    spec: str = ""  # a number's format spec in those texts (',': '1,500 steps')
    group: str = ""  # consecutive phrases of one group are joined by commas ('d=32, 4 heads, 2 layers')
    after: str | None = None  # a description names it right after this setting (default: in declaration order)
    named_at: int | None = None  # its place in a variant's name (None: after those placed, in declaration order)
    also_names: tuple = ()  # a variant that changes it names these too (an lr change names the norm, as the article)
    # what it needs, follows and shares
    requires: str | None = None  # the setting it means nothing without (at that one's default, it takes its own)
    needs: str = ""  # why, as an error line says it: 'is the end of a decay'
    follows: tuple | None = None  # (setting, factor): unless given, it is factor times that one (d_ff = 4d)
    shared: bool = False  # one value every run of a sweep shares, a preset's runs too (--steps, --d, ...)

    @property
    def config_field(self) -> str:
        return self.field or self.name

    @property
    def options(self) -> tuple:
        """The values a choice setting takes: its choices, or the registered tasks' names (attncore.task)."""
        return task_names() if self.name == "task" else self.choices

    @property
    def widget_label(self) -> str:
        return f"{self.label} ({self.hint})" if self.hint else self.label

    @property
    def ui_range(self) -> tuple:
        """(low, high) of the sidebar's widget before the operator's cap."""
        low = self.low if self.ui_low is None else self.ui_low
        return low, self.high if self.ui_high is None else self.ui_high

    def format(self, value) -> str:
        """A value as the pages and tables write it."""
        if self.labels and value in self.labels:
            return self.labels[value]
        if self.kind is bool:
            return on_off(value)
        if self.name == "lr":
            return learning_rate(float(value))
        if isinstance(value, float):
            return f"{value:g}"
        return str(value)

    def is_set(self, value) -> bool:
        """Whether a value differs from the default (an optional setting is then in the run's key)."""
        return value != self.default

    def check(self, value) -> None:
        """Raise ConfigError unless the value is of the setting's kind and in its range or choices (the field named
        as the config names it): a number in [low, high) or (low, high) (open_low). The configs check the two
        numbers whose ranges are closed at the top (embed_std, min_lr_ratio) with messages of their own."""
        field = self.config_field
        if self.kind is float:
            check_float(field, value, self.low, self.high, open_low=self.open_low)
        elif self.kind is int:
            check_int(field, value, int(self.low), None if self.high is None else int(self.high))
        elif self.kind is bool:
            if not isinstance(value, bool):
                raise ConfigError(field, f"must be true or false, got {value!r}")
        elif self.options:
            check_choice(field, value, self.options)


S = Setting
SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        # the task: its name, its length (L, or the task's own: Task.length_name) and a range of training lengths;
        # a task's own fields follow these, declared on its Task (Task.fields) and added by sync_task_fields
        S("task", "task", "copy", str, "Task", field="name", url="task", flag="--task", factor="task",
          labels=TaskLabels(), preselected=("copy", "sort"), widget="radio", swept=True, phrase="{}", named_at=5),
        S("length", "task", 6, int, "Sequence length", low=1, url="L", flag="--length", factor="length",
          factor_label="L",
          cap="max_length", preselected=(4, 6, 8), swept=True, metavar="L", variant="L {}", named_at=6),
        S("train_lengths", "task", None, tuple, "Train on lengths 1..L", url="range", flag="--train-lengths",
          optional=True, factor="range", factor_label="trained from", levels=(None, 1, 2, 4), preselected=(None, 1),
          widget="toggle",
          help="One length per batch, drawn each step (Ruoss et al.).", metavar=("MIN", "MAX"),
          flag_help="train on every length MIN..MAX (L becomes MAX): one length per batch, drawn each step"),
        # the sidebar's main settings
        S("seed", "train", 0, int, "Seed", low=0, high=2**32 - 1, url="seed", flag="--seed", ui_high=9999, swept=True,
          help="Seeds the initial weights and the training batches.", phrase="seed {}", named_at=7),
        S("position", "model", "learned", str, "Position encoding", choices=POSITIONS, url="pos", flag="--position",
          labels={"learned": "learned", "sinusoidal": "sinusoidal", "rope": "RoPE", "alibi": "ALiBi", "none": "none"},
          factor="position", levels=POSITIONS, preselected=("learned", "none"), widget="select", column=0, swept=True,
          phrase="{} position", words={"none": "no position"}, named_at=2),
        S("norm", "model", "pre", str, "LayerNorm", choices=NORMS, url="norm", flag="--norm",
          labels={"pre": "pre-LN", "post": "post-LN"}, factor="norm", factor_label="LayerNorm", levels=NORMS,
          preselected=NORMS,
          widget="radio", column=1, swept=True, phrase="{}", named_at=3),
        S("scaling", "model", True, bool, "Scale scores by 1/√d_k", url="scaling", flag="--no-scaling",
          factor="scaling", levels=(True, False), preselected=(True, False), widget="toggle", column=2, swept=True,
          flag_help="do not divide scores by sqrt(d_head)", phrase="scaling {}",
          words={True: "scaling", False: "no scaling"}, named_at=1),
        # the sidebar's Advanced section
        S("lr", "train", 3e-3, float, "Learning rate", low=0.0, high=1.0, url="lr", flag="--lr", advanced=True,
          factor="lr", factor_label="learning rate", levels=LEARNING_RATES, preselected=(1e-3, 3e-3, 1e-2),
          widget="select", column=3,
          swept=True, phrase="lr {}", named_at=4, also_names=("norm",)),
        S("steps", "train", 1500, int, "Training steps", low=1, high=1_000_000, url="steps", flag="--steps",
          advanced=True, cap="max_steps", factor="steps", levels=(100, 250, 500, 1000, 1500, 2000, 3000),
          preselected=(500, 1500), ui_low=10, step=100, column=4, phrase="{} steps", spec=",", named_at=11,
          shared=True),
        S("d_model", "model", 32, int, "Model width d", metavar="D", low=1, high=4096, url="d", flag="--d",
          advanced=True,
          cap="max_d_model", factor="d", levels=(8, 16, 32, 64, 128, 256), preselected=(16, 32, 64), ui_low=4,
          step=4, column=6, phrase="d={}", variant="d {}", group="size", named_at=8, shared=True),
        S("n_heads", "model", 4, int, "Heads", metavar="HEADS", factor_label="heads", low=1, high=256, url="heads",
          flag="--heads", advanced=True,
          cap="max_heads", factor="heads", levels=(1, 2, 4, 8, 16), preselected=(1, 2, 4), help="Must divide d.",
          column=7, noun="head", phrase="{}", group="size", named_at=9, shared=True),
        S("n_layers", "model", 2, int, "Layers", metavar="LAYERS", low=1, high=64, url="layers", flag="--layers",
          hint="blocks",
          advanced=True, cap="max_layers", factor="layers", preselected=(1, 2), column=8, noun="layer", phrase="{}",
          group="size", named_at=10, shared=True),
        S("batch_size", "train", 32, int, "Batch size", metavar="BATCH", low=1, high=65536, url="batch", flag="--batch",
          advanced=True, cap="max_batch", factor="batch", levels=(8, 16, 32, 64, 128), preselected=(16, 32, 64),
          step=8, column=5, phrase="batch {}", named_at=12, shared=True),
        S("mixed_lengths", "task", False, bool, "Mix lengths in a batch", url="mixed", flag="--mixed-lengths",
          advanced=True, optional=True, widget="toggle",
          help="With a range: right-padded batches, the loss averaged over every answer token, so a long sequence "
          "counts more than a short one. Off: one length per batch, each length weighted equally.",
          flag_help="with --train-lengths: mix lengths in a batch (right padding; the loss averages every answer "
          "token, so long sequences count more; without it one length per batch weights each length equally)",
          phrase="mixed", requires="train_lengths", needs="mixes the lengths of a range"),
        S("randomized_positions", "train", None, int, "Randomized positions N_MAX", low=2, high=MAX_RANDOMIZED,
          url="nmax", flag="--randomized-positions", advanced=True, optional=True, factor="randomized",
          factor_label="randomized N_MAX",
          levels=(None, 32, 64, 128, 256), preselected=(None, 64), hint="0 = off", ui_low=0, ui_high=1024,
          help="Each batch's positions drawn from [0, N_MAX), sorted (Ruoss et al.); at least 2L.", metavar="N_MAX",
          flag_help="each batch's positions: sorted, drawn without replacement from [0, N_MAX) (evaluation: 0..n-1)",
          phrase="randomized positions < {}", after="train_lengths"),
        S("warmup", "train", 0, int, "Warm-up steps", low=0, url="warmup", flag="--warmup", advanced=True,
          optional=True, cap="max_steps", factor="warmup", factor_label="warm-up", levels=(0, 50, 100, 150, 300, 500,
          750, 1000),
          preselected=(0, 300), step=50, hint="0 = none", column=14, swept=True, metavar="N",
          flag_help="steps of linear warm-up (0: none)",
          help="The learning rate rises linearly from lr/W to lr over the first W steps. At most the steps.",
          phrase="warm-up {} steps", variant="warm-up {}", spec=",", group="schedule"),
        S("decay", "train", "none", str, "Learning-rate decay", choices=DECAYS, url="decay", flag="--decay",
          advanced=True, optional=True, labels={"none": "none (constant)", "linear": "linear", "cosine": "cosine"},
          factor="decay", levels=DECAYS, preselected=("none", "cosine"), widget="select", column=15, swept=True,
          flag_help="the learning rate after warm-up: constant (none), or down to --min-lr-ratio x lr at the last step",
          help="After the warm-up: constant, or down to the ratio below times lr at the last step.",
          phrase="{} decay", words={"none": "no decay"}, group="schedule"),
        S("min_lr_ratio", "train", 0.0, float, "Decay to (fraction of lr)", low=0.0, high=1.0, url="minlr",
          flag="--min-lr-ratio", advanced=True, optional=True, step=0.05, column=16, swept=True, metavar="R",
          flag_help="where --decay ends, as a fraction of --lr (0 to 1)",
          help="Where the decay ends at the last step (0 to 1); unused without a decay.",
          phrase="to {} lr", requires="decay", needs="is the end of a decay"),
        S("embed_std", "model", 0.1, float, "Embedding init std", low=0.0, high=MAX_EMBED_STD, url="emb",
          flag="--embed-std", advanced=True, optional=True, ui_low=0.01, step=0.1, column=17,
          flag_help="the initial std of the token embedding (and learned position table)",
          help="The token embedding's (and learned position table's) initial standard deviation: 0.1 in the "
          "article's model, 1 for the induction task (PyTorch's nn.Embedding).", phrase="embedding std {}",
          shared=True),
        S("qk_norm", "model", False, bool, "qk-norm", url="qknorm", flag="--qk-norm", advanced=True, optional=True,
          factor="qk_norm", levels=(False, True), preselected=(False, True), widget="toggle", column=20,
          flag_help="LayerNorm on each head's queries and keys before the scores (Dehghani et al.; Wortsman et al.)",
          help="A LayerNorm (gain and bias over d_head, shared by the heads) on each head's queries and keys, after "
          "the projection and before RoPE and the scores (Dehghani et al. 2023; Wortsman et al. 2023).",
          phrase="qk-norm", after="scaling", shared=True),
        S("weight_decay", "train", 0.0, float, "Weight decay λ", low=0.0, high=10.0, open_low=False, url="wd",
          flag="--weight-decay", advanced=True, optional=True, factor="weight_decay", factor_label="weight decay",
          levels=(0.0, 0.01, 0.1, 1.0), preselected=(0.0, 1.0), step=0.1, fmt="%g", column=18, metavar="W",
          flag_help="decoupled weight decay (AdamW): every weight times 1 - lr x W before each Adam step (0: none)",
          help="AdamW (Loshchilov & Hutter): before each Adam step every trained tensor is multiplied by "
          "1 − lr·λ, lr the step's scheduled rate. 0: plain Adam.", phrase="weight decay {}", shared=True),
        S("z_loss", "train", 0.0, float, "Output z-loss c", low=0.0, high=1.0, open_low=False, url="zloss",
          flag="--z-loss", advanced=True, optional=True, factor="z_loss", factor_label="z-loss",
          levels=(0.0, 1e-4, 1e-3), preselected=(0.0, 1e-4), step=1e-4, fmt="%g", column=19, metavar="C",
          flag_help="add C x (log Z)^2 per predicted token to the objective, Z the output softmax's normaliser "
          "(Wortsman et al. use 1e-4; 0: none); the loss recorded stays the cross-entropy",
          help="Adds c·(log Z)² per predicted token to the training objective, Z the output softmax's normaliser "
          "(Wortsman et al. 2023 use 1e-4). The loss curve stays the cross-entropy. 0: none.", phrase="z-loss {}",
          shared=True),
        # settings of the command line and the configs only
        S("d_ff", "model", 128, int, "FFN width d_ff", low=1, high=65536, flag="--d-ff", flag_help="default 4d",
          column=9, variant="d_ff {}", follows=("d_model", 4), shared=True),
        S("dtype", "model", "float32", str, "dtype", choices=DTYPES, column=10, variant="{}"),
        S("beta1", "train", 0.9, float, "Adam β1", low=0.0, high=1.0, open_low=False, column=11, variant="beta1 {}"),
        S("beta2", "train", 0.999, float, "Adam β2", low=0.0, high=1.0, open_low=False, column=12, variant="beta2 {}"),
        S("eps", "train", 1e-8, float, "Adam ε", low=0.0, high=1.0, column=13, variant="eps {}"),
    )
}  # fmt: skip


_task_fields: dict[str, Setting] = {}  # the registered tasks' fields as sync_task_fields last put them in SETTINGS


def task_fields() -> dict[str, Setting]:
    """{name: record} of the registered tasks' own fields (Task.fields), in registry order; ValueError for a field
    that is not a task setting, or one name two tasks declare with different records."""
    out: dict[str, Setting] = {}
    for name in task_names():
        for s in task_get(name).fields:
            if s.section != "task" or s.field not in (None, s.name) or s.optional:
                raise ValueError(f"the {name} task's field {s.name!r} must be a setting of section 'task' named by "
                                 "its own field, in a run's key whenever the task is (optional False)")  # fmt: skip
            if out.get(s.name, s) != s:
                raise ValueError(f"the {name} task's field {s.name!r} is another task's field with another record")
            out[s.name] = s
    return out


def sync_task_fields() -> None:
    """Put the registered tasks' fields into SETTINGS (after the task's own length and range, in registry order) and
    drop those of a task no longer registered: attncore.task calls it on every register and unregister, so the
    consumers of SETTINGS (configs, flags, sidebar, URL, tables) read a task's fields as any other setting's."""
    fields = task_fields()
    rest = {name: s for name, s in SETTINGS.items() if name not in _task_fields}
    clash = sorted(set(fields) & set(rest))
    if clash:
        raise ValueError(f"a task's field {clash[0]!r} has the name of a setting already")
    ordered: dict[str, Setting] = {}
    for name, s in rest.items():
        ordered[name] = s
        if name == "train_lengths":
            ordered |= fields
    SETTINGS.clear()
    SETTINGS.update(ordered)
    _task_fields.clear()
    _task_fields.update(fields)


on_change(sync_task_fields)
sync_task_fields()


def in_section(section: str) -> list[Setting]:
    """The settings stored in one RunConfig section, in declaration order."""
    return [s for s in SETTINGS.values() if s.section == section]


def optional_fields() -> dict[str, dict[str, Any]]:
    """{section: {field: default}} of the settings a run's key holds only when they differ from their default."""
    out: dict[str, dict[str, Any]] = {"model": {}, "train": {}, "task": {}}
    for s in SETTINGS.values():
        if s.optional:
            out[s.section][s.config_field] = s.default
    return out


def factors() -> dict[str, Setting]:
    """{factor name: setting} of the settings a comparison may vary."""
    return {s.factor: s for s in SETTINGS.values() if s.factor}


def by_field(field: str) -> Setting | None:
    """The setting a ConfigError's field names (its config field or its name)."""
    return next((s for s in SETTINGS.values() if field in (s.name, s.config_field)), None)


def table_columns() -> list[str]:
    """The config columns of the runs table that make two runs of one task, length and seed differ."""
    return [s.name for s in sorted((s for s in SETTINGS.values() if s.column is not None), key=lambda s: s.column)]


POSITIONAL = ("task", "length", "seed")  # make_run's positional arguments: a run's task, its length and its seed


def value_of(run, s: Setting):
    """A setting's value in a RunConfig."""
    return getattr(getattr(run, s.section), s.config_field)


def settings_of(run) -> dict[str, Any]:
    """make_run keywords that rebuild `run`: every setting's value, None for one that follows another (d_ff = 4d)
    so that it follows a new value of that one too."""
    kw = {name: value_of(run, s) for name, s in SETTINGS.items()}
    for s in SETTINGS.values():
        if s.follows and kw[s.name] == s.follows[1] * kw[s.follows[0]]:
            kw[s.name] = None
    return kw


def without_unused(kw: dict[str, Any]) -> dict[str, Any]:
    """make_run keywords with each setting that needs another at that one's default set to its own default: mixing
    lengths needs a range, and without a decay it has no end (the configs refuse the contradiction; a sidebar's
    toggle left on or a sweep's product of values drops it)."""
    out = dict(kw)
    for s in SETTINGS.values():
        required = SETTINGS.get(s.requires) if s.requires else None
        if required and s.name in out and not required.is_set(out.get(s.requires, required.default)):
            out[s.name] = s.default
    return out


def check_requirements(values: dict[str, Any], named=lambda s: s.config_field) -> None:
    """Raise ConfigError for a setting set while the one it needs is at its default (a record's `requires`), naming
    what to give: 'is the end of a decay: give decay linear or cosine too, or leave it at 0'. `values` holds
    settings by name; `named` says how the message names the needed one (its field; a flag on the command line)."""
    for s in SETTINGS.values():
        required = SETTINGS.get(s.requires) if s.requires else None
        if required is None or s.name not in values or not s.is_set(values[s.name]):
            continue
        if not required.is_set(values.get(s.requires, required.default)):
            others = " or ".join(str(v) for v in required.options if required.is_set(v))
            give = f"{named(required)} {others}".strip()
            leave = "leave it off" if s.kind is bool else f"leave it at {s.format(s.default)}"
            raise ConfigError(s.config_field, f"{s.needs}: give {give} too, or {leave}")
