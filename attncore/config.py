"""Frozen configuration dataclasses for the model, the training and the task.

Every config validates itself in __post_init__ and raises ConfigError naming the
field and the allowed values, so the CLI and the dashboard show one clear line.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from . import task as tasks
from .checks import ConfigError, check_choice, check_float, check_int

POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "none")
NORMS = ("pre", "post")
DTYPES = ("float32", "float64")
DECAYS = ("none", "linear", "cosine")  # the learning rate after warm-up (attncore.optim.lr_multiplier)
N_SYMBOLS = 20  # symbols 0..19
SEP = 20  # the separator token
VOCAB_SIZE = N_SYMBOLS + 1
MAX_LENGTH = 64  # longest length L of a task whose lengths vary (a training range, length generalisation)
MAX_RANDOMIZED = 4096  # largest N_MAX of randomized positions
MAX_EMBED_STD = 10.0  # the largest initial std of the embeddings


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = VOCAB_SIZE
    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 128
    max_len: int = 13  # t_max: rows of the position table
    position: str = "learned"
    norm: str = "pre"
    scaling: bool = True  # divide scores by sqrt(d_head)
    dtype: str = "float32"
    embed_std: float = 0.1  # the token embedding's (and learned position table's) initial std, SPEC §4's 0.1

    def __post_init__(self):
        check_int("vocab_size", self.vocab_size, 2, 1_000_000)
        check_int("d_model", self.d_model, 1, 4096)
        check_int("n_heads", self.n_heads, 1, 256)
        if self.d_model % self.n_heads:
            raise ConfigError(
                "n_heads",
                f"must divide d_model={self.d_model}; allowed: "
                + ", ".join(str(h) for h in range(1, self.d_model + 1) if self.d_model % h == 0),
            )
        if self.position == "rope" and self.d_head % 2:
            raise ConfigError("n_heads", f"rope needs an even head size, got d_head={self.d_head}")
        check_int("n_layers", self.n_layers, 1, 64)
        check_int("d_ff", self.d_ff, 1, 65536)
        check_int("max_len", self.max_len, 1, 1_000_000)
        check_choice("position", self.position, POSITIONS)
        check_choice("norm", self.norm, NORMS)
        if not isinstance(self.scaling, bool):
            raise ConfigError("scaling", f"must be true or false, got {self.scaling!r}")
        check_choice("dtype", self.dtype, DTYPES)
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
    steps: int = 1500
    batch_size: int = 32
    lr: float = 3e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    seed: int = 0
    randomized_positions: int | None = None  # N_MAX: each batch's positions drawn from [0, N_MAX) (Ruoss et al.)
    warmup: int = 0  # W: steps of linear warm-up, lr_t = lr * min(1, (t + 1)/W); 0 = none
    decay: str = "none"  # after warm-up: none, linear or cosine down to min_lr_ratio * lr at the last step
    min_lr_ratio: float = 0.0  # r: the decay's end, a fraction of lr

    def __post_init__(self):
        if self.randomized_positions is not None:
            check_int("randomized_positions", self.randomized_positions, 2, MAX_RANDOMIZED)
        check_int("steps", self.steps, 1, 1_000_000)
        check_int("warmup", self.warmup, 0, self.steps)
        check_choice("decay", self.decay, DECAYS)
        if isinstance(self.min_lr_ratio, bool) or not isinstance(self.min_lr_ratio, (int, float)):
            raise ConfigError("min_lr_ratio", f"must be a number, got {self.min_lr_ratio!r}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:  # also refuses nan
            raise ConfigError("min_lr_ratio", f"must be in [0, 1], got {self.min_lr_ratio}")
        if self.min_lr_ratio and self.decay == "none":  # else two keys for one run
            raise ConfigError("min_lr_ratio", "is the end of a decay: give decay linear or cosine, or leave it at 0")
        object.__setattr__(self, "min_lr_ratio", float(self.min_lr_ratio))  # 0 and 0.0: one cache key
        check_int("batch_size", self.batch_size, 1, 65536)
        check_float("lr", self.lr, 0.0, 1.0)
        check_float("beta1", self.beta1, 0.0, 1.0, open_low=False)
        check_float("beta2", self.beta2, 0.0, 1.0, open_low=False)
        check_float("eps", self.eps, 0.0, 1.0)
        check_int("seed", self.seed, 0, 2**32 - 1)


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
        task = tasks.get(self.name)  # ConfigError naming the registered tasks
        task.check(self)  # its length and fields (filled when not given); another task's fields refused
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
        if self.mixed_lengths and self.train_lengths is None:
            raise ConfigError("mixed_lengths", "needs train_lengths (a range to mix)")

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
OPTIONAL_FIELDS = {
    "model": {"embed_std": 0.1},
    "train": {"randomized_positions": None, "warmup": 0, "decay": "none", "min_lr_ratio": 0.0},
    "task": {"train_lengths": None, "mixed_lengths": False, "vocab": None, "k_min": None},  # the last two: induction's
}


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
    task: str = "copy",
    length: int = 6,
    seed: int = 0,
    *,
    steps: int = 1500,
    batch_size: int = 32,
    lr: float = 3e-3,
    d_model: int = 32,
    n_heads: int = 4,
    n_layers: int = 2,
    d_ff: int | None = None,
    position: str = "learned",
    norm: str = "pre",
    scaling: bool = True,
    dtype: str = "float32",
    train_lengths: tuple[int, int] | None = None,
    mixed_lengths: bool = False,
    randomized_positions: int | None = None,
    train_min: int | None = None,
    warmup: int = 0,
    decay: str = "none",
    min_lr_ratio: float = 0.0,
    vocab: int | None = None,
    k_min: int | None = None,
    embed_std: float = 0.1,
) -> RunConfig:
    """The article's experiment (SPEC §7) with any field overridden; t_max = 2L + 1 (N_MAX with randomized
    positions). With train_lengths (MIN, MAX) the run trains on lengths MIN..MAX and L is MAX; train_min
    is the same as train_lengths (train_min, length). task "induction": `length` is T and `vocab`, `k_min` its V
    and shortest repeat (attncore.tasks.induction.make_induction has its defaults); t_max = T."""
    if train_min is not None:
        if train_lengths is not None:
            raise ConfigError("train_min", "give train_lengths or train_min, not both")
        train_lengths = (train_min, length)
    if train_lengths is not None and len(train_lengths) == 2 and length != train_lengths[1]:
        length = train_lengths[1]
    task_cfg = TaskConfig(task, length, train_lengths, mixed_lengths, vocab, k_min)
    d_ff = 4 * d_model if d_ff is None else d_ff
    model = ModelConfig(
        vocab_size=task_cfg.vocab_size,
        d_model=d_model,
        n_heads=n_heads,
        n_layers=n_layers,
        d_ff=d_ff,
        max_len=task_cfg.seq_len if randomized_positions is None else max(task_cfg.seq_len, randomized_positions),
        position=position,
        norm=norm,
        scaling=scaling,
        dtype=dtype,
        embed_std=embed_std,
    )
    train = TrainConfig(
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        randomized_positions=randomized_positions,
        warmup=warmup,
        decay=decay,
        min_lr_ratio=min_lr_ratio,
    )
    return RunConfig(model, train, task_cfg)
