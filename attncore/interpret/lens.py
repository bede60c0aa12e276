"""The logit lens (nostalgebraist 2020): the residual stream after each block read through the final LayerNorm
and the output head, as if the model stopped there; the last block's reading is the model's own output."""

from __future__ import annotations

import numpy as np

from ..config import RunConfig
from ..tasks import make_sequences, test_set
from .hooked import run_with_hooks, unembed


def _softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def lens_probabilities(params, run: RunConfig, tokens: np.ndarray) -> np.ndarray:
    """(n_layers + 1, B, L): probability of the correct answer token at each answer query L..2L-1, read from the
    embedding (row 0) and after each block (rows 1..n_layers) of inputs tokens (B, 2L) with their answers."""
    L, tokens = run.task.length, np.atleast_2d(np.asarray(tokens))
    answers = make_sequences(tokens[:, :L], run.task.name)[:, L + 1 :]  # (B, L)
    _, acts = run_with_hooks(params, tokens, run.model)
    streams = [acts["embed"]] + [acts[f"blocks.{i}.resid_post"] for i in range(run.model.n_layers)]
    out = []
    for resid in streams:
        probs = _softmax(unembed(params, resid[:, L:]).astype(np.float64))  # (B, L, V)
        out.append(np.take_along_axis(probs, answers[..., None], axis=-1)[..., 0])
    return np.stack(out)


def logit_lens(params, run: RunConfig, tokens: np.ndarray, n_test: int = 100) -> dict[str, np.ndarray]:
    """{"probe": (n_layers + 1, L) on `tokens` (2L,), "test": (n_layers + 1, L) the mean over the first n_test
    fixed test sequences (teacher-forced on their answers)}."""
    tests = test_set(run.task)[:n_test, :-1]
    return {
        "probe": lens_probabilities(params, run, tokens)[:, 0],
        "test": lens_probabilities(params, run, tests).mean(axis=1),
    }
