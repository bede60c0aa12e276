"""The store's index (index.json: one line of summary per entry) and its size cap with least-recently-used eviction.

The index is sealed like a sidecar, rewritten atomically under its own lock, re-read only when its file
changes, and rebuilt from the entries' sidecars when it is missing, damaged, holds a malformed line or was
written under another ATTNCORE_CACHE_KEY. A rebuild checks each sidecar as a read does (arrays aside) and
leaves the damaged out; entries not signed with the current key are listed as unverified (no summary: never
served, counted or evicted). Last use is an entry's sidecar mtime (touched on every hit), read only when
something must be evicted.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import warnings
from pathlib import Path

from . import backend, codec, pins
from .record import NUMERICS_VERSION, CacheWarning

INDEX_FILE = "index.json"
LOCK_FILE = "index.lock"
ID_FILE = "store.id"  # a random identity made once per store; the index is sealed with it
_memo: dict[tuple[str, str], tuple[tuple, dict]] = {}  # (index path, key id) -> (file identity, entries)


def _memo_key(path: Path) -> tuple[str, str]:
    """The memo's key: the index's path and which ATTNCORE_CACHE_KEY read it (another key sees other entries)."""
    return str(path), codec.key_id()


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


def describe_entry(path: Path, meta: dict, signed: bool = True) -> dict:
    """The index line of a stored entry; one not signed with the current key is listed as unverified, unsummarised."""
    try:
        created = (path / backend.SIDECAR_FILE).stat().st_mtime
    except OSError:
        created = time.time()
    version = meta.get("numerics_version")
    line = {"v": version if isinstance(version, int) and not isinstance(version, bool) else None}
    line |= {"summary": meta.get("summary") if signed else None, "bytes": _entry_bytes(path), "created": created}
    return line | ({} if signed else {"unverified": True})


def _checked_line(path: Path) -> dict | None:
    """The index line of an entry from its sidecar, checked as every read checks it (arrays aside): None when
    damaged or malformed. Entries of other numerics versions are listed unsummarised (never served)."""
    try:
        meta, signed = codec.open_seal(backend.read_sidecar(path))
        if signed and meta.get("numerics_version") == NUMERICS_VERSION:
            run = codec.check_meta(meta, NUMERICS_VERSION)
            codec.check_values(meta, run, stored=True)
        elif signed:
            meta = {"numerics_version": meta.get("numerics_version")}
    except (OSError, codec.RecordError):
        return None
    return describe_entry(path, meta, signed)


def rebuild(func_dir: Path) -> dict:
    """The index from the entries' sealed sidecars (the arrays are not read); damaged entries are left out,
    with one CacheWarning saying how many (`cache check` names them)."""
    found, bad = {}, 0
    for path in entry_dirs(func_dir):
        line = _checked_line(path)
        if line is None:
            bad += (path / backend.SIDECAR_FILE).exists()  # no sidecar: a write in progress, or joblib's leftover
            continue
        found[path.name] = line
    if bad:
        warnings.warn(
            f"left {bad:,} damaged or malformed entr{'ies' if bad > 1 else 'y'} of {func_dir} out of the store's "
            "index; `python -m attncore cache check` names them, `--repair` deletes them",
            CacheWarning,
            stacklevel=2,
        )
    return found


def _valid_line(line) -> bool:
    """Whether an index line read back from index.json is one this module writes (the index is hostile too)."""
    if not isinstance(line, dict) or not isinstance(line.get("bytes"), int) or line["bytes"] < 0:
        return False
    if not isinstance(line.get("created", 0), (int, float)) or not (line.get("v") is None or type(line["v"]) is int):
        return False
    if line.get("unverified") or line.get("v") != NUMERICS_VERSION:
        return line.get("summary") is None or line.get("v") != NUMERICS_VERSION
    try:
        codec.check_summary(line.get("summary"))
    except codec.RecordError:
        return False
    return True


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
    memo = _memo.get(_memo_key(path))
    if ident is not None and memo is not None and memo[0] == ident:
        return memo[1]
    try:
        meta = json.loads(codec.unseal_bytes(path.read_bytes()))
        found = meta["entries"]
        if meta.get("format") != "attnlab-index/1" or not isinstance(found, dict):
            raise codec.RecordError("not an index")
        if not all(_valid_line(line) for line in found.values()):
            raise codec.RecordError("a malformed line")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    sid = store_id(location)
    if sid is None or meta.get("store") != sid:
        return None  # another store's index (copied in), or one from before stores had an identity: rebuilt
    if meta.get("key", "") != codec.key_id():
        return None  # written under another ATTNCORE_CACHE_KEY (or none): which entries verify differs
    if memo is None and not _matches_entries(found, func_dir):
        return None  # first read in this process: an index that disagrees with the entries is rebuilt
    _memo[_memo_key(path)] = (ident, found)
    return found


def lists(location: Path, key: str) -> bool:
    """Whether the saved index (this store's, under this key) holds a valid line for the entry `key`, checking that
    line only: a stored run's read asks just this, and validating every line of a large index was most of a
    cached `train` (0.3 s of CPU at 3,000 runs). A whole read (`read`, list_cached) still checks all
    lines and the entries before it serves them, and rebuilds the index where they disagree."""
    path = location / INDEX_FILE
    memo = _memo.get(_memo_key(path))
    if memo is not None and memo[0] == _identity(path):
        return key in memo[1]
    try:
        meta = json.loads(codec.unseal_bytes(path.read_bytes()))
        line = meta["entries"].get(key)
        ours = meta.get("format") == "attnlab-index/1" and meta.get("key", "") == codec.key_id()
        return ours and meta.get("store") == store_id(location) and line is not None and _valid_line(line)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def _save(location: Path, found: dict) -> None:
    path = location / INDEX_FILE
    try:
        head = {"format": "attnlab-index/1", "store": store_id(location), "key": codec.key_id()}
        body = json.dumps(head | {"entries": found}).encode()
        backend.write_atomic(path, codec.seal_bytes(body))
    except OSError:
        return  # a read-only store: the in-memory index still answers
    _memo[_memo_key(path)] = (_identity(path), found)


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
    shown, up to half of max_bytes), nor unverified ones (not signed with the current key: neither counted nor
    evicted; `cache sign` or `cache check --repair --drop-unverified` settles them). Returns the call hashes removed.
    """
    with backend.locked(location / "locks" / LOCK_FILE, remove=False):
        found = _load(location, func_dir)
        found = dict(rebuild(func_dir) if found is None else found)
        total = sum(int(e.get("bytes") or 0) for e in found.values() if not e.get("unverified"))
        if total <= max_bytes:
            return []
        keep = keep | {k for k, e in found.items() if e.get("unverified")}  # untrusted, not damaged: the operator's
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
