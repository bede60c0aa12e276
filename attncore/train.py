"""Training: a RunConfig in, a TrainResult out. A pure function of the config."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ._blas import one_blas_thread
from ._malloc import keep_freed_memory
from .config import RunConfig
from .model import flatten, init_params, loss_and_grads, param_shapes, unflatten
from .optim import Adam, lr_schedule
from .sequences import draw_positions
from .snapshots import Snapshot, run_snapshot_steps, take_snapshot
from .task import task_of


@dataclass
class TrainResult:
    config: RunConfig
    loss_history: np.ndarray  # (steps,) float64, the training cross-entropy at every step (without a z-loss term)
    params: dict[str, np.ndarray]
    train_seconds: float  # the training steps only, without the snapshots
    snapshots: list[Snapshot] = field(default_factory=list)  # in step order; empty with snapshots=False
    snapshot_seconds: float = 0.0  # time spent taking the snapshots (and measuring them, with on_snapshot)
    measured: list = field(default_factory=list)  # on_snapshot's result at each snapshot, in step order

    @property
    def final_loss(self) -> float:
        return float(self.loss_history[-1])

    @property
    def n_params(self) -> int:
        return sum(a.size for a in self.params.values())


def batch_rng(seed: int) -> np.random.Generator:
    """The training batches' stream: branch 1 of the seed, independent of the model variant."""
    return np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[1])


def initial_params(run: RunConfig) -> dict[str, np.ndarray]:
    """A run's initial weights (name -> array): each tensor from its own (seed, name) stream."""
    return init_params(run.model, run.train.seed)


class Trainer:
    """One training run's state: weights and gradients (views of flat buffers), Adam, the batch stream.

    `step()` draws a fresh batch and takes one Adam step; `train` runs it `steps` times (the speed
    benchmark drives it in chunks, interleaved with PyTorch).
    """

    def __init__(self, run: RunConfig):
        keep_freed_memory()
        self.run = run
        cfg, tc = run.model, run.train
        self.data_rng = batch_rng(tc.seed)
        shapes = param_shapes(cfg)
        flat = flatten(initial_params(run), shapes)
        self.params = unflatten(flat, shapes)
        self.grad_flat = np.empty_like(flat)
        self.grads = unflatten(self.grad_flat, shapes)
        self.opt = Adam(flat, tc.lr, tc.beta1, tc.beta2, tc.eps, tc.weight_decay)
        self.lrs = lr_schedule(tc)  # each step's learning rate, None without warm-up or decay (lr throughout)

    def step(self) -> float:
        """One step on a fresh batch; returns its loss.

        A range-trained run draws its length (or, mixed, each sequence's length) from the batch stream first;
        randomized positions are drawn from it after the batch. The article's run draws the batch only. The
        induction task's loss is on every position (answer_len = T - 1), the others' on the L answer tokens.
        """
        run, rng = self.run, self.data_rng
        task, n_max = run.task, run.train.randomized_positions
        batch, lengths, n = task_of(task).train_batch(task, run.train.batch_size, rng)
        positions = None if n_max is None else draw_positions(rng, batch.shape[1] - 1, n_max)
        loss, _ = loss_and_grads(
            self.params, batch, run.model, n, self.grads, positions=positions, lengths=lengths, z_loss=run.train.z_loss
        )
        if self.lrs is not None:
            self.opt.lr = self.lrs[self.opt.t]  # opt.t: the steps taken before this one
        self.opt.step(self.grad_flat)
        return loss


def train(
    run: RunConfig,
    callback: Callable[[int, float], object] | None = None,
    *,
    snapshots: bool = True,
    on_snapshot: Callable[[dict, int], object] | None = None,
) -> TrainResult:
    """Train the model of `run` on fresh batches every step with Adam.

    callback(step, loss) is called after every step (a progress bar, a live curve). With snapshots
    (the default) the weights after each step of `run_snapshot_steps(run)` are scored and their probe
    attention kept (attncore.snapshots); that reads the weights only and draws no batch, so the loss
    history and the final weights are bit-identical with snapshots=False. on_snapshot(params, step), when given,
    is called there too (it must only read the weights) and its results are kept in `measured`.

    BLAS runs on one thread for the whole call (attncore._blas), restored after: OpenBLAS splits a product
    differently over 1 and 2 threads, and the bits must not depend on the thread count the process inherits.
    """
    with one_blas_thread():
        return _train(run, callback, snapshots, on_snapshot)


def _train(run: RunConfig, callback, snapshots: bool, on_snapshot) -> TrainResult:
    trainer = Trainer(run)
    history = np.empty(run.train.steps)
    at = set(run_snapshot_steps(run)) if snapshots else set()
    taken: list[Snapshot] = []
    measured = []
    snapshot_seconds = 0.0
    start = time.perf_counter()
    gc_was_enabled = gc.isenabled()
    gc.disable()  # a step makes no reference cycles; collections would only cost time
    try:
        for step in range(run.train.steps):
            history[step] = trainer.step()
            if step + 1 in at:  # the weights after step + 1 Adam steps
                t0 = time.perf_counter()
                taken.append(take_snapshot(trainer.params, run, step + 1))
                if on_snapshot is not None:
                    measured.append(on_snapshot(trainer.params, step + 1))
                snapshot_seconds += time.perf_counter() - t0
            if callback is not None:
                callback(step, history[step])
    finally:
        if gc_was_enabled:
            gc.enable()
    seconds = time.perf_counter() - start - snapshot_seconds
    params = {k: v.copy() for k, v in trainer.params.items()}
    return TrainResult(run, history, params, seconds, taken, snapshot_seconds, measured)
