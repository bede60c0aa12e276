"""The measurements behind the mechanism pages: scaling statistics, masks, heads and position (docs/model.md,
docs/experiments.md).

Pure functions with an explicit seed; they return dicts of arrays or lists of row-dicts
(one row per measurement, theory beside it) that a page turns into a DataFrame.
"""

from __future__ import annotations

import math

import numpy as np

from attncore import layers as L
from attncore.config import ConfigError, ModelConfig
from attncore.model import init_params, param_shapes

# --- scaling: why divide by sqrt(d_k) -----------------------------------------


def softmax_jacobian(p: np.ndarray) -> np.ndarray:
    """dp_i/ds_j = p_i (delta_ij - p_j) for weights p (..., T) -> (..., T, T)."""
    return p[..., :, None] * (np.eye(p.shape[-1]) - p[..., None, :])


def sensitivity(p: np.ndarray) -> np.ndarray:
    """Trace of the softmax Jacobian, sum_i p_i (1 - p_i), for weights p (..., T) -> (...)."""
    return np.sum(p * (1.0 - p), axis=-1)


def entropy(p: np.ndarray) -> np.ndarray:
    """-sum p ln p in nats over the last axis (0 ln 0 = 0)."""
    logs = np.log(np.where(p > 0, p, 1.0))
    return -np.sum(p * logs, axis=-1)


def scaling_statistics(d_k_values=(8, 64, 512), n_keys: int = 64, repetitions: int = 400, seed: int = 0) -> list[dict]:
    """The scaling table: one row per (d_k, scaled) with the measurement and the theory beside it.

    Each repetition draws one query and n_keys keys with iid N(0, 1) components.
    The draw for a d_k depends only on (seed, d_k), so adding a d_k leaves the
    other rows unchanged; scaled and unscaled rows share the same draw. The
    per-repetition statistics come with their standard error over repetitions (*_se).
    """
    if n_keys < 1:
        raise ConfigError("n_keys", f"must be >= 1, got {n_keys}")
    if repetitions < 2:
        raise ConfigError("repetitions", f"must be >= 2, got {repetitions}")
    rows = []
    for d_k in map(int, d_k_values):
        if d_k < 1:
            raise ConfigError("d_k", f"must be >= 1, got {d_k}")
        raw = _dot_products(d_k, n_keys, repetitions, np.random.default_rng([seed, d_k]))  # (R, T)
        var_dot = float(raw.var())
        for scaled in (False, True):
            s = raw / math.sqrt(d_k) if scaled else raw
            p = L.softmax_forward(s)  # (R, T)
            per_rep = {"max_weight": p.max(axis=-1), "entropy": entropy(p), "sensitivity": sensitivity(p)}  # each (R,)
            mean = {name: float(v.mean()) for name, v in per_rep.items()}
            se = {name: float(v.std(ddof=1) / math.sqrt(repetitions)) for name, v in per_rep.items()}
            rows.append(
                {
                    "d_k": d_k,
                    "scaled": scaled,
                    "var_dot": var_dot,
                    "var_dot_theory": float(d_k),
                    "sd_scores": float(s.std()),
                    "sd_scores_theory": 1.0 if scaled else math.sqrt(d_k),
                    "mean_max_weight": mean["max_weight"],
                    "mean_max_weight_se": se["max_weight"],
                    "min_max_weight": 1.0 / n_keys,  # uniform weights
                    "entropy": mean["entropy"],
                    "entropy_se": se["entropy"],
                    "max_entropy": math.log(n_keys),
                    "sensitivity": mean["sensitivity"],
                    "sensitivity_se": se["sensitivity"],
                    "max_sensitivity": 1.0 - 1.0 / n_keys,
                }
            )
    return rows


def _dot_products(d_k: int, n_keys: int, repetitions: int, rng) -> np.ndarray:
    """q . k for one query and n_keys keys per repetition, (R, T); keys drawn in chunks of ~4M numbers."""
    q = rng.standard_normal((repetitions, d_k))  # (R, d_k)
    raw = np.empty((repetitions, n_keys))
    chunk = max(1, 2**22 // (n_keys * d_k))
    for start in range(0, repetitions, chunk):
        k = rng.standard_normal((min(chunk, repetitions - start), n_keys, d_k))  # (r, T, d_k)
        raw[start : start + len(k)] = np.einsum("rd,rtd->rt", q[start : start + len(k)], k)
    return raw


# --- masks ---------------------------------------------------------------------


def mask_order_demo(t: int = 6, seed: int = 0) -> dict[str, np.ndarray]:
    """The causal mask applied before the softmax (correct) against zeroing weights after it (the bug).

    Returns scores, causal mask, both weight matrices (T, T) and their row sums (T,).
    """
    scores = np.random.default_rng(seed).standard_normal((t, t))  # (T, T)
    causal = L.causal_mask(t)
    before = L.softmax_forward(scores, causal)
    after = L.softmax_forward(scores) * causal
    return {
        "scores": scores,
        "causal": np.array(causal),
        "weights_before": before,
        "weights_after": after,
        "row_sums_before": before.sum(axis=-1),
        "row_sums_after": after.sum(axis=-1),
    }


def padding_demo(lengths=(5, 3, 0), t: int | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """A batch of sequences of the given lengths padded to T: the masks and the weights they give.

    padding (B, T) on the keys, causal (T, T), combined (B, T, T) from
    layers.attention_mask; weights (B, T, T) of random scores under the combined
    mask, their row sums (B, T), which rows have no key at all (B, T), and
    whether every weight is finite (a length-0 sequence masks whole rows).
    """
    lengths = [int(n) for n in lengths]  # Python ints: a huge one is rejected below, not overflowed
    t = max([1, *lengths]) if t is None else t
    if t < 1 or any(not 0 <= n <= t for n in lengths):
        raise ConfigError("lengths", f"each length must be from 0 to T={t}, got {lengths}")
    lengths = np.asarray(lengths, dtype=int)
    padding = L.padding_mask(lengths, t)
    causal = np.array(L.causal_mask(t))
    combined = L.attention_mask(causal, padding)[:, 0]  # (B, 1, T, T) -> (B, T, T)
    scores = np.random.default_rng(seed).standard_normal((len(lengths), t, t))
    weights = L.softmax_forward(scores, combined)
    return {
        "lengths": lengths,
        "padding": padding,
        "causal": causal,
        "combined": combined,
        "weights": weights,
        "row_sums": weights.sum(axis=-1),
        "fully_masked_rows": ~combined.any(axis=-1),
        "all_finite": np.array(bool(np.isfinite(weights).all())),
    }


# --- heads and position --------------------------------------------------------


def attention_param_counts(d_model: int = 64, heads=None) -> list[dict]:
    """Attention parameters of one block for each head count h dividing d (all divisors by default).

    Counted from model.param_shapes, beside the formula 4d^2 + 4d where h does not appear.
    """
    heads = [h for h in range(1, d_model + 1) if d_model % h == 0] if heads is None else heads
    rows = []
    for h in heads:
        shapes = param_shapes(ModelConfig(d_model=d_model, n_heads=h, n_layers=1, d_ff=4 * d_model))
        attn = sum(math.prod(s) for name, s in shapes.items() if ".attn." in name)
        block = sum(math.prod(s) for name, s in shapes.items() if name.startswith("blocks.0."))
        rows.append(
            {
                "n_heads": h,
                "d_head": d_model // h,
                "attention_params": attn,
                "attention_theory": 4 * d_model**2 + 4 * d_model,
                "block_params": block,
                "block_theory": 12 * d_model**2 + 13 * d_model,
            }
        )
    return rows


def _self_attention(x, params, n_heads, rope=False, causal=False):
    """Multi-head self-attention of x (B, T, D) with block 0's weights, as the model computes it."""
    B, T, D = x.shape
    qkv = x @ params["blocks.0.attn.w_qkv"] + params["blocks.0.attn.b_qkv"]  # (B, T, 3D)
    q, k, v = (L.split_heads(a, n_heads) for a in np.split(qkv, 3, axis=-1))  # each (B, H, T, Dh)
    if rope:
        cos, sin = L.rope_tables(T, D // n_heads)
        q, k = L.rope_forward(q, cos, sin), L.rope_forward(k, cos, sin)
    y, _ = L.attention_forward(q, k, v, L.causal_mask(T) if causal else None)
    return L.merge_heads(y) @ params["blocks.0.attn.w_out"] + params["blocks.0.attn.b_out"]  # (B, T, D)


PERMUTATION_CASES = [("none", False), ("sinusoidal", False), ("learned", False), ("rope", False), ("none", True)]


def permutation_test(t: int = 8, d_model: int = 16, n_heads: int = 4, seed: int = 0) -> list[dict]:
    """attn(PX) against P attn(X) for a random permutation P, per kind of position.

    One row per position in none | sinusoidal | learned | rope (and none with the
    causal mask): equivariance_error = max |attn(PX) - P attn(X)| (~1e-16 only
    without position or mask) and change = max |attn(PX) - attn(X)| (nonzero).
    Positions stay where they are; only the tokens move.
    """
    if t < 2:
        raise ConfigError("t", "a permutation needs at least 2 positions")
    cfg = ModelConfig(d_model=d_model, n_heads=n_heads, n_layers=1, d_ff=4 * d_model, max_len=t, dtype="float64")
    if cfg.d_head % 2:
        raise ConfigError("n_heads", f"rope needs an even head size, got d_head={cfg.d_head}")
    rng = np.random.default_rng(seed)
    params = init_params(cfg, rng)
    for name in ("blocks.0.attn.b_qkv", "blocks.0.attn.b_out"):  # biases are 0 at init: make them count
        params[name][...] = 0.1 * rng.standard_normal(params[name].shape)
    x = rng.standard_normal((1, t, d_model))  # (1, T, D)
    perm = rng.permutation(t)
    if np.array_equal(perm, np.arange(t)):
        perm = np.roll(perm, 1)
    additive = {
        "none": np.zeros((t, d_model)),
        "sinusoidal": L.sinusoidal_table(t, d_model),
        "learned": params["pos_emb"],
        "rope": np.zeros((t, d_model)),
    }
    rows = []
    for position, causal in PERMUTATION_CASES:
        pe, rope = additive[position], position == "rope"
        y = _self_attention(x + pe, params, n_heads, rope, causal)
        y_perm = _self_attention(x[:, perm] + pe, params, n_heads, rope, causal)
        rows.append(
            {
                "position": position,
                "causal": causal,
                "equivariance_error": float(np.abs(y_perm - y[:, perm]).max()),
                "change": float(np.abs(y_perm - y).max()),
            }
        )
    return rows


def position_encodings(t: int = 32, d_model: int = 16, seed: int = 0) -> dict[str, np.ndarray]:
    """The four encodings as arrays: what gets added to the tokens, and RoPE's angles.

    sinusoidal (T, D); learned (T, D), an init sample N(0, 1)*0.1; none (T, D) zeros;
    rope_cos and rope_sin (T, D/2) of the rotation angle per position and pair.
    """
    cfg = ModelConfig(d_model=d_model, n_heads=1, n_layers=1, d_ff=1, max_len=t, dtype="float64")
    learned = init_params(cfg, np.random.default_rng(seed))["pos_emb"]
    cos, sin = L.rope_tables(t, d_model)
    return {
        "sinusoidal": np.array(L.sinusoidal_table(t, d_model)),
        "learned": np.array(learned),
        "none": np.zeros((t, d_model)),
        "rope_cos": np.array(cos),
        "rope_sin": np.array(sin),
    }


def rope_relative_dots(t: int = 16, d_head: int = 16, offsets=(0, 1, 3, -2), seed: int = 0) -> dict:
    """One query q and one key k placed at every position: q_m . k_n after RoPE depends only on m - n.

    Returns dots (T, T) with dots[m, n] = rot_m(q) . rot_n(k); additive (T, T)
    the same with sinusoidal vectors added instead, for contrast; rows, one per
    (m, n) with m - n in offsets; spread, the largest max - min over any
    diagonal m - n = const (~1e-15 for RoPE) and additive_spread (large).
    """
    if d_head % 2:
        raise ConfigError("d_head", f"rope needs an even head size, got {d_head}")
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, d_head))
    cos, sin = L.rope_tables(t, d_head)
    q_rot = L.rope_forward(np.tile(q, (t, 1)), cos, sin)  # (T, Dh): q at positions 0..T-1
    k_rot = L.rope_forward(np.tile(k, (t, 1)), cos, sin)
    dots = q_rot @ k_rot.T  # (T, T)
    pe = L.sinusoidal_table(t, d_head)
    additive = (q + pe) @ (k + pe).T  # (T, T)
    rows = [
        {
            "m": m,
            "n": m - off,
            "m_minus_n": off,
            "dot_rope": float(dots[m, m - off]),
            "dot_additive": float(additive[m, m - off]),
        }
        for off in offsets
        for m in range(max(off, 0), min(t, t + off))
    ]
    return {
        "dots": dots,
        "additive": additive,
        "rows": rows,
        "spread": _diagonal_spread(dots),
        "additive_spread": _diagonal_spread(additive),
        "unrotated_dot": float(q @ k),
    }


def _diagonal_spread(a: np.ndarray) -> float:
    """Largest max - min along any diagonal of a square matrix: 0 for a Toeplitz matrix."""
    t = a.shape[0]
    return float(max(np.ptp(np.diagonal(a, offset)) for offset in range(-t + 1, t)))
