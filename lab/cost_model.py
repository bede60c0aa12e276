"""How long training runs take here, estimated before any of them is trained: a cost model of one step from the
run's shape and batch (multiply-adds, elementwise work, per-block overhead), calibrated once per process by timing
a few small probe runs on this machine, times the steps, plus the evaluation; and the wall time of a sweep of runs
on a number of worker processes. Imports attncore and NumPy (and joblib's loky, for a calibration in parallel).
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attncore import RunConfig, make_run
from attncore._blas import one_blas_thread
from attncore.config import INDUCTION
from attncore.snapshots import run_snapshot_steps
from attncore.train import Trainer

# The probes span what the coefficients tell apart: the fixed cost of a step, blocks, width, length, heads, batch.
PROBES = (
    dict(d_model=16, n_heads=2, n_layers=1, batch_size=8, length=4),
    dict(d_model=32, n_heads=4, n_layers=2, batch_size=32, length=6),  # the article's run
    dict(d_model=32, n_heads=4, n_layers=6, batch_size=32, length=6),
    dict(d_model=32, n_heads=4, n_layers=2, batch_size=32, length=12),
    dict(d_model=96, n_heads=2, n_layers=2, batch_size=32, length=6),
    dict(d_model=32, n_heads=16, n_layers=2, batch_size=64, length=6),
    dict(d_model=128, n_heads=1, n_layers=1, batch_size=16, length=6),
    dict(d_model=256, n_heads=4, n_layers=1, batch_size=16, length=6),  # products large enough for BLAS's pace
)
PROBE_STEPS = 3  # steps per timed chunk
PROBE_ROUNDS = 7  # chunks per probe: the fastest gives the model's shape, the median over the fastest its pace
EVAL_STEPS = 80  # the evaluation and the 20 snapshots (with their norms, issue 30.3) cost about this many steps
# an induction snapshot (held-out losses, the probe set's scores, the norms) costs about 5 steps, the final
# figures about 20 (measured on the default run: 424 steps' time beside 2,000 steps, 81 snapshots)
INDUCTION_SNAPSHOT_STEPS, INDUCTION_EVAL_STEPS = 5, 20


def eval_steps(run: RunConfig) -> int:
    """Steps' worth of time a run spends outside its training steps: evaluation and snapshots."""
    if run.task.name == INDUCTION:
        return INDUCTION_SNAPSHOT_STEPS * len(run_snapshot_steps(run)) + INDUCTION_EVAL_STEPS
    return EVAL_STEPS


def step_features(run: RunConfig) -> np.ndarray:
    """What one training step's time is linear in: [1, blocks, matmul multiply-adds, attention multiply-adds,
    elementwise values], averaged over the lengths a range-trained run draws from. The last block computes its
    keys and values on every position but the rest on the answer rows only (attncore.model), as counted here."""
    m, t = run.model, run.train
    B, n, d, f, H, V = t.batch_size, m.n_layers, m.d_model, m.d_ff, m.n_heads, m.vocab_size
    rows = []
    for length in range(run.task.min_length, run.task.length + 1):
        T, answers = 2 * length, length  # the tokens a step feeds the model, those with a loss
        if run.task.name == INDUCTION:
            T = answers = run.task.n_inputs  # a loss on every position
        queries = (n - 1) * T + answers  # rows past Q, K, V summed over the blocks: the last block's answers only
        matmul = B * (n * T * 3 * d * d + queries * (d * d + 2 * d * f) + answers * d * V)  # the unembedding
        attention = B * queries * T * d  # scores and the weighted sum
        elementwise = B * queries * (d + f) + B * H * queries * T  # norms, residuals, GELU; softmax
        rows.append([1.0, n, matmul, attention, elementwise])
    return np.mean(rows, axis=0)


def _probe_run(shape: dict) -> RunConfig:
    shape = dict(shape)
    return make_run("copy", shape.pop("length"), **shape)


def _time_probes() -> np.ndarray:
    """(PROBE_ROUNDS, probes) seconds per step of each timed chunk, the probes interleaved so a burst of other load
    does not land on one only."""
    trainers = [Trainer(_probe_run(p)) for p in PROBES]
    chunks = np.empty((PROBE_ROUNDS, len(PROBES)))
    with one_blas_thread():  # as attncore.train trains
        for trainer in trainers:
            trainer.step()  # the first step allocates
        for r in range(PROBE_ROUNDS):
            for i, trainer in enumerate(trainers):
                start = time.perf_counter()
                for _ in range(PROBE_STEPS):
                    trainer.step()
                chunks[r, i] = (time.perf_counter() - start) / PROBE_STEPS
    return chunks


def fit(features: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """Non-negative coefficients c with features @ c close to seconds in relative terms (least squares on each
    row divided by its time); a feature whose coefficient comes out negative is dropped and the rest refitted."""
    keep = list(range(features.shape[1]))
    weighted = features / seconds[:, None]
    while True:
        c, *_ = np.linalg.lstsq(weighted[:, keep], np.ones(len(seconds)), rcond=None)
        if (c >= 0).all() or len(keep) == 1:
            out = np.zeros(features.shape[1])
            out[keep] = np.maximum(c, 0)
            return out
        keep.pop(int(np.argmin(c)))


@dataclass(frozen=True)
class CostModel:
    coefficients: np.ndarray  # seconds per unit of each step feature
    probe_seconds: tuple[float, ...]  # what the calibration measured: each probe's median step
    calibration_seconds: float  # how long the calibration took

    def step_seconds(self, run: RunConfig) -> float:
        return float(step_features(run) @ self.coefficients)

    def run_seconds(self, run: RunConfig) -> float:
        """Seconds to train and evaluate `run` in one worker process."""
        return self.step_seconds(run) * (run.train.steps + eval_steps(run))

    def work_seconds(self, runs: Sequence[RunConfig]) -> float:
        """CPU seconds of training all the runs: what a view's budget counts."""
        return sum(self.run_seconds(r) for r in runs)

    def wall_seconds(self, runs: Sequence[RunConfig], workers: int) -> float:
        """Wall time of the runs trained in order on `workers` processes, each next run to the first one free."""
        free = [0.0] * max(1, min(workers, len(runs)))
        for run in runs:
            heapq.heappush(free, heapq.heappop(free) + self.run_seconds(run))
        return max(free) if runs else 0.0


def calibrate(workers: int = 1) -> CostModel:
    """Time the probes here (a second or two) and fit the step model. With workers > 1 the probes run in that many
    fresh processes at once, as a sweep's runs do, so the model sees what they cost each other (shared cores,
    caches and memory bandwidth); their chunks are pooled."""
    start = time.perf_counter()
    if workers <= 1:
        chunks = _time_probes()
    else:
        from joblib.externals.loky import ProcessPoolExecutor  # processes that do not re-run the caller's __main__

        with ProcessPoolExecutor(max_workers=workers) as pool:
            chunks = np.concatenate([job.result() for job in [pool.submit(_time_probes) for _ in range(workers)]])
    # Other load only ever adds time: the fastest chunks give the cost's shape (stable coefficients), and the
    # typical chunk over the fastest, the pace this machine keeps now, which scales the whole model.
    fastest, typical = chunks.min(axis=0), np.median(chunks, axis=0)
    pace = float(np.median(typical / fastest))
    features = np.array([step_features(_probe_run(p)) for p in PROBES])
    return CostModel(pace * fit(features, fastest), tuple(typical), time.perf_counter() - start)


_models: dict[int, CostModel] = {}
_calibrating = threading.Lock()  # one calibration at a time: two at once would time each other


def model(workers: int = 1) -> CostModel:
    """This process's cost model for runs trained `workers` at a time, calibrated on first use."""
    with _calibrating:
        if workers not in _models:
            _models[workers] = calibrate(workers)
        return _models[workers]
