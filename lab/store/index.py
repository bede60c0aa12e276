"""The store's index (index.json: one line of summary per entry) and its size cap with least-recently-used eviction.

The index is sealed like a sidecar, rewritten atomically under its own lock, re-read only when its file
changes, and rebuilt from the entries' sidecars when it is missing or damaged. Last use is an entry's
sidecar mtime (touched on every hit), read only when something must be evicted.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from . import backend, codec, pins

INDEX_FILE = "index.json"
LOCK_FILE = "index.lock"
ID_FILE = "store.id"  # a random identity made once per store; the index is sealed with it
_memo: dict[str, tuple[tuple, dict]] = {}  # index path -> (file identity, entries)


def _identity(path: Path) -> tuple | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def entry_dirs(func_dir: Path) -> list[Path]:
    """Every entry folder under joblib's function folder (old layouts and damaged ones included)."""
    try:
        return [p for p in func_dir.iterdir() if p.is_dir()]
    except OSError:
        return []


def _entry_bytes(path: Path) -> int:
    total = 0
    for f in path.iterdir():
        try:
            total += f.stat().st_size
        except OSError:
            pass
    return total


def describe_entry(path: Path, meta: dict) -> dict:
    """The index line of a stored entry."""
    try:
        created = (path / backend.SIDECAR_FILE).stat().st_mtime
    except OSError:
        created = time.time()
    return {"v": meta.get("numerics_version"), "summary": meta.get("summary"), "bytes": _entry_bytes(path)} | {
        "created": created
    }


def rebuild(func_dir: Path) -> dict:
    """The index from the entries' sealed sidecars (the arrays are not read); damaged entries are left out."""
    found = {}
    for path in entry_dirs(func_dir):
        try:
            meta = codec.unseal((path / backend.SIDECAR_FILE).read_bytes())
        except (OSError, codec.RecordError):
            continue
        found[path.name] = describe_entry(path, meta)
    return found


def store_id(location: Path) -> str | None:
    """This store's identity (ID_FILE), created once with a random value; None where it cannot be read or made."""
    path = location / ID_FILE
    for _ in range(2):
        try:
            text = path.read_text().strip()
            if len(text) == 32 and all(c in "0123456789abcdef" for c in text):
                return text
            path.unlink()  # damaged: a new identity (every index sealed with the old one is rebuilt)
        except FileNotFoundError:
            pass
        except (OSError, UnicodeDecodeError):
            return None
        try:
            location.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "w") as fh:
                fh.write(os.urandom(16).hex())
        except FileExistsError:
            continue  # another process made it first: read theirs
        except OSError:
            return None
    return None


def _matches_entries(found: dict, func_dir: Path) -> bool:
    """Whether the index lists exactly the entry folders that hold a sidecar (its first read in a process)."""
    present = {p.name for p in entry_dirs(func_dir) if (p / backend.SIDECAR_FILE).exists()}
    return present == set(found)


def _load(location: Path, func_dir: Path) -> dict | None:
    path = location / INDEX_FILE
    ident = _identity(path)
    memo = _memo.get(str(path))
    if ident is not None and memo is not None and memo[0] == ident:
        return memo[1]
    try:
        meta = json.loads(codec.unseal_bytes(path.read_bytes()))
        found = meta["entries"]
        if meta.get("format") != "attnlab-index/1" or not isinstance(found, dict):
            raise codec.RecordError("not an index")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    sid = store_id(location)
    if sid is None or meta.get("store") != sid:
        return None  # another store's index (copied in), or one from before stores had an identity: rebuilt
    if memo is None and not _matches_entries(found, func_dir):
        return None  # first read in this process: an index that disagrees with the entries is rebuilt
    _memo[str(path)] = (ident, found)
    return found


def _save(location: Path, found: dict) -> None:
    path = location / INDEX_FILE
    try:
        body = json.dumps({"format": "attnlab-index/1", "store": store_id(location), "entries": found}).encode()
        backend.write_atomic(path, codec.seal_bytes(body))
    except OSError:
        return  # a read-only store: the in-memory index still answers
    _memo[str(path)] = (_identity(path), found)


def read(location: Path, func_dir: Path) -> dict:
    """call hash -> {"v", "summary", "bytes", "created"}; rebuilt (and saved) when missing or damaged."""
    found = _load(location, func_dir)
    if found is None:
        with backend.locked(location / "locks" / LOCK_FILE, remove=False):
            found = _load(location, func_dir)
            if found is None:
                found = rebuild(func_dir)
                _save(location, found)
    return found


def update(location: Path, func_dir: Path, add: dict | None = None, remove=()) -> dict:
    """Add or replace entries (call hash -> index line) and drop others, under the index lock."""
    with backend.locked(location / "locks" / LOCK_FILE, remove=False):
        found = _load(location, func_dir)
        found = dict(rebuild(func_dir) if found is None else found)
        found.update(add or {})
        for key in remove:
            found.pop(key, None)
        _save(location, found)
    return found


def rebuild_saved(location: Path, func_dir: Path) -> dict:
    """Rebuild the index from the sidecars and save it, under the index lock."""
    with backend.locked(location / "locks" / LOCK_FILE, remove=False):
        found = rebuild(func_dir)
        _save(location, found)
    return found


def evict(location: Path, func_dir: Path, max_bytes: int, keep: set[str], version: int) -> list[str]:
    """Delete least-recently-used entries (other numerics versions first) until the store fits max_bytes.

    Entries in `keep` are never deleted, nor those that fresh pins protect (lab.store.pins: the views being
    shown, up to half of max_bytes). Returns the call hashes removed.
    """
    with backend.locked(location / "locks" / LOCK_FILE, remove=False):
        found = _load(location, func_dir)
        found = dict(rebuild(func_dir) if found is None else found)
        total = sum(int(e.get("bytes") or 0) for e in found.values())
        if total <= max_bytes:
            return []
        keep = keep | pins.pinned(location, {k: int(e.get("bytes") or 0) for k, e in found.items()}, max_bytes)

        def last_used(key: str) -> float:
            try:
                return (func_dir / key / backend.SIDECAR_FILE).stat().st_mtime
            except OSError:
                return 0.0

        candidates = sorted(
            (k for k in found if k not in keep), key=lambda k: (found[k].get("v") == version, last_used(k))
        )
        removed = []
        for key in candidates:
            if total <= max_bytes:
                break
            shutil.rmtree(func_dir / key, ignore_errors=True)
            total -= int(found.pop(key).get("bytes") or 0)
            removed.append(key)
        _save(location, found)
    return removed


def touch(func_dir: Path, key: str) -> None:
    """Mark an entry as just used (its sidecar's mtime), best effort."""
    try:
        os.utime(func_dir / key / backend.SIDECAR_FILE)
    except OSError:
        pass
