"""Work a command may start that takes long: its estimate on stderr before any training, and the rule every command
shares with `sweep`'s grid: more than MAX_GRID runs, or more than an hour of computing by lab.cost_model's estimate
(lab.cost_model.CONFIRM_COMPUTING_SECONDS, where the dashboard's sweep buttons ask once more), needs --yes. The rule
reads the computing (this machine's CPU time), not the wall time, so the load of the moment does not move it.

Light work (at most LIGHT_STEPS training steps and LIGHT_MULTIPLY_ADDS multiply-adds in all: seconds to a minute or
two at a default run's pace) is neither estimated nor asked about, so a short command does not time the cost model's
probes.
"""

from __future__ import annotations

import sys

from attncore.config import ConfigError
from cli.flags import MAX_GRID  # runs one command may start without --yes (sweep's grid rule)
from lab import formats
from lab.cost_model import CONFIRM_COMPUTING_SECONDS

LIGHT_STEPS = 30_000  # a default run's step costs a few ms: about a minute of them
LIGHT_MULTIPLY_ADDS = 10**11  # a default run (1,500 steps) is about 10^10


def add_yes(p) -> None:
    p.add_argument(
        "--yes",
        action="store_true",
        help=f"start work of more than {MAX_GRID:,} runs or estimated above {CONFIRM_COMPUTING_SECONDS // 60} min of "
        "computing",
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
    from lab import cost_model, wall
    from lab.store import cache_dir
    from lab.sweep import loky_workers

    workers = loky_workers(n_jobs, len(missing)) if missing else 1
    model = cost_model.model(1, cache_dir())  # kept in the store, or timed in this process (no pool starts first)
    slowdown = wall.slowdown(workers, cache_dir())  # the next minutes' load, as the dashboard's buttons read it
    extra = sum(model.step_seconds(run) * extra_steps for run in measured)
    cpu = model.work_seconds(missing) + extra
    here = wall.WallEstimate(
        *(model.wall_seconds(missing, workers, x) + extra * x for x in (slowdown.likely, slowdown.low, slowdown.high))
    )
    to_train = f"{len(missing):,} to train" if missing else "all stored"
    head = f"{formats.count(len(runs), 'run')}, {to_train}" if runs else f"{extra_steps:,} steps' work"
    print(
        f"{what}: {head}: {wall.about(here)} here, {formats.duration(cpu)} of computing",
        file=sys.stderr,
        flush=True,
    )
    check(a, what, len(runs), cpu)
    return here.likely


def check(a, what: str, n_runs: int, computing: float) -> None:
    """ConfigError("yes") for more than MAX_GRID runs or CONFIRM_COMPUTING_SECONDS of estimated computing, without
    --yes."""
    if getattr(a, "yes", False):
        return
    if n_runs > MAX_GRID:
        raise ConfigError("yes", f"the grid has {n_runs:,} runs, more than {MAX_GRID:,}; add --yes to run them all")
    if computing > CONFIRM_COMPUTING_SECONDS:
        raise ConfigError(
            "yes",
            f"{what} would take about {formats.duration(computing)} of computing, more than "
            f"{CONFIRM_COMPUTING_SECONDS // 60} min; "
            "add --yes to start it",
        )
