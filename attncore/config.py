"""Frozen configuration dataclasses for the model, the training and the task.

Every config validates itself in __post_init__ and raises ConfigError naming the
field and the allowed values, so the CLI and the dashboard show one clear line.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from . import task as tasks
from .checks import ConfigError, check_int
from .checks import check_choice as check_choice  # re-exported: the checks' callers import them from here
from .settings import DECAYS as DECAYS
from .settings import DTYPES as DTYPES
from .settings import MAX_EMBED_STD, SETTINGS, check_requirements, in_section, optional_fields, task_fields
from .settings import MAX_RANDOMIZED as MAX_RANDOMIZED
from .settings import NORMS as NORMS
from .settings import POSITIONS as POSITIONS

N_SYMBOLS = 20  # symbols 0..19
SEP = 20  # the separator token
VOCAB_SIZE = N_SYMBOLS + 1
MAX_LENGTH = 64  # longest length L of a task whose lengths vary (a training range, length generalisation)


def _default(name: str):
    """A setting's default, as attncore.settings declares it."""
    return SETTINGS[name].default


def _check(config, *names: str) -> None:
    """Check these settings' values in the config (range or choices, as attncore.settings declares them)."""
    for name in names:
        SETTINGS[name].check(getattr(config, SETTINGS[name].config_field))


def _check_rest(config, section: str, *own: str) -> None:
    """Check every setting of the config's section but `own` (checked by rules of their own): a setting added to
    attncore.settings is checked by its record."""
    _check(config, *(s.name for s in in_section(section) if s.name not in own))


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = VOCAB_SIZE
    d_model: int = _default("d_model")
    n_heads: int = _default("n_heads")
    n_layers: int = _default("n_layers")
    d_ff: int = _default("d_ff")
    max_len: int = 13  # t_max: rows of the position table
    position: str = _default("position")
    norm: str = _default("norm")
    scaling: bool = _default("scaling")  # divide scores by sqrt(d_head)
    dtype: str = _default("dtype")
    embed_std: float = _default("embed_std")  # the token embedding's (and learned position table's) initial std
    qk_norm: bool = _default("qk_norm")  # LayerNorm over d_head on each head's q and k before the scores

    def __post_init__(self):
        check_int("vocab_size", self.vocab_size, 2, 1_000_000)
        _check(self, "d_model", "n_heads")
        if self.d_model % self.n_heads:
            raise ConfigError(
                "n_heads",
                f"must divide d_model={self.d_model}; allowed: "
                + ", ".join(str(h) for h in range(1, self.d_model + 1) if self.d_model % h == 0),
            )
        if self.position == "rope" and self.d_head % 2:
            raise ConfigError("n_heads", f"rope needs an even head size, got d_head={self.d_head}")
        _check(self, "n_layers", "d_ff")
        check_int("max_len", self.max_len, 1, 1_000_000)
        _check_rest(self, "model", "d_model", "n_heads", "n_layers", "d_ff", "embed_std")
        if isinstance(self.embed_std, bool) or not isinstance(self.embed_std, (int, float)):
            raise ConfigError("embed_std", f"must be a number, got {self.embed_std!r}")
        if not 0.0 < self.embed_std <= MAX_EMBED_STD:  # also refuses nan
            raise ConfigError("embed_std", f"must be above 0 and at most {MAX_EMBED_STD:g}, got {self.embed_std}")
        object.__setattr__(self, "embed_std", float(self.embed_std))  # 1 and 1.0: one cache key

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads


@dataclass(frozen=True)
class TrainConfig:
    steps: int = _default("steps")
    batch_size: int = _default("batch_size")
    lr: float = _default("lr")
    beta1: float = _default("beta1")
    beta2: float = _default("beta2")
    eps: float = _default("eps")
    seed: int = _default("seed")
    # N_MAX: each batch's positions drawn from [0, N_MAX) (Ruoss et al.)
    randomized_positions: int | None = _default("randomized_positions")
    warmup: int = _default("warmup")  # W: steps of linear warm-up, lr_t = lr * min(1, (t + 1)/W); 0 = none
    decay: str = _default("decay")  # after warm-up: none, linear or cosine down to min_lr_ratio * lr at the last step
    min_lr_ratio: float = _default("min_lr_ratio")  # r: the decay's end, a fraction of lr
    weight_decay: float = _default("weight_decay")  # λ: AdamW's decoupled decay, θ *= 1 - lr_t·λ before each step
    z_loss: float = _default("z_loss")  # c: the objective adds c·(log Z)² per predicted token (Z: the softmax's sum)

    def __post_init__(self):
        if self.randomized_positions is not None:
            _check(self, "randomized_positions")
        _check(self, "steps")
        check_int("warmup", self.warmup, 0, self.steps)  # at most the steps
        _check(self, "decay")
        if isinstance(self.min_lr_ratio, bool) or not isinstance(self.min_lr_ratio, (int, float)):
            raise ConfigError("min_lr_ratio", f"must be a number, got {self.min_lr_ratio!r}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:  # also refuses nan
            raise ConfigError("min_lr_ratio", f"must be in [0, 1], got {self.min_lr_ratio}")
        # a decay's end without a decay: else two keys for one run
        check_requirements({s.name: getattr(self, s.config_field) for s in in_section("train")})
        object.__setattr__(self, "min_lr_ratio", float(self.min_lr_ratio))  # 0 and 0.0: one cache key
        _check_rest(self, "train", "randomized_positions", "steps", "warmup", "decay", "min_lr_ratio")
        object.__setattr__(self, "weight_decay", float(self.weight_decay))  # 0 and 0.0: one cache key
        object.__setattr__(self, "z_loss", float(self.z_loss))


@dataclass(frozen=True, init=False)
class TaskConfig:
    """A run's task: its name, its length and range of lengths, and its own fields (Task.fields, e.g. the induction
    task's vocab and k_min), read as attributes (`task.vocab`; None for another task's field). Written flat as
    before the fields moved onto their tasks: `TaskConfig("induction", 32, vocab=32, k_min=4)`, and a run's key
    holds each of the task's fields beside name and length (RunConfig.to_dict), none of another task's."""

    name: str = "copy"
    length: int = 6  # L: symbols to copy or sort; with train_lengths the longest trained (and evaluated) length.
    # The induction task: T, the tokens of a sequence.
    train_lengths: tuple[int, int] | None = None  # (L_min, L_max = length): train on every length of the range
    mixed_lengths: bool = False  # with train_lengths: lengths mixed in a batch (right padding), else one per batch
    own: tuple[tuple[str, Any], ...] = ()  # ((field, value), ...) of the task's fields, in its declaration order

    def __init__(self, name="copy", length=6, train_lengths=None, mixed_lengths=False, own=(), **fields):
        for key, value in (("name", name), ("length", length), ("train_lengths", train_lengths),
                           ("mixed_lengths", mixed_lengths)):  # fmt: skip
            object.__setattr__(self, key, value)
        given = dict(own) | {key: value for key, value in fields.items() if value is not None}
        task = tasks.get(self.name)  # ConfigError naming the registered tasks
        declared = {s.name: s for s in task.fields}
        for key in given:
            if key not in declared:
                owner = next((t for t in tasks.names() if key in tasks.get(t).field_names()), None)
                if owner is None:
                    raise TypeError(f"TaskConfig() got an unexpected keyword argument {key!r}")
                raise ConfigError(key, f"is a setting of the {owner} task, not of {self.name}")
        object.__setattr__(self, "own", tuple((key, given.get(key, s.default)) for key, s in declared.items()))
        self.__post_init__()

    def __getattr__(self, name: str):
        """A field of the task (None where the config's task has no such field but a registered one does)."""
        own = dict(self.__dict__.get("own", ()))  # __dict__: no recursion before __init__ has set it (unpickling)
        if name in own:
            return own[name]
        if any(name in tasks.get(t).field_names() for t in tasks.names()):
            return None
        raise AttributeError(f"TaskConfig has no field {name!r}")

    def __post_init__(self):
        task = tasks.get(self.name)
        task.check(self)  # its length and fields together
        own = []
        for s in task.fields:  # each field's own range (what depends on its length, the task checked above)
            value = getattr(self, s.name)
            s.check(value)
            own.append((s.name, float(value) if s.kind is float else value))  # 1/2 and 0.5: one cache key
        object.__setattr__(self, "own", tuple(own))
        if self.train_lengths is not None:
            if not task.lengths_vary:
                raise ConfigError("train_lengths", f"is not a setting of the {self.name} task (one length)")
            lengths = self.train_lengths
            if isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__len__") or len(lengths) != 2:
                raise ConfigError("train_lengths", f"must be two integers MIN MAX, got {lengths!r}")
            object.__setattr__(self, "train_lengths", tuple(lengths))  # a JSON list reads back as the tuple
            lo, hi = lengths
            check_int("train_lengths", lo, 1, MAX_LENGTH)
            check_int("train_lengths", hi, lo, MAX_LENGTH)
            if hi != self.length:
                raise ConfigError("train_lengths", f"MAX must be the run's length L={self.length}, got {lo} {hi}")
        if not isinstance(self.mixed_lengths, bool):
            raise ConfigError("mixed_lengths", f"must be true or false, got {self.mixed_lengths!r}")
        check_requirements({s.name: getattr(self, s.config_field) for s in in_section("task")})

    @property
    def min_length(self) -> int:
        """The shortest trained length (L itself without a range)."""
        return self.length if self.train_lengths is None else self.train_lengths[0]

    @property
    def seq_len(self) -> int:
        """Tokens in a full sequence: [s1..sL, SEP, a1..aL] (2L + 1), or the induction task's T."""
        return tasks.get(self.name).seq_len(self)

    @property
    def n_inputs(self) -> int:
        """Positions the model reads: the sequence without its last token (2L, or T - 1)."""
        return self.seq_len - 1

    @property
    def answer_len(self) -> int:
        """Targets with a loss, the last ones of the sequence: the L answer tokens, or every one of the T - 1."""
        return tasks.get(self.name).answer_len(self)

    @property
    def vocab_size(self) -> int:
        """Tokens the model must embed: 20 symbols and SEP, or the induction task's V."""
        return tasks.get(self.name).vocab_size(self)


# fields left out of RunConfig.to_dict at their default, so the cache key of configs without them is unchanged
OPTIONAL_FIELDS = optional_fields()


@dataclass(frozen=True)
class RunConfig:
    """Everything a training run depends on: a run is a pure function of this."""

    # factories: a TaskConfig is checked by its task, registered when attncore.tasks is imported
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    task: TaskConfig = field(default_factory=TaskConfig)

    def __post_init__(self):
        if self.model.vocab_size != self.task.vocab_size:
            raise ConfigError("vocab_size", f"the task needs {self.task.vocab_size}, got {self.model.vocab_size}")
        tasks.get(self.task.name).check_run(self)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["task"] |= dict(d["task"].pop("own"))  # the task's fields beside its name and length, as stored runs hold
        for section, fields in OPTIONAL_FIELDS.items():
            for key, default in fields.items():
                if d[section][key] == default:
                    del d[section][key]
        if "train_lengths" in d["task"]:
            d["task"]["train_lengths"] = list(d["task"]["train_lengths"])  # as JSON reads it back
        return d

    @classmethod
    def from_dict(cls, d: dict) -> RunConfig:
        return cls(ModelConfig(**d["model"]), TrainConfig(**d["train"]), TaskConfig(**d["task"]))


def make_run(
    task: str = _default("task"),
    length: int = _default("length"),
    seed: int = _default("seed"),
    *,
    d_ff: int | None = None,
    train_min: int | None = None,
    **settings,
) -> RunConfig:
    """The article's experiment with any setting overridden (the keywords are attncore.settings' names); d_ff is
    4d unless given, t_max = 2L + 1 (N_MAX with randomized positions). With train_lengths (MIN, MAX) the run trains
    on lengths MIN..MAX and L is MAX; train_min is the same as train_lengths (train_min, length). Task "induction":
    `length` is T and `vocab`, `k_min` its V and shortest repeat (make_induction has its defaults); t_max = T."""
    unknown = sorted(set(settings) - set(SETTINGS) - {"task", "length", "seed"})
    if unknown:
        raise TypeError(f"make_run() got unexpected keyword arguments {', '.join(unknown)}")
    central = {name: s.default for name, s in SETTINGS.items() if name not in task_fields()}  # a task's: its own
    kw = central | settings | {"task": task, "length": length, "seed": seed}
    if train_min is not None:
        if kw["train_lengths"] is not None:
            raise ConfigError("train_min", "give train_lengths or train_min, not both")
        kw["train_lengths"] = (train_min, length)
    lengths = kw["train_lengths"]
    if lengths is not None and len(lengths) == 2 and kw["length"] != lengths[1]:
        kw["length"] = lengths[1]
    task_cfg = TaskConfig(**{s.config_field: kw.get(s.name) for s in in_section("task")})
    model = {s.name: kw[s.name] for s in in_section("model")}
    model["d_ff"] = 4 * model["d_model"] if d_ff is None else d_ff
    n_max = kw["randomized_positions"]
    max_len = task_cfg.seq_len if n_max is None else max(task_cfg.seq_len, n_max)
    model = ModelConfig(vocab_size=task_cfg.vocab_size, max_len=max_len, **model)
    train = TrainConfig(**{s.name: kw[s.name] for s in in_section("train")})
    return RunConfig(model, train, task_cfg)
