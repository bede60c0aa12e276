"""Training: a RunConfig in, a TrainResult out (SPEC §6, §7). A pure function of the config."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ._malloc import keep_freed_memory
from .config import RunConfig
from .model import flatten, init_params, loss_and_grads, param_shapes, unflatten
from .optim import Adam
from .tasks import sample_batch


@dataclass
class TrainResult:
    config: RunConfig
    loss_history: np.ndarray  # (steps,) float64, the training loss at every step
    params: dict[str, np.ndarray]
    train_seconds: float

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
        self.opt = Adam(flat, tc.lr, tc.beta1, tc.beta2, tc.eps)

    def step(self) -> float:
        """One step on a fresh batch; returns its loss."""
        run = self.run
        batch = sample_batch(run.task, run.train.batch_size, self.data_rng)
        loss, _ = loss_and_grads(self.params, batch, run.model, run.task.length, self.grads)
        self.opt.step(self.grad_flat)
        return loss


def train(run: RunConfig, callback: Callable[[int, float], object] | None = None) -> TrainResult:
    """Train the model of `run` on fresh batches every step with Adam.

    callback(step, loss) is called after every step (a progress bar, a live curve).
    """
    trainer = Trainer(run)
    history = np.empty(run.train.steps)
    start = time.perf_counter()
    gc_was_enabled = gc.isenabled()
    gc.disable()  # a step makes no reference cycles; collections would only cost time
    try:
        for step in range(run.train.steps):
            history[step] = trainer.step()
            if callback is not None:
                callback(step, history[step])
    finally:
        if gc_was_enabled:
            gc.enable()
    seconds = time.perf_counter() - start
    return TrainResult(run, history, {k: v.copy() for k, v in trainer.params.items()}, seconds)
