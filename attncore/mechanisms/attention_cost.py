"""The cost of attention against sequence length: time and memory of the T x T scores.

Timing is measured live (minimum over trials after one warm-up); memory is arithmetic.
"""

from __future__ import annotations

import time

import numpy as np

from attncore import layers as L
from attncore.config import ConfigError

MIB = 2**20


def attention_memory(t: int, d_k: int = 64, bytes_per_element: int = 8) -> dict:
    """Bytes of the (T, T) score matrix against Q, K, V (T, d_k) together, for one head and sequence."""
    scores = t * t * bytes_per_element
    qkv = 3 * t * d_k * bytes_per_element
    return {"T": t, "scores_bytes": scores, "qkv_bytes": qkv, "scores_mib": scores / MIB, "qkv_mib": qkv / MIB}


def time_attention(
    lengths=(128, 256, 512, 1024),
    d_k: int = 64,
    trials: int = 3,
    seed: int = 0,
    max_t: int | None = None,
    progress=None,
) -> list[dict]:
    """Seconds of single-head causal attention, float64, for each T in lengths.

    One row per T with the minimum over `trials` timed calls after one warm-up,
    and the memory figures beside it. Lengths above max_t raise ConfigError
    (field "lengths") before anything runs; progress(i, n) is called after each T.
    """
    lengths = [int(t) for t in lengths]
    if not lengths or min(lengths) < 1:
        raise ConfigError("lengths", f"need at least one length, each >= 1; got {lengths}")
    if max_t is not None and max(lengths) > max_t:
        raise ConfigError("lengths", f"T={max(lengths)} is above the cap of {max_t}")
    if trials < 1:
        raise ConfigError("trials", f"must be >= 1, got {trials}")
    rng = np.random.default_rng(seed)
    rows = []
    for i, t in enumerate(lengths):
        q, k, v = rng.standard_normal((3, t, d_k))  # each (T, d_k)
        mask = L.causal_mask(t)
        L.attention_forward(q, k, v, mask)  # warm-up: caches, page faults
        best = float("inf")
        for _ in range(trials):
            start = time.perf_counter()
            L.attention_forward(q, k, v, mask)
            best = min(best, time.perf_counter() - start)
        rows.append({"T": t, "seconds": best, **attention_memory(t, d_k, 8)})
        if progress is not None:
            progress(i + 1, len(lengths))
    return rows


def loglog_slope(lengths, seconds) -> float:
    """Least-squares slope of log(seconds) against log(T): ~2 for attention at large T."""
    if len(lengths) < 2:
        raise ConfigError("lengths", "a slope needs at least two lengths")
    slope, _ = np.polyfit(np.log(np.asarray(lengths, float)), np.log(np.asarray(seconds, float)), 1)
    return float(slope)
