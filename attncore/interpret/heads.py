"""Head detection scores (as TransformerLens's head_detector, error measure "mul"): the share of a head's
attention that falls on a 0/1 pattern D, score = sum(A * D) / sum(A), over the answer queries L..2L-1
(the rows with a loss; every row of A sums to 1, so the score is the mean weight on the pattern there). Each
task says which patterns it scores (Task.patterns, Task.head_scores): the induction task's two are
attncore.tasks.induction's, induction over the repeat's queries and previous token over every query but the first.
"""

from __future__ import annotations

import numpy as np

from ..config import RunConfig, TaskConfig
from ..inspect import attention_maps
from ..task import task_of

PATTERNS = {
    "previous token": "the key just before the query",
    "same symbol earlier": "earlier keys holding the query's own symbol",
    "L back": "the key L positions back: the symbol copy must write",
    "k-th smallest": "the input position of the k-th smallest symbol: the one sort must write",
    "mirrored": "the input position mirrored about SEP (answer token j reads symbol L + 1 − j): the one reverse "
    "must write",
}


def patterns_of(task: TaskConfig) -> dict[str, str]:
    """The patterns scored for a task, {name: what it is} (Task.patterns)."""
    return task_of(task).patterns


def detection_patterns(tokens: np.ndarray, length: int) -> dict[str, np.ndarray]:
    """Each pattern (T, T) of 0/1 for the input tokens (T,), on the answer query rows only (others zero)."""
    tokens = np.asarray(tokens)
    T, L = len(tokens), length
    rows = np.zeros((T, 1), dtype=bool)
    rows[L:] = True
    i, j = np.indices((T, T))
    ordered = np.sort(tokens[:L])
    kth = np.zeros((T, T), dtype=bool)
    for k in range(L):  # query L + k writes the k-th smallest: every input position holding it
        kth[L + k, :L] = tokens[:L] == ordered[k]
    pats = {
        "previous token": j == i - 1,
        "same symbol earlier": (j < i) & (tokens[None, :] == tokens[:, None]),
        "L back": j == i - L,
        "k-th smallest": kth,
        "mirrored": j == 2 * L - 1 - i,  # query L + k (writing answer token k + 1) reads input position L - 1 - k
    }
    return {name: (p & rows).astype(np.float64) for name, p in pats.items()}


def scores(maps: np.ndarray, tokens: np.ndarray, length: int) -> dict[str, np.ndarray]:
    """{pattern: (..., n_layers, H) score} for maps (..., n_layers, H, T, T) on one input tokens (T,)."""
    L = length
    a = np.asarray(maps, dtype=np.float64)[..., L:, :]  # the answer queries
    total = a.sum(axis=(-1, -2))
    return {name: (a * d[L:]).sum(axis=(-1, -2)) / total for name, d in detection_patterns(tokens, L).items()}


def task_scores(maps: np.ndarray, tokens: np.ndarray, task: TaskConfig | int) -> dict[str, np.ndarray]:
    """`scores` for the task (an int: the article's tasks at that L), as the task scores (Task.head_scores); the
    induction task's on an input whose first half repeats (the probe's layout, k = T/2)."""
    if isinstance(task, int):
        return scores(maps, tokens, task)
    return task_of(task).head_scores(maps, tokens, task)


def probe_scores(params, run: RunConfig, tokens: np.ndarray) -> dict[str, np.ndarray]:
    """{pattern: (n_layers, H)} on one input (2L,)."""
    return task_scores(attention_maps(params, run, tokens), tokens, run.task)


def test_scores(params, run: RunConfig, n_test: int = 100) -> dict[str, np.ndarray]:
    """{pattern: (n_layers, H)} averaged over the first n_test fixed test sequences (induction: each scored at its
    own repeated prefix k)."""
    return task_of(run.task).test_scores(params, run, n_test)


def snapshot_scores(snapshots, tokens: np.ndarray, task: TaskConfig | int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(steps (S,), {pattern: (S, n_layers, H)}) from training snapshots' probe attention (task as task_scores)."""
    steps = np.array([s.step for s in snapshots])
    maps = np.stack([s.probe_attention for s in snapshots])  # (S, n_layers, H, T, T)
    return steps, task_scores(maps, tokens, task)


def task_pattern(run: RunConfig) -> str:
    """The pattern a head that reads what the task needs would match: L back for copy, k-th smallest for sort,
    the mirrored key for reverse, the induction pattern for induction (Task.pattern)."""
    return task_of(run.task).pattern


def best_head(params, run: RunConfig, tokens: np.ndarray) -> tuple[int, int]:
    """(layer, head) with the highest task-pattern score on the input: the map that reads best as an explanation."""
    s = probe_scores(params, run, tokens)[task_pattern(run)]
    layer, head = np.unravel_index(int(np.argmax(s)), s.shape)
    return int(layer), int(head)
