"""The copy, sort and reverse tasks (SPEC §7): sequences [s1..sL, SEP, a1..aL] over 20 symbols; batches at one
length, at a length drawn from a training range, or mixed lengths right-padded (SPEC §11)."""

from __future__ import annotations

import numpy as np

from .config import N_SYMBOLS, SEP, TaskConfig

TEST_SEED = 20_240_607  # the fixed test set's own seed, independent of any training seed
N_TEST = 500
# SPEC §8's probe for copy L = 6; longer probes continue it with seeded symbols.
PROBE_SYMBOLS = [17, 3, 0, 12, 7, 9] + list(np.random.default_rng(8).integers(0, N_SYMBOLS, 58))


def make_sequences(symbols: np.ndarray, task: str) -> np.ndarray:
    """(B, L) symbols -> (B, 2L+1) sequences with the task's answer after SEP."""
    if task == "copy":
        answer = symbols
    elif task == "sort":
        answer = np.sort(symbols, axis=1)
    elif task == "reverse":
        answer = symbols[:, ::-1]
    else:
        raise ValueError(f"unknown task {task!r}")
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


PAD = 0  # the token right padding writes; masked out of attention and the loss, so its value is never read


def pad_sequences(seqs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Sequences (2n+1,) of lengths n -> a right-padded (B, 2·max n + 1) batch and the lengths n (B,)."""
    lengths = np.array([(len(s) - 1) // 2 for s in seqs], dtype=np.int64)
    out = np.full((len(seqs), 2 * int(lengths.max()) + 1), PAD, dtype=np.int64)
    for row, s in zip(out, seqs, strict=True):
        row[: len(s)] = s
    return out, lengths


def sample_range_batch(task: TaskConfig, batch_size: int, rng: np.random.Generator):
    """A training batch of a range-trained task: (seqs, lengths); lengths None when rectangular.

    One length per batch (the default, Ruoss et al.): n ~ U{L_min..L_max} drawn once, then a (B, 2n+1) batch.
    Mixed: each sequence draws its own n; the batch is right-padded to the longest (pad_sequences).
    """
    lo, hi = task.train_lengths
    if not task.mixed_lengths:
        n = int(rng.integers(lo, hi + 1))
        return sample_batch(TaskConfig(task.name, n), batch_size, rng), None
    ns = rng.integers(lo, hi + 1, batch_size)
    symbols = rng.integers(0, N_SYMBOLS, (batch_size, hi))  # row b uses its first ns[b] symbols
    width = 2 * int(ns.max()) + 1
    out = np.full((batch_size, width), PAD, dtype=np.int64)
    for n in np.unique(ns):  # one vectorised make_sequences per length present
        rows = np.flatnonzero(ns == n)
        out[rows, : 2 * n + 1] = make_sequences(symbols[rows, :n], task.name)
    return out, ns.astype(np.int64)


def draw_positions(rng: np.random.Generator, t: int, n_max: int) -> np.ndarray:
    """Randomized positions (Ruoss et al.): t sorted positions drawn without replacement from [0, n_max)."""
    return np.sort(rng.choice(n_max, size=t, replace=False)).astype(np.int64)
