"""Training snapshots (issue 14.1): at ~20 log-spaced steps, the probe's attention and the greedy accuracy
on a fixed subset of the test set, recorded by `train` without touching its weights or batch stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import RunConfig, check_int
from .evaluate import evaluate
from .inspect import attention_maps

N_SNAPSHOTS = 20  # steps asked of snapshot_steps; fewer remain after deduplication on short runs
SNAPSHOT_N_TEST = 100  # a snapshot scores the first 100 of the 500 fixed test sequences
FIRST_FRACTION = 0.01  # the first snapshot at ~1% of the steps (step 1 for runs under 150 steps)


@dataclass(frozen=True)
class Snapshot:
    """The model after `step` Adam steps (1..steps; the last one is the final weights)."""

    step: int
    token_accuracy: float  # greedy generation on the first SNAPSHOT_N_TEST test sequences
    sequence_accuracy: float
    probe_attention: np.ndarray  # (n_layers, H, 2L, 2L) attention weights on the task's probe

    def summary(self) -> dict:
        """JSON-able scalars: {step, token_accuracy, sequence_accuracy}."""
        return {"step": self.step, "token_accuracy": self.token_accuracy, "sequence_accuracy": self.sequence_accuracy}


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


def take_snapshot(params, run: RunConfig, step: int) -> Snapshot:
    """Score `params` on the snapshot subset and record the probe's attention; reads params only."""
    scores = evaluate(params, run, n=SNAPSHOT_N_TEST)
    return Snapshot(step, scores.token_accuracy, scores.sequence_accuracy, attention_maps(params, run))


def stack(snapshots: list[Snapshot]) -> dict[str, np.ndarray]:
    """Snapshots -> arrays for storage: step (S,), token_accuracy (S,), sequence_accuracy (S,),
    probe_attention (S, n_layers, H, 2L, 2L)."""
    if not snapshots:
        raise ValueError("no snapshots to stack")
    return {
        "step": np.array([s.step for s in snapshots], dtype=np.int64),
        "token_accuracy": np.array([s.token_accuracy for s in snapshots], dtype=np.float64),
        "sequence_accuracy": np.array([s.sequence_accuracy for s in snapshots], dtype=np.float64),
        "probe_attention": np.stack([s.probe_attention for s in snapshots]),
    }


def unstack(arrays: dict[str, np.ndarray]) -> list[Snapshot]:
    """The inverse of `stack` (arrays as stored), checking that the four arrays agree in length."""
    steps = np.asarray(arrays["step"])
    tok, seq, att = (np.asarray(arrays[k]) for k in ("token_accuracy", "sequence_accuracy", "probe_attention"))
    if not (
        steps.ndim == tok.ndim == seq.ndim == 1 and att.ndim == 5 and len(steps) == len(tok) == len(seq) == len(att)
    ):
        raise ValueError("snapshot arrays disagree in shape")
    return [Snapshot(int(s), float(t), float(q), a) for s, t, q, a in zip(steps, tok, seq, att, strict=True)]
