"""The command line's flag table: the flags of `train` (several values each in `sweep`), the value checks
argparse runs on them, and the config field -> flag names that error lines use.

cli.main and cli.sweep both import this module; neither imports the other at import time.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import math
import os
import re

from attncore import task as tasks
from attncore.config import DECAYS, MAX_LENGTH, NORMS, POSITIONS, ConfigError
from attncore.memory import parse_size
from attncore.tasks.induction import INDUCTION_RUN  # the defaults of --T, --V and --k-min
from lab.presets import MAX_JOBS  # configs only: no store, no joblib

MAX_GRID = 1000  # a sweep grid of more runs needs --yes
GRID_FACTORS = ("task", "length", "position", "norm", "scaling", "lr", "warmup", "decay")  # a sweep grid's: --group-by
SCHEDULE_FLAGS = ("warmup", "decay", "min_lr_ratio")  # the learning-rate schedule (several values each in sweep)

# config field -> the train/sweep flag that sets it, so errors name what the user typed
FLAGS = {
    "d_model": "--d",
    "n_heads": "--heads",
    "n_layers": "--layers",
    "d_ff": "--d-ff",
    "batch_size": "--batch",
    "name": "--task",
    "task": "--task",
    "train_lengths": "--train-lengths",
    "mixed_lengths": "--mixed-lengths",
    "randomized_positions": "--randomized-positions",
    "randomized": "--eval-positions",
    "vocab": "--V",
}
# --task induction: the flags it reads with their own defaults (INDUCTION_RUN) when not typed (argparse dest ->
# make_run keyword), and those of the induction task only
INDUCTION_DEFAULTED = {"steps": "steps", "batch": "batch_size", "d_model": "d_model", "heads": "n_heads",
                       "layers": "n_layers", "lr": "lr", "position": "position", "embed_std": "embed_std"}  # fmt: skip
INDUCTION_ONLY = {"T": "length", "V": "vocab", "k_min": "k_min"}


STORE_VAR = "ATTNCORE_CACHE_DIR"  # lab.store.ENV_VAR, repeated so that building the parser loads no store


def store_place() -> str:
    """Where the run store is, for the help texts: the folder $ATTNCORE_CACHE_DIR names, else cache/ (as
    lab.store.cache_dir reads it)."""
    where = os.environ.get(STORE_VAR)
    return f"{where} (from {STORE_VAR})" if where else "cache/"


def flag_of(field: str) -> str:
    """The flag a ConfigError's field stands for: itself if it is one, else FLAGS or --field-name."""
    return field if field.startswith("-") else FLAGS.get(field, "--" + field.replace("_", "-"))


class ArgumentError(Exception):
    pass


class HelpFormatter(argparse.HelpFormatter):
    """--help with each flag's default: '(default: 1500)', lists as their values ('copy sort'); none for a flag
    whose default is unset (None) or off (False), or whose help already says its default."""

    @staticmethod
    def _default_text(action) -> str:
        default = action.default
        if not action.option_strings or default is None or default is False or default is argparse.SUPPRESS:
            return ""
        if "default" in (action.help or "").lower():
            return ""
        shown = " ".join(map(str, default)) if isinstance(default, (list, tuple)) else str(default)
        return f"(default: {shown})".replace("%", "%%")

    def _format_action(self, action):
        if not action.help and self._default_text(action):  # a flag without help still shows its default
            action = copy.copy(action)
            action.help = self._default_text(action)
        return super()._format_action(action)

    def _get_help_string(self, action):
        return f"{action.help.strip()} {self._default_text(action)}".strip()


class Typed(argparse.Action):
    """Store the value and note that the flag was typed (`typed_<dest>`): '--length 6' and no --length at all
    have the same value, but only the first contradicts --train-lengths 1 8."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        setattr(namespace, f"typed_{self.dest}", True)


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage, so every error is one line; a value that starts with a
    minus and a digit (-1G, -1e-3) is read as a value, never as a flag, so its own check names what is wrong."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        # argparse's own reads -1 and -.5 only; matched from the start (3.11) or whole (.*: later versions alike)
        self._negative_number_matcher = re.compile(r"-\.?[0-9].*")

    def error(self, message):
        raise ArgumentError(message.removeprefix("argument "))


# The one number parser of every flag: ASCII digits only. Python's int() and float() also read other scripts'
# digits ('٣' is 3, '١' is 1), underscores ('1_000') and surrounding spaces; a flag takes none of those.
ASCII_INTEGER = re.compile(r"[+-]?[0-9]+")
ASCII_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|infinity|nan)", re.I)


def _shown(text: str) -> str:
    return repr(text[:20] + ("..." if len(text) > 20 else ""))


def integer(text: str) -> int:
    """argparse type: a whole number written in ASCII digits, with an optional sign (its range is the config's)."""
    if not isinstance(text, str) or not ASCII_INTEGER.fullmatch(text):
        raise argparse.ArgumentTypeError(f"must be an integer (digits 0-9), got {_shown(str(text))}")
    return int(text)


def integer_in(low: int, high: int, allowed: str | None = None):
    """argparse type: an ASCII integer from low to high; the message says `allowed` (default 'from low to high')."""
    allowed = allowed or f"from {low:,} to {high:,}"

    def parse(text: str) -> int:
        try:
            value = integer(text)
        except argparse.ArgumentTypeError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be an integer {allowed}, got {_shown(text)}")
        return value

    return parse


def number(text: str) -> float:
    """argparse type: a finite number written in ASCII (3e-3, .5, -2); no nan or inf."""
    if not isinstance(text, str) or not ASCII_NUMBER.fullmatch(text):
        raise argparse.ArgumentTypeError(f"must be a number (digits 0-9), got {_shown(str(text))}")
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {_shown(text)}")
    return value


def jobs(text: str) -> int:
    """argparse type: -1 (all cores) or 1..MAX_JOBS."""
    try:
        value = integer(text)
    except argparse.ArgumentTypeError:
        value = None
    if value is None or not (value == -1 or 1 <= value <= MAX_JOBS):
        raise argparse.ArgumentTypeError(f"must be -1 (all cores) or from 1 to {MAX_JOBS}, got {text!r}")
    return value


def memory_size(text: str) -> int:
    """argparse type: a byte count like 512M, 2G, 1.5GiB (its number read by `number`: ASCII digits only)."""
    if text.strip().startswith("-"):
        raise argparse.ArgumentTypeError(f"must be more than 0 bytes (a size like 512M, 2G or 1.5GiB), got {text!r}")
    try:
        number(re.fullmatch(r"(.*?)[KMGT]?(?:i?B)?", text, re.IGNORECASE).group(1))
        return parse_size(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be a size like 512M, 2G or 1.5GiB, got {text!r}") from None
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_model_args(p: argparse.ArgumentParser, many: bool = False) -> None:
    """The flags of `train`; with many=True the sweepable ones take several values."""
    nargs = "+" if many else None

    def listed(v):  # a default that is a list when several values are allowed
        return [v] if many else v

    p.add_argument("--task", choices=tasks.names(), default=listed("copy"), nargs=nargs)
    p.add_argument("--length", type=integer, default=listed(6), nargs=nargs, metavar="L", action=Typed)
    p.add_argument("--seed", type=integer, default=listed(0), nargs=nargs)
    p.add_argument("--position", choices=POSITIONS, default=listed("learned"), nargs=nargs, action=Typed)
    p.add_argument("--norm", choices=NORMS, default=listed("pre"), nargs=nargs)
    p.add_argument("--lr", type=number, default=listed(3e-3), nargs=nargs, action=Typed)
    p.add_argument(
        "--warmup", type=integer, default=listed(0), nargs=nargs, metavar="N", help="steps of linear warm-up (0: none)"
    )
    p.add_argument(
        "--decay",
        choices=DECAYS,
        default=listed("none"),
        nargs=nargs,
        help="the learning rate after warm-up: constant (none), or down to --min-lr-ratio x lr at the last step",
    )
    p.add_argument(
        "--min-lr-ratio",
        type=number,
        default=listed(0.0),
        nargs=nargs,
        metavar="R",
        help="where --decay ends, as a fraction of --lr (0 to 1)",
    )
    p.add_argument("--steps", type=integer, default=1500, action=Typed)
    p.add_argument("--batch", type=integer, default=32, action=Typed)
    p.add_argument("--d", type=integer, default=32, dest="d_model", action=Typed)
    p.add_argument("--heads", type=integer, default=4, action=Typed)
    p.add_argument("--layers", type=integer, default=2, action=Typed)
    p.add_argument("--d-ff", type=integer, default=None, help="default 4d")
    p.add_argument(
        "--embed-std",
        type=number,
        default=0.1,
        action=Typed,
        help="the initial std of the token embedding (and learned position table)",
    )
    add_induction_args(p)
    p.add_argument("--no-scaling", action="store_true", help="do not divide scores by sqrt(d_head)")
    p.add_argument(
        "--train-lengths",
        type=integer,
        nargs=2,
        metavar=("MIN", "MAX"),
        help="train on every length MIN..MAX (L becomes MAX): one length per batch, drawn each step",
    )
    p.add_argument(
        "--mixed-lengths",
        action="store_true",
        help="with --train-lengths: mix lengths in a batch (right padding; the loss averages every answer token, so "
        "long sequences count more; without it one length per batch weights each length equally)",
    )
    p.add_argument(
        "--randomized-positions",
        type=integer,
        metavar="N_MAX",
        help="each batch's positions: sorted, drawn without replacement from [0, N_MAX) (evaluation: 0..n-1)",
    )
    if many:
        p.add_argument("--scaling", choices=("on", "off"), nargs="+", help="scaling by 1/sqrt(d_head): on, off or both")
    p.add_argument(
        "--max-memory",
        type=memory_size,
        metavar="SIZE",
        help="refuse to train runs estimated to need more (e.g. 2G); the machine's available memory always caps",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def add_induction_args(p: argparse.ArgumentParser) -> None:
    """--T, --V and --k-min: the induction task's sequence."""
    what = "the induction task's"
    p.add_argument(
        "--T", type=integer, default=INDUCTION_RUN["length"], action=Typed, help=f"{what} tokens per sequence"
    )
    p.add_argument("--V", type=integer, default=INDUCTION_RUN["vocab"], action=Typed, help=f"{what} vocabulary")
    p.add_argument(
        "--k-min", type=integer, default=INDUCTION_RUN["k_min"], action=Typed, help=f"{what} shortest repeated prefix"
    )


def typed(a, dest: str) -> bool:
    return bool(getattr(a, f"typed_{dest}", False))


def run_of(a):
    """The RunConfig of parsed `train` flags. --task induction: --T, --V, --k-min set its sequence, and the flags
    not typed take the induction defaults (its Task.defaults, INDUCTION_RUN: 2 heads, RoPE, lr 1e-3, 2,000 steps,
    embedding std 1); the other tasks (without fields of their own, Task.fields) refuse the induction flags."""
    from attncore.config import make_run

    check_length_flags(a)
    settings = run_settings(a) | {"lr": a.lr, "position": a.position, "norm": a.norm}
    task = tasks.get(a.task)
    if not task.fields:
        for dest in INDUCTION_ONLY:
            if typed(a, dest):
                raise ConfigError(dest, "is a setting of --task induction")
        return make_run(a.task, a.length, a.seed, **settings)
    if typed(a, "length"):
        raise ConfigError("length", "is L of the copy, sort and reverse tasks; the induction task's length is --T")
    settings |= {key: task.defaults[key] for dest, key in INDUCTION_DEFAULTED.items() if not typed(a, dest)}
    settings |= {key: getattr(a, dest) for dest, key in INDUCTION_ONLY.items()}
    return make_run(a.task, settings.pop("length"), a.seed, **settings)


# flags that set the same value for every run of a sweep (argparse dest -> make_run keyword)
SETTING_FLAGS = {
    "steps": "steps",
    "batch": "batch_size",
    "d_model": "d_model",
    "heads": "n_heads",
    "layers": "n_layers",
    "d_ff": "d_ff",
    "embed_std": "embed_std",
}


def schedules(a) -> list[dict]:
    """The learning-rate schedules a sweep's flags ask for (every combination of their values), as make_run
    keywords; --min-lr-ratio applies to the schedules with a decay (it is where a decay ends)."""
    if set(a.decay) == {"none"} and any(a.min_lr_ratio):
        raise ConfigError("min_lr_ratio", "is the end of a decay: give --decay linear or cosine too")
    found = []
    for warmup, decay, ratio in itertools.product(*(dict.fromkeys(getattr(a, f)) for f in SCHEDULE_FLAGS)):
        schedule = {"warmup": warmup, "decay": decay, "min_lr_ratio": ratio if decay != "none" else 0.0}
        if schedule not in found:
            found.append(schedule)
    return found


def run_settings(a) -> dict:
    """make_run keywords from the parsed flags that every run of a sweep shares (with `train`'s one-value
    flags, the schedule too; a sweep's schedules are in schedules())."""
    lengths = None if a.train_lengths is None else tuple(a.train_lengths)
    settings = {key: getattr(a, flag) for flag, key in SETTING_FLAGS.items()} | {
        "scaling": not a.no_scaling,
        "train_lengths": lengths,
        "mixed_lengths": a.mixed_lengths,
        "randomized_positions": a.randomized_positions,
    }
    if not isinstance(a.warmup, list):  # train, evaluate, ...: one schedule
        settings |= {flag: getattr(a, flag) for flag in SCHEDULE_FLAGS}
    return settings


def check_length_flags(a, default_length: int = 6) -> None:
    """--train-lengths MIN MAX (1 <= MIN <= MAX <= MAX_LENGTH) sets L = MAX: a typed --length other than MAX
    alongside it is a contradiction (the default L, untyped, is not)."""
    if a.train_lengths is None:
        return
    low, high = a.train_lengths
    if not 1 <= low <= high <= MAX_LENGTH:
        raise ConfigError(
            "train-lengths", f"MIN and MAX must be from 1 to {MAX_LENGTH} with MIN <= MAX, got {low} {high}"
        )
    given = a.length if isinstance(a.length, list) else [a.length]
    if getattr(a, "typed_length", False) and given != [high]:
        raise ConfigError("train-lengths", f"sets L = MAX = {high}; drop --length {' '.join(map(str, given))}")
