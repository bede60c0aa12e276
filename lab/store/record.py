"""What one run is: its record (RunRecord), how it is computed (compute_run), and the numerics version.

The bottom of the store: imports attncore, threadpoolctl and lab.provenance (where the numbers came from) only.
The store's format, backend, index and checks build on it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from attncore.config import RunConfig
from attncore.evaluate import EvalResult, evaluate
from attncore.evaluate import test_loss as measure_test_loss
from attncore.inspect import attention_maps
from attncore.interpret import norms
from attncore.snapshots import Snapshot
from attncore.task import task_of
from attncore.train import train
from lab import provenance

# Bump whenever the numbers a run produces would change (model, training, tasks, evaluation).
# joblib only hashes the source of the cached function itself, never of the helpers it calls.
NUMERICS_VERSION = 6  # 2: cross-entropy row sums as a matrix product; 3: float32 scores scaled by a float32 1/sqrt(d_k)
# 4: each initial tensor drawn from its own (seed, name) stream; batches unchanged
# 5: records carry training snapshots: accuracy and probe attention at ~20 log-spaced steps
# 6: a padded (--mixed-lengths) batch computes its real positions only, packed, and the last block each
#    sequence's answer rows (model.AnswerRows): mixed-length runs round differently; others unchanged


class CacheWarning(UserWarning):
    """A cache entry failed its checks and was recomputed, or a run could not be stored."""


class NotStoredWarning(CacheWarning):
    """A run was computed but the store could not keep it (a full disk, a read-only folder); `reason` says why in a
    few words (the system's, e.g. "No space left on device"), for a page to show without the store's paths."""

    def __init__(self, message: str, reason: str = ""):
        super().__init__(message)
        self.reason = reason


_python_format = warnings.formatwarning


def _format_warning(message, category, filename, lineno, line=None) -> str:
    """A CacheWarning prints as one plain line ('warning: ...'), not with Python's file path and source line."""
    if isinstance(category, type) and issubclass(category, CacheWarning):
        return f"warning: {message}\n"
    return _python_format(message, category, filename, lineno, line)


warnings.formatwarning = _format_warning


@dataclass
class RunRecord:
    """What the pages need from one trained run, without retraining."""

    config: RunConfig
    loss_history: np.ndarray  # (steps,) training loss at every step
    final_loss: float
    eval: EvalResult
    train_seconds: float
    n_params: int
    probe_tokens: np.ndarray  # (2L,) the probe input (attncore.tasks.probe_sequence)
    probe_attention: np.ndarray  # (n_layers, H, 2L, 2L) attention weights on the probe
    params: dict[str, np.ndarray]  # the trained weights, for head ablation and custom sequences
    snapshots: list[Snapshot] = field(default_factory=list)  # at snapshot_steps(steps), in step order
    platform: dict | None = None  # lab.provenance.current() where it was computed (None: made up in memory, unstored)
    test_loss: float | None = None  # attncore.evaluate.test_loss; None: stored before it was kept
    norms: list[dict] | None = None  # attncore.interpret.norms at each snapshot; None: stored before they were
    figures: dict | None = None  # the task's final figures (Task.metrics, in the summary); None without metrics

    def held_out_loss(self) -> float:
        """The test loss (teacher-forced, on the fixed test set); a record stored before it was kept computes it from
        its stored weights on first use and keeps it (the same bits compute_run would have stored)."""
        if self.test_loss is None:
            self.test_loss = measure_test_loss(self.params, self.config)
        return self.test_loss

    def summary(self) -> dict:
        """JSON-able scalars (no loss history, no arrays): the keys of `train --json`; NaN becomes None."""
        e = self.eval

        def number(x: float) -> float | None:  # NaN (no sequence of a kind, e.g. L = 1) is not JSON
            return None if np.isnan(x) else float(x)

        return {
            "config": self.config.to_dict(),
            "final_loss": float(self.final_loss),
            "test_loss": float(self.held_out_loss()),
            "token_accuracy": e.token_accuracy,
            "sequence_accuracy": e.sequence_accuracy,
            "distinct_accuracy": number(e.distinct_accuracy),
            "n_distinct": e.n_distinct,
            "repeated_accuracy": number(e.repeated_accuracy),
            "n_repeated": e.n_repeated,
            "n_params": int(self.n_params),
            "train_seconds": float(self.train_seconds),
            "eval_seconds": e.eval_seconds,
            "platform": self.platform,
        } | (self.figures or {})


def compute_run(run: RunConfig, callback: Callable[[int, float], object] | None = None) -> RunRecord:
    """Train, evaluate by greedy generation, and record the probe's attention; no cache.

    BLAS is pinned to one thread: at these sizes a second thread only adds contention (a 100-step
    run took 0.3-0.4 s on one thread and 0.3-2.6 s on two), and a sweep runs one process per core.
    """
    with threadpool_limits(limits=1, user_api="blas"):
        result = train(run, callback, on_snapshot=norms.at_snapshots(run))
        platform = provenance.current(run.model.dtype)
        task = task_of(run.task)
        tokens = task.probe(run.task)  # (2L,)
        final = task.final_figures(result.params, run)  # the induction task's: on all its held-out sequences
        return RunRecord(
            config=run,
            loss_history=result.loss_history,
            final_loss=result.final_loss,
            eval=evaluate(result.params, run),
            train_seconds=result.train_seconds,
            n_params=result.n_params,
            probe_tokens=tokens,
            probe_attention=attention_maps(result.params, run, tokens),
            params=result.params,
            snapshots=result.snapshots,
            platform=platform,
            test_loss=measure_test_loss(result.params, run),
            norms=result.measured,
            figures=final,
        )


def describe(run: RunConfig) -> str:
    m, t = run.model, run.train
    return f"{run.task.name} L={run.task.length} seed={t.seed} position={m.position} norm={m.norm} lr={t.lr:g}"
