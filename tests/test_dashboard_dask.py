"""The dashboard's sweeps on a Dask cluster: with dask_scheduler set, a page's Train button sends its
runs to the scheduler (never to the local worker pool), and they are bit-identical to runs trained here. A scheduler
address that does not answer, or answers garbage, is one plain sentence within a bounded time and holds no slot."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from apptest_helpers import free_slots, texts
from streamlit.testing.v1 import AppTest

from attncore import ConfigError, make_run
from attncore.train import train
from lab import sweep
from lab.experiments import regimes
from lab.jobs import slots
from lab.jobs.limits import parse_limits
from lab.store import get_run, is_cached

pytestmark = pytest.mark.slow  # AppTests of the pages over a Dask cluster

distributed = pytest.importorskip("distributed")
REPO = Path(__file__).resolve().parents[1]
QUERY = {"reg_exp": "depth", "reg_seeds": "1", "reg_steps": "100", "reg_depths": "2", "reg_lrs": "1e-2"}


@pytest.fixture(scope="module")
def cluster():
    mp = pytest.MonkeyPatch()
    mp.setenv("PYTHONPATH", str(REPO))  # the workers import lab and attncore from this checkout
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None, host="127.0.0.1"
    ) as c:
        yield c
        from lab.jobs import dask_client

        dask_client.close_all()  # before the cluster goes: no reconnection attempts at exit
    mp.undo()


class Listener:
    """A TCP server on 127.0.0.1 that accepts every connection and then does `answer(conn)`: nothing (a silent
    scheduler), random bytes, a huge length header. Connections stay open until the test ends."""

    def __init__(self, answer=None):
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.address = f"tcp://127.0.0.1:{self.server.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self.answer = answer
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:  # closed
                return
            self.accepted.append(conn)
            if self.answer is not None:
                try:
                    self.answer(conn)
                except OSError:
                    pass

    def close(self) -> None:
        try:
            self.server.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread, so the port really closes
        except OSError:
            pass
        self.server.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def listener():
    made = []

    def make(answer=None) -> Listener:
        made.append(Listener(answer))
        return made[-1]

    yield make
    for each in made:
        each.close()


def returns_within(fn, seconds: float):
    """fn()'s exception (or None) if it returns within `seconds`; else the test fails (a hang guard, not a timing)."""
    found = {}

    def call():
        try:
            fn()
            found["raised"] = None
        except BaseException as e:  # noqa: BLE001  (handed to the test)
            found["raised"] = e

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    assert "raised" in found, f"still waiting after {seconds} s"
    return found["raised"]


GARBAGE = {
    "random bytes": lambda conn: conn.sendall(os.urandom(4096)),
    "a huge length header": lambda conn: conn.sendall(struct.pack("<Q", 2**62) + os.urandom(64)),
    "a short garbled frame": lambda conn: conn.sendall(struct.pack("<Q", 64) + os.urandom(64)),
}
CLASS_NAMES = ("Error", "Exception", "Timeout", "struct", "EiB", "dimension")  # what a traceback line would show


def test_a_silent_scheduler_is_a_config_error_within_the_connect_bound(listener):
    silent = listener()
    raised = returns_within(lambda: sweep.connect(silent.address, timeout=1), 60)
    assert isinstance(raised, ConfigError) and raised.field == "scheduler"
    assert raised.message == (
        f"no dask scheduler answered at {silent.address} within 1 s: the connection was accepted but nothing answered"
    )
    assert silent.accepted  # it did reach the listener: the bound is on the handshake, not on a refused port


@pytest.mark.parametrize("case", GARBAGE, ids=list(GARBAGE))
def test_a_scheduler_answering_garbage_is_one_plain_sentence(listener, case):
    raised = returns_within(lambda: sweep.connect(listener(GARBAGE[case]).address, timeout=5), 60)
    assert isinstance(raised, ConfigError) and raised.field == "scheduler"
    assert raised.message.endswith(": what answered there does not speak dask's protocol")
    assert not any(name in raised.message for name in CLASS_NAMES) and "\n" not in raised.message
    assert raised.__cause__ is not None  # what the operator's log shows


def test_a_refused_port_answers_at_once_without_waiting_out_the_bound():
    with socket.socket() as s:  # bound, never listening: connecting is refused
        s.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
        # a bound far above the answer: the refusal comes from the port itself, not from waiting out the timeout
        raised = returns_within(lambda: sweep.connect(address, timeout=600), 60)
    assert isinstance(raised, ConfigError)
    assert raised.message == (
        f"no dask scheduler answered at {address}: the connection was refused (nothing listens on that port)"
    )


def click_train_on_the_regimes_page(timeout: int) -> AppTest:
    at = AppTest.from_file("../dashboard.py", default_timeout=timeout)
    at.query_params.update(QUERY)
    at.run()
    at.switch_page("app_pages/regimes.py").run()
    (button,) = [b for b in at.button if b.key == "reg_train"]
    button.click().run()
    return at


def test_a_scheduler_address_is_read_as_a_setting_and_checked():
    lim, problems = parse_limits({"ATTNLAB_DASK_SCHEDULER": "tcp://127.0.0.1:8786"}, {})
    assert lim.dask_scheduler == "tcp://127.0.0.1:8786" and problems == []
    lim, problems = parse_limits({}, {"dask_scheduler": "http://[evil](x)"})
    assert lim.dask_scheduler is None
    assert len(problems) == 1 and "dask_scheduler" in problems[0] and "[evil]" not in problems[0]
    # what is used instead, in words (it said "using the default None")
    assert problems[0].endswith("; the pages' sweeps train on this server's own worker pool, as when it is unset.")
    assert "None" not in problems[0]
    _, problems = parse_limits({}, {"bundle_upload": "maybe"})
    assert problems[0].endswith("only when the server is not headless, as when it is unset.")
    assert parse_limits({}, {})[0].dask_scheduler is None  # no scheduler: the local workers, as before


def test_a_pages_sweep_goes_to_the_scheduler_and_matches_local_training(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNCORE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ATTNLAB_DASK_SCHEDULER", cluster.scheduler_address)

    def no_local_pool(n):
        raise AssertionError("the local worker pool was used with a scheduler configured")

    monkeypatch.setattr("lab.jobs.pool.shared", no_local_pool)
    runs = regimes.all_runs(regimes.depth_cells(range(1), steps=100, depths=(2,), lrs=(1e-2,)))
    at = click_train_on_the_regimes_page(timeout=240)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert all(is_cached(run) for run in runs)
    assert "What the lab found." in texts(at.markdown)
    for run in runs[:2]:
        np.testing.assert_array_equal(get_run(run).loss_history, train(run, snapshots=False).loss_history)


def test_an_unreachable_scheduler_is_one_message_not_a_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNCORE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ATTNLAB_DASK_SCHEDULER", "tcp://127.0.0.1:9")  # the discard port: nothing answers
    at = click_train_on_the_regimes_page(timeout=120)
    assert not at.exception
    assert [e.value for e in at.error] == [
        "Training the depth experiment could not start: No dask scheduler answered at tcp://127.0.0.1:9: the "
        "connection was refused (nothing listens on that port)."
    ]


@pytest.fixture
def one_server_runtime(monkeypatch):
    """Concurrent AppTests as one server's sessions. AppTest sets the process-wide Runtime._instance to a mock of its
    own for each run and to None when the run ends, and patches the global 'global.appTest' option the same way, so
    two visits in two threads raced: one visit's end left the other's script without a runtime (CI saw an empty
    page that never reached the scheduler). Here every run sees one runtime and the option stays set, and the pages
    are compiled one at a time, as one server's shared script cache compiles them: each AppTest has a cache of its
    own, and two compiling at once in two threads (Streamlit's magic parses a page to an AST and compiles that)
    can fail on CPython 3.11 with "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905),
    the AST converter's depth counter being shared by every thread."""
    from unittest.mock import MagicMock

    from streamlit.components.v2.component_manager import BidiComponentManager
    from streamlit.runtime import Runtime
    from streamlit.runtime.caching.storage.dummy_cache_storage import MemoryCacheStorageManager
    from streamlit.runtime.dataframe_source_manager import DataframeSourceManager
    from streamlit.runtime.media_file_manager import MediaFileManager
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
    from streamlit.testing.v1.util import patch_config_options

    runtime = MagicMock(spec=Runtime)
    runtime.media_file_mgr = MediaFileManager(MemoryMediaFileStorage("/mock/media"))
    runtime.cache_storage_manager = MemoryCacheStorageManager()
    runtime.dataframe_source_mgr = DataframeSourceManager()
    runtime.bidi_component_registry = BidiComponentManager()
    monkeypatch.setattr(Runtime, "instance", classmethod(lambda cls: runtime))
    monkeypatch.setattr(Runtime, "exists", classmethod(lambda cls: True))
    one_compile_at_a_time(monkeypatch)
    with patch_config_options({"global.appTest": True}):
        yield


def one_compile_at_a_time(monkeypatch) -> None:
    """Every AppTest's script cache compiles under one process-wide lock (the visits themselves still run at once)."""
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache

    compiling = threading.Lock()
    get_bytecode = ScriptCache.get_bytecode

    def one_at_a_time(self, script_path: str):
        with compiling:
            return get_bytecode(self, script_path)

    monkeypatch.setattr(ScriptCache, "get_bytecode", one_at_a_time)


def test_concurrent_apptests_compile_their_pages_one_at_a_time(monkeypatch):
    """Four threads' script caches asked for a page at once: the compiling never overlaps (it did: each AppTest's
    cache has its own lock)."""
    from streamlit.runtime.scriptrunner.script_cache import ScriptCache

    active, most, started = [0], [0], threading.Barrier(4)

    def slow_compile(self, script_path: str):
        active[0] += 1
        most[0] = max(most[0], active[0])
        threading.Event().wait(0.05)  # long enough for the others to arrive (their start is a barrier, not a clock)
        active[0] -= 1

    monkeypatch.setattr(ScriptCache, "get_bytecode", slow_compile)
    one_compile_at_a_time(monkeypatch)

    def ask():
        started.wait()
        ScriptCache().get_bytecode("dashboard.py")

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert most[0] == 1 and active[0] == 0


def test_two_visits_to_a_silent_scheduler_do_not_wedge_the_slots_for_a_third_visitor(
    tmp_path, monkeypatch, listener, one_server_runtime
):
    """Regression: two Train clicks on Regimes with a scheduler that accepts and never answers held both slots for
    good (connect inside the slot and under the clients' lock, unbounded); a third visitor got "busy"."""
    silent = listener()
    monkeypatch.setenv("ATTNCORE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ATTNLAB_DASK_SCHEDULER", silent.address)
    monkeypatch.setenv("ATTNLAB_MAX_CONCURRENT", "2")
    monkeypatch.setenv("ATTNLAB_SLOT_WAIT_SECONDS", "5")  # a third visitor kept waiting is told "busy" soon
    slots.shared.clear()
    visits, errors = [], []

    def visit():
        at = click_train_on_the_regimes_page(timeout=120)
        visits.append(at)
        errors.extend(e.value for e in at.error)

    threads = [threading.Thread(target=visit, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60  # a hang guard: both visits reach the scheduler (a probe and a handshake each)
    while len(silent.accepted) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(silent.accepted) >= 4, "the two visits did not both reach the scheduler"
    assert free_slots(2) == 2  # connecting holds no slot: a third visitor would start at once
    for t in threads:
        t.join(180)
    assert len(visits) == 2 and not any(at.exception for at in visits)
    sentence = (
        f"Training the depth experiment could not start: No dask scheduler answered at {silent.address} within 5 s: "
        "the connection was accepted but nothing answered."
    )
    assert errors == [sentence, sentence]
    assert free_slots(2) == 2  # and none is held once they are done
    # a third visitor trains on the Train page (a local run: it needs one of the slots)
    at = AppTest.from_file("../dashboard.py", default_timeout=120)
    at.query_params.update({"steps": "20"})
    at.run()
    at.switch_page("app_pages/train.py").run()
    at.button(key="train").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert is_cached(make_run(steps=20)) and free_slots(2) == 2
