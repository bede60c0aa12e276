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
import time
from pathlib import Path

from . import backend

PIN_DIR = "pins"
PIN_SECONDS = 15 * 60  # a view not rerun for this long is no longer protected
MAX_PIN_BYTES = 64 * 2**10  # a pin of the largest view (60 runs) is ~4 kB
MAX_PINNED_SHARE = 0.5  # pins protect at most this share of the store's cap, the newest pins first
_HOLDER = re.compile(r"[0-9a-f]{16,64}")
_KEY = re.compile(r"[0-9a-f]{16,64}")


def pin(location: Path, holder: str, keys: list[str]) -> None:
    """Record that `holder` shows the entries `keys` now (an empty list releases its pin); best effort."""
    if not _HOLDER.fullmatch(holder):
        raise ValueError("a pin holder is a hex digest")
    path = location / PIN_DIR / f"{holder}.json"
    try:
        if not keys:
            path.unlink(missing_ok=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        backend.write_atomic(path, json.dumps({"keys": sorted(set(keys))}).encode())
    except OSError:
        pass  # a read-only or full store: the view still shows, it is just not protected


def _read(path: Path) -> list[str] | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_PIN_BYTES:
            return None
        keys = json.loads(path.read_bytes()).get("keys")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    if not isinstance(keys, list) or not all(isinstance(k, str) and _KEY.fullmatch(k) for k in keys):
        return None
    return keys


def pinned(location: Path, sizes: dict[str, int], max_bytes: int, now: float | None = None) -> set[str]:
    """The entry keys that fresh pins protect, newest pin first, up to MAX_PINNED_SHARE of max_bytes.

    `sizes` maps the stored entries' keys to their bytes; stale or malformed pin files are removed.
    """
    now = time.time() if now is None else now
    folder = location / PIN_DIR
    try:
        files = [(p.stat().st_mtime, p) for p in folder.glob("*.json") if _HOLDER.fullmatch(p.stem)]
    except OSError:
        return set()
    kept: set[str] = set()
    budget = MAX_PINNED_SHARE * max_bytes
    for mtime, path in sorted(files, reverse=True):
        keys = _read(path) if now - mtime <= PIN_SECONDS else None
        if keys is None:
            try:
                os.unlink(path)
            except OSError:
                pass
            continue
        extra = sum(sizes.get(k, 0) for k in set(keys) - kept)
        if extra > budget:
            continue  # an older or larger view than the budget allows: not protected
        budget -= extra
        kept |= set(keys)
    return kept
