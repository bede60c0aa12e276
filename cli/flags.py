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
from attncore.checks import ASCII_INTEGER, ASCII_NUMBER
from attncore.config import MAX_LENGTH, ConfigError
from attncore.memory import parse_size
from attncore.settings import POSITIONAL, SETTINGS, Setting, by_field, check_requirements, without_unused
from lab.presets import MAX_JOBS  # configs only: no store, no joblib

MAX_GRID = 1000  # a sweep grid of more runs needs --yes
GRID_FACTORS = tuple(s.factor for s in SETTINGS.values() if s.factor and s.swept)  # a sweep grid's: --group-by
# the swept settings grid() does not take (added after the article's grid: the learning-rate schedule), whose
# values a sweep combines itself (schedules)
SCHEDULE_FLAGS = tuple(s.name for s in SETTINGS.values() if s.swept and s.optional)
# settings whose one value every run of a sweep (or a preset's) shares
SETTING_FLAGS = tuple(s.name for s in SETTINGS.values() if s.shared)

# the flags errors name where a field's record does not say it: --scaling (of sweep) and --eval-positions
FLAGS = {"scaling": "--scaling", "randomized": "--eval-positions"}


STORE_VAR = "ATTNCORE_CACHE_DIR"  # lab.store.ENV_VAR, repeated so that building the parser loads no store


def store_place() -> str:
    """Where the run store is, for the help texts: the folder $ATTNCORE_CACHE_DIR names, else cache/ (as
    lab.store.cache_dir reads it)."""
    where = os.environ.get(STORE_VAR)
    return f"{where} (from {STORE_VAR})" if where else "cache/"


def flag_of(field: str) -> str:
    """The flag a ConfigError's field stands for: itself if it is one, else FLAGS, its setting's flag (a config field
    or a setting's name, attncore.settings) or --field-name."""
    if field.startswith("-"):
        return field
    s = by_field(field)
    return FLAGS.get(field) or (s.flag if s and s.flag else "--" + field.replace("_", "-"))


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


# ASCII_INTEGER, ASCII_NUMBER (attncore.checks): the one number syntax of every flag, link and typed number.


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


def _flag_kwargs(s: Setting, many: bool) -> dict:
    """argparse's keywords for a setting's flag, read from its record; a swept setting takes several values with
    many=True (a sweep's grid axis)."""
    several = many and s.swept
    kw = {"dest": s.name, "help": s.flag_help or None}
    if s.kind is bool:  # a switch: on by its flag (--mixed-lengths), or off by it when on by default (--no-scaling)
        return kw | {"action": "store_true", "dest": f"no_{s.name}" if s.default else s.name}
    if s.kind is tuple:  # MIN MAX
        return kw | {"type": integer, "nargs": 2, "metavar": s.metavar}
    kw |= {"choices": s.options} if s.options else {"type": integer if s.kind is int else number}
    kw |= {"metavar": s.metavar} if s.metavar else {}
    default = None if s.follows else s.default  # d_ff follows d (4d) unless given
    kw |= {"default": [default] if several else default, "nargs": "+" if several else None, "action": Typed}
    return kw


def add_model_args(p: argparse.ArgumentParser, many: bool = False) -> None:
    """The flags of `train`, one per setting with a flag (attncore.settings); with many=True the swept ones take
    several values. A task's own settings default to its experiment's (task_flags)."""
    for s in SETTINGS.values():
        if s.flag and s.name not in task_flags():
            p.add_argument(s.flag, **_flag_kwargs(s, many))
    add_task_args(p)
    if many:
        p.add_argument("--scaling", choices=("on", "off"), nargs="+", help="scaling by 1/sqrt(d_head): on, off or both")
    p.add_argument(
        "--max-memory",
        type=memory_size,
        metavar="SIZE",
        help="refuse to train runs estimated to need more (e.g. 2G); the machine's available memory always caps",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")


def task_flags(only: str | None = None) -> dict[str, tuple[str, object, str]]:
    """The flags of the tasks' own settings (of one task, `only`), {dest: (flag, default, help)}: a task's own
    length (--T, where Task.length_name is not L) and its fields (--V, --k-min: Task.fields), with the declaring
    task's defaults."""
    out = {}
    for task in map(tasks.get, [only] if only else tasks.names()):
        if task.length_name != SETTINGS["length"].url:
            help = f"the {task.name} task's length {task.length_name}"
            out[task.length_name] = (f"--{task.length_name}", task.defaults["length"], help)
        for s in task.fields:
            out[s.name] = (s.flag, s.default, s.flag_help)
    return out


def add_task_args(p: argparse.ArgumentParser, only: str | None = None) -> None:
    """The flags of the tasks' own settings (task_flags); --task's help, where the parser has it, says each task's
    summary (Task.summary)."""
    choice = p._option_string_actions.get(SETTINGS["task"].flag)  # argparse keeps its actions by flag
    if choice is not None:
        said = (f"{t.name}: {t.summary}" for t in map(tasks.get, tasks.names()) if t.summary)
        choice.help = "; ".join(said).replace("%", "%%")
    for dest, (flag, default, help) in task_flags(only).items():
        metavar = SETTINGS[dest].metavar if dest in SETTINGS else None
        kind = number if dest in SETTINGS and SETTINGS[dest].kind is float else integer  # the modular task's fraction
        p.add_argument(flag, type=kind, default=default, dest=dest, action=Typed, help=help, metavar=metavar)


def typed(a, dest: str) -> bool:
    return bool(getattr(a, f"typed_{dest}", False))


def refuse_task_flags(a, task=None) -> None:
    """Raise ConfigError for a typed flag of a task's own settings (task_flags) that `task` does not read (any such
    flag, without a task)."""
    own = {*task.field_names(), task.length_name} if task else set()
    for dest in task_flags():
        if typed(a, dest) and dest not in own:
            owner = next(t for t in tasks.names() if dest in {*tasks.get(t).field_names(), tasks.get(t).length_name})
            raise ConfigError(dest, f"is a setting of --task {owner}")


def run_of(a):
    """The RunConfig of parsed `train` flags. A task with its own length and fields (--task induction: --T, --V,
    --k-min) reads them, and the flags not typed take its experiment's defaults (Task.defaults); a task refuses
    another task's own flags."""
    from attncore.config import make_run

    check_length_flags(a)
    settings = run_settings(a)
    task = tasks.get(a.task)
    refuse_task_flags(a, task)
    fields = {field: getattr(a, field) for field in task.field_names()}
    if task.length_name == SETTINGS["length"].url:
        return make_run(a.task, a.length, a.seed, **settings | fields)
    if typed(a, "length"):
        with_l = ", ".join(t for t in tasks.names() if tasks.get(t).length_name == SETTINGS["length"].url)
        raise ConfigError(
            "length", f"is L of the {with_l} tasks; the {task.name} task's length is --{task.length_name}"
        )
    settings |= {key: value for key, value in task.defaults.items() if key in settings and not typed(a, key)}
    # its defaults of settings no flag sets (the modular task's Adam β2)
    settings |= {key: v for key, v in task.defaults.items() if key in SETTINGS and not SETTINGS[key].flag}
    return make_run(a.task, getattr(a, task.length_name), a.seed, **settings | fields)


def grid_dests() -> list[str]:
    """The parsed flags (argparse dests) that say which runs a grid holds: every setting's flag but the shared ones."""
    return [_flag_kwargs(s, False)["dest"] for s in SETTINGS.values() if s.flag and not s.shared]


def schedules(a) -> list[dict]:
    """The combinations a sweep's flags ask for of the swept settings grid() does not take (SCHEDULE_FLAGS: the
    learning-rate schedules), as make_run keywords; a setting that needs another takes its default where that one
    is at its own (--min-lr-ratio applies to the schedules with a decay: it is where a decay ends)."""
    given = {name: dict.fromkeys(getattr(a, name)) for name in SCHEDULE_FLAGS}
    # one value of each, a set one where any is: a needed setting never set refuses the values that need it
    any_set = {
        name: next((v for v in values if SETTINGS[name].is_set(v)), SETTINGS[name].default)
        for name, values in given.items()
    }
    check_requirements(any_set, named=lambda s: s.flag)
    found = []
    for values in itertools.product(*given.values()):
        schedule = without_unused(dict(zip(given, values, strict=True)))
        if schedule not in found:
            found.append(schedule)
    return found


def _value(a, s: Setting):
    """A setting's make_run value from its parsed flag: a switch that turns it off negated (--no-scaling), MIN MAX as
    a tuple."""
    dest = _flag_kwargs(s, False)["dest"]
    value = getattr(a, dest)
    if s.kind is bool and dest != s.name:
        return not value
    return tuple(value) if s.kind is tuple and value is not None else value


def run_settings(a) -> dict:
    """make_run keywords from the parsed flags of every setting but the run's task, length and seed and the task's
    own (task_flags); of a sweep (several values per swept flag), those every run shares (its grid and schedules
    are grid()'s and schedules())."""
    many = any(isinstance(getattr(a, s.name, None), list) for s in SETTINGS.values() if s.swept)
    own = task_flags()
    return {
        s.name: _value(a, s)
        for s in SETTINGS.values()
        if s.flag and s.name not in POSITIONAL and s.name not in own and not (many and s.swept and s.kind is not bool)
    }


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
