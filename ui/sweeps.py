"""A sweep from a page: the missing runs trained on ui.live's worker pool, a few at a time, with the runs done of
the total (cached ones counted apart), each running run's step, elapsed time, time left and a Cancel that stops
every worker at its next step (nothing half-trained is stored). Also what a sweep will cost, said before the click
(lab.cost_model: the wall time here now and the computing), the one sweep button of every page (train_button), and
the hosted per-view budget (max_view_cpu_s) that refuses a sweep estimated to compute for longer.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, BrokenExecutor, Future, wait
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


CONFIRM_SECONDS = 30 * 60  # a local server asks once more before a sweep estimated to take longer than this here


def workers() -> int:
    """Runs of one sweep trained at once: the sweep's share of the worker pool."""
    lim = limits()
    return max(1, min(lim.sweep_jobs, lim.max_concurrent))


def model() -> cost_model.CostModel:
    """The server's cost model for `workers()` at a time; its first calibration (once per server process) says
    what the page waits for."""
    n = workers()
    if cost_model.calibrated(n):
        return cost_model.model(n)
    with st.spinner("Timing this server's CPU for the estimates (once per server process, a few seconds)..."):
        return cost_model.model(n)


def computing(runs: Sequence[RunConfig]) -> float:
    """CPU seconds the runs should take to train (lab.cost_model, calibrated on this server's CPU time once per
    process, `workers()` probes at once): what a view's budget counts, whatever the load."""
    return model().work_seconds(list(runs))


def estimate(missing: Sequence[RunConfig]) -> float:
    """Wall seconds the missing runs should take here now, `workers()` at a time: their computing shared out over
    the workers, slowed by what the machine's other work takes (cost_model.slowdown, measured now)."""
    n = workers()
    return model().wall_seconds(list(missing), n, cost_model.slowdown(n))


def budget_error(runs: Sequence[RunConfig], command: str | None = None) -> str | None:
    """Why this server refuses to train these runs for one view (hosted mode: their estimated computing is over
    max_view_cpu_s), naming the setting that lifts the cap and the command line that does the same work; or None."""
    lim = limits()
    work, cap = computing(runs), lim.max_view_cpu_s
    if work <= cap:
        return None
    return (
        f"Training {count(len(runs), 'run')} here would take about {duration(work)} of computing (estimated from "
        f"their sizes), more than this server allows for one view ({duration(cap)}, max_view_cpu_s): choose fewer "
        f"runs or smaller ones (steps, blocks, width, batch, seeds). {_elsewhere(lim, 'max_view_cpu_s', command)}"
    )


def _elsewhere(lim, cap: str, command: str | None) -> str:
    """'Its operator lifts the cap with ...; the command line trains the same runs with no cap: `...`.'"""
    cli = command or "python -m attncore sweep ... (python -m attncore sweep --help)"
    return f"The operator lifts the cap with {lim.lifted_by(cap)}; the command line has no cap: `{cli}`."


def estimate_text(missing: Sequence[RunConfig]) -> str:
    """'about 6 min here, 12 min of computing': the wall time here now and the CPU time (the same phrase on every
    button); over a hosted server's budget, 'about 2 h of computing: over this server's 1 h per view'."""
    lim = limits()
    work = computing(missing)
    if work > lim.max_view_cpu_s:
        return f"about {duration(work)} of computing: over this server's {duration(lim.max_view_cpu_s)} per view"
    wall = estimate(missing)
    return f"{_about(wall)} here, {duration(work) if work >= 0.5 else 'under a second'} of computing"


def _about(seconds: float) -> str:
    return f"about {duration(seconds)}" if seconds >= 0.5 else "under a second"


def cost(missing: Sequence[RunConfig]) -> str:
    """'18 runs, about 1 min here, 2 min of computing' (or over this server's budget per view)."""
    return f"{count(len(missing), 'run')}, {estimate_text(missing)}"


def train_button(label: str, missing: Sequence[RunConfig], key: str, command: str | None = None, place=None) -> bool:
    """The sweep button of every page: `label` and what the sweep costs ('Train the missing: 18 runs, about 1 min
    here, 2 min of computing'). Over a hosted server's caps (max_sweep_runs, max_view_cpu_s) it is shown disabled
    with the reason before any click, naming the setting that lifts the cap and `command`, the command line that
    does the same work; on a local server a sweep of more than CONFIRM_SECONDS here asks once more (a checkbox).
    True when the visitor asked to train now. `place`: a container to draw the button in (default: the page)."""
    place = st if place is None else place
    lim = limits()
    text = f"{label}{cost(missing)}"
    refused = None
    if len(missing) > lim.max_sweep_runs:
        refused = (
            f"{count(len(missing), 'run')} is more than this server trains at once ({lim.max_sweep_runs:,}, "
            f"max_sweep_runs): choose fewer levels, variants or seeds. {_elsewhere(lim, 'max_sweep_runs', command)}"
        )
    else:
        refused = budget_error(missing, command)
    if refused:
        place.button(text, type="primary", key=key, disabled=True)
        st.info(refused, icon=":material/block:")
        return False
    confirmed = True
    if (wall := estimate(missing)) > CONFIRM_SECONDS:
        confirmed = st.checkbox(
            f"Yes, train for about {duration(wall)}: the page shows the progress and Cancel stops it",
            key=f"{key}_confirm",
            help="A long sweep: the runs are stored as each finishes, so a cancelled sweep resumes where it stopped.",
        )
    return place.button(text, type="primary", key=key, disabled=not confirmed)


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
    cold: bool = False  # the worker processes were started for this sweep (their first run loads the lab first)


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
        parts.append(f"run {s.runs.index(j.run) + 1}: {_job_state(j, running_steps[id(j)], s.cold)}")
    parts.append(f"{duration(now - s.started)} elapsed")
    left = None
    if s.first_step_at is not None and now - s.first_step_at >= 0.5:
        pace = steps_done / (now - s.started)  # steps per second over the whole sweep, start-up included
        left = (total_steps - steps_done) / pace
    elif estimate_s is not None:
        left = max(0.0, estimate_s - (now - s.started))
    parts.append(f"about {duration(left)} left" if left is not None else "time left: measuring the pace")
    return min(1.0, steps_done / max(1, total_steps)), " · ".join(parts)


def _until_one_finishes(running: list[_Job]) -> None:
    """Wait REFRESH_SECONDS, or less when a local run finishes first: its worker gets the next run at once."""
    futures = [j.future for j in running]
    if all(isinstance(f, Future) for f in futures):
        wait(futures, timeout=REFRESH_SECONDS, return_when=FIRST_COMPLETED)
    else:  # a cluster's futures: polled
        time.sleep(REFRESH_SECONDS)


def _job_state(j: _Job, steps: int, cold: bool) -> str:
    """What a running job of the sweep is doing, or waiting for, in a few words."""
    if steps:
        return f"step {steps:,} of {j.run.train.steps:,}"
    if j.progress is None:
        return "on the cluster"
    if not j.future.running():
        return "waiting for a free worker process"
    return "starting a worker process (it loads the lab once)" if cold else "building the model, first snapshot"


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
    queue = cost_model.longest_first(runs, model())  # the order the estimate assumed
    s = _Sweep(cached=cached, runs=list(queue))
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
            s.cold = not lim.dask_scheduler and not live.pool(lim.max_concurrent).started()
            submit = _submitter(lim, tmp, view, lim.store_bytes(), client)
            _sweeps().put(token, (what, s))
            try:
                while queue or s.running:
                    while queue and len(s.running) < workers():
                        s.running.append(submit(queue.pop(0), len(s.done) + len(s.running)))
                    _until_one_finishes(s.running)
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
