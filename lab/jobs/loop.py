"""A page's sweep: the missing runs trained a few at a time on the server's worker pool (or its Dask scheduler), the
progress line (runs done of the total, cached ones counted apart, each running run's step, elapsed time, time
left), and a Cancel that stops every worker at its next step (nothing half-trained is stored). A page that goes away
without a Cancel stops its workers on a hosted server (to free them for other visitors); on a local one the runs
already training finish and are stored."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from pathlib import Path

from attncore import RunConfig
from lab import wall
from lab.formats import count, duration
from lab.jobs import pool
from lab.jobs.intervals import CANCEL_WAIT_SECONDS, REFRESH_SECONDS
from lab.jobs.memo import Memo, per_process
from lab.jobs.progress import losses_so_far, open_progress, request_cancel, train_with_progress
from lab.store import RunRecord, cache_dir, get_run, is_cached


@dataclass
class Job:
    run: RunConfig
    future: Future  # a concurrent.futures or a distributed Future
    progress: object  # the worker's memory-mapped progress file (lab.jobs.progress); None on a Dask cluster


def submitter(workers: int, tmp: str, view: tuple, cap: int, client=None) -> Callable[[RunConfig, int], Job]:
    """submit(run, index) -> Job: on the server's pool of `workers` processes with a progress file in `tmp`, or, given
    the dask_scheduler's client, on the cluster through lab.store.get_run (the same function the command line's
    `--backend dask` runs there, so the bits are the same; the workers' own max_store_mb applies there). Each
    worker's cap pass takes `cap` and keeps `view`."""
    location = str(cache_dir())
    if client is not None:

        def on_cluster(run: RunConfig, index: int) -> Job:
            return Job(run, client.submit(get_run, run, location=location, keep=view, pure=False), None)

        return on_cluster
    workers_pool = pool.shared(workers)

    def local(run: RunConfig, index: int) -> Job:
        path = Path(tmp) / f"progress-{index}-{uuid.uuid4().hex}.f64"
        progress = open_progress(path, run.train.steps, create=True)
        return Job(run, workers_pool.submit(train_with_progress, run, location, str(path), view, cap), progress)

    return local


@dataclass
class Sweep:
    cached: int  # runs found in the store before the sweep
    runs: list[RunConfig]  # the missing runs, in order
    done: dict[RunConfig, RunRecord] = field(default_factory=dict)
    running: list[Job] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    steps_seen: int = 0  # steps trained in this sweep (finished runs and running ones)
    first_step_at: float | None = None
    cold: bool = False  # the worker processes were started for this sweep (their first run loads the lab first)
    costs: dict[RunConfig, float] | None = None  # each run's estimated computing (lab.cost_model); else its steps


def progress_text(what: str, s: Sweep, estimate_s: float | None) -> tuple[float, str]:
    """(fraction done, the progress line) from the state of the sweep. The time left is the estimate less the time
    elapsed until a few runs have finished, then the sweep's own pace (lab.wall.time_left)."""
    now = time.monotonic()
    running_steps = {id(j): 0 if j.progress is None else len(losses_so_far(j.progress)) for j in s.running}
    steps_done = sum(r.train.steps for r in s.done) + sum(running_steps.values())
    if steps_done and s.first_step_at is None:
        s.first_step_at = now
    head = f"{what}: {len(s.done)} of {count(len(s.runs), 'run')} trained"
    if s.cached:
        head += f" ({s.cached:,} more already cached)"
    parts = [head]
    for j in s.running:
        parts.append(f"run {s.runs.index(j.run) + 1}: {_job_state(j, running_steps[id(j)], s.cold)}")
    parts.append(f"{duration(now - s.started)} elapsed")
    # The work done: each finished run's estimated computing, and the part of each running one its steps say (a
    # step of a deep run is worth more than one of a shallow run: the sweep deals the deep ones first).
    cost = (lambda run: s.costs.get(run, run.train.steps)) if s.costs else (lambda run: run.train.steps)
    total = sum(cost(r) for r in s.runs)
    done = sum(cost(r) for r in s.done)
    done += sum(cost(j.run) * running_steps[id(j)] / max(1, j.run.train.steps) for j in s.running)
    measured = s.first_step_at is not None and now - s.first_step_at >= 0.5
    left = wall.time_left(estimate_s, now - s.started, len(s.done), done if measured else 0.0, total)
    parts.append(f"about {duration(left)} left" if left is not None else "time left: measuring the pace")
    return min(1.0, done / total if total > 0 else 0.0), " · ".join(parts)


def _until_one_finishes(running: list[Job]) -> None:
    """Wait REFRESH_SECONDS, or less when a local run finishes first: its worker gets the next run at once."""
    futures = [j.future for j in running]
    if all(isinstance(f, Future) for f in futures):
        wait(futures, timeout=REFRESH_SECONDS, return_when=FIRST_COMPLETED)
    else:  # a cluster's futures: polled
        time.sleep(REFRESH_SECONDS)


def _job_state(j: Job, steps: int, cold: bool) -> str:
    """What a running job of the sweep is doing, or waiting for, in a few words."""
    if steps:
        return f"step {steps:,} of {j.run.train.steps:,}"
    if j.progress is None:
        return "on the cluster"
    if not j.future.running():
        return "waiting for a free worker process"
    return "starting a worker process (it loads the lab once)" if cold else "building the model, first snapshot"


def stop_all(s: Sweep, finish_started: bool = False) -> None:
    """Stop every worker of this sweep (Cancel, a failure; on a hosted server also a rerun or the visitor gone). With
    `finish_started` (a local server's page gone without a Cancel) a run that has trained a step goes on and is
    stored when it finishes; only the runs that had not begun are dropped."""
    for j in s.running:
        if finish_started and started(j):
            continue
        if j.progress is not None:  # a cluster's run cannot be stopped midway: it finishes and is stored whole
            request_cancel(j.progress)
        j.future.cancel()


def started(j: Job) -> bool:
    """Whether the job's run has trained a step (a cluster's run: always, it cannot be stopped midway)."""
    return j.progress is None or len(losses_so_far(j.progress)) > 0


def run(
    what: str,
    s: Sweep,
    queue: list[RunConfig],
    submit: Callable[[RunConfig, int], Job],
    workers: Callable[[], int],
    show: Callable[[float, str], object],
    estimate_s: float | None,
    finish_started: bool = False,
) -> None:
    """Train the queue into s.done, workers() runs at a time, show(fraction done, progress line) after each wait.

    A failed run raises here and stops every worker. The page stopped (a rerun, the visitor gone: Streamlit's
    StopException and RerunException are BaseExceptions, not Exceptions) stops every worker too, unless
    `finish_started` (a local server): then the runs under way finish and are stored (stop_all).
    """
    try:
        while queue or s.running:
            while queue and len(s.running) < workers():
                s.running.append(submit(queue.pop(0), len(s.done) + len(s.running)))
            _until_one_finishes(s.running)
            for j in [j for j in s.running if j.future.done()]:
                s.done[j.run] = j.future.result()  # a failed run raises here (the others are stopped)
                s.running.remove(j)
            show(*progress_text(what, s, estimate_s))
    except Exception:
        stop_all(s)
        raise
    except BaseException:  # the page left mid-sweep
        stop_all(s, finish_started)
        raise


@per_process
def running() -> Memo:
    return Memo(1024)  # visitor token -> (what, Sweep) of that visitor's sweep while it runs


def release(token: str | None) -> tuple[str, int] | None:
    """Forget this visitor's last sweep without stopping it (a local server's page rerun without a Cancel: its
    runs under way finish and are stored): (what, runs still training), once; else None."""
    found = running().pop(token) if token else None
    if found is None:
        return None
    what, s = found
    return what, sum(started(j) and not j.future.done() for j in s.running)


def cancel(token: str | None) -> tuple[str, int, int] | None:
    """Stop what still runs of this visitor's last sweep, if it did not finish (a Cancel reruns the page):
    (what, runs trained, runs asked for), once; else None. The new script run may start while the stopped one is
    still unwinding (Streamlit's fast reruns), so the workers are stopped here too, and awaited for a moment."""
    found = running().pop(token) if token else None
    if found is None:
        return None
    what, s = found
    stop_all(s)
    wait([j.future for j in s.running], timeout=CANCEL_WAIT_SECONDS)
    return what, sum(is_cached(run) for run in s.runs), len(s.runs)
