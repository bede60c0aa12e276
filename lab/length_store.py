"""A stored run's evaluations at other lengths (attncore.evaluate.evaluate_lengths), kept beside the run store in
<store>/lengths/, so that a server's first view of a length comparison reads them instead of generating again: a pure
function of the stored run, like the record itself. `python -m attncore lessons warm` fills them for the lessons, and
every view that computes one keeps it. ATTNLAB_LENGTH_STORE=0 turns it off.

One file per run and position draw: the run's key (lab.jobs.training.run_key, the caller's) and NUMERICS_VERSION in
a sealed JSON sidecar (lab.store.codec: its SHA-256, and its HMAC when the store has a key), every value checked on
read. A file that is damaged, unsigned, for another run or numerics version, or holds a value out of range is
ignored (the evaluation is computed again and the file rewritten): the folder is shared and may be hostile."""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
from collections.abc import Mapping
from pathlib import Path

from attncore.config import MAX_LENGTH
from attncore.evaluate import LengthResult
from lab.store import NUMERICS_VERSION, cache_dir
from lab.store.backend import write_atomic
from lab.store.codec import RecordError, seal, unseal

FOLDER = "lengths"
OFF_VAR = "ATTNLAB_LENGTH_STORE"  # =0: neither read nor kept (benchmarks/lesson_open.py --compare measures the saving)
MAX_NOTE = 400  # characters of a note (attncore's are about 100)
MAX_BYTES = 64 * 1024  # a file holds at most MAX_LENGTH results: a few kB


def _path(key: str, randomized: bool, location: Path | None) -> Path:
    digest = hashlib.sha256(key.encode()).hexdigest()[:40]
    return Path(location or cache_dir()) / FOLDER / f"{digest}{'-randomized' if randomized else ''}.json"


def _accuracy(x) -> bool:
    return x is None or (isinstance(x, float) and (math.isnan(x) or 0.0 <= x <= 1.0))


def _result(row) -> LengthResult | None:
    """A LengthResult from [length, token, sequence, note], or None when any value is not one evaluate_lengths makes."""
    if not (isinstance(row, list) and len(row) == 4):
        return None
    length, token, sequence, note = row
    token, sequence = (_from_json(x) for x in (token, sequence))
    if not (isinstance(length, int) and not isinstance(length, bool) and 1 <= length <= MAX_LENGTH):
        return None
    if not (_accuracy(token) and _accuracy(sequence)):
        return None
    if not (note is None or (isinstance(note, str) and len(note) <= MAX_NOTE)):
        return None
    return LengthResult(length, token, sequence, note)


def read(key: str, randomized: bool = False, location: Path | None = None) -> dict[int, LengthResult]:
    """{length: result} kept for the run with this key ({} when none is, or the file does not hold)."""
    if os.environ.get(OFF_VAR) == "0":
        return {}
    path = _path(key, randomized, location)
    try:
        if path.stat().st_size > MAX_BYTES:
            return {}
        meta = unseal(path.read_bytes())
    except (OSError, RecordError):
        return {}
    if meta.get("run") != key or meta.get("numerics") != NUMERICS_VERSION or meta.get("randomized") is not randomized:
        return {}
    rows = meta.get("results")
    found = [_result(row) for row in rows] if isinstance(rows, list) else [None]
    return {} if None in found else {r.length: r for r in found}


NAN = "NaN"  # NaN is not JSON: written as this text, read back as NaN (None means no number at that length)


def _to_json(x: float | None):
    return None if x is None else NAN if math.isnan(x) else float(x)


def _from_json(x):
    if x == NAN:
        return math.nan
    return float(x) if isinstance(x, int) and not isinstance(x, bool) else x


def write(key: str, results: Mapping[int, LengthResult], randomized: bool = False, location: Path | None = None):
    """Keep `results` for the run with this key, beside those kept already; silent when the folder cannot be
    written (read-only, full: the evaluation is computed again next time)."""
    if os.environ.get(OFF_VAR) == "0":
        return
    kept = dict(sorted((read(key, randomized, location) | dict(results)).items()))
    rows = [[r.length, _to_json(r.token_accuracy), _to_json(r.sequence_accuracy), r.note] for r in kept.values()]
    meta = {"run": key, "numerics": NUMERICS_VERSION, "randomized": randomized, "results": rows}
    path = _path(key, randomized, location)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, seal(meta).encode())  # whole or not at all: a reader never sees half a file
