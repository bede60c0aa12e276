"""lab.store: every training computed once, kept in cache/ by joblib.Memory, served in milliseconds.

A run's key is its full config plus NUMERICS_VERSION; joblib stores it through the store's backend (arrays
and sealed JSON, never pickle). An entry that fails its checks is reported (CacheWarning), recomputed and
rewritten; one that is whole but not signed with the current ATTNCORE_CACHE_KEY is untrusted, not damaged:
kept, never served, evicted or overwritten, until `cache sign` adopts it or `--drop-unverified` deletes it.
The parts, each importing only those below it:

    record   what one run is (RunRecord, compute_run, NUMERICS_VERSION); attncore only
    codec    a record as data: .npz + sealed JSON sidecar, checked on read
    backend  joblib's store backend writing that format; per-run locks
    index    index.json and the size cap (LRU eviction)
    pins     the runs the visitors' views show, kept from eviction while fresh
    check    `cache check [--repair]` and `cache sign` over every entry
    (this module) the store's API: get_run, is_cached, list_cached, put_run, clear_cache, check_store, sign_store

It may import attncore, lab.presets (the article's runs, never evicted) and joblib; never lab's sweeps,
tables or comparisons, which build on it. The cached function lives here so that its joblib identity
(the store's folder, lab/store/_compute_cached) is the same as before the store became a package.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import shutil
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import joblib
import numpy as np

from attncore.config import RunConfig
from lab import limits, presets

from . import backend, check, codec, index, pins
from .record import NUMERICS_VERSION, CacheWarning, NotStoredWarning, RunRecord, compute_run, describe

__all__ = [
    "NUMERICS_VERSION",
    "CacheWarning",
    "NotStoredWarning",
    "RunRecord",
    "cache_dir",
    "check_store",
    "clear_cache",
    "compute_run",
    "enforce_cap",
    "entry_keys",
    "expected_bytes",
    "get_run",
    "is_cached",
    "list_cached",
    "listing_digest",
    "max_store_bytes",
    "pin_view",
    "put_run",
    "put_runs",
    "remove_runs",
    "stored_bytes",
    "sign_store",
    "stored_run",
    "unverified_runs",
    "view_bytes",
    "whole_entries",
]

ENV_VAR = "ATTNCORE_CACHE_DIR"
REPO_ROOT = Path(__file__).resolve().parents[2]
MAX_STORE_VAR = limits.env_var("max_store_mb")  # ATTNLAB_MAX_STORE_MB
DEFAULT_MAX_STORE_MB = 512  # a 1 GB container: ~85 hosted-maximum runs (~6 MB each), ~2,300 default ones (228 kB)


def cache_dir() -> Path:
    """$ATTNCORE_CACHE_DIR, or cache/ at the repository root; read at every call."""
    return Path(os.environ.get(ENV_VAR) or REPO_ROOT / "cache")


# The joblib-cached function, keyed by (config, numerics_version). Keep it tiny: its source is what joblib's
# func_code.py records (the store's backend keeps that file right; the store never lets joblib wipe runs over it).
def _compute_cached(config: dict, numerics_version: int, callback=None) -> RunRecord:
    return compute_run(RunConfig.from_dict(config), callback)


def _memorized(location: str):
    """joblib's memoized _compute_cached on `location`, storing through the store's backend."""

    func = _MEMO.get((location, NUMERICS_VERSION))
    if func is None:
        memory = joblib.Memory(
            location=location,
            backend=backend.BACKEND,
            verbose=0,
            backend_options={"numerics_version": NUMERICS_VERSION},
        )
        func = _MEMO[location, NUMERICS_VERSION] = memory.cache(_compute_cached, ignore=["callback"])
        backend.repair_func_code(func)
    return func


_MEMO: dict = {}


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
        self.unverified = False  # set by read(): whole, but not signed with the current key

    def read(self, warn: bool) -> RunRecord | None:
        """The stored record if every check passes; None if absent; None with a CacheWarning if damaged or
        unverified (whole, but not signed with the current key: then self.unverified is set)."""
        self.unverified = False
        if not (self.path / backend.SIDECAR_FILE).exists() and not (self.path / backend.RECORD_FILE).exists():
            return None
        try:
            record, meta = backend.read_entry(self.path, NUMERICS_VERSION, self.args[0])
        except codec.UnverifiedError:
            self.unverified = True
            if warn:
                warnings.warn(
                    f"cache entry {self.path} for {describe(self.run)} is not signed with this store's "
                    f"{codec.KEY_VAR} (the key changed, or was set on an unkeyed store): kept but not served, so "
                    "the run is computed again and not stored; `python -m attncore cache sign` adopts such runs, "
                    "`cache check --repair --drop-unverified` deletes them",
                    CacheWarning,
                    stacklevel=4,
                )
            return None
        except codec.RecordError as exc:
            if warn:
                warnings.warn(
                    f"cache entry {self.path} for {describe(self.run)} failed its checks ({exc}); recomputing",
                    CacheWarning,
                    stacklevel=4,
                )
            return None
        self._indexed(meta)
        return record

    def _indexed(self, meta: dict) -> None:

        index.touch(self.func_dir, self.path.name)
        try:
            if not index.lists(self.location, self.path.name) and self.path.name not in index.read(
                self.location, self.func_dir
            ):
                line = index.describe_entry(self.path, meta)
                index.update(self.location, self.func_dir, {self.path.name: line})
        except OSError:
            pass  # evicted meanwhile, or a read-only store: the record in hand is whole

    def compute(self, callback) -> RunRecord:

        shutil.rmtree(self.path, ignore_errors=True)  # a damaged leftover
        record, _ = self.func.call(*self.args, callback=callback)  # joblib stores it (or warns that it cannot)
        return record

    def stored_bytes(self, warn: bool) -> tuple[dict, bytes] | None:
        """(checked sidecar meta, npz bytes) of a whole entry, without parsing the arrays; None if absent or damaged."""
        if not (self.path / backend.SIDECAR_FILE).exists():
            return None
        try:
            return backend.read_verified(self.path, NUMERICS_VERSION, self.args[0])
        except codec.RecordError as exc:
            if warn:
                warnings.warn(
                    f"cache entry {self.path} for {describe(self.run)} failed its checks ({exc}); left out",
                    CacheWarning,
                    stacklevel=4,
                )
            return None

    def stored(self) -> dict | None:
        """The checked sidecar meta of a whole entry, or None."""

        try:
            return backend.verify_entry(self.path, NUMERICS_VERSION, self.args[0])
        except codec.RecordError:
            return None


def max_store_bytes() -> int:
    """The store's size cap, max_store_mb (default DEFAULT_MAX_STORE_MB) as lab.limits reads it in every
    process: $ATTNLAB_MAX_STORE_MB, else max_store_mb under [limits] in .streamlit/secrets.toml.

    lab.jobs.limits parses the page's value with the same rule (lab.limits.parse_store_mb), so a value is applied
    everywhere or reported as ignored everywhere.
    """
    raw = limits.raw_setting("max_store_mb")
    try:
        mb = DEFAULT_MAX_STORE_MB if raw is None or raw == "" else parse_store_mb(raw)
    except ValueError:
        shown = repr(raw) if len(repr(raw)) <= 24 else repr(raw)[:21] + "..."
        where = limits.source("max_store_mb")
        warnings.warn(f"ignoring {where}={shown}: not a positive number of MB", CacheWarning, stacklevel=3)
        mb = DEFAULT_MAX_STORE_MB
    return int(mb * 2**20)


parse_store_mb = limits.parse_store_mb


def _article_keys(location: Path) -> set[str]:

    return {_Entry(run, location).path.name for run in presets.preset("article")}


def enforce_cap(max_bytes: int | None = None, *, location: Path | str | None = None, keep=()) -> int:
    """Evict least-recently-used runs until the store fits `max_bytes` (default max_store_bytes()).

    The article's 23 runs and the runs in `keep` are never evicted. Returns how many runs were removed.
    """

    location = Path(location) if location is not None else cache_dir()
    func = _memorized(str(location))
    func_dir = Path(func.store_backend.location, func.func_id)
    keep_keys = _article_keys(location) | {_Entry(run, location).path.name for run in keep}
    max_bytes = max_store_bytes() if max_bytes is None else max_bytes
    return len(index.evict(location, func_dir, max_bytes, keep_keys, NUMERICS_VERSION))


def pin_view(holder: str, runs, *, location: Path | str | None = None) -> None:
    """Keep `runs` from eviction while `holder` (a hex digest naming a visitor's session) shows them.

    Each call replaces the holder's previous pin; it lapses PIN_SECONDS after the last call (lab.store.pins).
    """
    location = Path(location) if location is not None else cache_dir()
    try:
        keys = [_Entry(run, location).path.name for run in runs]
    except OSError:
        return
    pins.pin(location, holder, keys)


def get_run(
    run: RunConfig,
    callback: Callable[[int, float], object] | None = None,
    *,
    location: Path | str | None = None,
    keep=(),
    max_bytes: int | None = None,
) -> RunRecord:
    """The run from the store, computed and stored first if needed.

    callback(step, loss) is only called when this call actually trains. `location` overrides
    cache_dir() (sweep workers get the caller's). A store that cannot be written still returns the run.
    The size cap applied after storing (`max_bytes`, the caller's cap, else max_store_bytes()) never evicts
    this run nor those in `keep` (the rest of its sweep or view). An entry of this run that is whole but not
    signed with the current key is left as it is: the run is computed and returned, not stored over it.
    """

    try:
        entry = _Entry(run, location)
    except OSError as exc:  # cannot even create the store's folders
        warnings.warn(
            NotStoredWarning(
                f"the run store is unavailable ({exc.strerror or exc}); {describe(run)} is computed but not stored",
                exc.strerror or type(exc).__name__,
            ),
            stacklevel=2,
        )
        return compute_run(run, callback)
    record = entry.read(warn=True)
    if record is not None:
        return record
    warned = entry.path.exists()
    with backend.locked(entry.lock_path):
        record = entry.read(warn=not warned)  # another process may have stored it while we waited
        if record is not None:
            return record
        if entry.unverified:  # another key's run is the operator's to adopt or drop, never overwritten here
            return compute_run(run, callback)
        record = entry.compute(callback)
    meta = entry.stored()
    if meta is not None:
        try:
            index.update(entry.location, entry.func_dir, {entry.path.name: index.describe_entry(entry.path, meta)})
            enforce_cap(max_bytes, location=entry.location, keep=[run, *keep])
        except OSError:
            pass  # the entry is whole; the index is rebuilt when next read
    return record


def stored_run(run: RunConfig, *, location: Path | str | None = None) -> RunRecord | None:
    """The stored record when every check passes, else None (a CacheWarning if damaged); never computes."""
    try:
        return _Entry(run, location).read(warn=True)
    except OSError:
        return None


def put_run(record: RunRecord, *, location: Path | str | None = None, replace: bool = True) -> bool:
    """Store a record checked elsewhere (a bundle's), as joblib would have; OSError if the store refuses it.

    With replace=False an entry already there (whole, or whole but not signed with the current key) is left
    as it is. True when this call wrote the entry.
    """
    return list(put_runs([record], location=location, replace=replace))[0]


def put_runs(records, *, location: Path | str | None = None, replace: bool = True) -> Iterator[bool]:
    """put_run for each record in turn, yielding whether this call wrote it; the index is written once, when the
    iteration ends or is refused midway (an import of thousands of runs rewrites it once, not once a run)."""
    lines, entry = {}, None
    try:
        for record in records:
            entry = _Entry(record.config, location)
            meta, data = codec.encode(record)
            meta["numerics_version"] = NUMERICS_VERSION
            with backend.locked(entry.lock_path):
                wrote = replace or (entry.stored() is None and not _unsigned(entry))
                if wrote:
                    backend.write_entry(entry.path, meta, data)
            if wrote:
                lines[entry.path.name] = index.describe_entry(entry.path, meta)
            yield wrote
    finally:
        if lines:
            index.update(entry.location, entry.func_dir, lines)


def _unsigned(entry: _Entry) -> bool:
    """Whether the entry's sidecar is whole but not signed with the current key (kept for the operator)."""
    try:
        return not codec.open_seal(backend.read_sidecar(entry.path))[1]
    except (OSError, codec.RecordError):
        return False


def entry_keys(runs, *, location: Path | str | None = None) -> list[str]:
    """The name of each run's entry in the store (its folder's), as a journal of work on the store records them."""
    return [_Entry(run, location).path.name for run in runs]


def whole_entries(keys, *, location: Path | str | None = None) -> int:
    """How many of the entries named `keys` (entry_keys) are stored whole: every check of the entry passes."""
    location = Path(location) if location is not None else cache_dir()
    func_dir = _func_dir(location)
    n = 0
    for key in keys:
        if not (isinstance(key, str) and key.isalnum()):  # an entry's name, never a path
            continue
        try:
            backend.verify_entry(func_dir / key, NUMERICS_VERSION)
        except (codec.RecordError, OSError):
            continue
        n += 1
    return n


def remove_runs(runs, *, location: Path | str | None = None) -> None:
    """Delete these runs' entries and their index lines (an import taking back what it stored)."""
    entries = [_Entry(run, location) for run in runs]
    for entry in entries:
        with backend.locked(entry.lock_path):
            shutil.rmtree(entry.path, ignore_errors=True)
    if entries:
        try:
            index.update(entries[0].location, entries[0].func_dir, remove=[e.path.name for e in entries])
        except OSError:
            pass  # the index is rebuilt from the sidecars when next found damaged


def is_cached(run: RunConfig, *, location: Path | str | None = None) -> bool:
    """True when get_run(run) would answer from the store: the sidecar holds and the arrays' digest matches."""
    try:
        return _Entry(run, location).stored() is not None
    except OSError:
        return False


def entry_stamp(run: RunConfig, *, location: Path | str | None = None, touch: bool = False) -> tuple | None:
    """What changes whenever the run's entry is written, replaced or removed (the inode and size of its two files, the
    array file's modification and change times, which no one can set back), or None when it is absent. A record read
    and checked with one stamp is the stored one for as long as the stamp holds. touch: mark the entry as just used,
    as a read does (the sidecar's mtime: eviction takes the least recently used first)."""
    try:
        func_dir, name = _entry_place(run, str(Path(location) if location is not None else cache_dir()))
        if touch:
            index.touch(func_dir, name)
        sidecar, arrays = (os.stat(func_dir / name / file) for file in (backend.SIDECAR_FILE, backend.RECORD_FILE))
    except OSError:
        return None
    return sidecar.st_ino, sidecar.st_size, arrays.st_ino, arrays.st_size, arrays.st_mtime_ns, arrays.st_ctime_ns


@functools.lru_cache(maxsize=8192)  # joblib's hash of the config: the same place for as long as the process runs
def _entry_place(run: RunConfig, location: str) -> tuple[Path, str]:
    entry = _Entry(run, location)
    return entry.func_dir, entry.path.name


def _func_dir(location: Path) -> Path:
    func = _memorized(str(location))
    return Path(func.store_backend.location, func.func_id)


def _lines(location: Path) -> dict:
    try:
        return index.read(location, _func_dir(location))
    except OSError:
        return {}


def list_cached(*, location: Path | str | None = None) -> list[dict]:
    """Summaries (RunRecord.summary()) of the stored runs of this NUMERICS_VERSION, oldest first.

    Reads the store's index (re-read only when it changed; rebuilt from the sidecars if damaged). Runs not
    signed with the current key are left out (unverified_runs counts them).
    """
    location = Path(location) if location is not None else cache_dir()
    found = _lines(location)
    mine = [e for e in found.values() if e.get("v") == NUMERICS_VERSION and isinstance(e.get("summary"), dict)]
    mine = [e for e in mine if not e.get("unverified")]
    return [e["summary"] for e in sorted(mine, key=lambda e: e.get("created") or 0)]


def listing_digest(*, location: Path | str | None = None) -> str:
    """A SHA-256 of which runs the store serves now (each verified entry of this NUMERICS_VERSION: its key, size and
    creation time) and of the signing key: two moments with one digest give one bundle of all runs."""
    location = Path(location) if location is not None else cache_dir()
    found = _lines(location)
    rows = sorted(
        [key, e.get("bytes"), e.get("created")]
        for key, e in found.items()
        if e.get("v") == NUMERICS_VERSION and isinstance(e.get("summary"), dict) and not e.get("unverified")
    )
    signed = codec.sign({"runs": len(rows)})  # a keyed store signs its bundles: its digest follows the key
    return hashlib.sha256(json.dumps([NUMERICS_VERSION, rows, signed]).encode()).hexdigest()


def stored_bytes(*, location: Path | str | None = None) -> int:
    """Bytes on disk of the stored runs of this NUMERICS_VERSION, from the index (what a bundle of them weighs)."""
    location = Path(location) if location is not None else cache_dir()
    found = _lines(location).values()
    return sum(int(e.get("bytes") or 0) for e in found if e.get("v") == NUMERICS_VERSION and not e.get("unverified"))


ARRAY_OVERHEAD_BYTES = 400  # per array: its .npy header and zip records, and its line in the sidecar (measured ~350)
ENTRY_OVERHEAD_BYTES = 3000  # the sidecar's fixed part and joblib's metadata.json (measured ~2,500)


def expected_bytes(run: RunConfig) -> int:
    """About the bytes `run` takes once stored (its arrays, their framing, the sidecars), from its config alone."""
    arrays = codec.expected_arrays(run)
    data = sum(math.prod(shape) * np.dtype(dtypes[0]).itemsize for shape, dtypes in arrays.values())
    return data + ARRAY_OVERHEAD_BYTES * len(arrays) + ENTRY_OVERHEAD_BYTES


def view_bytes(runs, *, location: Path | str | None = None) -> int:
    """The bytes `runs` take once all are stored: the index's figure for those stored, expected_bytes for the rest."""
    location = Path(location) if location is not None else cache_dir()
    found = _lines(location)
    total = 0
    for run in dict.fromkeys(runs):
        line = found.get(_Entry(run, location).path.name)
        stored = line is not None and not line.get("unverified")
        total += int(line.get("bytes") or 0) if stored else expected_bytes(run)
    return total


def unverified_runs(*, location: Path | str | None = None) -> tuple[int, int]:
    """(count, bytes) of the stored entries that are whole but not signed with the current ATTNCORE_CACHE_KEY.

    They are kept, never served nor evicted: `cache sign` re-seals them under the key, `cache check --repair
    --drop-unverified` deletes them.
    """
    location = Path(location) if location is not None else cache_dir()
    found = [e for e in _lines(location).values() if e.get("unverified")]
    return len(found), sum(int(e.get("bytes") or 0) for e in found)


def sign_store(*, location: Path | str | None = None) -> dict:
    """Re-seal under the current ATTNCORE_CACHE_KEY every entry whose only fault is its signature (lab.store.check).

    Returns {"signed": n, "already": n, "left": [(folder, why)]}; ValueError when no key is set.
    """
    if not os.environ.get(codec.KEY_VAR):
        raise ValueError(f"{codec.KEY_VAR} is not set: there is no key to sign with")
    location = Path(location) if location is not None else cache_dir()
    func = _memorized(str(location))
    return check.sign(
        location, _func_dir(location), NUMERICS_VERSION, lambda config: func._get_args_id(config, NUMERICS_VERSION)
    )


def clear_cache(location: Path | str) -> int:
    """Delete every stored run in the store at `location` (all numerics versions), its lock files and its index;
    returns how many runs. The one way to delete a store's runs, for the explicit `cache clear` command: the
    caller names the store (never taken from the environment), and joblib's own clearing is refused anywhere
    else (backend.ClearRefused)."""

    location = Path(location)
    func = _memorized(str(location))
    func_dir = _func_dir(location)
    n = len(index.entry_dirs(func_dir))
    with backend.locked(location / "locks" / index.LOCK_FILE, remove=False), backend.clearing(location):
        func.clear(warn=False)  # empties the function's folder, rewrites its code file
        (location / index.INDEX_FILE).unlink(missing_ok=True)
    for lock in (location / "locks").glob("*.lock"):
        if lock.name != index.LOCK_FILE:
            lock.unlink(missing_ok=True)
    return n


def check_store(repair: bool = False, *, location: Path | str | None = None, drop_unverified: bool = False) -> dict:
    """Verify every entry (sidecar seal, config, digest); with repair, delete what fails and rebuild the index.

    Returns {"ok": n, "damaged": [(folder, why)], "unverified": [(folder, why)], "other_version": n,
    "leftovers": n, "func_code": rewritten?}. Damaged entries are recomputed when next asked for; unverified
    ones (whole, not signed with the current key) are kept, unless drop_unverified (with repair) deletes them;
    leftovers are temporary files and unused locks.
    """

    location = Path(location) if location is not None else cache_dir()
    func = _memorized(str(location))
    report = check.check(
        location,
        _func_dir(location),
        NUMERICS_VERSION,
        repair,
        lambda config: func._get_args_id(config, NUMERICS_VERSION),
        drop_unverified=drop_unverified,
    )
    report["func_code"] = backend.repair_func_code(func) if repair else False
    return report
