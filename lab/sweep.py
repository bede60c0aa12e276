"""Sweeps: named presets and grids of RunConfigs, run through joblib.Parallel on local cores or Dask.

Every run goes through the store, so a sweep that was killed resumes where it stopped, and the
local and Dask backends give bit-identical numbers.

On a cluster: `dask scheduler`, then `dask worker tcp://HOST:8786 --nthreads 1` from the repository root
(workers import attncore and lab), then `python -m attncore sweep ... --backend dask --scheduler tcp://HOST:8786`.
Each task carries the caller's cache_dir() path; workers write the runs there, so on several machines it
must be a shared filesystem mounted at the same path (set ATTNCORE_CACHE_DIR on the caller to choose it).
"""

from __future__ import annotations

import functools
import os
import re
import socket
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from joblib import Parallel, cpu_count, delayed, parallel_config

from attncore._malloc import release_freed_memory
from attncore.config import ConfigError, RunConfig
from lab.presets import MAX_JOBS
from lab.store import RunRecord, cache_dir, get_run, is_cached

BACKENDS = ("loky", "dask")
CONNECT_SECONDS = 5  # how long a dask scheduler may take to answer before the sweep gives up
CLOSE_SECONDS = 1  # how long closing a client whose connection failed may take
# a dask address: protocol://host:port (host a name, IPv4 or [IPv6]), e.g. tcp://127.0.0.1:8786
SCHEDULER_ADDRESS = re.compile(r"(tcp|tls|ws|wss)://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):([0-9]{1,5})")


def _sweep_one(index: int, run: RunConfig, location: str, keep=()) -> tuple[int, RunRecord, bool]:
    # Runs in a worker process: the store pins BLAS to one thread, so workers do not fight over cores.
    steps = []  # get_run calls back only when it trains; else another process stored the run meanwhile
    record = get_run(run, lambda step, loss: steps or steps.append(step), location=location, keep=keep)
    release_freed_memory()  # the run's heap back to the system: loky restarts a worker grown 300 MB since its first
    return index, record, bool(steps)


# loky warns in Python's two-line format (file path, source line) when it replaces a worker whose memory grew 300 MB
# past its size after its first task; the sweep's runs go on in the new worker. One plain line, as the store's own
# warnings (lab.store.record).
LOKY_REPLACED_A_WORKER = "A worker stopped while some jobs were given to the executor"
_python_format = warnings.formatwarning


def _format_warning(message, category, filename, lineno, line=None) -> str:
    if str(message).startswith(LOKY_REPLACED_A_WORKER):
        return (
            "warning: a worker process was replaced, its memory having grown since its first run (loky's guard "
            "against leaks); the sweep goes on in a new one and loses nothing\n"
        )
    return _python_format(message, category, filename, lineno, line)


warnings.formatwarning = _format_warning


def check_jobs(n_jobs) -> None:
    """Raise ConfigError unless n_jobs is -1 (all cores) or 1..MAX_JOBS."""
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or not (n_jobs == -1 or 1 <= n_jobs <= MAX_JOBS):
        raise ConfigError("jobs", f"must be -1 (all cores) or from 1 to {MAX_JOBS}, got {n_jobs!r}")


def loky_workers(n_jobs: int, missing: int) -> int:
    """Processes a loky sweep of `missing` runs starts: n_jobs (-1: every core), never more than the runs."""
    return max(1, min(cpu_count() if n_jobs == -1 else n_jobs, missing))


def check_scheduler_address(address) -> None:
    """Raise ConfigError unless address looks like protocol://host:port."""
    if not address:
        raise ConfigError("scheduler", "the dask backend needs a scheduler address, e.g. tcp://127.0.0.1:8786")
    match = isinstance(address, str) and SCHEDULER_ADDRESS.fullmatch(address)
    if not match or not 1 <= int(match.group(3)) <= 65535:
        raise ConfigError(
            "scheduler", f"must be an address like tcp://HOST:PORT (tcp, tls, ws or wss; port 1-65535), got {address!r}"
        )


def _refused(address: str, why: str, cause: BaseException):
    """ConfigError('scheduler', one plain sentence) from `cause`, which stays attached for the operator's log."""
    raise ConfigError("scheduler", f"no dask scheduler answered at {address}{why}") from cause


def _reach(address: str, timeout: float) -> None:
    """A plain TCP connection to the address's host and port, closed at once: a refused port or an unknown host
    answers here at once, where distributed's own connect retries for its whole timeout."""
    match = SCHEDULER_ADDRESS.fullmatch(address)
    host, port = match.group(2).strip("[]"), int(match.group(3))
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except ConnectionRefusedError as e:
        _refused(address, ": the connection was refused (nothing listens on that port)", e)
    except socket.gaierror as e:
        _refused(address, ": its host name could not be resolved", e)
    except TimeoutError as e:
        _refused(address, f" within {timeout:g} s", e)
    except OSError as e:
        _refused(address, f": the connection failed ({e.strerror or 'no reason given'})", e)


@functools.cache
def _bounded_client_class():
    """distributed.Client whose start is bounded in time: Client's own timeout does not cover the handshake, so
    a server that accepts the connection and never answers kept `Client(address)` waiting for good.
    The bound is distributed's sync(callback_timeout=...), which cancels the start on the client's own event loop
    (closing its half-read connection); the client is then closed, its loop thread stopped."""
    from distributed import Client

    class BoundedClient(Client):
        def __init__(self, address: str, seconds: float):
            self._start_seconds = seconds
            super().__init__(address, timeout=f"{seconds}s", set_as_default=False)

        def start(self, **kwargs):
            try:
                super().start(callback_timeout=self._start_seconds, **kwargs)
            except BaseException:
                try:
                    self.close(timeout=CLOSE_SECONDS)
                except Exception:  # closing what never opened: nothing more to release
                    pass
                raise

    return BoundedClient


def connect(address: str, timeout: float | None = None):
    """A distributed.Client on the scheduler at address, or ConfigError (one plain sentence naming the address)
    within about `timeout` seconds (CONNECT_SECONDS) whatever the other end does: nothing listening (answered at
    once), silence after accepting the connection, or bytes that are not dask's protocol (a random answer, a huge
    length header). The ConfigError's __cause__ is the exception behind it, for the operator's log."""
    timeout = CONNECT_SECONDS if timeout is None else timeout
    check_scheduler_address(address)
    deadline = time.monotonic() + timeout
    _reach(address, timeout)
    try:
        return _bounded_client_class()(address, max(0.1, deadline - time.monotonic()))
    except TimeoutError as e:  # accepted, then silent (TimeoutError is an OSError: caught first)
        _refused(address, f" within {timeout:g} s: the connection was accepted but nothing answered", e)
    except OSError as e:
        _refused(address, f" within {timeout:g} s", e)
    except Exception as e:  # ValueError, MemoryError, struct.error...: the answer was not dask's protocol
        _refused(address, ": what answered there does not speak dask's protocol", e)


def _client(scheduler):
    """A distributed.Client for an address, or the Client passed in; the caller closes only its own."""
    from distributed import Client

    if isinstance(scheduler, Client):
        return scheduler, False
    return connect(scheduler), True


def exit_with_parent(parent_pid: int, interval: float = 0.5) -> None:
    """loky worker initializer (the sweep's workers, and the dashboard's: lab.jobs.pool): end this worker within
    `interval` seconds of the process that started it dying.

    loky workers do not watch their parent on POSIX: after a `kill -9` of the sweep they finished their run
    and stayed, idle, for over 30 minutes. A daemon thread polls the parent pid (reparenting changes it) and
    ends the process at once; the run it was computing is not stored (a resumed sweep computes it).
    """

    if os.getpid() == parent_pid:  # joblib ran the runs in this process (one worker): nothing to watch
        return

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def check_cluster(client, timeout: float | None = None) -> None:
    """Fail with one clear line, not a hang, when the scheduler or a worker cannot import this project, or does
    not answer within `timeout` seconds (CONNECT_SECONDS)."""
    timeout = CONNECT_SECONDS if timeout is None else timeout

    def importable() -> bool:  # a nested function travels by value, so it runs even where lab is missing
        from importlib.util import find_spec

        return find_spec("lab") is not None and find_spec("attncore") is not None

    try:  # callback_timeout: distributed's own bound on a call from this thread
        found = client.run_on_scheduler(importable, callback_timeout=timeout) and all(
            client.run(importable, callback_timeout=timeout).values()
        )
    except TimeoutError as e:
        address = getattr(client.scheduler, "address", "the scheduler")
        raise ConfigError("scheduler", f"the dask scheduler at {address} did not answer within {timeout:g} s") from e
    if not found:
        raise ConfigError(
            "scheduler",
            "the dask scheduler or a worker cannot import lab and attncore; "
            "start them with PYTHONPATH set to the repository root",
        )


def run_sweep(
    runs: Sequence[RunConfig],
    n_jobs: int = -1,
    backend: str = "loky",
    scheduler=None,
    progress: Callable[[int, int], object] | None = None,
    *,
    location: Path | str | None = None,
    trained: set | None = None,
    cost=None,
) -> list[RunRecord]:
    """Every run's record, in input order; cached runs are read here, the others computed in parallel.
    `trained`, if given, receives the runs this call trained itself (the rest came from the store, some perhaps
    stored by another process while this one ran).

    backend 'loky' uses local processes (n_jobs=-1: all cores). backend 'dask' sends the missing runs to
    the dask.distributed scheduler at `scheduler` (an address or a Client); its workers write to the same
    cache location as the caller (`location`, default cache_dir()), so it must be a path they can reach.
    progress(done, total) is called in this process after every finished run. With `cost` (a lab.cost_model
    CostModel) the missing runs are dealt longest first, so the last to finish are short ones.
    """
    check_jobs(n_jobs)
    if backend not in BACKENDS:
        raise ConfigError("backend", f"must be one of {', '.join(BACKENDS)}; got {backend!r}")
    if backend == "dask" and (scheduler is None or scheduler == ""):
        raise ConfigError("scheduler", "the dask backend needs a scheduler address, e.g. tcp://127.0.0.1:8786")
    location = str(Path(location) if location is not None else cache_dir())
    unique = list(dict.fromkeys(runs))  # a run listed twice is computed once
    done: dict[RunConfig, RunRecord] = {}

    def finished(run: RunConfig, record: RunRecord, trained_here: bool = False) -> None:
        done[run] = record
        if trained_here and trained is not None:
            trained.add(run)
        if progress is not None:
            progress(len(done), len(unique))

    missing = []
    for run in unique:
        if is_cached(run, location=location):
            finished(run, get_run(run, location=location))
        else:
            missing.append(run)
    if cost is not None:
        missing.sort(key=cost.run_seconds, reverse=True)
    tasks = (delayed(_sweep_one)(i, run, location, tuple(unique)) for i, run in enumerate(missing))
    if missing and backend == "loky":
        with parallel_config(backend="loky", initializer=exit_with_parent, initargs=(os.getpid(),)):
            workers = loky_workers(n_jobs, len(missing))  # no idle processes
            for i, record, trained_here in Parallel(n_jobs=workers, return_as="generator_unordered")(tasks):
                finished(missing[i], record, trained_here)
    elif missing:
        client, own = _client(scheduler)
        try:
            check_cluster(client)
            with parallel_config(backend="dask", client=client):
                for i, record, trained_here in Parallel(n_jobs=n_jobs, return_as="generator_unordered")(tasks):
                    finished(missing[i], record, trained_here)
        finally:
            if own:
                client.close()
    return [done[run] for run in runs]
