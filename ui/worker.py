"""Training in a worker process, so a run never holds the server's GIL (no streamlit import: workers stay light).

The worker writes each step's loss into a shared memory-mapped file; the page reads it to draw the live curve.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attncore import RunConfig
from lab.store import RunRecord, get_run


def open_progress(path: Path, steps: int, create: bool = False) -> np.memmap:
    """The (steps,) float64 losses file; NaN marks steps not trained yet."""
    losses = np.memmap(path, dtype=np.float64, mode="w+" if create else "r+", shape=(steps,))
    if create:
        losses[:] = np.nan
    return losses


def losses_so_far(losses: np.memmap) -> np.ndarray:
    """The trained prefix of the progress file (steps are written in order)."""
    missing = np.isnan(losses)
    return np.array(losses[: missing.argmax() if missing.any() else len(losses)])


def train_with_progress(run: RunConfig, location: str, progress_path: str) -> RunRecord:
    """lab.store.get_run in this process, each step's loss written to progress_path as it trains."""
    try:
        losses = open_progress(Path(progress_path), run.train.steps)
    except OSError:  # the page that asked went away before we started: train all the same, for the cache
        losses = np.full(run.train.steps, np.nan)

    def on_step(step: int, loss: float) -> None:
        losses[step] = loss

    return get_run(run, callback=on_step, location=location)
