"""Work a command may start that takes long: its estimate on stderr before any training, and the rule every command
shares with `sweep`'s grid: more than MAX_GRID runs, or more than MAX_UNASKED_SECONDS of wall time here by
lab.cost_model's estimate (the dashboard's own "asks once more" above 30 minutes), needs --yes.

Light work (at most LIGHT_STEPS training steps and LIGHT_MULTIPLY_ADDS multiply-adds in all: seconds to a minute or
two at a default run's pace) is neither estimated nor asked about, so a short command does not time the cost model's
probes.
"""

from __future__ import annotations

import sys

from attncore.config import ConfigError
from cli.flags import MAX_GRID  # runs one command may start without --yes (sweep's grid rule)
from lab import formats

MAX_UNASKED_SECONDS = 30 * 60  # estimated wall seconds here one command may start without --yes
LIGHT_STEPS = 30_000  # a default run's step costs a few ms: about a minute of them
LIGHT_MULTIPLY_ADDS = 10**11  # a default run (1,500 steps) is about 10^10


def add_yes(p) -> None:
    p.add_argument(
        "--yes",
        action="store_true",
        help=f"start work of more than {MAX_GRID:,} runs or estimated above {MAX_UNASKED_SECONDS // 60} min here",
    )


def light(runs, steps_of=None) -> bool:
    """Whether training `runs` (or `steps_of(run)` steps' work on each) is short on any machine."""
    from lab.cost_model import eval_steps, step_features

    steps = [steps_of(run) if steps_of else run.train.steps + eval_steps(run) for run in runs]
    work = sum(float(step_features(run)[2:].sum()) * n for run, n in zip(runs, steps, strict=True))
    return len(runs) <= MAX_GRID and sum(steps) <= LIGHT_STEPS and work <= LIGHT_MULTIPLY_ADDS


def ask(a, what: str, runs, n_jobs: int = 1, measured=(), extra_steps: int = 0) -> float | None:
    """Before `what` trains the missing ones of `runs` (and does `extra_steps` steps' work on each of `measured`,
    stored or not: a measurement), print what it costs here on stderr, unless it is light; ConfigError("yes") past
    the rule without --yes. The estimated wall seconds, or None for light work."""
    from lab.store import is_cached

    runs = list(dict.fromkeys(runs))
    missing = [run for run in runs if not is_cached(run)]
    if len(runs) <= MAX_GRID and light(missing) and light(list(measured), lambda run: extra_steps):
        return None
    from lab import cost_model
    from lab.sweep import loky_workers

    workers = loky_workers(n_jobs, len(missing)) if missing else 1
    model = cost_model.model(1)  # probes timed in this process: no pool of processes starts before the work does
    slowdown = cost_model.slowdown(workers)
    extra = sum(model.step_seconds(run) * extra_steps for run in measured)
    cpu = model.work_seconds(missing) + extra
    wall = model.wall_seconds(missing, workers, slowdown) + extra * slowdown
    to_train = f"{len(missing):,} to train" if missing else "all stored"
    head = f"{formats.count(len(runs), 'run')}, {to_train}" if runs else f"{extra_steps:,} steps' work"
    print(
        f"{what}: {head}: about {formats.duration(wall)} here, {formats.duration(cpu)} of computing",
        file=sys.stderr,
        flush=True,
    )
    check(a, what, len(runs), wall)
    return wall


def check(a, what: str, n_runs: int, wall: float) -> None:
    """ConfigError("yes") for more than MAX_GRID runs or MAX_UNASKED_SECONDS of estimated wall time, without --yes."""
    if getattr(a, "yes", False):
        return
    if n_runs > MAX_GRID:
        raise ConfigError("yes", f"the grid has {n_runs:,} runs, more than {MAX_GRID:,}; add --yes to run them all")
    if wall > MAX_UNASKED_SECONDS:
        raise ConfigError(
            "yes",
            f"{what} would take about {formats.duration(wall)} here, more than {MAX_UNASKED_SECONDS // 60} min; "
            "add --yes to start it",
        )
