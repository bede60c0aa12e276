"""Evaluation by true greedy generation on the fixed test set (SPEC §7)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np

from .config import RunConfig
from .model import generate
from .tasks import N_TEST, all_distinct, test_set


@dataclass(frozen=True)
class EvalResult:
    token_accuracy: float
    sequence_accuracy: float
    distinct_accuracy: float  # per-sequence accuracy where all L symbols differ
    n_distinct: int
    repeated_accuracy: float  # ... where some symbol repeats
    n_repeated: int
    eval_seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


def _mean(x: np.ndarray) -> float:
    return float(x.mean()) if x.size else float("nan")


def evaluate(params, run: RunConfig, *, head_mask=None, n: int = N_TEST) -> EvalResult:
    """Feed the model its own greedy outputs (KV-cached) and score the L answer tokens."""
    start = time.perf_counter()
    L = run.task.length
    seqs = test_set(run.task, n)
    tokens, _ = generate(params, seqs[:, : L + 1], L, run.model, head_mask=head_mask)
    correct = tokens == seqs[:, L + 1 :]  # (n, L)
    whole = correct.all(axis=1)
    distinct = all_distinct(seqs[:, :L])
    return EvalResult(
        token_accuracy=float(correct.mean()),
        sequence_accuracy=float(whole.mean()),
        distinct_accuracy=_mean(whole[distinct]),
        n_distinct=int(distinct.sum()),
        repeated_accuracy=_mean(whole[~distinct]),
        n_repeated=int((~distinct).sum()),
        eval_seconds=time.perf_counter() - start,
    )
