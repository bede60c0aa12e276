"""Looking inside a trained model: its answer to one input, attention maps, per-head summaries, head ablation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import ConfigError, RunConfig
from .evaluate import EvalResult, evaluate
from .model import attention_weights, forward, generate
from .task import task_of


def parse_sequence(text: str, run: RunConfig) -> np.ndarray:
    """A user's symbols, e.g. "17 3 0 12 7 9", validated -> the model input with the task's answer (2L,), as the
    task reads them (Task.parse_input: the induction task's first copy, T/2 tokens from 0 to V - 1, -> the input
    (T - 1,) with that copy repeated).

    Raises ConfigError naming the field 'sequence' and the allowed values.
    """
    return task_of(run.task).parse_input(text, run.task)


@dataclass(frozen=True)
class ModelAnswer:
    """The model's answer to one input beside the task's: at the answer queries, the expected and the predicted
    tokens; generated greedily (the task generates) or the most likely token at each query reading the true
    tokens (teacher-forced)."""

    queries: np.ndarray  # (A,) the positions whose prediction is the answer
    expected: np.ndarray  # (A,)
    predicted: np.ndarray  # (A,)
    generated: bool

    @property
    def right(self) -> int:
        return int((self.predicted == self.expected).sum())


def model_answer(params, run: RunConfig, tokens: np.ndarray) -> ModelAnswer:
    """The model's answer to one input (T,), as the task scores it: greedy generation after the prompt for a task
    that generates, else the argmax of the logits at each answer query."""
    task, tokens = task_of(run.task), np.asarray(tokens)
    if task.generates:
        L = run.task.length
        expected = task.answer_tokens(run.task, tokens[None, :L])[0]  # (L,)
        predicted = generate(params, tokens[None, : L + 1], L, run.model)[0][0]  # (L,)
        return ModelAnswer(task.answer_queries(run.task), expected, predicted, generated=True)
    queries, expected = task.answer_queries(run.task), task.answer_tokens(run.task, tokens)[0]  # (A,), (A,)
    logits, _ = forward(params, tokens[None], run.model)  # (1, T - 1, V): every query reads the true tokens
    return ModelAnswer(queries, expected, logits[0, queries].argmax(axis=-1), generated=False)


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
