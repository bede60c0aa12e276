"""A sweep from a page: the missing runs trained on ui.live's worker pool, a few at a time, with the runs done of
the total (cached ones counted apart), each running run's step, elapsed time, time left and a Cancel that stops
every worker at its next step (nothing half-trained is stored). Also what a sweep will cost, said before the click
(lab.cost_model), and the per-view budget (max_view_cpu_s) that refuses a sweep estimated to cost more.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import BrokenExecutor, Future, wait
from dataclasses import dataclass, field
from pathlib import Path

import streamlit as st

from attncore import ConfigError, RunConfig
from lab import cost_model
from lab.formats import count, duration
from lab.store import RunRecord, cache_dir, get_run, is_cached
from ui import live, worker
from ui.limits import BusyError, limits, training_slot
from ui.metered import Memo

REFRESH_SECONDS = 0.25  # the progress text is redrawn this often (the issue asks for at least once a second)
CANCEL_WAIT_SECONDS = 3.0
_LOG = logging.getLogger(__name__)


def workers() -> int:
    """Runs of one sweep trained at once: the sweep's share of the worker pool."""
    lim = limits()
    return max(1, min(lim.sweep_jobs, lim.max_concurrent))


def estimate(missing: Sequence[RunConfig]) -> float:
    """Wall seconds the missing runs should take here, `workers()` at a time, from lab.cost_model (their shapes,
    steps and batch; calibrated on this server once per process, `workers()` probes at once): no earlier run is
    needed."""
    return cost_model.model(workers()).wall_seconds(list(missing), workers())


def budget_error(runs: Sequence[RunConfig]) -> str | None:
    """Why this server refuses to train these runs for one view (their estimated computing time is over the
    max_view_cpu_s cap), or None."""
    work, cap = cost_model.model(workers()).work_seconds(list(runs)), limits().max_view_cpu_s
    if work <= cap:
        return None
    return (
        f"Training {count(len(runs), 'run')} here would take about {duration(work)} of computing (estimated from "
        f"their sizes), more than this server allows for one view ({duration(cap)}, max_view_cpu_s): choose fewer "
        "runs or smaller ones (steps, blocks, width, batch, seeds)."
    )


def estimate_text(missing: Sequence[RunConfig]) -> str:
    """'about 1 min 10 s here' (lab.cost_model's estimate), or that it is over this server's budget per view."""
    if budget_error(missing):
        work, cap = cost_model.model(workers()).work_seconds(list(missing)), limits().max_view_cpu_s
        return f"about {duration(work)} of computing: over this server's {duration(cap)} per view"
    return f"about {duration(estimate(missing))} here"


def cost(missing: Sequence[RunConfig]) -> str:
    """'18 runs, about 1 min 10 s here', or '18 runs, about 2 h of computing: over this server's 1 h per view'."""
    return f"{count(len(missing), 'run')}, {estimate_text(missing)}"


@dataclass
class _Job:
    run: RunConfig
    future: Future  # a concurrent.futures or a distributed Future
    progress: object  # the worker's memory-mapped progress file (ui.worker); None on a Dask cluster


_clients: dict[str, object] = {}  # address -> distributed.Client, one per server process (st.cache_resource would
_clients_lock = threading.Lock()  # take the Client, which is awaitable, for a coroutine); held for lookups only


def _dask_client(address: str):
    """The server's distributed.Client on the configured scheduler, connected and checked once (lab.sweep's connect
    and check_cluster, each bounded in time; again after it closed): ConfigError, one plain sentence, when none
    answers or its workers cannot import the lab; the cause goes to the server's log with the address.

    Called before a slot is taken, and the connection is made outside the lock: a scheduler that accepts and never
    answers costs the visitor who asked lab.sweep's few seconds, never a slot or another visitor's wait."""
    from lab.sweep import check_cluster, connect

    with _clients_lock:
        client = _clients.get(address)
        if client is not None and client.status == "running":
            return client
    try:
        client = connect(address)
        try:
            check_cluster(client)
        except Exception:
            client.close()
            raise
    except ConfigError as e:
        _LOG.warning("dask_scheduler %s: %s (cause: %r)", address, e.message, e.__cause__)
        raise
    with _clients_lock:
        current = _clients.get(address)
        if current is not None and current.status == "running":  # another visitor connected meanwhile
            client.close()
            return current
        _clients[address] = client
        return client


def _submitter(lim, tmp: str, view: tuple, cap: int, client=None):
    """submit(run, index) -> _Job: on the local worker pool with a progress file, or, given the dask_scheduler's
    client, on the cluster through lab.store.get_run (the same function the command line's `--backend dask` runs
    there, so the bits are the same; the workers' own max_store_mb applies there)."""
    location = str(cache_dir())
    if client is not None:

        def on_cluster(run: RunConfig, index: int) -> _Job:
            return _Job(run, client.submit(get_run, run, location=location, keep=view, pure=False), None)

        return on_cluster
    pool = live.pool(lim.max_concurrent)

    def local(run: RunConfig, index: int) -> _Job:
        path = Path(tmp) / f"progress-{index}-{uuid.uuid4().hex}.f64"
        progress = worker.open_progress(path, run.train.steps, create=True)
        return _Job(run, pool.submit(worker.train_with_progress, run, location, str(path), view, cap), progress)

    return local


@dataclass
class _Sweep:
    cached: int  # runs found in the store before the sweep
    runs: list[RunConfig]  # the missing runs, in order
    done: dict[RunConfig, RunRecord] = field(default_factory=dict)
    running: list[_Job] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    steps_seen: int = 0  # steps trained in this sweep (finished runs and running ones)
    first_step_at: float | None = None


def _text(what: str, s: _Sweep, estimate_s: float | None) -> tuple[float, str]:
    """(fraction done, the progress line) from the state of the sweep."""
    now = time.monotonic()
    total_steps = sum(r.train.steps for r in s.runs)
    running_steps = {id(j): 0 if j.progress is None else len(worker.losses_so_far(j.progress)) for j in s.running}
    steps_done = sum(r.train.steps for r in s.done) + sum(running_steps.values())
    if steps_done and s.first_step_at is None:
        s.first_step_at = now
    head = f"{what}: {len(s.done)} of {count(len(s.runs), 'run')} trained"
    if s.cached:
        head += f" ({s.cached:,} more already cached)"
    parts = [head]
    for j in s.running:
        n = running_steps[id(j)]
        shown = f"step {n:,} of {j.run.train.steps:,}" if n else "on the cluster" if j.progress is None else "starting"
        parts.append(f"run {s.runs.index(j.run) + 1}: {shown}")
    parts.append(f"{duration(now - s.started)} elapsed")
    left = None
    if s.first_step_at is not None and now - s.first_step_at >= 0.5:
        pace = steps_done / (now - s.started)  # steps per second over the whole sweep, start-up included
        left = (total_steps - steps_done) / pace
    elif estimate_s is not None:
        left = max(0.0, estimate_s - (now - s.started))
    parts.append(f"about {duration(left)} left" if left is not None else "time left: measuring the pace")
    return min(1.0, steps_done / max(1, total_steps)), " · ".join(parts)


def _stop_all(s: _Sweep) -> None:
    """The page is leaving mid-sweep (Cancel, a rerun, the visitor gone): stop every worker of this sweep."""
    for j in s.running:
        if j.progress is not None:  # a cluster's run cannot be stopped midway: it finishes and is stored whole
            worker.request_cancel(j.progress)
        j.future.cancel()


@st.cache_resource
def _sweeps() -> Memo:
    return Memo(1024)  # visitor token -> (what, _Sweep) of that visitor's sweep while it runs


def report_cancelled() -> None:
    """After a Cancel (which reruns the page): stop what still runs of this visitor's last sweep, and say once
    how far it got. The new run may start while the stopped one is still unwinding (Streamlit's fast reruns),
    so the workers are stopped here too, and awaited for a moment."""
    token = st.session_state.get(live.TOKEN_KEY)
    found = _sweeps().pop(token) if token else None
    if found is None:
        return
    what, s = found
    _stop_all(s)
    wait([j.future for j in s.running], timeout=CANCEL_WAIT_SECONDS)
    trained = sum(is_cached(run) for run in s.runs)
    # a toast, not a box: this runs in dashboard.py before the page, where a box stood above the page's title
    st.toast(
        f"{what}: cancelled after {trained} of {count(len(s.runs), 'run')}. The finished runs are stored; the ones "
        "in progress were stopped at their next step, and nothing half-trained was stored.",
        icon=":material/stop_circle:",
        duration="long",
    )


def sweep_live(runs: Sequence[RunConfig], what: str, cached: int = 0, keep=()) -> list[RunRecord] | None:
    """Train the given (missing) runs on the worker pool, `workers()` at a time, with live progress and Cancel.

    Each worker's cap pass takes the page's max_store_mb and keeps these runs and `keep` (the rest of the view).
    The records in input order, or None when refused, cancelled or failed (the reason is shown).
    """
    runs = list(dict.fromkeys(runs))
    if refused := budget_error(runs):
        st.error(refused, icon=":material/block:")
        return None
    token = st.session_state.setdefault(live.TOKEN_KEY, uuid.uuid4().hex)
    bar, cancel = st.empty(), st.empty()
    bar.progress(0.0, text=f"{what}: starting {cost(runs)}")
    estimate_s = estimate(runs)
    s = _Sweep(cached=cached, runs=runs)
    queue = list(runs)
    finished_cleanly = False  # else the page left mid-sweep: stop every worker
    lim = limits()
    try:  # before the slot: connecting is bounded in time, and no slot waits on a scheduler that does not answer
        client = _dask_client(lim.dask_scheduler) if lim.dask_scheduler else None
    except ConfigError as e:
        _clear(bar, cancel)
        st.error(f"{what} could not start: {e.message[0].upper()}{e.message[1:]}.", icon=":material/lan:")
        return None
    try:
        with training_slot(what.lower()), tempfile.TemporaryDirectory() as tmp:
            cancel.button("Cancel", key=f"sweep_cancel_{what}", icon=":material/stop_circle:")  # a click reruns
            view = tuple(dict.fromkeys([*runs, *keep]))
            submit = _submitter(lim, tmp, view, lim.store_bytes(), client)
            _sweeps().put(token, (what, s))
            try:
                while queue or s.running:
                    while queue and len(s.running) < workers():
                        s.running.append(submit(queue.pop(0), len(s.done) + len(s.running)))
                    time.sleep(REFRESH_SECONDS)
                    for j in [j for j in s.running if j.future.done()]:
                        s.done[j.run] = j.future.result()  # a failed run raises here (the others are stopped)
                        s.running.remove(j)
                    fraction, text = _text(what, s, estimate_s)
                    bar.progress(fraction, text=text)
                finished_cleanly = True
                _sweeps().pop(token)
            finally:
                if not finished_cleanly:
                    _stop_all(s)
    except BusyError as e:
        _clear(bar, cancel)
        st.error(str(e), icon=":material/hourglass_top:")
        return None
    except worker.Cancelled:  # stopped from elsewhere (report_cancelled of a newer run of this page)
        _clear(bar, cancel)
        return None
    except BrokenExecutor:
        _clear(bar, cancel)
        _sweeps().pop(token)
        st.error(
            f"{what}: a training worker stopped unexpectedly (killed, or out of memory) after {len(s.done)} of "
            f"{count(len(runs), 'run')}; the finished ones are stored. Press the button again to go on.",
            icon=":material/error:",
        )
        return None
    except Exception as e:  # a failed worker: one line, never a traceback
        _clear(bar, cancel)
        _sweeps().pop(token)
        st.error(f"{what} failed: {type(e).__name__}: {e}", icon=":material/error:")
        return None
    _clear(bar, cancel)
    return [s.done[run] for run in runs]


def _clear(*placeholders) -> None:
    for p in placeholders:
        p.empty()
