"""The run store: every training computed once, kept in cache/ by joblib.Memory, served in milliseconds.

A run's key is its full config plus NUMERICS_VERSION. Concurrent requests for one run compute it once
under a file lock; an unreadable entry is reported with a warning and recomputed.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import joblib
import numpy as np
from threadpoolctl import threadpool_limits

from attncore.config import RunConfig
from attncore.evaluate import EvalResult, evaluate
from attncore.inspect import attention_maps
from attncore.tasks import probe_sequence
from attncore.train import train

try:
    import fcntl
except ImportError:  # no flock (Windows): joblib's atomic rename still lets the last writer win whole
    fcntl = None

# Bump whenever the numbers a run produces would change (model, training, tasks, evaluation).
# joblib only hashes the source of the cached function itself, never of the helpers it calls.
NUMERICS_VERSION = 4  # 2: cross-entropy row sums as a matrix product; 3: float32 scores scaled by a float32 1/sqrt(d_k)
# 4: each initial tensor drawn from its own (seed, name) stream (issue 13); batches unchanged

ENV_VAR = "ATTNCORE_CACHE_DIR"
REPO_ROOT = Path(__file__).resolve().parents[1]
SUMMARY_FILE = "summary.json"  # sidecar next to joblib's output.pkl, read by list_cached


class CacheWarning(UserWarning):
    """A cache entry could not be read and was recomputed."""


def cache_dir() -> Path:
    """$ATTNCORE_CACHE_DIR, or cache/ at the repository root; read at every call."""
    return Path(os.environ.get(ENV_VAR) or REPO_ROOT / "cache")


@dataclass
class RunRecord:
    """What the pages need from one trained run, without retraining."""

    config: RunConfig
    loss_history: np.ndarray  # (steps,) training loss at every step
    final_loss: float
    eval: EvalResult
    train_seconds: float
    n_params: int
    probe_tokens: np.ndarray  # (2L,) the probe input of SPEC §8
    probe_attention: np.ndarray  # (n_layers, H, 2L, 2L) attention weights on the probe
    params: dict[str, np.ndarray]  # the trained weights, for head ablation and custom sequences

    def summary(self) -> dict:
        """JSON-able scalars (no loss history, no arrays): the keys of `train --json`; NaN becomes None."""
        e = self.eval

        def number(x: float) -> float | None:  # NaN (no sequence of a kind, e.g. L = 1) is not JSON
            return None if np.isnan(x) else float(x)

        return {
            "config": self.config.to_dict(),
            "final_loss": float(self.final_loss),
            "token_accuracy": e.token_accuracy,
            "sequence_accuracy": e.sequence_accuracy,
            "distinct_accuracy": number(e.distinct_accuracy),
            "n_distinct": e.n_distinct,
            "repeated_accuracy": number(e.repeated_accuracy),
            "n_repeated": e.n_repeated,
            "n_params": int(self.n_params),
            "train_seconds": float(self.train_seconds),
            "eval_seconds": e.eval_seconds,
        }


def compute_run(run: RunConfig, callback: Callable[[int, float], object] | None = None) -> RunRecord:
    """Train, evaluate by greedy generation, and record the probe's attention; no cache.

    BLAS is pinned to one thread: at these sizes a second thread only adds contention (a 100-step
    run took 0.3-0.4 s on one thread and 0.3-2.6 s on two), and a sweep runs one process per core.
    """
    with threadpool_limits(limits=1, user_api="blas"):
        result = train(run, callback)
        tokens = probe_sequence(run.task)  # (2L,)
        return RunRecord(
            config=run,
            loss_history=result.loss_history,
            final_loss=result.final_loss,
            eval=evaluate(result.params, run),
            train_seconds=result.train_seconds,
            n_params=result.n_params,
            probe_tokens=tokens,
            probe_attention=attention_maps(result.params, run, tokens),
            params=result.params,
        )


# The joblib-cached function, keyed by (config, numerics_version). Keep it tiny and leave it alone:
# joblib drops every stored run when the source of this function changes.
def _compute_cached(config: dict, numerics_version: int, callback=None) -> RunRecord:
    return compute_run(RunConfig.from_dict(config), callback)


@lru_cache(maxsize=8)
def _memorized(location: str):
    memory = joblib.Memory(location=location, verbose=0)
    return memory.cache(_compute_cached, ignore=["callback"])


class _Entry:
    """One run's place in the store: joblib's call id, its directory and its lock file."""

    def __init__(self, run: RunConfig, location: Path | str | None = None):
        self.location = Path(location) if location is not None else cache_dir()
        self.func = _memorized(str(self.location))
        self.args = (run.to_dict(), NUMERICS_VERSION)
        # joblib's own argument hash, so our sidecar and lock sit next to joblib's entry
        self.call_id = (self.func.func_id, self.func._get_args_id(*self.args))
        self.path = Path(self.func.store_backend.location, *self.call_id)
        self.lock_path = self.location / "locks" / f"{self.call_id[1]}.lock"

    def cached(self) -> bool:
        return self.func.check_call_in_cache(*self.args)

    def load(self) -> RunRecord:
        record = self.func.store_backend.load_item(self.call_id, verbose=0)
        if not isinstance(record, RunRecord):
            raise TypeError(f"expected a RunRecord, found {type(record).__name__}")
        return record

    def compute(self, callback) -> RunRecord:
        self.func.store_backend.clear_item(self.call_id)  # a corrupt leftover, with its stale sidecar
        record, _ = self.func.call(*self.args, callback=callback)
        self.write_summary(record)
        return record

    def write_summary(self, record: RunRecord) -> None:
        text = json.dumps({"numerics_version": NUMERICS_VERSION, "summary": record.summary()})
        tmp = self.path / f".{SUMMARY_FILE}.{os.getpid()}"
        tmp.write_text(text)
        tmp.replace(self.path / SUMMARY_FILE)  # atomic: a reader sees the old file or the new one


@contextmanager
def _locked(path: Path):
    """An exclusive flock on `path` for the duration; released by the OS if the process dies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        if fcntl is not None:
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(fh, fcntl.LOCK_UN)


def _describe(run: RunConfig) -> str:
    m, t = run.model, run.train
    return f"{run.task.name} L={run.task.length} seed={t.seed} position={m.position} norm={m.norm} lr={t.lr:g}"


def _try_load(entry: _Entry, run: RunConfig, warn: bool) -> RunRecord | None:
    try:
        return entry.load()
    except Exception as exc:  # truncated pickle, missing file, a class that changed: all mean recompute
        if warn:
            warnings.warn(
                f"cache entry {entry.path} for {_describe(run)} is unreadable "
                f"({type(exc).__name__}: {exc}); recomputing",
                CacheWarning,
                stacklevel=3,
            )
        return None


def get_run(
    run: RunConfig, callback: Callable[[int, float], object] | None = None, *, location: Path | str | None = None
) -> RunRecord:
    """The run from the store, computed and stored first if needed.

    callback(step, loss) is only called when this call actually trains. `location` overrides
    cache_dir() (sweep workers get the caller's).
    """
    entry = _Entry(run, location)
    warned = False
    if entry.cached():
        record = _try_load(entry, run, warn=True)
        if record is not None:
            if not (entry.path / SUMMARY_FILE).exists():  # killed between the pickle and the sidecar
                entry.write_summary(record)
            return record
        warned = True
    with _locked(entry.lock_path):
        if entry.cached():  # another process may have finished it while we waited for the lock
            record = _try_load(entry, run, warn=not warned)
            if record is not None:
                return record
        return entry.compute(callback)


def is_cached(run: RunConfig, *, location: Path | str | None = None) -> bool:
    """True when get_run(run) would answer from the store (a few stats, no loading)."""
    return _Entry(run, location).cached()


def _entry_dirs(location: Path) -> list[Path]:
    func = _memorized(str(location))
    func_dir = Path(func.store_backend.location, func.func_id)
    return [p.parent for p in func_dir.glob("*/output.pkl")]


def list_cached() -> list[dict]:
    """Summaries (RunRecord.summary()) of the stored runs of this NUMERICS_VERSION, oldest first.

    Reads only the small JSON sidecars, never the pickles.
    """
    found = []
    for path in _entry_dirs(cache_dir()):
        sidecar = path / SUMMARY_FILE
        try:
            data = json.loads(sidecar.read_text())
            if data["numerics_version"] == NUMERICS_VERSION:
                found.append((sidecar.stat().st_mtime, data["summary"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # no sidecar yet, or a damaged one: get_run repairs it on the next hit
    return [summary for _, summary in sorted(found, key=lambda item: item[0])]


def clear_cache() -> int:
    """Delete every stored run (all numerics versions) and the lock files; returns how many runs."""
    location = cache_dir()
    n = len(_entry_dirs(location))
    _memorized(str(location)).clear(warn=False)  # empties the function's folder, rewrites its code file
    for lock in (location / "locks").glob("*.lock"):
        lock.unlink(missing_ok=True)
    return n
