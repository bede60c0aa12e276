"""Looking inside a trained model: attention maps, per-head summaries, head ablation."""

from __future__ import annotations

import re

import numpy as np

from .config import INDUCTION, N_SYMBOLS, ConfigError, RunConfig
from .evaluate import EvalResult, evaluate
from .model import attention_weights
from .tasks import answer_queries, induction_input, make_sequences, probe_sequence


def parse_sequence(text: str, run: RunConfig) -> np.ndarray:
    """A user's symbols, e.g. "17 3 0 12 7 9", validated -> the model input (2L,) with the task's answer. The
    induction task: its first copy, T/2 tokens from 0 to V - 1, -> the input (T - 1,) with that copy repeated.

    Raises ConfigError naming the field 'sequence' and the allowed values.
    """
    parts = text.replace(",", " ").split()
    induction = run.task.name == INDUCTION
    n, top = (run.task.length // 2, run.task.vocab) if induction else (run.task.length, N_SYMBOLS)
    count = f"T/2 = {n} tokens" if induction else f"L={n} symbols"
    if not all(re.fullmatch(r"[0-9]{1,4}", p, re.ASCII) for p in parts):  # int() also reads '٣', '+3' and '1_0'
        raise ConfigError("sequence", f"symbols must be integers 0 to {top - 1} in ASCII digits; got {text!r}")
    symbols = [int(p) for p in parts]
    if len(symbols) != n:
        raise ConfigError("sequence", f"needs exactly {count}, got {len(symbols)}")
    bad = [s for s in symbols if not 0 <= s < top]
    if bad:
        raise ConfigError("sequence", f"symbols must be 0 to {top - 1}; got {bad[0]}")
    if induction:
        return induction_input(np.array(symbols), run.task.length)
    return make_sequences(np.array([symbols]), run.task.name)[0, :-1]  # the task's own answer (reverse too)


def attention_maps(params, run: RunConfig, tokens: np.ndarray | None = None) -> np.ndarray:
    """Weights (n_layers, H, T, T) for one input (the task's probe by default)."""
    tokens = probe_sequence(run.task) if tokens is None else np.asarray(tokens)
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
    """head_summary at the run's task's answer queries (tasks.answer_queries)."""
    return head_summary(maps, run.task.length, answer_queries(run.task))


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
