"""The training worker processes of a server: one pool per process, shared by every session's trainings and sweeps,
replaced as a whole when one of its workers died."""

from __future__ import annotations

import os
import threading
from concurrent.futures import BrokenExecutor, Future

from joblib.externals.loky import ProcessPoolExecutor

from lab.jobs.memo import per_process
from lab.sweep import exit_with_parent


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


@per_process
def shared(n: int) -> WorkerPool:
    return WorkerPool(n)  # one per server process; the workers persist and serve every session
