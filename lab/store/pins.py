"""Pins: the runs a visitor's view is showing, kept from eviction while the view is fresh.

One small JSON file per holder (a visitor's session, named by a hash) under <store>/pins/, rewritten on every
rerun of its view and honoured for PIN_SECONDS after that; a holder that left simply stops refreshing it.
The files live in a shared folder, so they are read as hostile: size-capped, schema-checked, and honoured
newest first only up to a share of the cap, so pins can never hold the store above its size.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from pathlib import Path

from . import backend

PIN_DIR = "pins"
PIN_SECONDS = 15 * 60  # a view not rerun for this long is no longer protected
MAX_PIN_BYTES = 16 * 2**10  # a pin of the largest view (60 runs) is ~2 kB
MAX_PIN_FILES = 256  # pins read per cap pass, newest first (one per visitor session showing runs)
MAX_PINNED_SHARE = 0.5  # pins protect at most this share of the store's cap, the newest pins first
_HOLDER = re.compile(r"[0-9a-f]{16,64}")
_KEY = re.compile(r"[0-9a-f]{16,64}")


def _folder(location: Path) -> Path | None:
    """The pins folder, or None when it is a symlink (never read, written or tidied: it may point anywhere)."""
    folder = location / PIN_DIR
    return None if folder.is_symlink() else folder


def pin(location: Path, holder: str, keys: list[str]) -> None:
    """Record that `holder` shows the entries `keys` now (an empty list releases its pin); best effort."""
    if not _HOLDER.fullmatch(holder):
        raise ValueError("a pin holder is a hex digest")
    folder = _folder(location)
    if folder is None:
        return
    path = folder / f"{holder}.json"
    try:
        if not keys:
            path.unlink(missing_ok=True)
            return
        folder.mkdir(parents=True, exist_ok=True)
        backend.write_atomic(path, json.dumps({"keys": sorted(set(keys))}).encode())
    except OSError:
        pass  # a read-only or full store: the view still shows, it is just not protected


def _read(path: Path) -> list[str] | None:
    """The keys of one pin file (read without following a symlink), or None when it is not a well-formed pin."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None  # a FIFO, a device: never block on it
            text = fh.read(MAX_PIN_BYTES + 1)
        if len(text) > MAX_PIN_BYTES:
            return None
        keys = json.loads(text).get("keys")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    if not isinstance(keys, list) or not all(isinstance(k, str) and _KEY.fullmatch(k) for k in keys):
        return None
    return keys


def _pin_files(folder: Path) -> list[tuple[float, Path]]:
    """(mtime, path) of the pin files, newest first; an entry that vanishes or cannot be statted is skipped."""
    found = []
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if not (entry.name.endswith(".json") and _HOLDER.fullmatch(entry.name[:-5])):
                    continue
                try:
                    found.append((entry.stat(follow_symlinks=False).st_mtime, Path(entry.path)))
                except OSError:
                    continue  # removed meanwhile
    except OSError:
        return []  # no pins folder (yet), or not a folder
    return sorted(found, reverse=True)


def _remove(path: Path) -> None:
    try:
        os.unlink(path)  # a symlink itself, never its target
    except OSError:
        pass


def pinned(location: Path, sizes: dict[str, int], max_bytes: int, now: float | None = None) -> set[str]:
    """The entry keys that fresh pins protect, newest pin first, up to MAX_PINNED_SHARE of max_bytes.

    `sizes` maps the stored entries' keys to their bytes. Stale, malformed and symlinked pin files, and those
    beyond the newest MAX_PIN_FILES, are removed; a pin that vanishes meanwhile is skipped. A symlinked pins
    folder is ignored whole (nothing outside the store is ever read or deleted).
    """
    now = time.time() if now is None else now
    folder = _folder(location)
    if folder is None:
        return set()
    kept: set[str] = set()
    budget = MAX_PINNED_SHARE * max_bytes
    for i, (mtime, path) in enumerate(_pin_files(folder)):
        keys = _read(path) if i < MAX_PIN_FILES and now - mtime <= PIN_SECONDS else None
        if keys is None:
            _remove(path)
            continue
        extra = sum(sizes.get(k, 0) for k in set(keys) - kept)
        if extra > budget:
            continue  # an older or larger view than the budget allows: not protected
        budget -= extra
        kept |= set(keys)
    return kept
