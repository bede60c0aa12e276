"""What every task's sequences share: the fixed test set's seed and size, right padding, randomized positions.
NumPy only, below the model (the tasks themselves are attncore.tasks, at the top)."""

from __future__ import annotations

import re

import numpy as np

from .checks import ConfigError

TEST_SEED = 20_240_607  # the fixed test set's own seed, independent of any training seed
N_TEST = 500
PAD = 0  # the token right padding writes; masked out of attention and the loss, so its value is never read


def all_distinct(symbols: np.ndarray) -> np.ndarray:
    """(B,) True where a row of (B, L) symbols has no repeated symbol."""
    s = np.sort(symbols, axis=1)
    return ~np.any(s[:, 1:] == s[:, :-1], axis=1)


def pad_sequences(seqs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Sequences (2n+1,) of lengths n -> a right-padded (B, 2·max n + 1) batch and the lengths n (B,)."""
    lengths = np.array([(len(s) - 1) // 2 for s in seqs], dtype=np.int64)
    out = np.full((len(seqs), 2 * int(lengths.max()) + 1), PAD, dtype=np.int64)
    for row, s in zip(out, seqs, strict=True):
        row[: len(s)] = s
    return out, lengths


def draw_positions(rng: np.random.Generator, t: int, n_max: int) -> np.ndarray:
    """Randomized positions (Ruoss et al.): t sorted positions drawn without replacement from [0, n_max)."""
    return np.sort(rng.choice(n_max, size=t, replace=False)).astype(np.int64)


def parse_symbols(text: str, n: int, top: int, count: str) -> list[int]:
    """A user's n integers from 0 to top - 1 (ASCII digits, spaces or commas between); ConfigError('sequence', ...)
    naming `count` (what n integers are) otherwise."""
    parts = text.replace(",", " ").split()
    if not all(re.fullmatch(r"[0-9]{1,4}", p, re.ASCII) for p in parts):  # int() also reads '٣', '+3' and '1_0'
        raise ConfigError("sequence", f"symbols must be integers 0 to {top - 1} in ASCII digits; got {text!r}")
    symbols = [int(p) for p in parts]
    if len(symbols) != n:
        raise ConfigError("sequence", f"needs exactly {count}, got {len(symbols)}")
    bad = [s for s in symbols if not 0 <= s < top]
    if bad:
        raise ConfigError("sequence", f"symbols must be 0 to {top - 1}; got {bad[0]}")
    return symbols
