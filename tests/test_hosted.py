"""Hosted mode: training slots released on every path, a dead worker pool replaced, a worker without
Streamlit, Cancel on Train, metered page work and the caps' parser."""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import types
from concurrent.futures import BrokenExecutor
from pathlib import Path

import hosted_probe
import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from attncore import make_run
from lab.store import cache_dir, get_run, is_cached
from ui import limits as limits_module
from ui import live, worker

TIMEOUT = 60


@pytest.fixture(autouse=True)
def fresh_slots():
    """Every test starts with the server's slots all free (a leak in one test must not fail the next)."""
    limits_module._slots.clear()
    yield
    limits_module._slots.clear()


def _slot_script() -> None:
    import hosted_probe
    import streamlit as st

    from ui.limits import training_slot

    hosted_probe.inject_faults()
    st.write("before")
    with training_slot():
        st.write("inside")
    st.write("after")


def _free_slots(n: int) -> int:
    """How many of the server's n slots can be taken right now (all given back again)."""
    slots, taken = limits_module._slots(n), 0
    while slots.acquire(blocking=False):
        taken += 1
    for _ in range(taken):
        slots.release()
    return taken


def _run_slot_script(fault_at: int, kind: str, contended: bool) -> int:
    """Run the script with Streamlit's stop/rerun raised at its fault_at-th message; returns messages seen."""
    hosted_probe.arm(fault_at, kind)
    holder = None
    if contended:  # another session trains: the script must wait, then get the slot
        slots = limits_module._slots(1)
        assert slots.acquire(blocking=False)
        holder = threading.Timer(0.8, slots.release)
        holder.start()
    at = AppTest.from_function(_slot_script, default_timeout=TIMEOUT).run()
    if holder is not None:
        holder.join()
    assert not at.exception, [e.message for e in at.exception]
    return hosted_probe.FAULT["seen"]


@pytest.mark.parametrize("contended", [False, True], ids=["free", "waiting"])
@pytest.mark.parametrize("kind", ["stop", "rerun"])
def test_training_slot_is_released_when_streamlit_stops_or_reruns_at_any_point(monkeypatch, kind, contended):
    monkeypatch.setenv("ATTNLAB_MAX_CONCURRENT", "1")
    monkeypatch.setenv("ATTNLAB_SLOT_WAIT_SECONDS", "30")
    messages = _run_slot_script(0, kind, contended)  # no fault: count the messages of a clean run
    assert messages >= 3 and _free_slots(1) == 1
    for fault_at in range(1, messages + 1):
        _run_slot_script(fault_at, kind, contended)
        assert _free_slots(1) == 1, f"slot leaked when Streamlit raised {kind} at message {fault_at}"


# --- the training worker ------------------------------------------------------------------------

DASHBOARD = Path(__file__).resolve().parents[1] / "dashboard.py"


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNCORE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


@pytest.fixture
def streamlit_main(monkeypatch):
    """sys.modules['__main__'] as Streamlit leaves it while serving: a module whose file is the page script."""
    main = types.ModuleType("__main__")
    main.__file__ = str(DASHBOARD)
    monkeypatch.setitem(sys.modules, "__main__", main)


def test_training_worker_imports_no_streamlit(streamlit_main):
    pool = live.WorkerPool(1)
    has_streamlit, pid = pool.submit(hosted_probe.worker_state).result(timeout=TIMEOUT)
    assert not has_streamlit and pid != os.getpid()
    pool.discard(pool._current())


def _wait_for_steps(progress, n: int = 1) -> None:
    while len(worker.losses_so_far(progress)) < n:
        threading.Event().wait(0.05)


def test_a_killed_worker_fails_its_run_and_the_next_training_gets_a_new_pool(store):
    pool = live.WorkerPool(1)
    _, pid = pool.submit(hosted_probe.worker_state).result(timeout=TIMEOUT)  # the pool's only worker
    run = make_run(steps=3000, d_model=64, n_layers=3)
    progress = worker.open_progress(store / "progress.f64", 3000, create=True)
    job = pool.submit(worker.train_with_progress, run, str(cache_dir()), str(store / "progress.f64"))
    _wait_for_steps(progress)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(BrokenExecutor):
        job.result(timeout=TIMEOUT)
    assert not is_cached(run)
    short = make_run(steps=20)
    again = worker.open_progress(store / "again.f64", 20, create=True)
    record = pool.submit(worker.train_with_progress, short, str(cache_dir()), str(store / "again.f64")).result(
        timeout=TIMEOUT
    )
    assert is_cached(short) and len(worker.losses_so_far(again)) == 20
    np.testing.assert_array_equal(record.loss_history, get_run(short).loss_history)
    _, new_pid = pool.submit(hosted_probe.worker_state).result(timeout=TIMEOUT)
    assert new_pid != pid
    pool.discard(pool._current())


def test_cancel_stops_the_worker_and_stores_nothing(store):
    pool = live.WorkerPool(1)
    run = make_run(steps=3000, d_model=64, n_layers=3)
    progress = worker.open_progress(store / "progress.f64", 3000, create=True)
    job = pool.submit(worker.train_with_progress, run, str(cache_dir()), str(store / "progress.f64"))
    _wait_for_steps(progress, 5)
    worker.request_cancel(progress)
    with pytest.raises(worker.Cancelled) as stopped:
        job.result(timeout=TIMEOUT)
    assert 5 <= stopped.value.steps_done < 3000
    assert len(worker.losses_so_far(progress)) == stopped.value.steps_done
    assert not is_cached(run)
    short = make_run(steps=20)
    worker.open_progress(store / "again.f64", 20, create=True)
    pool.submit(worker.train_with_progress, short, str(cache_dir()), str(store / "again.f64")).result(TIMEOUT)
    assert is_cached(short)
    pool.discard(pool._current())


# --- the Train flow in a script run ---------------------------------------------------------------


def _train_script(steps: int, d_model: int, n_layers: int) -> None:
    import hosted_probe
    import streamlit as st

    from attncore import make_run
    from ui import live

    hosted_probe.inject_faults()
    run = make_run(steps=steps, d_model=d_model, n_layers=n_layers)
    live.report_cancelled(run)
    if not st.session_state.get("trained"):
        st.session_state.trained = True
        if live.train_live(run) is not None:
            st.success("trained")


def _train_app(steps: int, d_model: int = 32, n_layers: int = 2) -> AppTest:
    at = AppTest.from_function(_train_script, default_timeout=TIMEOUT, args=(steps, d_model, n_layers))
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_a_rerun_mid_training_cancels_it_frees_the_slot_and_says_where_it_stopped(store, monkeypatch):
    monkeypatch.setenv("ATTNLAB_MAX_CONCURRENT", "1")
    hosted_probe.arm(0, "rerun", text="Step ")  # what a Cancel click (or a sidebar change) does mid-training
    at = _train_app(3000, 64, 3)
    warning = " ".join(w.value for w in at.warning)
    assert re.search(r"Cancelled after [\d,]+ of 3,000 steps; nothing was stored", warning), warning
    assert not is_cached(make_run(steps=3000, d_model=64, n_layers=3))
    assert _free_slots(1) == 1
    hosted_probe.arm(0, "stop")
    at = _train_app(20)  # the next training works
    assert [s.value for s in at.success] == ["trained"] and is_cached(make_run(steps=20))
    assert _free_slots(1) == 1


def test_a_killed_worker_shows_one_message_and_the_next_training_works(store, monkeypatch):
    monkeypatch.setenv("ATTNLAB_MAX_CONCURRENT", "1")
    hosted_probe.arm(0, "stop")
    _, pid = live.pool(1).submit(hosted_probe.worker_state).result(timeout=TIMEOUT)
    killer = threading.Timer(3.0, os.kill, (pid, signal.SIGKILL))  # the run below takes far longer than 3 s
    killer.start()
    at = _train_app(3000, 64, 3)
    killer.join()
    assert [e.value for e in at.error] == [
        "The training worker stopped unexpectedly (killed, or out of memory); nothing was stored. "
        "A new worker starts with the next training: press Train again."
    ]
    assert not is_cached(make_run(steps=3000, d_model=64, n_layers=3)) and _free_slots(1) == 1
    at = _train_app(20)
    assert [s.value for s in at.success] == ["trained"] and is_cached(make_run(steps=20))
