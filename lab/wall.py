"""The wall time one can plan on: the slowdown of the next minutes, not of this second, and the time left of a
sweep from its own progress.

lab.cost_model measures how busy the machine's other work keeps its cores at the moment it is asked (a probe's
pace and the processes ready to run), a reading that swings several times over between two asks a minute apart
on a shared machine. Here every reading joins a record kept over minutes, in this process and in a small file
(`LOAD_FILE`, in the run store's folder, so that the next command goes on with it): smoothed exponentially in
time (half of a reading forgotten in LOAD_HALF_LIFE_SECONDS), which gives the likely slowdown, and the least and
most busy readings of the last LOAD_WINDOW_SECONDS, which give its range. Once a sweep has finished a few runs,
its time left comes from its own pace (the computing it got through per wall second), no longer from the
estimate. Imports lab.cost_model and the standard library.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from attncore import RunConfig
from lab import cost_model
from lab.formats import duration, duration_span

LOAD_HALF_LIFE_SECONDS = 180.0  # a reading weighs half as much three minutes later
LOAD_WINDOW_SECONDS = 600.0  # the range: the least and the most busy readings of the last ten minutes
LOAD_FILE = "load.json"  # the record, in the run store's folder
RANGE_FROM = 1.25  # a range is given when its ends are this far apart (a machine whose load varies)
MAX_LOAD_FILE_BYTES = 64 * 1024  # a record of ten minutes' readings is a few KiB; a larger file is not one
MAX_BUSY = 4096.0  # busy cores a reading may say (a shared store's file is read as untrusted input)
FINISHED_BEFORE_PACE = 3  # runs a sweep finishes before its time left is taken from its own pace


@dataclass(frozen=True)
class Slowdown:
    """How many times its computing a run's wall time should be here over the next minutes: `likely` (from the
    smoothed record) within `low` to `high` (the least and most busy readings of the window)."""

    likely: float
    low: float
    high: float

    @property
    def varies(self) -> bool:
        return self.high > RANGE_FROM * self.low


@dataclass
class LoadRecord:
    """Busy cores of the machine's other work, read at each ask: the smoothed value and the window's readings."""

    smoothed: float | None = None
    at: float = -math.inf  # when `smoothed` was last updated (time.time(): a file outlives the process)
    readings: list[tuple[float, float]] | None = None  # (when, busy cores), the last LOAD_WINDOW_SECONDS

    def add(self, others: float, now: float) -> None:
        if self.smoothed is None or now <= self.at:
            self.smoothed = others if self.smoothed is None else max(self.smoothed, others)
        else:
            kept = 0.5 ** ((now - self.at) / LOAD_HALF_LIFE_SECONDS)
            self.smoothed = kept * self.smoothed + (1.0 - kept) * others
        self.at = max(self.at, now)
        self.readings = [(t, x) for t, x in (self.readings or []) if now - t <= LOAD_WINDOW_SECONDS]
        self.readings.append((now, others))

    def slowdown(self, workers: int, n_cores: int, now: float) -> Slowdown:
        """The record's slowdown for `workers` runs at once (cost_model.slowdown of its busy cores)."""
        window = [x for t, x in self.readings or [] if now - t <= LOAD_WINDOW_SECONDS] or [self.smoothed or 0.0]
        likely = self.smoothed if self.smoothed is not None else window[-1]
        low, high = min([*window, likely]), max([*window, likely])
        return Slowdown(*(cost_model.slowdown_of(x, workers, n_cores) for x in (likely, low, high)))

    def to_json(self) -> str:
        return json.dumps({"smoothed": self.smoothed, "at": self.at, "readings": self.readings or []})

    @classmethod
    def from_json(cls, text: str | bytes) -> LoadRecord:
        """A record read back from its file; an unreadable or malformed one is an empty record."""
        try:
            data = json.loads(text)
            smoothed, at = data["smoothed"], float(data["at"])
            readings = [(float(t), float(x)) for t, x in data["readings"]]
            if smoothed is not None:
                smoothed = float(smoothed)
            values = [x for _, x in readings] + ([] if smoothed is None else [smoothed])
            times = [t for t, _ in readings] + [at]
            # busy cores of another process's readings: finite, from 0 to MAX_BUSY; times not in the future
            if not all(math.isfinite(x) and 0 <= x <= MAX_BUSY for x in values):
                raise ValueError("not a record")
            if not all(math.isfinite(t) and t <= time.time() + 60 for t in times):
                raise ValueError("not a record")
            return cls(smoothed, at, readings)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):  # a bad encoding: a ValueError
            return cls()


_records: dict[str, LoadRecord] = {}  # per process, by file (or "" for none)
_lock = threading.Lock()


def record_at(folder: Path | str | None) -> LoadRecord:
    """The record kept for `folder` (its LOAD_FILE, when newer than this process's copy), or this process's own."""
    key = "" if folder is None else str(Path(folder) / LOAD_FILE)
    mine = _records.get(key, LoadRecord())
    if key:
        try:
            with open(key, "rb") as f:
                text = f.read(MAX_LOAD_FILE_BYTES + 1)
            stored = LoadRecord() if len(text) > MAX_LOAD_FILE_BYTES else LoadRecord.from_json(text)
            if stored.smoothed is not None and stored.at > mine.at:
                mine = stored
        except OSError:
            pass
    _records[key] = mine
    return mine


def _save(record: LoadRecord, folder: Path | str | None) -> None:
    """Write the record to the folder's LOAD_FILE (whole, by a rename); a store that cannot be written keeps it in
    this process only."""
    if folder is None:
        return
    path = Path(folder) / LOAD_FILE
    tmp = path.with_name(f".{LOAD_FILE}.{os.getpid()}.tmp")
    try:
        tmp.write_text(record.to_json())
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass


def slowdown(workers: int, folder: Path | str | None = None, others: float | None = None, now: float | None = None):
    """The Slowdown of the next minutes for `workers` runs at once: a reading of the machine now
    (cost_model.busy_cores, measured at most every PACE_TTL_SECONDS; or `others`, given) added to the record of
    `folder` (the store's; None: this process's only), and the record's smoothed value and range."""
    now = time.time() if now is None else now
    reading = cost_model.busy_cores() if others is None else others
    with _lock:
        record = record_at(folder)
        if reading is not None:
            record.add(reading, now)
            _save(record, folder)
        return record.slowdown(workers, cost_model.cores(), now)


@dataclass(frozen=True)
class WallEstimate:
    """Wall seconds of a sweep here: likely, within low to high (equal when the load has held)."""

    likely: float
    low: float
    high: float

    @property
    def varies(self) -> bool:
        return self.high > RANGE_FROM * self.low


def estimate(
    model: cost_model.CostModel, runs: Sequence[RunConfig], workers: int, folder: Path | str | None = None
) -> WallEstimate:
    """The wall time of `runs` on `workers` processes over the next minutes (model.wall_seconds at the Slowdown)."""
    s = slowdown(workers, folder)
    likely, low, high = (model.wall_seconds(list(runs), workers, x) for x in (s.likely, s.low, s.high))
    return WallEstimate(likely, low, high) if s.varies else WallEstimate(likely, likely, likely)


def about(w: WallEstimate) -> str:
    """'about 6 min', or 'about 12–25 min' while the load varies; 'under a second'."""
    if w.varies:
        return f"about {duration_span(w.low, w.high)}"
    return f"about {duration(w.likely)}" if w.likely >= 0.5 else "under a second"


def time_left(estimate_s: float | None, elapsed: float, finished: int, done: float, total: float) -> float | None:
    """Wall seconds a sweep still needs: after FINISHED_BEFORE_PACE finished runs, its own pace (`done` of `total`
    units of work, the runs' estimated computing, in `elapsed` seconds: the rest at that pace); before, the
    estimate less the time elapsed, or the pace so far once the estimate has run out (None with neither)."""
    paced = max(0.0, total - done) * elapsed / done if done > 0 and elapsed > 0 else None
    if finished >= FINISHED_BEFORE_PACE and paced is not None:
        return paced
    if estimate_s is None or (estimate_s <= elapsed and paced is not None):  # over the estimate: the pace so far
        return paced
    return max(0.0, estimate_s - elapsed)
