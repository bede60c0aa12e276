"""Hosted mode: training slots released on every path, a dead worker pool replaced, a worker without
Streamlit, Cancel on Train, metered page work and the caps' parser."""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import types
from concurrent.futures import BrokenExecutor, Future
from pathlib import Path

import hosted_probe
import numpy as np
import pytest
from apptest_helpers import free_slots
from streamlit.testing.v1 import AppTest

from attncore import make_run
from attncore.inspect import evaluate_ablated
from lab.jobs import limits
from lab.jobs import pool as pools
from lab.jobs import progress as worker
from lab.jobs.pool import WorkerPool
from lab.jobs.slots import shared as shared_slots
from lab.store import cache_dir, get_run, is_cached
from ui import live
from ui import slots as slots_module

pytestmark = pytest.mark.slow  # AppTests of the pages

TIMEOUT = 60


@pytest.fixture(autouse=True)
def fresh_slots():
    """Every test starts with the server's slots all free (a leak in one test must not fail the next)."""
    shared_slots.clear()
    yield
    shared_slots.clear()


def _slot_script() -> None:
    import hosted_probe
    import streamlit as st

    from ui.slots import training_slot

    hosted_probe.inject_faults()
    st.write("before")
    with training_slot():
        st.write("inside")
    st.write("after")


def _settledfree_slots(n: int) -> int:
    """free_slots once a finished job's done-callback has given its slot back (it runs just after the
    job's waiters wake up); polls for at most 10 s, then answers whatever it sees."""
    for _ in range(200):
        if free_slots(n) == n:
            break
        threading.Event().wait(0.05)
    return free_slots(n)


def _run_slot_script(fault_at: int, kind: str, contended: bool) -> int:
    """Run the script with Streamlit's stop/rerun raised at its fault_at-th message; returns messages seen."""
    hosted_probe.arm(fault_at, kind)
    holder = None
    if contended:  # another session trains: the script must wait, then get the slot
        taken = shared_slots(1)
        assert taken.acquire(blocking=False)
        holder = threading.Timer(0.8, taken.release)
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
    assert messages >= 3 and free_slots(1) == 1
    for fault_at in range(1, messages + 1):
        _run_slot_script(fault_at, kind, contended)
        assert free_slots(1) == 1, f"slot leaked when Streamlit raised {kind} at message {fault_at}"


def test_an_error_in_the_body_gives_the_slot_back(monkeypatch):
    monkeypatch.setenv("ATTNLAB_MAX_CONCURRENT", "1")
    with pytest.raises(ValueError, match="between acquire and use"):
        with slots_module.training_slot():
            raise ValueError("between acquire and use")
    assert free_slots(1) == 1


def test_a_slot_handed_to_a_job_is_held_until_the_job_ends(monkeypatch):
    monkeypatch.setenv("ATTNLAB_MAX_CONCURRENT", "1")
    job = Future()
    with pytest.raises(KeyboardInterrupt):  # the page goes away while the job still runs
        with slots_module.training_slot() as slot:
            slot.hand_to(job)
            raise KeyboardInterrupt
    assert free_slots(1) == 0
    job.set_exception(worker.Cancelled(3))
    assert free_slots(1) == 1


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
    pool = WorkerPool(1)
    has_streamlit, pid = pool.submit(hosted_probe.worker_state).result(timeout=TIMEOUT)
    assert not has_streamlit and pid != os.getpid()
    pool.discard(pool._current())


def _wait_for_steps(progress, n: int = 1) -> None:
    while len(worker.losses_so_far(progress)) < n:
        threading.Event().wait(0.05)


def test_a_killed_worker_fails_its_run_and_the_next_training_gets_a_new_pool(store):
    pool = WorkerPool(1)
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
    pool = WorkerPool(1)
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


def test_the_expected_duration_comes_from_the_cost_model_with_nothing_stored(store):
    """An empty store still gives an estimate, the cost model's, longer for a longer or deeper run."""
    from lab import cost_model
    from lab.formats import duration

    run = make_run(steps=100, seed=9)
    assert f", {duration(cost_model.model().run_seconds(run))} of computing: estimated from its size" in (
        live.expectation(run)
    )
    model = cost_model.model()
    assert model.run_seconds(make_run(steps=200)) > model.run_seconds(run)
    assert model.run_seconds(make_run(steps=100, n_layers=8)) > model.run_seconds(run)


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


@pytest.mark.parametrize("kind", ["rerun", "stop"])
def test_leaving_mid_training_cancels_it_frees_the_slot_and_says_where_it_stopped(store, monkeypatch, kind):
    """A Cancel click or a sidebar change mid-training: Streamlit raises a rerun in the running page, or,
    with fast reruns (the default), stops it and starts a new run of the same session at once."""
    monkeypatch.setenv("ATTNLAB_MAX_CONCURRENT", "1")
    hosted_probe.arm(0, kind, text="Step ")
    at = AppTest.from_function(_train_script, default_timeout=TIMEOUT, args=(3000, 64, 3)).run()
    if kind == "stop":
        at.run()  # the new run of the same session
    assert not at.exception, [e.message for e in at.exception]
    warning = " ".join(w.value for w in at.warning)
    assert re.search(r"Cancelled after [\d,]+ of 3,000 steps; nothing was stored", warning), warning
    assert not is_cached(make_run(steps=3000, d_model=64, n_layers=3))
    assert _settledfree_slots(1) == 1
    hosted_probe.arm(0, "stop")
    at = _train_app(20)  # the next training works
    assert [s.value for s in at.success] == ["trained"] and is_cached(make_run(steps=20))
    assert _settledfree_slots(1) == 1


def test_a_killed_worker_shows_one_message_and_the_next_training_works(store, monkeypatch):
    monkeypatch.setenv("ATTNLAB_MAX_CONCURRENT", "1")
    hosted_probe.arm(0, "stop")
    _, pid = pools.shared(1).submit(hosted_probe.worker_state).result(timeout=TIMEOUT)
    killer = threading.Timer(3.0, os.kill, (pid, signal.SIGKILL))  # the run below takes far longer than 3 s
    killer.start()
    at = _train_app(3000, 64, 3)
    killer.join()
    assert [e.value for e in at.error] == [
        "The training worker stopped unexpectedly (killed, or out of memory); nothing was stored. "
        "A new worker starts with the next training: press Train again."
    ]
    assert not is_cached(make_run(steps=3000, d_model=64, n_layers=3)) and _settledfree_slots(1) == 1
    at = _train_app(20)
    assert [s.value for s in at.success] == ["trained"] and is_cached(make_run(steps=20))


# --- metered page work ----------------------------------------------------------------------------


@pytest.fixture
def trained(store):
    """The default run at 30 steps in a fresh store; the server's memo of page work emptied."""
    from lab.jobs import memo

    memo.shared.clear()
    get_run(make_run(steps=30))
    yield
    memo.shared.clear()


def _dashboard(page: str, **query) -> AppTest:
    at = AppTest.from_file(str(DASHBOARD), default_timeout=TIMEOUT)
    at.query_params.update({"steps": "30"} | query)
    at.run()
    at.switch_page(f"app_pages/{page}.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _hold_every_slot(monkeypatch) -> threading.BoundedSemaphore:
    monkeypatch.setenv("ATTNLAB_MAX_CONCURRENT", "1")
    monkeypatch.setenv("ATTNLAB_SLOT_WAIT_SECONDS", "1")
    taken = shared_slots(1)
    assert taken.acquire(blocking=False)  # another visitor's training holds the only slot
    return taken


def test_attention_head_ablations_wait_for_a_slot_and_are_capped(trained, monkeypatch):
    slots = _hold_every_slot(monkeypatch)
    at = _dashboard("attention", att_ablate="L0H1")
    assert "The server is busy" in " ".join(w.value for w in at.warning)
    assert at.dataframe[0].value["per-seq acc. zeroed"].isna().all()  # nothing evaluated without a slot
    assert not [m for m in at.metric if m.label == "Per-sequence"]
    slots.release()
    monkeypatch.setenv("ATTNLAB_MAX_ABLATION_HEADS", "3")
    at = _dashboard("attention")
    zeroed = at.dataframe[0].value["per-seq acc. zeroed"]
    record = get_run(make_run(steps=30))
    expected = [evaluate_ablated(record.params, record.config, [(0, h)]).sequence_accuracy for h in range(3)]
    assert zeroed[:3].tolist() == expected and zeroed[3:].isna().all()
    assert "Only the first 3 of 8 heads are zeroed one by one" in " ".join(c.value for c in at.caption)
    assert _settledfree_slots(1) == 1
    slots = _hold_every_slot(monkeypatch)  # from the memo now: no slot needed, nothing to wait for
    at = _dashboard("attention")
    assert at.dataframe[0].value["per-seq acc. zeroed"][:3].tolist() == expected and not at.warning
    slots.release()


def test_a_new_gradient_check_waits_for_a_slot_and_a_known_one_does_not(trained, monkeypatch):
    query = {"gc_coords": "3", "gc_seed": "7"}
    slots = _hold_every_slot(monkeypatch)
    at = _dashboard("gradient_check", **query)
    assert "The server is busy" in " ".join(w.value for w in at.warning) and not at.metric
    slots.release()
    at = _dashboard("gradient_check", **query)
    shown = [m.value for m in at.metric]
    assert shown and _settledfree_slots(1) == 1
    slots = _hold_every_slot(monkeypatch)
    assert [m.value for m in _dashboard("gradient_check", **query).metric] == shown
    slots.release()


def test_gradient_check_coordinates_are_capped(trained, monkeypatch):
    monkeypatch.setenv("ATTNLAB_MAX_GRADCHECK_COORDS", "5")
    at = _dashboard("gradient_check", gc_coords="40")
    assert at.number_input(key="gc_coords").max == 5 and at.number_input(key="gc_coords").value <= 5


def test_scaling_draws_are_capped_and_a_new_draw_waits_for_a_slot(trained, monkeypatch):
    slots = _hold_every_slot(monkeypatch)
    at = _dashboard("scaling", scal_seed="3")
    assert "The server is busy" in " ".join(w.value for w in at.warning) and not at.metric
    slots.release()
    monkeypatch.setenv("ATTNLAB_MAX_SCALING_DRAWS", "1000")
    at = _dashboard("scaling", scal_seed="3")
    assert "must stay under 1e+03" in " ".join(e.value for e in at.error) and not at.metric


# --- the caps' parser -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw", ["inf", "-inf", "nan", "1e309", "1e3", "-3", "0", "abc", "", "12abc", float("inf"), float("nan"), 2.5, True]
)
def test_a_bad_cap_is_rejected_with_its_name_and_range(raw):
    environ = {"ATTNLAB_MAX_STEPS": raw} if isinstance(raw, str) else {}
    lim, problems = limits.parse_limits(environ, {"max_steps": raw})
    assert lim.max_steps == limits.Limits().max_steps
    assert problems == [
        f"Limit ignored: max_steps must be a whole number from 1 to 1,000,000,000, got {raw!r}; using the default 3000."
    ]


@pytest.mark.parametrize("raw, value", [("200", 200), (" 7 ", 7), (64, 64), (64.0, 64)])
def test_a_good_cap_is_read(raw, value):
    assert limits.parse_limits({}, {"max_d_model": raw})[0].max_d_model == value


def test_a_non_finite_cap_in_secrets_shows_a_warning_not_a_traceback(trained):
    at = AppTest.from_file(str(DASHBOARD), default_timeout=TIMEOUT)
    at.secrets["limits"] = {"max_steps": float("inf"), "max_layers": 3}
    at.query_params["steps"] = "30"
    at.run()
    assert not at.exception
    assert "max_steps must be a whole number from 1 to 1,000,000,000, got inf" in " ".join(w.value for w in at.warning)
    assert at.number_input(key="steps").max == 3000 and at.number_input(key="layers").max == 3


# --- the dashboard's workers end with it ------------------------------------------------------------------

POOL_SCRIPT = """
import os, sys, time
from lab.jobs.pool import WorkerPool
pool = WorkerPool(2)
jobs = [pool.submit(time.sleep, 0.5) for _ in range(4)]
for job in jobs:
    job.result()
print("ready", flush=True)
time.sleep(600)
"""


def _descendants(pid: int) -> set[int]:
    """Every live process below `pid` (workers, loky's resource tracker), from /proc."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc")
def test_kill_9_of_the_dashboard_ends_its_training_workers_and_resource_tracker():
    import subprocess
    import time

    root = Path(__file__).resolve().parents[1]
    server = subprocess.Popen(
        [sys.executable, "-c", POOL_SCRIPT],
        cwd=root,
        env=os.environ | {"PYTHONPATH": str(root)},
        stdout=subprocess.PIPE,
        text=True,
    )
    children: set[int] = set()
    try:
        assert server.stdout.readline().strip() == "ready"
        children = _descendants(server.pid)
        assert len(children) >= 2  # two workers (and loky's resource tracker)
        os.kill(server.pid, signal.SIGKILL)
        server.wait(timeout=10)
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [p for p in children if _alive(p)]
    finally:  # whatever failed, nothing this test started is left running
        for p in children | _descendants(server.pid):
            if _alive(p):
                os.kill(p, signal.SIGKILL)
        if server.poll() is None:
            server.kill()
        server.stdout.close()


@pytest.mark.slow
@pytest.mark.parametrize("hosted, mode", [("1", "hosted mode"), ("0", "local mode")])
def test_home_says_which_mode_the_server_runs_in_and_how_to_change_it(cache, monkeypatch, hosted, mode):
    """A headless server starts in hosted mode unless told: Home says the mode, why, and the switch."""
    from apptest_helpers import texts
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ATTNLAB_HOSTED", hosted)
    at = AppTest.from_file("../dashboard.py", default_timeout=120)
    at.run()
    said = texts(at.caption)
    assert f"**This server runs in {mode}**, because hosted = {hosted} is set" in said
    assert ("`ATTNLAB_HOSTED=0 streamlit run dashboard.py`" if hosted == "1" else "`ATTNLAB_HOSTED=1`") in said


def test_the_mode_says_why_a_headless_server_is_hosted():
    from lab.jobs.limits import parse_limits

    lim, _ = parse_limits({}, {})
    assert "hosted mode**, because it runs headless" in lim.mode_text(headless=True)
    assert "Load a bundle is off (turn it on with ATTNLAB_BUNDLE_UPLOAD=1)" in lim.mode_text(headless=True)
    assert "local mode**, because it has a display" in lim.mode_text(headless=False)
