"""Position encodings at arbitrary positions: ALiBi's slopes and score bias, and the rows of the
sinusoidal, learned and RoPE tables at the positions of a batch (0..T-1, or randomized positions).

Every function here is a constant of the positions (no trained parameter), so the backward passes are the
model's own: ALiBi adds a constant to the scores (its gradient passes unchanged to the softmax's input), and a
learned table's gradient is scattered to the rows the positions read (model.backward).
Imports layers only.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from . import layers as L


def _power_of_two_slopes(n: int) -> list[float]:
    """m_h = 2^(-8h/n), h = 1..n (Press et al.): a geometric series from 2^(-8/n) with that ratio."""
    return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]


@lru_cache(maxsize=64)
def alibi_slopes(n_heads: int) -> tuple[float, ...]:
    """The ALiBi slope of each head (Press et al., arXiv:2108.12409, and their reference code).

    n a power of two: 2^(-8h/n). Otherwise the slopes of the closest power of two below, 2^k, then every other
    slope of the 2·2^k series (its odd-numbered ones: those that interleave the first set) until n are given.
    """
    if n_heads < 1:
        raise ValueError(f"n_heads must be >= 1, got {n_heads}")
    if math.log2(n_heads).is_integer():
        return tuple(_power_of_two_slopes(n_heads))
    k = 2 ** math.floor(math.log2(n_heads))
    return tuple(_power_of_two_slopes(k) + _power_of_two_slopes(2 * k)[0::2][: n_heads - k])


def alibi_bias(q_pos: np.ndarray, k_pos: np.ndarray, n_heads: int, dtype: str = "float64") -> np.ndarray:
    """The additive score bias (H, T_q, T_k): -m_h·(i - j) for a query at position i and a key at j.

    Future keys (j > i) get a positive bias, but the causal mask removes them. q_pos and k_pos are the
    positions themselves (0..T-1, or randomized positions: ALiBi then sees the drawn differences).
    """
    slopes = np.array(alibi_slopes(n_heads))[:, None, None]
    distance = np.asarray(q_pos, dtype=np.float64)[:, None] - np.asarray(k_pos, dtype=np.float64)[None, :]
    return (-slopes * distance).astype(dtype)


@lru_cache(maxsize=64)
def alibi_bias_cached(t_q: int, t_k: int, n_heads: int, dtype: str) -> np.ndarray:
    """alibi_bias at the last t_q of positions 0..t_k-1 (queries) against all of them (keys); read-only."""
    bias = alibi_bias(np.arange(t_k - t_q, t_k), np.arange(t_k), n_heads, dtype)
    bias.flags.writeable = False
    return bias


def rope_at(pos: np.ndarray, d_head: int, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """RoPE's cos and sin (T, Dh/2) at the given positions."""
    cos, sin = L.rope_tables(int(np.max(pos)) + 1, d_head, dtype)
    return cos[pos], sin[pos]


def sinusoidal_at(pos: np.ndarray, t_max: int, d_model: int, dtype: str) -> np.ndarray:
    """Rows (T, D) of the sinusoidal table at the given positions (its rows do not depend on its size)."""
    return L.sinusoidal_table(max(t_max, int(np.max(pos)) + 1), d_model, dtype)[pos]
