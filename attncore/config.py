"""Frozen configuration dataclasses for the model, the training and the task.

Every config validates itself in __post_init__ and raises ConfigError naming the
field and the allowed values, so the CLI and the dashboard show one clear line.
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass

from .checks import ConfigError, check_float, check_int
from .checks import check_choice as check_choice  # re-exported: the checks' callers import them from here
from .settings import DECAYS as DECAYS
from .settings import DTYPES as DTYPES
from .settings import MAX_EMBED_STD, SETTINGS, in_section, optional_fields
from .settings import MAX_RANDOMIZED as MAX_RANDOMIZED
from .settings import NORMS as NORMS
from .settings import POSITIONS as POSITIONS

ARTICLE_TASKS = ("copy", "sort", "reverse")  # [s1..sL, SEP, a1..aL] over 20 symbols, the loss on the answer
INDUCTION = "induction"  # T random tokens of V with a repeated prefix, the loss on every position (SPEC §14)
TASKS = (*ARTICLE_TASKS, INDUCTION)
N_SYMBOLS = 20  # symbols 0..19
SEP = 20  # the separator token
VOCAB_SIZE = N_SYMBOLS + 1
MAX_LENGTH = 64  # longest task length L accepted anywhere
MIN_INDUCTION_T, MAX_INDUCTION_T = 4, 256  # T: tokens of an induction sequence (the hosted cap may be lower)
MAX_INDUCTION_VOCAB = 1024  # V: tokens drawn uniformly
MIN_K = 2  # the shortest repeated prefix: its repeat holds one query with a target (k .. 2k - 2)
INDUCTION_DEFAULTS = {"vocab": 32, "k_min": 4}  # TaskConfig's fields an induction task fills when not given


def _default(name: str):
    """A setting's default, as attncore.settings declares it."""
    return SETTINGS[name].default


def _check(config, *names: str) -> None:
    """Check these settings' values in the config (range or choices, as attncore.settings declares them)."""
    for name in names:
        SETTINGS[name].check(getattr(config, SETTINGS[name].config_field))


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
        _check(self, "position", "norm", "scaling", "dtype")
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
        if self.min_lr_ratio and self.decay == "none":  # else two keys for one run
            raise ConfigError("min_lr_ratio", "is the end of a decay: give decay linear or cosine, or leave it at 0")
        object.__setattr__(self, "min_lr_ratio", float(self.min_lr_ratio))  # 0 and 0.0: one cache key
        _check(self, "batch_size")
        check_float("lr", self.lr, 0.0, 1.0)
        check_float("beta1", self.beta1, 0.0, 1.0, open_low=False)
        check_float("beta2", self.beta2, 0.0, 1.0, open_low=False)
        check_float("eps", self.eps, 0.0, 1.0)
        _check(self, "seed")


@dataclass(frozen=True)
class TaskConfig:
    name: str = "copy"
    length: int = 6  # L: symbols to copy or sort; with train_lengths the longest trained (and evaluated) length.
    # The induction task: T, the tokens of a sequence.
    train_lengths: tuple[int, int] | None = None  # (L_min, L_max = length): train on every length of the range
    mixed_lengths: bool = False  # with train_lengths: lengths mixed in a batch (right padding), else one per batch
    vocab: int | None = None  # induction: V, the tokens drawn uniformly (default 32); None for the other tasks
    k_min: int | None = None  # induction: the shortest repeated prefix k (default 4; k ~ U{k_min .. T/2})

    def __post_init__(self):
        check_choice("task", self.name, TASKS)
        if self.name == INDUCTION:
            self._check_induction()
        else:
            check_int("length", self.length, 1, MAX_LENGTH)
            for field in ("vocab", "k_min"):
                if getattr(self, field) is not None:
                    raise ConfigError(field, f"is a setting of the induction task, not of {self.name}")
        if self.train_lengths is not None:
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
        if self.mixed_lengths and self.train_lengths is None:
            raise ConfigError("mixed_lengths", "needs train_lengths (a range to mix)")

    def _check_induction(self) -> None:
        """T, V and k_min in range (k_min at most T/2); V and k_min filled from INDUCTION_DEFAULTS when None."""
        for field, default in INDUCTION_DEFAULTS.items():
            if getattr(self, field) is None:
                object.__setattr__(self, field, default)
        check_int("T", self.length, MIN_INDUCTION_T, MAX_INDUCTION_T)
        check_int("vocab", self.vocab, 2, MAX_INDUCTION_VOCAB)
        half = self.length // 2
        if isinstance(self.k_min, numbers.Integral) and not isinstance(self.k_min, bool) and self.k_min > half:
            raise ConfigError("k_min", f"must be from {MIN_K} to T/2 = {half} (the repeat must fit), got {self.k_min}")
        check_int("k_min", self.k_min, MIN_K, half)
        if self.train_lengths is not None:
            raise ConfigError("train_lengths", "is not a setting of the induction task (one length T)")

    @property
    def min_length(self) -> int:
        """The shortest trained length (L itself without a range)."""
        return self.length if self.train_lengths is None else self.train_lengths[0]

    @property
    def seq_len(self) -> int:
        """Tokens in a full sequence: [s1..sL, SEP, a1..aL] (2L + 1), or the induction task's T."""
        return self.length if self.name == INDUCTION else 2 * self.length + 1

    @property
    def n_inputs(self) -> int:
        """Positions the model reads: the sequence without its last token (2L, or T - 1)."""
        return self.seq_len - 1

    @property
    def answer_len(self) -> int:
        """Targets with a loss, the last ones of the sequence: the L answer tokens, or every one of the T - 1."""
        return self.n_inputs if self.name == INDUCTION else self.length

    @property
    def vocab_size(self) -> int:
        """Tokens the model must embed: 20 symbols and SEP, or the induction task's V."""
        return self.vocab if self.name == INDUCTION else VOCAB_SIZE


# fields left out of RunConfig.to_dict at their default, so the cache key of configs without them is unchanged
OPTIONAL_FIELDS = optional_fields()


@dataclass(frozen=True)
class RunConfig:
    """Everything a training run depends on: a run is a pure function of this."""

    model: ModelConfig = ModelConfig()
    train: TrainConfig = TrainConfig()
    task: TaskConfig = TaskConfig()

    def __post_init__(self):
        if self.model.vocab_size != self.task.vocab_size:
            raise ConfigError("vocab_size", f"the task needs {self.task.vocab_size}, got {self.model.vocab_size}")
        if self.task.name == INDUCTION:
            self._check_induction()
            return
        if self.model.position in ("learned", "sinusoidal") and self.model.max_len < 2 * self.task.length:
            raise ConfigError(
                "length",
                f"L={self.task.length} needs {2 * self.task.length} positions but the position "
                f"table has max_len={self.model.max_len}; allowed L from 1 to {self.model.max_len // 2}",
            )
        n_max = self.train.randomized_positions
        if n_max is not None:
            if self.model.position == "none":
                raise ConfigError(
                    "randomized_positions", "needs a position encoding (learned, sinusoidal, rope, alibi)"
                )
            if n_max < 2 * self.task.length:
                raise ConfigError(
                    "randomized_positions",
                    f"N_MAX must be at least 2L = {2 * self.task.length} (the inputs' positions), got {n_max}",
                )
            if self.model.position in ("learned", "sinusoidal") and self.model.max_len < n_max:
                raise ConfigError("randomized_positions", f"needs a table of N_MAX={n_max} rows (max_len)")

    def _check_induction(self) -> None:
        if self.model.position in ("learned", "sinusoidal") and self.model.max_len < self.task.n_inputs:
            raise ConfigError(
                "T",
                f"T={self.task.length} needs {self.task.n_inputs} positions but the position table has "
                f"max_len={self.model.max_len}; allowed T from {MIN_INDUCTION_T} to {self.model.max_len + 1}",
            )
        if self.train.randomized_positions is not None:
            raise ConfigError("randomized_positions", "is not a setting of the induction task")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
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
    kw = {name: s.default for name, s in SETTINGS.items()} | settings | {"task": task, "length": length, "seed": seed}
    if train_min is not None:
        if kw["train_lengths"] is not None:
            raise ConfigError("train_min", "give train_lengths or train_min, not both")
        kw["train_lengths"] = (train_min, length)
    lengths = kw["train_lengths"]
    if lengths is not None and len(lengths) == 2 and kw["length"] != lengths[1]:
        kw["length"] = lengths[1]
    task_cfg = TaskConfig(**{s.config_field: kw[s.name] for s in in_section("task")})
    model = {s.name: kw[s.name] for s in in_section("model")}
    model["d_ff"] = 4 * model["d_model"] if d_ff is None else d_ff
    n_max = kw["randomized_positions"]
    max_len = task_cfg.seq_len if n_max is None else max(task_cfg.seq_len, n_max)
    model = ModelConfig(vocab_size=task_cfg.vocab_size, max_len=max_len, **model)
    train = TrainConfig(**{s.name: kw[s.name] for s in in_section("train")})
    return RunConfig(model, train, task_cfg)


# The induction experiment's defaults (issue 34, from a prototype that showed the phase change on 4 of 4 seeds):
# T = 32 tokens of V = 32, k ~ U{4 .. 16}; 2 blocks, d = 32, 2 heads, RoPE, pre-LN, lr 1e-3, batch 32, 2,000 steps;
# the token embedding drawn N(0, 1) as the prototype's (PyTorch's nn.Embedding): at SPEC §4's 0.1 the blocks' outputs
# drown the tokens' identity in the residual stream and the pair of heads had not formed by 2,000 steps
# (docs/induction.md).
INDUCTION_RUN = dict(length=32, vocab=32, k_min=4, n_layers=2, d_model=32, n_heads=2, position="rope", norm="pre",
                     lr=1e-3, batch_size=32, steps=2000, embed_std=1.0)  # fmt: skip


def make_induction(seed: int = 0, **overrides) -> RunConfig:
    """The induction task's run at INDUCTION_RUN's defaults, any make_run argument overridden (length is T)."""
    kw = INDUCTION_RUN | overrides
    return make_run(INDUCTION, kw.pop("length"), seed, **kw)
