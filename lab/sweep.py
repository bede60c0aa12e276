"""Sweeps: named presets and grids of RunConfigs, run through joblib.Parallel on local cores or Dask.

Every run goes through the store, so a sweep that was killed resumes where it stopped, and the
local and Dask backends give bit-identical numbers.

On a cluster: `dask scheduler`, then `dask worker tcp://HOST:8786 --nthreads 1` from the repository root
(workers import attncore and lab), then `python -m attncore sweep ... --backend dask --scheduler tcp://HOST:8786`.
Each task carries the caller's cache_dir() path; workers write the runs there, so on several machines it
must be a shared filesystem mounted at the same path (set ATTNCORE_CACHE_DIR on the caller to choose it).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from joblib import Parallel, cpu_count, delayed, parallel_config

from attncore.config import ConfigError, RunConfig
from lab.presets import MAX_JOBS
from lab.store import RunRecord, cache_dir, get_run, is_cached

BACKENDS = ("loky", "dask")
CONNECT_SECONDS = 5  # how long a dask scheduler may take to answer before the sweep gives up
# a dask address: protocol://host:port (host a name, IPv4 or [IPv6]), e.g. tcp://127.0.0.1:8786
SCHEDULER_ADDRESS = re.compile(r"(tcp|tls|ws|wss)://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):([0-9]{1,5})")


def _sweep_one(index: int, run: RunConfig, location: str, keep=()) -> tuple[int, RunRecord, bool]:
    # Runs in a worker process: the store pins BLAS to one thread, so workers do not fight over cores.
    steps = []  # get_run calls back only when it trains; else another process stored the run meanwhile
    record = get_run(run, lambda step, loss: steps or steps.append(step), location=location, keep=keep)
    return index, record, bool(steps)


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


def connect(address: str, timeout: float = CONNECT_SECONDS):
    """A distributed.Client on the scheduler at address, or ConfigError within about `timeout` seconds."""
    from distributed import Client

    check_scheduler_address(address)
    try:
        return Client(address, timeout=f"{timeout}s")
    except (OSError, TimeoutError) as e:
        raise ConfigError("scheduler", f"no dask scheduler answered at {address} within {timeout:g} s") from e


def _client(scheduler):
    """A distributed.Client for an address, or the Client passed in; the caller closes only its own."""
    from distributed import Client

    if isinstance(scheduler, Client):
        return scheduler, False
    return connect(scheduler), True


def _exit_with_parent(parent_pid: int, interval: float = 0.5) -> None:
    """loky worker initializer: end this worker within `interval` seconds of the sweep's process dying.

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


def check_cluster(client) -> None:
    """Fail with one clear line, not a hang, when the scheduler or a worker cannot import this project."""

    def importable() -> bool:  # a nested function travels by value, so it runs even where lab is missing
        from importlib.util import find_spec

        return find_spec("lab") is not None and find_spec("attncore") is not None

    if not (client.run_on_scheduler(importable) and all(client.run(importable).values())):
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
        with parallel_config(backend="loky", initializer=_exit_with_parent, initargs=(os.getpid(),)):
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
