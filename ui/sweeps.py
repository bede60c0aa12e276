"""A sweep from a page, drawn: what it will cost, said before the click (lab.cost_model's computing, and lab.wall's
wall time here over the next minutes: the load smoothed over minutes, a range when it varies), the one sweep button
of every page (train_button), the hosted per-view budget (max_view_cpu_s) that refuses a sweep estimated to
compute for longer, and the sweep's progress bar and Cancel. lab.jobs.loop runs it: the
missing runs on the server's worker pool (or its Dask scheduler), a few at a time.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Sequence
from concurrent.futures import BrokenExecutor

import streamlit as st

from attncore import ConfigError, RunConfig
from lab import cost_model, wall
from lab.formats import count, duration
from lab.jobs import dask_client, loop, pool
from lab.jobs.progress import Cancelled
from lab.jobs.slots import BusyError
from lab.store import RunRecord, cache_dir
from ui import live
from ui.limits import headless, limits
from ui.slots import training_slot

# A local server asks once more before a sweep of more computing than this (CPU time: what the load does not move,
# so the button does not flip between two reloads): half an hour here on two quiet cores.
CONFIRM_COMPUTING_SECONDS = cost_model.CONFIRM_COMPUTING_SECONDS
CANCEL_CLICKED = "_sweep_cancel_clicked"  # set by the Cancel button's callback, read by the rerun it causes


def _cancel_clicked() -> None:
    st.session_state[CANCEL_CLICKED] = True


def workers() -> int:
    """Runs of one sweep trained at once: the sweep's share of the worker pool."""
    lim = limits()
    return max(1, min(lim.sweep_jobs, lim.max_concurrent))


def model() -> cost_model.CostModel:
    """The server's cost model for `workers()` at a time; its first calibration (once per server process) says
    what the page waits for."""
    n = workers()
    if cost_model.calibrated(n):
        return cost_model.model(n, cache_dir())
    with st.spinner("Reading this server's CPU timings for the estimates (timed once per machine, a few seconds)..."):
        return cost_model.model(n, cache_dir())


def computing(runs: Sequence[RunConfig]) -> float:
    """CPU seconds the runs should take to train (lab.cost_model, calibrated on this server's CPU time once per
    process, `workers()` probes at once): what a view's budget counts, whatever the load."""
    return model().work_seconds(list(runs))


def outlook(missing: Sequence[RunConfig]) -> wall.WallEstimate:
    """Wall seconds the missing runs should take here, `workers()` at a time: their computing shared out over the
    workers, slowed by what the machine's other work takes over the next minutes (lab.wall: the readings of the
    load smoothed over minutes, kept in the store's folder; their range when they vary)."""
    return wall.estimate(model(), list(missing), workers(), cache_dir())


def estimate(missing: Sequence[RunConfig]) -> float:
    """The likely wall seconds of the missing runs here (outlook)."""
    return outlook(missing).likely


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


def view_cap_error(n: int, fewer: str, command: str | None = None) -> str | None:
    """Why this server refuses to show a view of `n` runs (more than max_compare_runs, cached or not), naming the
    setting that lifts the cap and the command line that trains and stores the same runs; or None."""
    lim = limits()
    if n <= lim.max_compare_runs:
        return None
    return (
        f"This view has {n:,} runs; this server shows at most {lim.max_compare_runs:,} at once (max_compare_runs): "
        f"choose fewer {fewer}. {_elsewhere(lim, 'max_compare_runs', command)}"
    )


def _elsewhere(lim, cap: str, command: str | None) -> str:
    """'Its operator lifts the cap with ...; the command line trains the same runs with no cap: `...`.'"""
    cli = command or "python -m attncore sweep ... (python -m attncore sweep --help)"
    return f"The operator lifts the cap with {lim.lifted_by(cap)}; the command line has no cap: `{cli}`."


def estimate_text(missing: Sequence[RunConfig]) -> str:
    """'about 6 min here, 12 min of computing': the wall time here over the next minutes ('about 12–25 min here'
    while the load varies) and the CPU time (the same phrase on every button); over a hosted server's budget,
    'about 2 h of computing: over this server's 1 h per view'."""
    lim = limits()
    work = computing(missing)
    if work > lim.max_view_cpu_s:
        return f"about {duration(work)} of computing: over this server's {duration(lim.max_view_cpu_s)} per view"
    return f"{wall.about(outlook(missing))} here, {duration(work) if work >= 0.5 else 'under a second'} of computing"


def cost(missing: Sequence[RunConfig]) -> str:
    """'18 runs, about 1 min here, 2 min of computing' (or over this server's budget per view)."""
    return f"{count(len(missing), 'run')}, {estimate_text(missing)}"


def train_button(label: str, missing: Sequence[RunConfig], key: str, command: str | None = None, place=None) -> bool:
    """The sweep button of every page: `label` and what the sweep costs ('Train the missing: 18 runs, about 1 min
    here, 2 min of computing'). Over a hosted server's caps (max_sweep_runs, max_view_cpu_s) it is shown disabled
    with the reason before any click, naming the setting that lifts the cap and `command`, the command line that
    does the same work; on a local server a sweep of more than CONFIRM_COMPUTING_SECONDS of computing asks once
    more (a checkbox): decided by the computing, which the load does not move, so the button does not flip.
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
    if (work := computing(missing)) > CONFIRM_COMPUTING_SECONDS:
        confirmed = st.checkbox(
            f"Yes, train for {wall.about(outlook(missing))} here ({duration(work)} of computing): the page shows the "
            "progress and Cancel stops it",
            key=f"{key}_confirm",
            help="A long sweep: the runs are stored as each finishes, so a cancelled sweep resumes where it stopped.",
        )
    return place.button(text, type="primary", key=key, disabled=not confirmed)


def report_cancelled() -> None:
    """After a Cancel (which reruns the page): stop what still runs of this visitor's last sweep, and say once
    how far it got (lab.jobs.loop.cancel). A rerun without a Cancel (another setting, another page) stops it the
    same way on a hosted server, to free its workers; on a local one the runs under way finish and are stored
    (lab.jobs.loop.release)."""
    token = st.session_state.get(live.TOKEN_KEY)
    clicked = st.session_state.pop(CANCEL_CLICKED, False)
    if not clicked and not limits().is_hosted(headless()):
        went_on = loop.release(token)
        if went_on and went_on[1]:
            what, n = went_on
            st.toast(f"{what}: the {count(n, 'run')} under way go on and are stored as each finishes; the runs not "
                     "started were dropped (press the button again for them).", icon=":material/info:")  # fmt: skip
        return
    stopped = loop.cancel(token)
    if stopped is None:
        return
    what, trained, total = stopped
    # a toast, not a box: this runs in dashboard.py before the page, where a box stood above the page's title
    st.toast(
        f"{what}: cancelled after {trained} of {count(total, 'run')}. The finished runs are stored; the ones "
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
    s = loop.Sweep(cached=cached, runs=list(queue), costs={run: model().run_seconds(run) for run in queue})
    lim = limits()
    try:  # before the slot: connecting is bounded in time, and no slot waits on a scheduler that does not answer
        client = dask_client.client(lim.dask_scheduler) if lim.dask_scheduler else None
    except ConfigError as e:
        _clear(bar, cancel)
        st.error(f"{what} could not start: {e.message[0].upper()}{e.message[1:]}.", icon=":material/lan:")
        return None
    try:
        # a run still training after the page left keeps its progress file open (mapped) once this folder goes
        with training_slot(what.lower()), tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
            cancel.button("Cancel", key=f"sweep_cancel_{what}", icon=":material/stop_circle:", on_click=_cancel_clicked)
            view = tuple(dict.fromkeys([*runs, *keep]))
            s.cold = not lim.dask_scheduler and not pool.shared(lim.max_concurrent).started()
            submit = loop.submitter(lim.max_concurrent, tmp, view, lim.store_bytes(), client)
            loop.running().put(token, (what, s))
            show = lambda done, text: bar.progress(done, text=text)  # noqa: E731
            local = not lim.is_hosted(headless())  # a local page gone: its runs under way finish and are stored
            loop.run(what, s, queue, submit, workers, show, estimate_s, finish_started=local)
            loop.running().pop(token)
    except BusyError as e:
        _clear(bar, cancel)
        st.error(str(e), icon=":material/hourglass_top:")
        return None
    except Cancelled:  # stopped from elsewhere (report_cancelled of a newer run of this page)
        _clear(bar, cancel)
        return None
    except BrokenExecutor:
        _clear(bar, cancel)
        loop.running().pop(token)
        st.error(
            f"{what}: a training worker stopped unexpectedly (killed, or out of memory) after {len(s.done)} of "
            f"{count(len(runs), 'run')}; the finished ones are stored. Press the button again to go on.",
            icon=":material/error:",
        )
        return None
    except Exception as e:  # a failed worker: one line, never a traceback
        _clear(bar, cancel)
        loop.running().pop(token)
        st.error(f"{what} failed: {type(e).__name__}: {e}", icon=":material/error:")
        return None
    _clear(bar, cancel)
    return [s.done[run] for run in runs]


def _clear(*placeholders) -> None:
    for p in placeholders:
        p.empty()
