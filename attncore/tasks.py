"""The copy and sort tasks (SPEC §7): sequences [s1..sL, SEP, a1..aL] over 20 symbols."""

from __future__ import annotations

import numpy as np

from .config import N_SYMBOLS, SEP, TaskConfig

TEST_SEED = 20_240_607  # the fixed test set's own seed, independent of any training seed
N_TEST = 500
# SPEC §8's probe for copy L = 6; longer probes continue it with seeded symbols.
PROBE_SYMBOLS = [17, 3, 0, 12, 7, 9] + list(np.random.default_rng(8).integers(0, N_SYMBOLS, 58))


def make_sequences(symbols: np.ndarray, task: str) -> np.ndarray:
    """(B, L) symbols -> (B, 2L+1) sequences with the task's answer after SEP."""
    answer = symbols if task == "copy" else np.sort(symbols, axis=1)
    sep = np.full((len(symbols), 1), SEP, dtype=np.int64)
    return np.concatenate([symbols, sep, answer], axis=1).astype(np.int64)


def sample_batch(task: TaskConfig, batch_size: int, rng: np.random.Generator) -> np.ndarray:
    """A fresh batch (B, 2L+1) of uniformly drawn symbols."""
    return make_sequences(rng.integers(0, N_SYMBOLS, (batch_size, task.length)), task.name)


def test_set(task: TaskConfig, n: int = N_TEST) -> np.ndarray:
    """The fixed evaluation sequences (n, 2L+1), the same for every run of a task and L."""
    return sample_batch(task, n, np.random.default_rng([TEST_SEED, task.length]))


def probe_sequence(task: TaskConfig) -> np.ndarray:
    """The model input (2L,) of the probe: [s1..sL, SEP, a1..a_{L-1}]."""
    symbols = np.array([PROBE_SYMBOLS[: task.length]])
    return make_sequences(symbols, task.name)[0, :-1]


def all_distinct(symbols: np.ndarray) -> np.ndarray:
    """(B,) True where a row of (B, L) symbols has no repeated symbol."""
    s = np.sort(symbols, axis=1)
    return ~np.any(s[:, 1:] == s[:, :-1], axis=1)
