"""The run store: every training computed once, kept in cache/ by joblib.Memory, served in milliseconds.

A run's key is its full config plus NUMERICS_VERSION; joblib stores it through lab.entries (arrays and sealed
JSON, never pickle). An entry that fails its checks is reported (CacheWarning), recomputed and rewritten.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from attncore.config import RunConfig
from attncore.evaluate import EvalResult, evaluate
from attncore.inspect import attention_maps
from attncore.snapshots import Snapshot
from attncore.tasks import probe_sequence
from attncore.train import train

# Bump whenever the numbers a run produces would change (model, training, tasks, evaluation).
# joblib only hashes the source of the cached function itself, never of the helpers it calls.
NUMERICS_VERSION = 5  # 2: cross-entropy row sums as a matrix product; 3: float32 scores scaled by a float32 1/sqrt(d_k)
# 4: each initial tensor drawn from its own (seed, name) stream (issue 13); batches unchanged
# 5: records carry training snapshots (issue 14): accuracy and probe attention at ~20 log-spaced steps

ENV_VAR = "ATTNCORE_CACHE_DIR"
REPO_ROOT = Path(__file__).resolve().parents[1]
MAX_STORE_VAR = "ATTNLAB_MAX_STORE_MB"
DEFAULT_MAX_STORE_MB = 512  # a 1 GB container: ~85 hosted-maximum runs (~6 MB each), ~2,300 default ones (228 kB)


class CacheWarning(UserWarning):
    """A cache entry failed its checks and was recomputed, or a run could not be stored."""


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
    snapshots: list[Snapshot] = field(default_factory=list)  # at snapshot_steps(steps), in step order

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
            snapshots=result.snapshots,
        )


# The joblib-cached function, keyed by (config, numerics_version). Keep it tiny: its source is what joblib's
# func_code.py records (lab.entries keeps that file right; the store never lets joblib wipe runs over it).
def _compute_cached(config: dict, numerics_version: int, callback=None) -> RunRecord:
    return compute_run(RunConfig.from_dict(config), callback)


def _memorized(location: str):
    """joblib's memoized _compute_cached on `location`, storing through lab.entries' backend."""
    import joblib

    from . import entries

    func = _MEMO.get(location)
    if func is None:
        memory = joblib.Memory(location=location, backend=entries.BACKEND, verbose=0)
        func = _MEMO[location] = memory.cache(_compute_cached, ignore=["callback"])
        entries.repair_func_code(func)
    return func


_MEMO: dict = {}


def _describe(run: RunConfig) -> str:
    m, t = run.model, run.train
    return f"{run.task.name} L={run.task.length} seed={t.seed} position={m.position} norm={m.norm} lr={t.lr:g}"


class _Entry:
    """One run's place in the store: joblib's call id, its folder and its lock file."""

    def __init__(self, run: RunConfig, location: Path | str | None = None):
        self.run = run
        self.location = Path(location) if location is not None else cache_dir()
        self.func = _memorized(str(self.location))
        self.args = (run.to_dict(), NUMERICS_VERSION)
        self.call_id = (self.func.func_id, self.func._get_args_id(*self.args))  # joblib's own argument hash
        self.func_dir = Path(self.func.store_backend.location, self.func.func_id)
        self.path = self.func_dir / self.call_id[1]
        self.lock_path = self.location / "locks" / f"{self.call_id[1]}.lock"

    def read(self, warn: bool) -> RunRecord | None:
        """The stored record if every check passes; None if absent; None with a CacheWarning if damaged."""
        from . import entries, records

        if not (self.path / entries.SIDECAR_FILE).exists() and not (self.path / entries.RECORD_FILE).exists():
            return None
        try:
            record, meta = entries.read_entry(self.path, NUMERICS_VERSION, self.args[0])
        except records.RecordError as exc:
            if warn:
                warnings.warn(
                    f"cache entry {self.path} for {_describe(self.run)} failed its checks ({exc}); recomputing",
                    CacheWarning,
                    stacklevel=4,
                )
            return None
        self._indexed(meta)
        return record

    def _indexed(self, meta: dict) -> None:
        from . import store_index

        store_index.touch(self.func_dir, self.path.name)
        try:
            if self.path.name not in store_index.read(self.location, self.func_dir):
                line = store_index.describe_entry(self.path, meta)
                store_index.update(self.location, self.func_dir, {self.path.name: line})
        except OSError:
            pass  # evicted meanwhile, or a read-only store: the record in hand is whole

    def compute(self, callback) -> RunRecord:
        import shutil

        shutil.rmtree(self.path, ignore_errors=True)  # a damaged leftover
        record, _ = self.func.call(*self.args, callback=callback)  # joblib stores it (or warns that it cannot)
        return record

    def stored(self) -> dict | None:
        """The checked sidecar meta of a whole entry, or None."""
        from . import entries, records

        try:
            return entries.verify_entry(self.path, NUMERICS_VERSION, self.args[0])
        except records.RecordError:
            return None


def max_store_bytes() -> int:
    """The store's size cap from $ATTNLAB_MAX_STORE_MB (default DEFAULT_MAX_STORE_MB)."""
    raw = os.environ.get(MAX_STORE_VAR)
    try:
        mb = float(raw) if raw else DEFAULT_MAX_STORE_MB
        if not (0 < mb < 1e9):
            raise ValueError
    except ValueError:
        warnings.warn(f"ignoring {MAX_STORE_VAR}={raw[:20]!r}: not a positive number of MB", CacheWarning, stacklevel=3)
        mb = DEFAULT_MAX_STORE_MB
    return int(mb * 2**20)


def _article_keys(location: Path) -> set[str]:
    from .sweep import preset

    return {_Entry(run, location).path.name for run in preset("article")}


def enforce_cap(max_bytes: int | None = None, *, location: Path | str | None = None, keep=()) -> int:
    """Evict least-recently-used runs until the store fits `max_bytes` (default max_store_bytes()).

    The article's 23 runs and the runs in `keep` are never evicted. Returns how many runs were removed.
    """
    from . import store_index

    location = Path(location) if location is not None else cache_dir()
    func = _memorized(str(location))
    func_dir = Path(func.store_backend.location, func.func_id)
    keep_keys = _article_keys(location) | {_Entry(run, location).path.name for run in keep}
    max_bytes = max_store_bytes() if max_bytes is None else max_bytes
    return len(store_index.evict(location, func_dir, max_bytes, keep_keys, NUMERICS_VERSION))


def get_run(
    run: RunConfig, callback: Callable[[int, float], object] | None = None, *, location: Path | str | None = None
) -> RunRecord:
    """The run from the store, computed and stored first if needed.

    callback(step, loss) is only called when this call actually trains. `location` overrides
    cache_dir() (sweep workers get the caller's). A store that cannot be written still returns the run.
    """
    from . import entries, store_index

    try:
        entry = _Entry(run, location)
    except OSError as exc:  # cannot even create the store's folders
        warnings.warn(
            f"the run store is unavailable ({exc.strerror or exc}); {_describe(run)} is computed but not stored",
            CacheWarning,
            stacklevel=2,
        )
        return compute_run(run, callback)
    record = entry.read(warn=True)
    if record is not None:
        return record
    warned = entry.path.exists()
    with entries.locked(entry.lock_path):
        record = entry.read(warn=not warned)  # another process may have stored it while we waited
        if record is not None:
            return record
        record = entry.compute(callback)
    meta = entry.stored()
    if meta is not None:
        try:
            store_index.update(
                entry.location, entry.func_dir, {entry.path.name: store_index.describe_entry(entry.path, meta)}
            )
            enforce_cap(location=entry.location, keep=[run])
        except OSError:
            pass  # the entry is whole; the index is rebuilt when next read
    return record


def put_run(record: RunRecord, *, location: Path | str | None = None) -> None:
    """Store a record checked elsewhere (a bundle's), as joblib would have; OSError if the store refuses it."""
    from . import entries, records, store_index

    entry = _Entry(record.config, location)
    meta, data = records.encode(record)
    meta["numerics_version"] = NUMERICS_VERSION
    with entries.locked(entry.lock_path):
        entries.write_entry(entry.path, meta, data)
    store_index.update(entry.location, entry.func_dir, {entry.path.name: store_index.describe_entry(entry.path, meta)})


def is_cached(run: RunConfig, *, location: Path | str | None = None) -> bool:
    """True when get_run(run) would answer from the store: the sidecar holds and the arrays' digest matches."""
    try:
        return _Entry(run, location).stored() is not None
    except OSError:
        return False


def _func_dir(location: Path) -> Path:
    func = _memorized(str(location))
    return Path(func.store_backend.location, func.func_id)


def list_cached(*, location: Path | str | None = None) -> list[dict]:
    """Summaries (RunRecord.summary()) of the stored runs of this NUMERICS_VERSION, oldest first.

    Reads the store's index (re-read only when it changed; rebuilt from the sidecars if damaged).
    """
    from . import store_index

    location = Path(location) if location is not None else cache_dir()
    try:
        found = store_index.read(location, _func_dir(location))
    except OSError:
        return []
    mine = [e for e in found.values() if e.get("v") == NUMERICS_VERSION and isinstance(e.get("summary"), dict)]
    return [e["summary"] for e in sorted(mine, key=lambda e: e.get("created") or 0)]


def clear_cache(*, location: Path | str | None = None) -> int:
    """Delete every stored run (all numerics versions), the lock files and the index; returns how many runs."""
    from . import entries, store_index

    location = Path(location) if location is not None else cache_dir()
    func = _memorized(str(location))
    func_dir = _func_dir(location)
    n = len(store_index.entry_dirs(func_dir))
    with entries.locked(location / "locks" / store_index.LOCK_FILE, remove=False):
        func.clear(warn=False)  # empties the function's folder, rewrites its code file
        (location / store_index.INDEX_FILE).unlink(missing_ok=True)
    for lock in (location / "locks").glob("*.lock"):
        if lock.name != store_index.LOCK_FILE:
            lock.unlink(missing_ok=True)
    return n


def check_store(repair: bool = False, *, location: Path | str | None = None) -> dict:
    """Verify every entry (sidecar seal, config, digest); with repair, delete what fails and rebuild the index.

    Returns {"ok": n, "damaged": [folders], "other_version": n, "leftovers": n, "func_code": rewritten?}.
    Damaged entries are recomputed when next asked for; leftovers are temporary files and unused locks.
    """
    from . import entries, store_check

    location = Path(location) if location is not None else cache_dir()
    func = _memorized(str(location))
    report = store_check.check(
        location,
        _func_dir(location),
        NUMERICS_VERSION,
        repair,
        lambda config: func._get_args_id(config, NUMERICS_VERSION),
    )
    report["func_code"] = entries.repair_func_code(func) if repair else False
    return report
