"""Looking inside a trained model: attention maps, per-head summaries, head ablation."""

from __future__ import annotations

import numpy as np

from .config import ConfigError, RunConfig
from .evaluate import EvalResult, evaluate
from .model import attention_weights
from .task import task_of


def parse_sequence(text: str, run: RunConfig) -> np.ndarray:
    """A user's symbols, e.g. "17 3 0 12 7 9", validated -> the model input with the task's answer (2L,), as the
    task reads them (Task.parse_input: the induction task's first copy, T/2 tokens from 0 to V - 1, -> the input
    (T - 1,) with that copy repeated).

    Raises ConfigError naming the field 'sequence' and the allowed values.
    """
    return task_of(run.task).parse_input(text, run.task)


def attention_maps(params, run: RunConfig, tokens: np.ndarray | None = None) -> np.ndarray:
    """Weights (n_layers, H, T, T) for one input (the task's probe by default)."""
    tokens = task_of(run.task).probe(run.task) if tokens is None else np.asarray(tokens)
    return attention_weights(params, tokens[None, :], run.model)[:, 0]


def head_summary(maps: np.ndarray, length: int, queries: np.ndarray | None = None) -> list[dict]:
    """Per head: the most-weighted key of each answer query (L..2L-1, or `queries`), its offset, and max weight."""
    rows = []
    n_layers, n_heads, T, _ = maps.shape
    queries = np.arange(length, T) if queries is None else np.asarray(queries)
    for layer in range(n_layers):
        for head in range(n_heads):
            w = maps[layer, head, queries]  # (L, T)
            keys = w.argmax(axis=-1)
            offsets = keys - queries
            rows.append(
                {
                    "layer": layer,
                    "head": head,
                    "keys": keys.tolist(),
                    "offsets": offsets.tolist(),
                    "constant_offset": int(offsets[0]) if np.all(offsets == offsets[0]) else None,
                    "mean_max_weight": float(w.max(axis=-1).mean()),
                }
            )
    return rows


def summary_of(maps: np.ndarray, run: RunConfig) -> list[dict]:
    """head_summary at the run's task's answer queries (Task.answer_queries)."""
    return head_summary(maps, run.task.length, task_of(run.task).answer_queries(run.task))


def head_mask_for(run: RunConfig, ablated: list[tuple[int, int]]) -> np.ndarray:
    """(n_layers, H) mask of ones with zeros at the ablated (layer, head) pairs."""
    mask = np.ones((run.model.n_layers, run.model.n_heads), dtype=run.model.dtype)
    for layer, head in ablated:
        if not (0 <= layer < run.model.n_layers and 0 <= head < run.model.n_heads):
            raise ConfigError(
                "heads", f"({layer}, {head}) is outside {run.model.n_layers} layers x {run.model.n_heads} heads"
            )
        mask[layer, head] = 0
    return mask


def evaluate_ablated(params, run: RunConfig, ablated: list[tuple[int, int]]) -> EvalResult:
    """Evaluation with the chosen heads' outputs zeroed: the intervention that attention maps are not."""
    return evaluate(params, run, head_mask=head_mask_for(run, ablated))
