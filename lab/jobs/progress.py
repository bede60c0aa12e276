"""The progress file a page and its training worker share, and the training the worker runs (in a worker process,
so a run never holds the server's GIL; no streamlit import: workers stay light).

The file is memory-mapped: slot 0 is the page's cancel flag, slot 1 + step the loss of each step as it trains
(NaN: not trained yet).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np

from attncore import RunConfig
from attncore._malloc import release_freed_memory
from lab.store import NotStoredWarning, RunRecord, get_run


class Cancelled(Exception):
    """The page asked the worker to stop; raised out of training, so the store keeps nothing."""

    def __init__(self, steps_done: int):
        super().__init__(steps_done)
        self.steps_done = steps_done

    def __str__(self) -> str:
        return f"cancelled after {self.steps_done:,} steps"


def open_progress(path: Path, steps: int, create: bool = False) -> np.memmap:
    """The (1 + steps,) float64 progress file: [cancel flag, loss of step 0, loss of step 1, ...]."""
    progress = np.memmap(path, dtype=np.float64, mode="w+" if create else "r+", shape=(1 + steps,))
    if create:
        progress[0] = 0.0
        progress[1:] = np.nan
    return progress


def request_cancel(progress: np.memmap) -> None:
    """Ask the worker training into this file to stop at its next step."""
    progress[0] = 1.0
    progress.flush()


def losses_so_far(progress: np.memmap) -> np.ndarray:
    """The trained prefix of the losses (steps are written in order)."""
    losses = progress[1:]
    missing = np.isnan(losses)
    return np.array(losses[: missing.argmax() if missing.any() else len(losses)])


def train_with_progress(
    run: RunConfig, location: str, progress_path: str, keep=(), max_bytes: int | None = None
) -> RunRecord:
    """lab.store.get_run in this process, each step's loss written to progress_path as it trains.

    The cap pass after storing takes the page's cap (`max_bytes`: lab.jobs.limits' max_store_mb, secrets.toml
    included; else lab.limits' reading of the same) and never evicts `keep`, the rest of the page's view.
    Raises Cancelled once the page sets the flag (or when its progress file is already gone: the page
    that asked went away before this started).
    """
    try:
        progress = open_progress(Path(progress_path), run.train.steps)
    except OSError:
        raise Cancelled(0) from None

    def on_step(step: int, loss: float) -> None:
        progress[1 + step] = loss
        if progress[0] != 0.0:
            raise Cancelled(step + 1)

    try:
        return get_run(run, callback=on_step, location=location, keep=keep, max_bytes=max_bytes)
    finally:
        release_freed_memory()  # the run's heap back to the system (lab.sweep's workers do the same)


class Trained(NamedTuple):
    """A live training's answer to its page: the record, and why the store could not keep it (None: stored)."""

    record: RunRecord
    not_stored: str | None


def train_and_store(
    run: RunConfig, location: str, progress_path: str, keep=(), max_bytes: int | None = None
) -> Trained:
    """train_with_progress, and the reason the store refused the run if it did (a full disk, a read-only folder), so
    the page can say so: the worker's warnings reach only the server's log. They are still written there."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            record = train_with_progress(run, location, progress_path, keep, max_bytes)
        finally:
            seen = list(caught)
    for w in seen:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    reasons = [w.message.reason or "the store refused it" for w in seen if isinstance(w.message, NotStoredWarning)]
    return Trained(record, reasons[0] if reasons else None)
