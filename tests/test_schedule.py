"""The learning-rate schedule (docs/training.md): warm-up and decay as multipliers of lr, and what a run does with them.

The PyTorch oracle (LambdaLR over Adam) is in test_oracle.py; here, the shape of the schedule itself.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from attncore.config import make_run
from attncore.optim import lr_multiplier, lr_schedule
from attncore.train import Trainer


def test_without_a_schedule_every_step_has_lr():
    assert lr_schedule(make_run().train) is None
    assert all(lr_multiplier(t, 100) == 1.0 for t in range(100))


def test_warm_up_rises_linearly_to_lr_and_stays():
    m = [lr_multiplier(t, 100, warmup=10) for t in range(100)]
    assert m[0] == pytest.approx(0.1) and m[4] == pytest.approx(0.5)
    assert m[9] == 1.0 and set(m[9:]) == {1.0}
    assert np.all(np.diff(m[:10]) > 0)


@pytest.mark.parametrize("decay", ["linear", "cosine"])
@pytest.mark.parametrize("r", [0.0, 0.1])
def test_decay_starts_at_lr_after_warm_up_and_ends_at_r_at_the_last_step(decay, r):
    T, W = 101, 20
    m = [lr_multiplier(t, T, W, decay, r) for t in range(T)]
    assert m[W - 1] == 1.0 and m[W] == pytest.approx(1.0)  # continuous at the end of the warm-up
    assert m[-1] == pytest.approx(r, abs=1e-15)
    assert np.all(np.diff(m[W:]) <= 1e-15)  # never rises after the warm-up
    middle = W + (T - 1 - W) // 2  # half way through the decay: both are half way between 1 and r
    assert m[middle] == pytest.approx(r + (1 - r) / 2)
    quarter = W + (T - 1 - W) // 4
    expected = r + (1 - r) * (0.75 if decay == "linear" else 0.5 * (1 + math.cos(math.pi / 4)))
    assert m[quarter] == pytest.approx(expected)


def test_a_warm_up_of_every_step_never_decays():
    assert [lr_multiplier(t, 5, 5, "cosine", 0.0) for t in range(5)] == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])


def test_the_trainer_takes_each_steps_learning_rate_from_the_schedule():
    run = make_run("copy", 3, steps=12, batch_size=4, d_model=8, n_heads=2, warmup=4, decay="linear")
    trainer, seen = Trainer(run), []
    for _ in range(run.train.steps):
        trainer.step()
        seen.append(trainer.opt.lr)
    assert seen == lr_schedule(run.train)
    assert seen[0] == pytest.approx(run.train.lr / 4) and seen[-1] == 0.0


def test_adams_update_is_the_same_bits_in_any_block_size(monkeypatch):
    """Adam walks its buffer in cache-sized blocks (optim.CHUNK); elementwise, so any block size gives the same bits."""
    from attncore import optim

    rng = np.random.default_rng(3)
    start = rng.standard_normal(100_003).astype(np.float32)
    grads = [(rng.standard_normal(start.size) * 10.0 ** rng.uniform(-6, 1, start.size)).astype(np.float32)]
    grads += [g * 0.5 for g in grads * 3]
    results = []
    for chunk in (7, 4096, 1 << 20):
        monkeypatch.setattr(optim, "CHUNK", chunk)
        opt = optim.Adam(start.copy(), lr=1e-2)
        for g in grads:
            opt.step(g)
        results.append(opt.params)
    assert not np.array_equal(results[0], start)
    assert all(np.array_equal(results[0], r) for r in results[1:])
