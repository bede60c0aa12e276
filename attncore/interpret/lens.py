"""The logit lens (nostalgebraist 2020): the residual stream after each block read through the final LayerNorm
and the output head, as if the model stopped there; the last block's reading is the model's own output."""

from __future__ import annotations

import numpy as np

from ..config import RunConfig
from ..task import task_of
from .hooks import run_with_hooks, unembed


def _softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def lens_probabilities(params, run: RunConfig, tokens: np.ndarray) -> np.ndarray:
    """(n_layers + 1, B, A): probability of the correct answer token at each answer query (L..2L-1; the induction
    task's repeat k..2k-2), read from the embedding (row 0) and after each block (rows 1..n_layers) of inputs
    tokens (B, 2L) with their answers (Task.answer_queries, answer_tokens)."""
    tokens = np.atleast_2d(np.asarray(tokens))
    task = task_of(run.task)
    queries, answers = task.answer_queries(run.task), task.answer_tokens(run.task, tokens)  # (A,), (B, A)
    _, acts = run_with_hooks(params, tokens, run.model)
    streams = [acts["embed"]] + [acts[f"blocks.{i}.resid_post"] for i in range(run.model.n_layers)]
    out = []
    for resid in streams:
        probs = _softmax(unembed(params, resid[:, queries]).astype(np.float64))  # (B, A, V)
        out.append(np.take_along_axis(probs, answers[..., None], axis=-1)[..., 0])
    return np.stack(out)


def logit_lens(params, run: RunConfig, tokens: np.ndarray, n_test: int = 100) -> dict[str, np.ndarray]:
    """{"probe": (n_layers + 1, L) on `tokens` (2L,), "test": (n_layers + 1, L) the mean over the first n_test
    fixed test sequences (teacher-forced on their answers; the induction task: of its probe set, whose k is the
    probe's, so that the repeat's queries are the same positions)}."""
    tests = task_of(run.task).lens_inputs(run.task, n_test)
    return {
        "probe": lens_probabilities(params, run, tokens)[:, 0],
        "test": lens_probabilities(params, run, tests).mean(axis=1),
    }
