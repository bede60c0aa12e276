"""Training snapshots: at ~20 log-spaced steps, the probe's attention and the greedy accuracy
on a fixed subset of the test set, recorded by `train` without touching its weights or batch stream. Each task
says when and how (Task.snapshot_steps, Task.snapshot_scores): the induction task's are every 25 steps (its phase
change needs the curve), with its losses and head scores as the snapshot's figures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import RunConfig, check_int
from .inspect import attention_maps
from .task import task_of

N_SNAPSHOTS = 20  # steps asked of snapshot_steps; fewer remain after deduplication on short runs
SNAPSHOT_N_TEST = 100  # a snapshot scores the first 100 of the 500 fixed test sequences
FIRST_FRACTION = 0.01  # the first snapshot at ~1% of the steps (step 1 for runs under 150 steps)


@dataclass(frozen=True)
class Snapshot:
    """The model after `step` Adam steps (1..steps; the last one is the final weights)."""

    step: int
    token_accuracy: float  # greedy generation on the first SNAPSHOT_N_TEST test sequences
    sequence_accuracy: float
    probe_attention: np.ndarray  # (n_layers, H, 2L, 2L) attention weights on the task's probe (T - 1 for induction)
    figures: dict | None = None  # the task's own figures (Task.snapshot_shapes' names); None for the article's tasks

    def summary(self) -> dict:
        """JSON-able scalars: {step, token_accuracy, sequence_accuracy} (and the task's figures)."""
        out = {"step": self.step, "token_accuracy": self.token_accuracy, "sequence_accuracy": self.sequence_accuracy}
        if self.figures is not None:
            out |= {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in self.figures.items()}
        return out


def snapshot_steps(steps: int, n: int = N_SNAPSHOTS) -> list[int]:
    """About n steps in 1..steps, evenly spaced on a log scale, increasing and distinct.

    The first is round(1% of steps) (at least 1, so within the first 10% whenever steps >= 10), the
    last is `steps`; rounding merges the close early steps of short runs (steps <= n gives 1..steps).
    """
    check_int("steps", steps, 1, 1_000_000)
    check_int("n", n, 1, 1000)
    first = max(1, round(FIRST_FRACTION * steps))
    points = np.rint(np.geomspace(first, steps, n)).astype(int) if n > 1 else np.array([steps])
    return sorted({int(p) for p in points} | {steps})


def run_snapshot_steps(run: RunConfig) -> list[int]:
    """The steps a run's training takes its snapshots at: its task's (snapshot_steps, or the induction task's
    every 25)."""
    return task_snapshot_steps(run.task.name, run.train.steps)


def task_snapshot_steps(task: str, steps: int) -> list[int]:
    """run_snapshot_steps of a run of this task and steps."""
    return task_of(task).snapshot_steps(steps)


def take_snapshot(params, run: RunConfig, step: int) -> Snapshot:
    """Score `params` on the snapshot subset and record the probe's attention; reads params only."""
    maps = attention_maps(params, run)
    token_accuracy, sequence_accuracy, figures = task_of(run.task).snapshot_scores(params, run)
    return Snapshot(step, token_accuracy, sequence_accuracy, maps, figures)


def stack(snapshots: list[Snapshot]) -> dict[str, np.ndarray]:
    """Snapshots -> arrays for storage: step (S,), token_accuracy (S,), sequence_accuracy (S,),
    probe_attention (S, n_layers, H, 2L, 2L); snapshots with figures also each figure stacked (S, ...) in float64
    (Task.snapshot_shapes: the induction task's scalars (S,), its head scores (S, n_layers, H))."""
    if not snapshots:
        raise ValueError("no snapshots to stack")
    out = {
        "step": np.array([s.step for s in snapshots], dtype=np.int64),
        "token_accuracy": np.array([s.token_accuracy for s in snapshots], dtype=np.float64),
        "sequence_accuracy": np.array([s.sequence_accuracy for s in snapshots], dtype=np.float64),
        "probe_attention": np.stack([s.probe_attention for s in snapshots]),
    }
    if snapshots[0].figures is not None:
        for name in snapshots[0].figures:
            out[name] = np.array([s.figures[name] for s in snapshots], dtype=np.float64)
    return out


STACKED = ("step", "token_accuracy", "sequence_accuracy", "probe_attention")  # the arrays of every snapshot


def unstack(arrays: dict[str, np.ndarray]) -> list[Snapshot]:
    """The inverse of `stack` (arrays as stored), checking that the arrays agree in length."""
    steps = np.asarray(arrays["step"])
    tok, seq, att = (np.asarray(arrays[k]) for k in ("token_accuracy", "sequence_accuracy", "probe_attention"))
    if not (
        steps.ndim == tok.ndim == seq.ndim == 1 and att.ndim == 5 and len(steps) == len(tok) == len(seq) == len(att)
    ):
        raise ValueError("snapshot arrays disagree in shape")
    names = [name for name in arrays if name not in STACKED]  # the task's figures, in the order stacked
    figures = [None] * len(steps)
    if names:
        found = {name: np.asarray(arrays[name], dtype=np.float64) for name in names}
        if any(a.ndim < 1 or len(a) != len(steps) for a in found.values()):
            raise ValueError("snapshot arrays disagree in shape")
        figures = [{k: float(a[i]) if a.ndim == 1 else a[i] for k, a in found.items()} for i in range(len(steps))]
    return [
        Snapshot(int(s), float(t), float(q), a, f) for s, t, q, a, f in zip(steps, tok, seq, att, figures, strict=True)
    ]
