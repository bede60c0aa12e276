"""The operations of the decoder as <op>_forward / <op>_backward pairs.

A forward returns (output, cache); its backward takes the upstream gradient and
that cache and returns the input gradients. Nothing is stored on the side.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

import numpy as np

LN_EPS = 1e-5


class LayerNormCache(NamedTuple):
    xhat: np.ndarray  # (..., D) the input, centred and scaled to unit variance
    inv: np.ndarray  # (..., 1) 1 / sqrt(var + eps)
    gamma: np.ndarray  # (D,)


class FFNCache(NamedTuple):
    x: np.ndarray  # (N, D) the input
    hidden: np.ndarray  # (N, F) after the ReLU


class AttentionCache(NamedTuple):
    q: np.ndarray  # (..., T_q, Dh)
    k: np.ndarray  # (..., T_k, Dh)
    v: np.ndarray  # (..., T_k, Dh)
    weights: np.ndarray  # (..., T_q, T_k) the softmax of the scores; rows sum to 1
    factor: float | None  # the scores' scale 1/sqrt(Dh), or None unscaled


class CrossEntropyCache(NamedTuple):
    probs: np.ndarray  # (N, V) softmax of the logits
    targets: np.ndarray  # (N,)


class ZLossCache(NamedTuple):
    probs: np.ndarray  # (N, V) softmax of the logits
    targets: np.ndarray  # (N,)
    log_z: np.ndarray  # (N, 1) log of the softmax's normaliser Z = sum_v exp(logit_v)
    coefficient: float  # c of the term c·(log Z)²


# Reductions over a short last axis are slow in NumPy (a loop per row); these
# express them as matrix products or a few vectorised maximum ops instead.


_ONES: dict[tuple, np.ndarray] = {}
_ONES_MAX = 64  # a long-lived process (the dashboard's worker) meets many shapes: keep the cache bounded


def _ones(shape: tuple[int, ...], dtype: np.dtype, value: float = 1.0) -> np.ndarray:
    """A cached read-only array of `value` (a plain dict: this sits on the hot path)."""
    key = (shape, dtype.char, value)
    ones = _ONES.get(key)
    if ones is None:
        if len(_ONES) >= _ONES_MAX:
            _ONES.clear()
        ones = _ONES[key] = np.full(shape, value, dtype=dtype)
        ones.flags.writeable = False
    return ones


def row_sum(a: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """scale * a.sum(axis=-1, keepdims=True), as one matrix-vector product."""
    n = a.shape[-1]
    return (a.reshape(-1, n) @ _ones((n, 1), a.dtype, scale)).reshape(a.shape[:-1] + (1,))


def col_sum(a2d: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """a2d.sum(axis=0) of an (N, D) array, as one vector-matrix product."""
    return np.matmul(_ones((a2d.shape[0],), a2d.dtype), a2d, out=out)


def row_max(a: np.ndarray) -> np.ndarray:
    """a.max(axis=-1, keepdims=True): transpose once, then halve the rows (log2(T) maximum ops)."""
    n = a.shape[-1]
    at = np.ascontiguousarray(a.reshape(-1, n).T)  # (T, N): each step below is one contiguous op
    while at.shape[0] > 1:
        h = (at.shape[0] + 1) // 2  # the halves overlap in the middle row when T is odd
        at = np.maximum(at[:h], at[at.shape[0] - h :])
    return at.reshape(*a.shape[:-1], 1)


# --- linear ----------------------------------------------------------------


def linear_forward(x, w, b):
    """x (N, D_in) @ w (D_in, D_out) + b (D_out,); the cache is x."""
    y = x @ w
    y += b  # in place: no second (N, D_out) temporary
    return y, x


# A backward's parameter gradients go into `out` arrays when given (views of the
# flat gradient buffer during training), else into new ones.


def linear_backward(dy, x, w, out=None):
    """Returns dx, dw, db; leading axes of x and dy are flattened for dw, db; out = (dw, db)."""
    dw, db = out or (None, None)
    dx = dy @ w.T
    x2 = x.reshape(-1, x.shape[-1])
    dy2 = dy.reshape(-1, dy.shape[-1])
    return dx, np.matmul(x2.T, dy2, out=dw), col_sum(dy2, out=db)


# --- layer norm ------------------------------------------------------------


def layernorm_forward(x, gamma, beta, eps=LN_EPS):
    d = x.shape[-1]
    xc = x - row_sum(x, 1.0 / d)
    var = row_sum(xc * xc, 1.0 / d)
    var += eps
    inv = np.sqrt(var, out=var)
    np.divide(1.0, inv, out=inv)  # (..., 1)
    xhat = np.multiply(xc, inv, out=xc)
    y = xhat * gamma
    y += beta
    return y, LayerNormCache(xhat, inv, gamma)


def layernorm_backward(dy, cache, out=None):
    """Closed form: dx = inv * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)); out = (dgamma, dbeta)."""
    xhat = cache.xhat  # (N, D)
    dgamma, dbeta = out or (None, None)
    d = xhat.shape[-1]
    dy2 = dy.reshape(-1, d)
    dgamma = col_sum(dy2 * xhat.reshape(-1, d), out=dgamma)  # (D,)
    dbeta = col_sum(dy2, out=dbeta)  # (D,)
    dxhat = dy * cache.gamma  # (N, D)
    m2 = row_sum(dxhat * xhat, 1.0 / d)  # (N, 1)
    dx = dxhat - row_sum(dxhat, 1.0 / d)  # (N, D)
    m2 = m2 * xhat
    dx -= m2
    dx *= cache.inv
    return dx, dgamma, dbeta


# --- feed-forward ----------------------------------------------------------


def ffn_forward(x, w1, b1, w2, b2):
    """d -> d_ff (ReLU) -> d."""
    h = x @ w1
    h += b1
    np.maximum(h, _ones(h.shape, h.dtype, 0.0), out=h)  # against an array of zeros: 5x faster than the scalar 0
    return h @ w2 + b2, FFNCache(x, h)


def ffn_backward(dy, cache, w1, w2, out=None):
    """Returns dx, dw1, db1, dw2, db2; out = (dw1, db1, dw2, db2)."""
    x, h = cache.x, cache.hidden  # (N, D), (N, F)
    dw1, db1, dw2, db2 = out or (None,) * 4
    d, f = w1.shape
    dh = dy @ w2.T  # (N, F)
    dh *= (h > 0).astype(dh.dtype)  # ReLU: the gradient passes where the activation was positive
    dy2 = dy.reshape(-1, d)
    dh2 = dh.reshape(-1, f)
    dw2 = np.matmul(h.reshape(-1, f).T, dy2, out=dw2)  # (F, D)
    dw1 = np.matmul(x.reshape(-1, d).T, dh2, out=dw1)  # (D, F)
    return dh @ w1.T, dw1, col_sum(dh2, out=db1), dw2, col_sum(dy2, out=db2)


# --- masks and softmax -----------------------------------------------------


@lru_cache(maxsize=64)
def causal_mask(t_q: int, t_k: int | None = None) -> np.ndarray:
    """(T_q, T_k) bool, True where query i may read key j: j <= i + (T_k - T_q).

    With T_k > T_q the queries are the last T_q positions of T_k (decoding with
    a key-value cache). The array is cached and read-only.
    """
    t_k = t_q if t_k is None else t_k
    mask = np.tri(t_q, t_k, k=t_k - t_q, dtype=bool)
    mask.flags.writeable = False
    return mask


def padding_mask(lengths, t: int) -> np.ndarray:
    """(B, T) bool, True on the first lengths[b] positions of each sequence."""
    return np.arange(t)[None, :] < np.asarray(lengths)[:, None]


def window_mask(t: int, window: int, sink: bool = False) -> np.ndarray:
    """(T, T) bool, True where query i may read key j under a sliding window of `window` keys: i - window < j <= i
    (the causal bound included); with `sink`, key 0 too, kept as StreamingLLM keeps its attention sinks (Xiao et
    al. 2023, arXiv:2309.17453)."""
    i, j = np.arange(t)[:, None], np.arange(t)[None, :]
    mask = (j <= i) & (j > i - window)
    if sink:
        mask[:, 0] = True
    return mask


def attention_mask(causal: np.ndarray | None, padding: np.ndarray | None) -> np.ndarray | None:
    """The one place masks combine: causal (T, T) AND padding on the keys (B, T) -> (B, 1, T, T)."""
    if padding is None:
        return causal
    keys = padding[:, None, None, :]  # (B, 1, 1, T)
    return keys if causal is None else causal & keys


def as_bias(mask: np.ndarray, dtype: str = "float64") -> np.ndarray:
    """A bool mask as an additive bias (0 where allowed, -inf where not), for a mask in which every row keeps
    a key: softmax then gives the same bits as under the bool mask, without its copy and clamps."""
    return np.where(mask, 0.0, -np.inf).astype(dtype)


@lru_cache(maxsize=64)
def causal_bias(t_q: int, t_k: int | None = None, dtype: str = "float64") -> np.ndarray:
    """The causal mask as an additive (T_q, T_k) bias: 0 where allowed, -inf where not."""
    bias = as_bias(causal_mask(t_q, t_k), dtype)
    bias.flags.writeable = False
    return bias


def softmax_forward(s, mask=None, inplace=False):
    """Softmax over the keys (last axis); masked scores are set to -inf first.

    mask is bool (True = may attend) broadcasting to s, or an additive float bias
    such as causal_bias (cheaper; every row must keep a key). Max-subtracted for
    stability. Under a bool mask a row whose keys are all masked gives weights 0,
    not NaN: its max is clamped to a finite number and its sum to at least 1.
    inplace=True reuses s for the result.
    """
    if mask is not None and mask.dtype == bool:
        s = np.where(mask, s, -np.inf)
    elif not inplace:
        s = s.copy()
    if mask is not None and mask.dtype != bool:
        s += mask
    m = row_max(s)
    if mask is not None and mask.dtype == bool:
        m = np.maximum(m, np.finfo(s.dtype).min)
    s -= m
    e = np.exp(s, out=s)
    z = row_sum(e)
    if mask is not None and mask.dtype == bool:
        np.maximum(z, 1.0, out=z)  # a row with any key has z >= 1 (its max gives exp(0))
    e /= z
    return e


def softmax_backward(dp, p):
    """dS = P * (dP - rowsum(dP * P)); masked keys have P = 0 and get no gradient."""
    ds = dp * p
    ds -= p * row_sum(ds)
    return ds


# --- attention -------------------------------------------------------------


def attention_forward(q, k, v, mask=None, scale=True, bias=None):
    """softmax(Q K^T / sqrt(d_k) + bias) V over (..., T, D) arrays; mask and bias broadcast to (..., T_q, T_k).

    bias is an additive constant of the positions (ALiBi's -m·(i - j)); it has no gradient of its own and the
    scores' gradient passes through it unchanged, so attention_backward is the same with or without it.
    """
    s = q @ np.ascontiguousarray(k.swapaxes(-1, -2))  # (..., T_q, T_k)
    # A Python float: a NumPy float64 scalar would make float32 scores compute in float64.
    factor = 1.0 / math.sqrt(q.shape[-1]) if scale else None
    if factor is not None:
        s *= factor  # Q K^T / sqrt(d_k)
    if bias is not None:
        s += bias
    p = softmax_forward(s, mask, inplace=True)  # (..., T_q, T_k) masked keys -inf before the softmax: weight 0
    return p @ v, AttentionCache(q, k, v, p, factor)  # P V: (..., T_q, D)


def attention_backward(dy, cache, out=None):
    """Returns dq, dk, dv; `out` = (dq, dk, dv) arrays to write into, if given.

    cache: anything with the fields of AttentionCache (q, k, v, weights, factor).
    """
    p = cache.weights  # (..., T_q, T_k)
    dq, dk, dv = (None, None, None) if out is None else out
    dv = np.matmul(p.swapaxes(-1, -2), dy, out=dv)  # (..., T_k, Dh)
    ds = softmax_backward(dy @ cache.v.swapaxes(-1, -2), p)  # (..., T_q, T_k)
    if cache.factor is not None:  # the forward's score scale
        ds *= cache.factor
    dq = np.matmul(ds, cache.k, out=dq)  # (..., T_q, Dh)
    dk = np.matmul(ds.swapaxes(-1, -2), cache.q, out=dk)  # (..., T_k, Dh)
    return dq, dk, dv


def split_heads(x, n_heads):
    """(B, T, D) -> (B, H, T, D/H): reshape, then transpose."""
    b, t, d = x.shape
    return x.reshape(b, t, n_heads, d // n_heads).transpose(0, 2, 1, 3)


def merge_heads(x):
    """(B, H, T, Dh) -> (B, T, H*Dh): the exact inverse of split_heads."""
    b, h, t, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, t, h * dh)


# --- position --------------------------------------------------------------


@lru_cache(maxsize=32)
def sinusoidal_table(t: int, d: int, dtype: str = "float64") -> np.ndarray:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(same)."""
    pos = np.arange(t)[:, None]
    freq = 10000.0 ** (-np.arange(0, d, 2) / d)
    table = np.zeros((t, d))
    table[:, 0::2] = np.sin(pos * freq)
    table[:, 1::2] = np.cos(pos * freq[: d // 2])
    table = table.astype(dtype)
    table.flags.writeable = False
    return table


@lru_cache(maxsize=32)
def rope_tables(t: int, d_head: int, dtype: str = "float64"):
    """cos and sin (T, Dh/2) of angle pos * 10000^(-2i/Dh) for each pair (2i, 2i+1)."""
    angle = np.arange(t)[:, None] * 10000.0 ** (-np.arange(0, d_head, 2) / d_head)
    cos, sin = np.cos(angle).astype(dtype), np.sin(angle).astype(dtype)
    cos.flags.writeable = sin.flags.writeable = False
    return cos, sin


def rope_forward(x, cos, sin):
    """Rotate each pair (x[2i], x[2i+1]) of x (..., T, Dh) by its angle; cos, sin (T, Dh/2)."""
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    x0, x1 = pairs[..., 0], pairs[..., 1]
    out = np.empty_like(pairs)
    out[..., 0] = x0 * cos - x1 * sin
    out[..., 1] = x0 * sin + x1 * cos
    return out.reshape(x.shape)


def rope_backward(dy, cos, sin):
    """The rotation is orthogonal: its gradient rotates back by the opposite angle."""
    return rope_forward(dy, cos, -sin)


# --- embeddings and loss ---------------------------------------------------


def embedding_backward(dy, idx, n_rows, out=None):
    """Scatter-add rows of dy (B, T, D) into a (n_rows, D) table (or `out`); tokens may repeat.

    Written as one_hot(idx)^T @ dy: the same sums as np.add.at, as one matrix product.
    """
    one_hot = (idx.reshape(-1, 1) == np.arange(n_rows)).astype(dy.dtype)  # (B*T, n_rows)
    return np.matmul(one_hot.T, dy.reshape(-1, dy.shape[-1]), out=out)


def cross_entropy_forward(logits, targets):
    """Mean negative log-likelihood of targets (N,) under logits (N, V), via log-sum-exp."""
    z = logits - row_max(logits)
    e = np.exp(z)
    total = row_sum(e)  # (N, 1)
    n = len(targets)
    loss = (np.log(total).sum() - z[np.arange(n), targets].sum()) / n
    e /= total
    return float(loss), CrossEntropyCache(e, targets)


def cross_entropy_backward(cache):
    targets = cache.targets
    n = len(targets)
    dlogits = cache.probs.copy()  # (N, V)
    dlogits[np.arange(n), targets] -= 1.0
    dlogits /= n
    return dlogits


def cross_entropy_z_forward(logits, targets, coefficient: float):
    """The cross-entropy of cross_entropy_forward and the output z-loss beside it (Wortsman et al. 2023, after
    PaLM): the mean over the N rows of (log Z)², Z = sum_v exp(logit_v) the softmax's normaliser. Returns the
    cross-entropy, the mean (log Z)² and the cache; the objective is cross-entropy + coefficient · mean (log Z)²."""
    peak = row_max(logits)  # (N, 1)
    z = logits - peak
    e = np.exp(z)
    total = row_sum(e)  # (N, 1)
    n = len(targets)
    log_total = np.log(total)
    loss = (log_total.sum() - z[np.arange(n), targets].sum()) / n
    log_z = log_total + peak  # (N, 1)
    e /= total
    return float(loss), float((log_z * log_z).sum() / n), ZLossCache(e, targets, log_z, coefficient)


def cross_entropy_z_backward(cache):
    """d(cross-entropy + c · mean (log Z)²)/d logits: (softmax - onehot + 2c · log Z · softmax) / N."""
    targets = cache.targets
    n = len(targets)
    dlogits = cache.probs * (1.0 + 2.0 * cache.coefficient * cache.log_z)  # (N, V)
    dlogits[np.arange(n), targets] -= 1.0
    dlogits /= n
    return dlogits
