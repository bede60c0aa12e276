"""Live training from a page: the worker pool (rebuilt when a worker dies), the progress display with
elapsed time, time left and Cancel, and the expected duration (lab.cost_model).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
import uuid
from concurrent.futures import BrokenExecutor, Future
from pathlib import Path

import streamlit as st
from joblib.externals.loky import ProcessPoolExecutor

from attncore import RunConfig
from lab import cost_model
from lab.formats import duration
from lab.store import RunRecord, cache_dir
from lab.sweep import _exit_with_parent as exit_with_parent  # the sweep's own watch of its parent process
from ui import frames, worker
from ui.charts import runs as charts
from ui.limits import BusyError, limits, training_slot
from ui.metered import Memo

REFRESH_SECONDS = 0.25  # redraw the live loss curve at most this often
CANCEL_WAIT_SECONDS = 3.0  # after Cancel, how long the page waits to learn at which step the worker stopped
TOKEN_KEY = "_live_token"  # session_state: this visitor's key into _last_jobs


class WorkerPool:
    """The training worker processes, replaced as a whole when one of them died.

    loky's processes, not multiprocessing's spawn: spawn re-runs the parent's __main__ in each worker,
    and under Streamlit that is the page script (the worker would import Streamlit and log warnings).
    loky workers do not watch their parent on POSIX, so each runs lab.sweep's parent watch: after a kill -9
    of the server they exit (and loky's resource tracker with them, once no process holds its pipe).
    """

    def __init__(self, n: int):
        self.n, self._lock, self._executor = n, threading.Lock(), None

    def _current(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._executor is None:  # each worker ends within a second of this server process dying (kill -9)
                self._executor = ProcessPoolExecutor(
                    max_workers=self.n, initializer=exit_with_parent, initargs=(os.getpid(),)
                )
            return self._executor

    def started(self) -> bool:
        """Whether the worker processes are running already (a first job starts them, and loads the lab in each)."""
        with self._lock:
            return self._executor is not None

    def discard(self, executor: ProcessPoolExecutor) -> None:
        """Forget a broken executor (the next submit starts a new one) and stop what is left of it."""
        with self._lock:
            if self._executor is executor:
                self._executor = None
        executor.shutdown(wait=False, kill_workers=True)

    def submit(self, fn, *args) -> Future:
        for attempt in range(2):  # a pool found broken at submit is replaced once
            executor = self._current()
            try:
                job = executor.submit(fn, *args)
            except (BrokenExecutor, RuntimeError):
                self.discard(executor)
                if attempt:
                    raise
                continue

            def replace_if_broken(done: Future, executor=executor) -> None:
                if not done.cancelled() and isinstance(done.exception(), BrokenExecutor):
                    self.discard(executor)

            job.add_done_callback(replace_if_broken)
            return job
        raise AssertionError("unreachable")


@st.cache_resource
def pool(n: int) -> WorkerPool:
    return WorkerPool(n)  # one per server process; the workers persist and serve every session


def run_key(run: RunConfig) -> str:
    return json.dumps(run.to_dict(), sort_keys=True)


def expectation(run: RunConfig) -> str:
    """One sentence on how long training `run` should take here, from lab.cost_model (no earlier run needed)."""
    if cost_model.calibrated(1):
        cost = cost_model.model()
    else:
        with st.spinner("Timing this server's CPU for the estimates (once per server process, a few seconds)..."):
            cost = cost_model.model()
    wall = cost.wall_seconds([run], 1, cost_model.slowdown(1))
    return (
        f"Expect about {duration(wall)} here, {duration(cost.run_seconds(run))} of computing: estimated from its "
        "size, steps and batch by a cost model timed on this server's CPU, and the load on it now (the bar shows "
        "the time left at the pace it measures)."
    )


def _show_progress(bar, done, steps: int, started: float, first: tuple[float, int]) -> None:
    """Step, loss, elapsed time, and the time left at the pace measured since the first step seen."""
    now = time.monotonic()
    text = f"Step {len(done):,} of {steps:,}, loss {done[-1]:.4f} · {duration(now - started)} elapsed"
    if len(done) >= steps:
        text += " · evaluating on the test sequences"
    elif len(done) > first[1] and now > first[0]:
        rate = (len(done) - first[1]) / (now - first[0])  # steps per second
        text += f", about {duration((steps - len(done)) / rate)} left"
    bar.progress(len(done) / steps, text=text)


def waiting_text(job: Future, cold: bool, workers: int) -> str:
    """What a submitted training that has not trained a step yet is waiting for."""
    if not job.running():
        return f"Waiting for a free worker process (this server's {workers} are training other runs)"
    if cold:
        return "Starting a worker process (it loads the lab once, then trains)"
    return "Building the model and its first snapshot"


def _follow(job: Future, progress, steps: int, bar, curve, cold: bool, workers: int) -> RunRecord:
    started, first, shown = time.monotonic(), None, 0
    while not job.done():
        time.sleep(REFRESH_SECONDS)
        done = worker.losses_so_far(progress)
        if len(done) == 0:
            text = f"{waiting_text(job, cold, workers)} · {duration(time.monotonic() - started)} elapsed"
            bar.progress(0.0, text=text)
            continue
        first = first or (time.monotonic(), len(done))
        _show_progress(bar, done, steps, started, first)
        if len(done) > shown:
            shown = len(done)
            curve.altair_chart(charts.live_loss_curve(frames.history_frame(done), steps), width="stretch")
    return job.result()


def _stop(job: Future, progress) -> None:
    """The page is leaving mid-training (Cancel, a rerun, the visitor gone): stop the worker too.

    No Streamlit call here: under fast reruns the page was stopped, and every call would raise again.
    """
    worker.request_cancel(progress)
    job.cancel()  # if it had not started yet


@st.cache_resource
def _last_jobs() -> Memo:
    return Memo(1024)  # visitor token -> (run key, job, progress) of that visitor's latest training


def _forget_unless_cancelled(jobs: Memo, token: str, job: Future) -> None:
    """Keep only what report_cancelled needs: a finished job's record is not held for the visitor."""
    if job.cancelled() or not isinstance(job.exception(), worker.Cancelled):
        jobs.pop(token, only_if=lambda found: found[1] is job)


def train_live(run: RunConfig) -> RunRecord | None:
    """Train (or fetch) one run in a worker, with progress, time left, a live loss curve and Cancel."""
    steps, key = run.train.steps, run_key(run)
    token = st.session_state.setdefault(TOKEN_KEY, uuid.uuid4().hex)
    bar, curve, cancel = st.empty(), st.empty(), st.empty()
    bar.progress(0.0, text="Starting: a training slot, then a worker process")  # at once, whatever comes next
    try:
        with training_slot() as slot, tempfile.TemporaryDirectory() as tmp:
            progress_path = Path(tmp) / "progress.f64"
            progress = worker.open_progress(progress_path, steps, create=True)
            lim = limits()
            cold = not pool(lim.max_concurrent).started()
            job = pool(lim.max_concurrent).submit(
                worker.train_with_progress, run, str(cache_dir()), str(progress_path), (), lim.store_bytes()
            )
            slot.hand_to(job)  # the slot is free again when the worker is, not when this page leaves
            jobs = _last_jobs()
            jobs.put(token, (key, job, progress))
            job.add_done_callback(lambda done: _forget_unless_cancelled(jobs, token, done))
            try:
                cancel.button("Cancel", key="train_cancel", icon=":material/stop_circle:")  # a click reruns
                record = _follow(job, progress, steps, bar, curve, cold, lim.max_concurrent)
            finally:
                if not job.done():
                    _stop(job, progress)
    except BusyError as e:
        _clear(bar, curve, cancel)
        st.error(str(e), icon=":material/hourglass_top:")
        return None
    except worker.Cancelled as e:
        _clear(bar, curve, cancel)
        st.warning(f"Cancelled after {e.steps_done:,} of {steps:,} steps; nothing was stored.")
        return None
    except BrokenExecutor:
        _clear(bar, curve, cancel)
        st.error(
            "The training worker stopped unexpectedly (killed, or out of memory); nothing was stored. "
            "A new worker starts with the next training: press Train again.",
            icon=":material/error:",
        )
        return None
    except Exception as e:  # a failed worker: one line, never a traceback
        _clear(bar, curve, cancel)
        st.error(f"Training failed: {type(e).__name__}: {e}", icon=":material/error:")
        return None
    _clear(bar, curve, cancel)
    return record


def _clear(*placeholders) -> None:
    for p in placeholders:
        p.empty()


def report_cancelled(run: RunConfig) -> None:
    """After a Cancel (which reruns the page), say where this visitor's training of `run` stopped, once.

    The new run may start while the stopped one is still unwinding (Streamlit's fast reruns), so the
    cancel is requested here too, and the worker's answer awaited for a moment.
    """
    token = st.session_state.get(TOKEN_KEY)
    found = _last_jobs().pop(token) if token else None
    if found is None:
        return
    key, job, progress = found
    if not job.done():
        _stop(job, progress)
    try:
        job.result(timeout=CANCEL_WAIT_SECONDS)
    except worker.Cancelled as e:
        if key == run_key(run):
            st.warning(
                f"Cancelled after {e.steps_done:,} of {run.train.steps:,} steps; nothing was stored.",
                icon=":material/stop_circle:",
            )
        else:  # the visitor changed a setting mid-training: the page now shows another run
            total = RunConfig.from_dict(json.loads(key)).train.steps
            st.warning(
                f"The settings changed during a training, so it stopped after {e.steps_done:,} of {total:,} "
                "steps; nothing was stored.",
                icon=":material/stop_circle:",
            )
    except Exception:  # finished or failed (its own run reported it), or still evaluating: nothing to say
        pass
