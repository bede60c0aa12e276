"""Adam (Kingma & Ba) on one flat parameter buffer, with optional decoupled weight decay (AdamW, Loshchilov &
Hutter): a handful of vector operations a step."""

from __future__ import annotations

import math

import numpy as np

CHUNK = 1 << 15  # elements of each block of Adam's update (128 KiB of float32 per buffer: five fit a core's L2)


class Adam:
    """Bias-corrected Adam, written as torch.optim.Adam computes it; with weight_decay λ > 0, AdamW as
    torch.optim.AdamW computes it: every parameter of the buffer is first multiplied by 1 - lr·λ (lr the step's
    rate, so a schedule scales the decay too), then takes the Adam step. λ = 0 adds no operation."""

    def __init__(self, flat_params: np.ndarray, lr=3e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0):
        self.params = flat_params
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.weight_decay = weight_decay
        self.m = np.zeros_like(flat_params)
        self.v = np.zeros_like(flat_params)
        self._tmp = np.empty_like(flat_params)
        self.t = 0

    def step(self, grad: np.ndarray) -> None:
        """Update the parameters in place from the flat gradient.

        The buffer is walked in CHUNK-element blocks, every pass of the update over one block before the next, so
        a large model's update stays in the CPU's cache instead of streaming its buffers from memory a dozen
        times (what made a deep step cost more than its depth). Elementwise: the same bits for any CHUNK.
        """
        self.t += 1
        b1, b2 = self.beta1, self.beta2
        bias1 = 1 - b1**self.t
        bias2 = 1 - b2**self.t
        decay = 1 - self.lr * self.weight_decay  # AdamW's decoupled decay, before the Adam update
        for lo in range(0, self.params.size, CHUNK):
            hi = lo + CHUNK
            m, v, g, tmp = self.m[lo:hi], self.v[lo:hi], grad[lo:hi], self._tmp[lo:hi]
            if self.weight_decay:
                self.params[lo:hi] *= decay
            m *= b1
            m += (1 - b1) * g
            v *= b2
            np.multiply(g, g, out=tmp)
            tmp *= 1 - b2
            v += tmp
            np.sqrt(v, out=tmp)
            tmp *= 1 / math.sqrt(bias2)
            tmp += self.eps
            np.divide(m, tmp, out=tmp)
            tmp *= self.lr / bias1
            self.params[lo:hi] -= tmp


def lr_multiplier(step: int, steps: int, warmup: int = 0, decay: str = "none", min_lr_ratio: float = 0.0) -> float:
    """The learning rate of step t = 0 .. steps - 1 as a fraction of lr (docs/training.md).

    Linear warm-up over W steps: min(1, (t + 1)/W). After it, decay to r = min_lr_ratio at the last step
    T - 1 along a straight line (linear) or half a cosine (cosine); 1 with decay none.
    """
    if step < warmup:
        return (step + 1) / warmup
    if decay == "none":
        return 1.0
    span = steps - 1 - warmup
    progress = (step - warmup) / span if span > 0 else 1.0  # 0 at the first step after warm-up, 1 at the last
    if decay == "linear":
        return min_lr_ratio + (1 - min_lr_ratio) * (1 - progress)
    return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def lr_schedule(train) -> list[float] | None:
    """Each step's learning rate of a TrainConfig, or None without a schedule (lr at every step)."""
    if not train.warmup and train.decay == "none":
        return None
    t = train
    return [t.lr * lr_multiplier(s, t.steps, t.warmup, t.decay, t.min_lr_ratio) for s in range(t.steps)]
