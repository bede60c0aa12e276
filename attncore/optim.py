"""Adam (Kingma & Ba) on one flat parameter buffer: a handful of vector operations a step."""

from __future__ import annotations

import math

import numpy as np


class Adam:
    """Bias-corrected Adam, no weight decay, written as torch.optim.Adam computes it."""

    def __init__(self, flat_params: np.ndarray, lr=3e-3, beta1=0.9, beta2=0.999, eps=1e-8):
        self.params = flat_params
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.m = np.zeros_like(flat_params)
        self.v = np.zeros_like(flat_params)
        self._tmp = np.empty_like(flat_params)
        self.t = 0

    def step(self, grad: np.ndarray) -> None:
        """Update the parameters in place from the flat gradient."""
        self.t += 1
        b1, b2, tmp = self.beta1, self.beta2, self._tmp
        self.m *= b1
        self.m += (1 - b1) * grad
        self.v *= b2
        np.multiply(grad, grad, out=tmp)
        tmp *= 1 - b2
        self.v += tmp
        bias1 = 1 - b1**self.t
        bias2 = 1 - b2**self.t
        np.sqrt(self.v, out=tmp)
        tmp *= 1 / math.sqrt(bias2)
        tmp += self.eps
        np.divide(self.m, tmp, out=tmp)
        tmp *= self.lr / bias1
        self.params -= tmp
