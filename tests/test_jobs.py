"""The job runtime below the pages (lab.jobs) without a page: one instance per process, the slots' wait and refusal,
a sweep's loop and its Cancel, where a cancelled training stopped; and none of it imports Streamlit."""

from __future__ import annotations

import subprocess
import sys
import threading
from concurrent.futures import Future
from pathlib import Path

import pytest

from attncore import make_run
from lab.jobs import loop, memo, slots, training
from lab.jobs.progress import Cancelled, open_progress

REPO = Path(__file__).resolve().parents[1]


def test_the_runtime_imports_no_streamlit():
    code = (
        "import sys; import lab.jobs.loop, lab.jobs.training, lab.jobs.limits, lab.jobs.slots, lab.jobs.dask_client; "
        "print(sorted(m for m in ('streamlit', 'altair') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_per_process_makes_one_instance_per_key_for_every_thread():
    made = []

    @memo.per_process
    def thing(key):
        made.append(key)
        threading.Event().wait(0.01)  # widen the window two threads could both make it in
        return object()

    found = []
    threads = [threading.Thread(target=lambda: found.append(thing("a"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert made == ["a"] and len({id(f) for f in found}) == 1
    assert thing("b") is not thing("a") and made == ["a", "b"]
    before = thing("a")
    thing.clear()
    assert thing("a") is not before


@pytest.fixture
def fresh_slots():
    slots.shared.clear()
    yield
    slots.shared.clear()


def test_a_slot_waits_saying_so_then_refuses_in_plain_words(fresh_slots):
    held = slots.take(1, "another training", 10)
    ticks = iter(range(100))
    waited = []
    with pytest.raises(slots.BusyError, match=r"^The server is busy: its 1 slot for heavy jobs stayed taken for 2 s\."):
        slots.take(1, "this sweep", 2, waited.append, clock=lambda: float(next(ticks)))
    assert waited == [1.0]  # told once, at 1 s of the 2 s allowed
    assert "another training for" in slots.wait_text(1, 2, "this sweep", 1.0)
    held.release()
    slots.take(1, "this sweep", 2).release()  # free again


def test_a_slot_freed_while_waiting_is_taken(fresh_slots):
    held = slots.take(1, "another training", 10)
    started = threading.Event()

    def waiting(seconds: float) -> None:
        started.set()

    releaser = threading.Thread(target=lambda: started.wait(10) and held.release())
    releaser.start()
    slot = slots.take(1, "this training", 60, waiting)
    releaser.join()
    assert started.is_set()
    slot.release()
    assert slots.shared(1).acquire(blocking=False)  # nothing left taken
    slots.shared(1).release()


def _done(value=None, error=None) -> Future:
    future = Future()
    future.set_running_or_notify_cancel()
    future.set_exception(error) if error else future.set_result(value)
    return future


def test_the_sweep_loop_trains_every_run_and_shows_its_progress(tmp_path):
    runs = [make_run(steps=10, seed=s) for s in range(3)]
    s = loop.Sweep(cached=2, runs=list(runs))
    shown = []

    def submit(run, index):
        return loop.Job(
            run, _done(f"record {runs.index(run)}"), open_progress(tmp_path / f"{index}.f64", 10, create=True)
        )

    loop.run("Test sweep", s, list(runs), submit, lambda: 2, lambda *a: shown.append(a), None)
    assert s.done == {run: f"record {i}" for i, run in enumerate(runs)} and not s.running
    fraction, text = shown[-1]
    assert fraction == 1.0 and text.startswith("Test sweep: 3 of 3 runs trained (2 more already cached) · ")


def test_a_failed_run_stops_the_sweeps_other_workers(tmp_path):
    runs = [make_run(steps=10, seed=s) for s in range(2)]
    s = loop.Sweep(cached=0, runs=list(runs))
    progress = [open_progress(tmp_path / f"{i}.f64", 10, create=True) for i in range(2)]
    pending = Future()
    futures = [_done(error=ValueError("out of memory")), pending]

    def submit(run, index):
        return loop.Job(run, futures[index], progress[index])

    with pytest.raises(ValueError, match="out of memory"):
        loop.run("Test sweep", s, list(runs), submit, lambda: 2, lambda *a: None, None)
    assert progress[1][0] == 1.0 and pending.cancelled()  # the other worker asked to stop, the queued job dropped


def test_where_a_cancelled_training_stopped_is_said_once():
    run = make_run(steps=300)
    job = Future()
    job.set_exception(Cancelled(137))
    training.latest().put("visitor", (training.run_key(run), job, None))
    assert training.stopped_at("visitor") == (training.run_key(run), 137)
    assert training.stopped_at("visitor") is None and training.stopped_at(None) is None


class PageGone(BaseException):
    """What Streamlit raises in a script whose page reruns or whose visitor left (StopException, RerunException)."""


def _leaving_sweep(tmp_path, finish_started: bool, error: BaseException):
    """A sweep of two runs, one that has trained a step and one that has not begun, whose page raises `error`."""
    runs = [make_run(steps=10, seed=s) for s in range(2)]
    s = loop.Sweep(cached=0, runs=list(runs))
    tmp_path.mkdir(exist_ok=True)
    progress = [open_progress(tmp_path / f"{i}.f64", 10, create=True) for i in range(2)]
    progress[0][1] = 2.5  # run 0: its first step's loss
    futures = [Future(), Future()]
    futures[0].set_running_or_notify_cancel()

    def submit(run, index):
        return loop.Job(run, futures[index], progress[index])

    def show(*_):
        raise error

    with pytest.raises(type(error)):
        loop.run("Test sweep", s, list(runs), submit, lambda: 2, show, None, finish_started=finish_started)
    return progress, futures


def test_a_local_page_gone_lets_its_started_runs_finish(tmp_path, monkeypatch):
    monkeypatch.setattr(loop, "REFRESH_SECONDS", 0.01)
    progress, futures = _leaving_sweep(tmp_path, True, PageGone())
    assert progress[0][0] == 0.0 and not futures[0].cancelled()  # training on: it finishes and is stored
    assert progress[1][0] == 1.0 and futures[1].cancelled()  # not begun: dropped


def test_a_hosted_page_gone_or_a_failure_stops_every_run(tmp_path, monkeypatch):
    monkeypatch.setattr(loop, "REFRESH_SECONDS", 0.01)
    progress, futures = _leaving_sweep(tmp_path / "hosted", False, PageGone())
    assert progress[0][0] == 1.0 and progress[1][0] == 1.0 and futures[1].cancelled()
    progress, futures = _leaving_sweep(tmp_path / "failed", True, ValueError("a failed page"))
    assert progress[0][0] == 1.0 and progress[1][0] == 1.0  # a failure stops all, locally too


def test_release_forgets_a_sweep_without_stopping_it(tmp_path):
    run = make_run(steps=10)
    progress = open_progress(tmp_path / "p.f64", 10, create=True)
    progress[1] = 2.5
    s = loop.Sweep(cached=0, runs=[run], running=[loop.Job(run, Future(), progress)])
    loop.running().put("visitor-release", ("Test sweep", s))
    assert loop.release("visitor-release") == ("Test sweep", 1)
    assert progress[0] == 0.0 and loop.release("visitor-release") is None and loop.cancel("visitor-release") is None


@pytest.mark.slow
def test_a_local_sweep_whose_page_goes_stores_the_run_under_way(cache, tmp_path):
    """On the real worker pool: the page goes (a BaseException from its progress bar) while the first of two runs
    trains; that run finishes and is stored, the second (never begun) is not trained."""
    from lab.store import is_cached

    runs = [make_run(steps=400, seed=s) for s in (71, 72)]
    s = loop.Sweep(cached=0, runs=list(runs))
    submit = loop.submitter(1, str(tmp_path), tuple(runs), 2**40)

    def show(*_):
        if s.running and loop.started(s.running[0]):
            raise PageGone()

    with pytest.raises(PageGone):
        loop.run("Test sweep", s, list(runs), submit, lambda: 1, show, None, finish_started=True)
    (job,) = s.running
    assert job.run == runs[0] and job.future.result(timeout=600).config == runs[0]  # waits for the event
    assert is_cached(runs[0]) and not is_cached(runs[1])


def _report_script(clicked: bool):
    import streamlit as st

    from ui import live, sweeps

    st.session_state[live.TOKEN_KEY] = "visitor-report"
    if clicked:
        st.session_state[sweeps.CANCEL_CLICKED] = True
    sweeps.report_cancelled()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("hosted", "clicked", "stopped"),
    [("0", False, False), ("0", True, True), ("1", False, True), ("1", True, True)],
    ids=["local rerun", "local Cancel", "hosted rerun", "hosted Cancel"],
)
def test_the_rerun_after_a_sweep_stops_it_unless_local_and_not_a_cancel(
    tmp_path, monkeypatch, hosted, clicked, stopped
):
    """The page's next run (dashboard.py calls report_cancelled first): a Cancel stops the runs under way in either
    mode; another rerun (a setting, another page) stops them on a hosted server, and lets them finish locally."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ATTNLAB_HOSTED", hosted)
    run = make_run(steps=10)
    progress = open_progress(tmp_path / "p.f64", 10, create=True)
    progress[1] = 2.5  # a step trained
    loop.running().put(
        "visitor-report", ("Test sweep", loop.Sweep(0, [run], running=[loop.Job(run, Future(), progress)]))
    )
    at = AppTest.from_function(_report_script, args=(clicked,), default_timeout=60).run()
    assert not at.exception
    assert bool(progress[0] == 1.0) is stopped and loop.running().pop("visitor-report") is None
    toasts = " ".join(t.value for t in at.toast)
    assert ("cancelled after" in toasts) is stopped and ("go on and are stored" in toasts) is (not stopped)
