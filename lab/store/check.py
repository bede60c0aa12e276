"""`cache check [--repair]`: verify every stored entry, delete what fails (it is recomputed on demand), tidy up;
`cache sign`: re-seal the entries whose only fault is not being signed with the current ATTNCORE_CACHE_KEY.

An entry whose sidecar is whole but not signed with the current key is unverified, not damaged (a changed key,
or a key set on an unkeyed store): never served, never deleted by a repair, unless asked (drop_unverified).
Tidying removes temporary files older than TMP_AGE_SECONDS, lock files nobody holds, and rebuilds the index.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from . import backend, codec, index

try:
    import fcntl
except ImportError:
    fcntl = None

TMP_AGE_SECONDS = 600  # a temporary file this old belongs to no write in progress


def _entry_problem(path: Path, version: int, key_of) -> tuple[str, str] | None:
    """None for a whole entry of this version, else (kind, what is wrong): kind 'other' for another numerics
    version, 'unverified' for a whole sidecar not signed with the current key, 'damaged' for anything else."""
    try:
        meta, signed = codec.open_seal(backend.read_sidecar(path))
    except OSError:
        return "damaged", "no sidecar (an older layout, or a write that never finished)"
    except codec.RecordError as exc:
        return "damaged", str(exc)
    if not signed:
        return "unverified", f"not signed with this store's {codec.KEY_VAR} (sealed without it, or under another)"
    if meta.get("numerics_version") != version:
        return "other", "another numerics version"
    try:
        meta = backend.verify_entry(path, version)
    except codec.RecordError as exc:
        return "damaged", str(exc)
    if key_of(meta["config"]) != path.name:
        return "damaged", "the entry holds another run's config"
    return None


def _mtime(path: Path) -> float:
    try:
        return max([path.stat().st_mtime] + [f.stat().st_mtime for f in path.iterdir()])
    except OSError:
        return 0.0


def _probe_lock(path: Path, remove: bool) -> bool | None:
    """Whether some process holds the flock on `path` (True: a write in progress); None where no lock can be
    taken. With remove, a free lock file is unlinked while this probe holds it (the protocol of backend.locked)."""
    if fcntl is None or not path.exists():
        return None
    try:
        with open(path, "a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return True
            if remove:
                path.unlink(missing_ok=True)
            fcntl.flock(fh, fcntl.LOCK_UN)
            return False
    except OSError:
        return None


def _unused_lock(path: Path) -> bool:
    """Remove the lock file if no process holds it; True if it was removed."""
    return _probe_lock(path, remove=True) is False


def _lock_held(path: Path) -> bool:
    """Whether some process holds the flock on `path` (a write in progress); False where there is no lock."""
    return _probe_lock(path, remove=False) is True


def check(location: Path, func_dir: Path, version: int, repair: bool, key_of, drop_unverified: bool = False) -> dict:
    """The check's report; with repair, damaged entries deleted, leftovers removed, the index rebuilt.

    Unverified entries are reported apart and kept, unless drop_unverified (with repair) deletes them too.
    """
    report = {"ok": 0, "other_version": 0, "damaged": [], "unverified": [], "leftovers": 0}
    old = time.time() - TMP_AGE_SECONDS
    for path in index.entry_dirs(func_dir):
        problem = _entry_problem(path, version, key_of)
        if problem and problem[1].startswith("no sidecar") and _mtime(path) > old:
            if _lock_held(location / "locks" / f"{path.name}.lock"):
                continue  # a write in progress (arrays first, sidecar last, under the run's lock)
            if not (path / backend.RECORD_FILE).exists():
                continue  # an empty folder (joblib's, a moment before the arrays): nothing to verify yet
        if problem is None:
            report["ok"] += 1
        elif problem[0] == "other":
            report["other_version"] += 1
        else:
            report[problem[0]].append((str(path), problem[1]))
            if repair and (problem[0] == "damaged" or drop_unverified):
                shutil.rmtree(path, ignore_errors=True)
    for tmp in list(func_dir.glob(f"*/.*{backend.TMP_SUFFIX}")) + list(location.glob(f".*{backend.TMP_SUFFIX}")):
        try:
            stale = tmp.stat().st_mtime < old
        except OSError:
            continue
        if stale:
            report["leftovers"] += 1
            if repair:
                tmp.unlink(missing_ok=True)
    for lock in (location / "locks").glob("*.lock"):
        if lock.name != index.LOCK_FILE and repair and _unused_lock(lock):
            report["leftovers"] += 1
    if repair:
        index.rebuild_saved(location, func_dir)
    return report


def sign(location: Path, func_dir: Path, version: int, key_of) -> dict:
    """Re-seal, under the current key, every entry of this version whose only fault is its signature.

    Each entry is checked as a read checks it (digests, schema, the numbers' ranges, its config's key) before
    its sidecar is rewritten, under the run's lock. Returns {"signed": n, "already": n, "left": [(folder, why)]}.
    """
    report = {"signed": 0, "already": 0, "left": []}
    for path in index.entry_dirs(func_dir):
        with backend.locked(location / "locks" / f"{path.name}.lock"):
            try:
                meta, signed = codec.open_seal(backend.read_sidecar(path))
                if signed:
                    report["already"] += 1
                    continue
                meta = backend.verify_entry(path, version, unsigned=True)
                if key_of(meta["config"]) != path.name:
                    raise codec.RecordError("the entry holds another run's config")
                backend.write_atomic(path / backend.SIDECAR_FILE, codec.seal(meta).encode())
            except OSError as exc:
                report["left"].append((str(path), f"cannot be read or rewritten ({exc.strerror or exc})"))
                continue
            except codec.RecordError as exc:
                report["left"].append((str(path), str(exc)))
                continue
        report["signed"] += 1
    index.rebuild_saved(location, func_dir)
    return report
