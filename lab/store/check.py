"""`cache check [--repair]`: verify every stored entry, delete what fails (it is recomputed on demand), tidy up.

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


def _entry_problem(path: Path, version: int, key_of) -> str | None:
    """None for a whole entry of this version, 'other' for another version, else what is wrong."""
    try:
        meta = codec.unseal((path / backend.SIDECAR_FILE).read_bytes())
    except OSError:
        return "no sidecar (an older layout, or a write that never finished)"
    except codec.RecordError as exc:
        return str(exc)
    if meta.get("numerics_version") != version:
        return "other"
    try:
        meta = backend.verify_entry(path, version)
    except codec.RecordError as exc:
        return str(exc)
    if key_of(meta["config"]) != path.name:
        return "the entry holds another run's config"
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


def check(location: Path, func_dir: Path, version: int, repair: bool, key_of) -> dict:
    """The check's report; with repair, damaged entries deleted, leftovers removed, the index rebuilt."""
    report = {"ok": 0, "other_version": 0, "damaged": [], "leftovers": 0}
    old = time.time() - TMP_AGE_SECONDS
    for path in index.entry_dirs(func_dir):
        problem = _entry_problem(path, version, key_of)
        if problem and problem.startswith("no sidecar") and _mtime(path) > old:
            if _lock_held(location / "locks" / f"{path.name}.lock"):
                continue  # a write in progress (arrays first, sidecar last, under the run's lock)
            if not (path / backend.RECORD_FILE).exists():
                continue  # an empty folder (joblib's, a moment before the arrays): nothing to verify yet
        if problem is None:
            report["ok"] += 1
        elif problem == "other":
            report["other_version"] += 1
        else:
            report["damaged"].append((str(path), problem))
            if repair:
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
