"""One live training from a page: submitted to the worker pool with its progress file, followed step by step (the
progress line: step, loss, elapsed time, time left), stopped when the page leaves, and each visitor's latest one
remembered so the next script run can say where a Cancel stopped it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attncore import RunConfig
from lab.formats import duration
from lab.jobs import pool
from lab.jobs.intervals import CANCEL_WAIT_SECONDS, REFRESH_SECONDS
from lab.jobs.memo import Memo, per_process
from lab.jobs.progress import Cancelled, Trained, losses_so_far, open_progress, request_cancel, train_and_store
from lab.store import cache_dir


def run_key(run: RunConfig) -> str:
    return json.dumps(run.to_dict(), sort_keys=True)


@dataclass
class Training:
    run: RunConfig
    future: Future
    progress: np.memmap  # the file the worker writes each step's loss to (lab.jobs.progress)
    cold: bool  # the worker processes were started for it (its first run loads the lab first)
    workers: int  # the pool's size

    def stop(self) -> None:
        """The page is leaving mid-training (Cancel, a rerun, the visitor gone): stop the worker too.

        No Streamlit call here: under fast reruns the page was stopped, and every call would raise again.
        """
        _stop(self.future, self.progress)


def start(run: RunConfig, workers: int, max_bytes: int, progress_path: Path) -> Training:
    """Submit `run` to the server's pool of `workers` processes, its progress written to progress_path (a fresh file);
    the worker's cap pass takes `max_bytes`."""
    progress = open_progress(progress_path, run.train.steps, create=True)
    workers_pool = pool.shared(workers)
    cold = not workers_pool.started()
    future = workers_pool.submit(train_and_store, run, str(cache_dir()), str(progress_path), (), max_bytes)
    return Training(run, future, progress, cold, workers)


def waiting_text(job: Future, cold: bool, workers: int) -> str:
    """What a submitted training that has not trained a step yet is waiting for."""
    if not job.running():
        return f"Waiting for a free worker process (this server's {workers} are training other runs)"
    if cold:
        return "Starting a worker process (it loads the lab once, then trains)"
    return "Building the model and its first snapshot"


def progress_text(done: np.ndarray, steps: int, started: float, first: tuple[float, int]) -> str:
    """Step, loss, elapsed time, and the time left at the pace measured since the first step seen."""
    now = time.monotonic()
    text = f"Step {len(done):,} of {steps:,}, loss {done[-1]:.4f} · {duration(now - started)} elapsed"
    if len(done) >= steps:
        text += " · evaluating on the test sequences"
    elif len(done) > first[1] and now > first[0]:
        rate = (len(done) - first[1]) / (now - first[0])  # steps per second
        text += f", about {duration((steps - len(done)) / rate)} left"
    return text


def follow(training: Training, show: Callable[[float, str, np.ndarray | None], object]) -> Trained:
    """The run's record once trained, and why the store could not keep it if it could not (progress.Trained); every
    REFRESH_SECONDS meanwhile, show(fraction done, progress line, the losses so far when there are new ones, else
    None). Raises what the worker raised (Cancelled, BrokenExecutor, ...)."""
    job, steps = training.future, training.run.train.steps
    started, first, shown = time.monotonic(), None, 0
    while not job.done():
        time.sleep(REFRESH_SECONDS)
        done = losses_so_far(training.progress)
        if len(done) == 0:
            waiting = waiting_text(job, training.cold, training.workers)
            show(0.0, f"{waiting} · {duration(time.monotonic() - started)} elapsed", None)
            continue
        first = first or (time.monotonic(), len(done))
        new = len(done) > shown
        shown = max(shown, len(done))
        show(len(done) / steps, progress_text(done, steps, started, first), done if new else None)
    return job.result()


def _stop(job: Future, progress: np.memmap) -> None:
    request_cancel(progress)
    job.cancel()  # if it had not started yet


@per_process
def latest() -> Memo:
    return Memo(1024)  # visitor token -> (run key, job, progress) of that visitor's latest training


def remember(token: str, training: Training) -> None:
    """Keep `training` as this visitor's latest until it ends; a cancelled one stays for stopped_at to report."""
    jobs, job = latest(), training.future
    jobs.put(token, (run_key(training.run), job, training.progress))

    def forget_unless_cancelled(done: Future) -> None:  # a finished job's record is not held for the visitor
        if done.cancelled() or not isinstance(done.exception(), Cancelled):
            jobs.pop(token, only_if=lambda found: found[1] is job)

    job.add_done_callback(forget_unless_cancelled)


def stopped_at(token: str | None) -> tuple[str, int] | None:
    """(run key, steps done) of this visitor's latest training if a Cancel stopped it, once; else None.

    The new script run may start while the stopped one is still unwinding (Streamlit's fast reruns), so the cancel
    is requested here too, and the worker's answer awaited for at most CANCEL_WAIT_SECONDS.
    """
    found = latest().pop(token) if token else None
    if found is None:
        return None
    key, job, progress = found
    if not job.done():
        _stop(job, progress)
    try:
        job.result(timeout=CANCEL_WAIT_SECONDS)
    except Cancelled as e:
        return key, e.steps_done
    except Exception:  # finished or failed (its own run reported it), or still evaluating: nothing to say
        pass
    return None
