"""The decoder's causal multi-head self-attention sublayer: its forward and backward, the Context one call of it
reads (which rows ask queries, which keys they may read, the KV cache, the hook points) and the rows a padded
batch computes (AnswerRows). Shapes: B batch, T time, D model width, H heads, Dh = D / H.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from . import layers as L
from . import positions as P

# --- the rows a padded batch computes --------------------------------------


@dataclass(frozen=True)
class AnswerRows:
    """The rows a padded batch computes. Sequence b computes its positions 0..computed[b] - 1 (`present`; the
    right padding after them is never read by a real query under the causal mask) and outputs its positions
    starts[b] .. starts[b] + counts[b] - 1, packed in sequence order: R = sum(counts) rows.

    Activations stay packed, one row per present position; attention scatters its queries, keys and values
    into the padded (B, H, T, Dh) layout (padding 0, masked) and gathers its output rows back. The last block
    asks its queries in a window of W = max(counts) positions per sequence (rectangular: one batched product)
    from window[b, 0] = min(starts[b], T - W), and keeps the R output rows. A right-padded batch of lengths n
    (computed 2n, starts n, counts n, T = 2·max n) so costs the attention of its longest length and the
    row-wise work (projections, norms, MLPs, head) of the lengths it holds.
    """

    B: int
    T: int  # positions of the padded batch
    present: np.ndarray | None  # (N,) the positions computed, as indices into the B·T rows; None: all
    window: np.ndarray | None  # (B, W) each sequence's query positions; None: every position asks
    keep: np.ndarray  # (R,) the output rows, as indices into the B·W window rows (B·T without a window)
    out: np.ndarray | None  # (R,) the same rows as indices into the present rows; None: all of them
    sequence: np.ndarray  # (R,) the sequence of each output row

    @classmethod
    def of(cls, starts, counts, T: int, computed=None) -> AnswerRows:
        starts, counts = np.asarray(starts, dtype=np.int64), np.asarray(counts, dtype=np.int64)
        computed = np.full(starts.shape, T) if computed is None else np.asarray(computed, dtype=np.int64)
        if starts.ndim != 1 or not starts.shape == counts.shape == computed.shape:
            raise ValueError("starts, counts and computed must be (B,) ints")
        if (counts < 1).any() or (starts < 0).any() or (starts + counts > computed).any() or (computed > T).any():
            raise ValueError(f"need counts >= 1 and 0 <= starts < starts + counts <= computed <= T = {T}")
        B, W = len(starts), int(counts.max())
        window = np.minimum(starts, T - W)[:, None] + np.arange(W)  # (B, W)
        kept = (window >= starts[:, None]) & (window < (starts + counts)[:, None])
        sequence = np.nonzero(kept)[0]
        first = np.cumsum(computed) - computed  # where each sequence's rows begin among the present rows
        present = None if (computed == T).all() else np.flatnonzero(np.arange(T)[None, :] < computed[:, None])
        return cls(B, T, present, window, np.flatnonzero(kept), first[sequence] + window[kept], sequence)

    def inner(self) -> AnswerRows:
        """The same rows for a block before the last: every present position asks and keeps its row."""
        keep = np.arange(self.B * self.T) if self.present is None else self.present
        return replace(self, window=None, keep=keep, out=None)

    @property
    def batch(self) -> np.ndarray:
        """(B, 1): with `window`, the (sequence, position) pair of each window entry."""
        return np.arange(self.B)[:, None]


# --- what one call reads ---------------------------------------------------


class Context(NamedTuple):
    """What a block's forward reads besides its input and weights. The model's forward makes one per call and
    gives each block its own rows and head mask with `_replace` (a NamedTuple: cheap to make once per block)."""

    B: int  # sequences in the batch
    rows: int | AnswerRows = 0  # the queries asked: positions rows.. of every sequence, or a padded batch's rows
    mask: np.ndarray | None = None  # the keys each query may read: bool (B, 1, T, T) or (T, T), or a bias (T, T)
    bias: np.ndarray | None = None  # (H, T, T) ALiBi's score bias at the batch's positions, or None
    pos: np.ndarray | None = None  # (T,) randomized positions, or None for t0..t0+T-1
    t0: int = 0  # the first position of a chunk decoded against the KV cache
    kv: tuple[np.ndarray, np.ndarray] | None = None  # this layer's KV cache, each (B, H, T_max, Dh), or None
    head_mask: np.ndarray | None = None  # (H,) 0/1 on this layer's heads' outputs, or None
    hooks: Callable[[str, np.ndarray], np.ndarray] | None = None  # hook points (attncore.interpret), or None

    @property
    def answer_rows(self) -> AnswerRows | None:
        return None if isinstance(self.rows, int) else self.rows

    def hook(self, name: str, x: np.ndarray) -> np.ndarray:
        """x (B*T, D) through the hook point `name`, which sees it as (B, T, D); x itself without hooks."""
        if self.hooks is None:
            return x
        return self.hooks(name, x.reshape(self.B, -1, x.shape[-1])).reshape(x.shape)

    def query_rows(self, x: np.ndarray) -> np.ndarray:
        """Rows of x (B*T, D) at positions rows.. -> (B*(T - rows), D); of AnswerRows' present rows, the kept."""
        rows = self.answer_rows
        if rows is not None:
            return x if rows.out is None else x[rows.out]
        D = x.shape[-1]
        return x if not self.rows else x.reshape(self.B, -1, D)[:, self.rows :].reshape(-1, D)


class SelfAttentionCache(NamedTuple):
    """The attention sublayer's forward, as its backward reads it; q, k, v, weights and factor are
    L.AttentionCache's fields, so L.attention_backward takes this cache as it is."""

    x: np.ndarray  # (N, D) the sublayer's input (pre-LN: after LN1)
    q: np.ndarray  # (B, H, Tq, Dh) the queries asked, after RoPE
    k: np.ndarray  # (B, H, T, Dh) every position's keys, after RoPE
    v: np.ndarray  # (B, H, T, Dh)
    weights: np.ndarray  # (B, H, Tq, T) attention weights; each row sums to 1
    factor: float | None  # the scores' scale 1/sqrt(Dh), or None unscaled
    merged: np.ndarray  # (R, D) the heads' outputs side by side: the input of W_O
    head_mask: np.ndarray | None  # (H,) 0/1 per head, or None
    q_from: int | AnswerRows  # the positions that asked queries (Context.rows)
    rope: tuple[np.ndarray, np.ndarray] | None  # RoPE's cos and sin (T, Dh/2) at the positions, or None
    q_norm: L.LayerNormCache | None = None  # qk-norm: the queries' LayerNorm over Dh, or None without it
    k_norm: L.LayerNormCache | None = None  # and the keys'


# --- forward ---------------------------------------------------------------


def self_attention_forward(h, params, p, cfg, ctx: Context):
    """Causal multi-head self-attention (Vaswani et al. 2017) of h (N, D), the rows of positions t0..t0+T-1 (ctx.pos):

        [Q K V] = h W_qkv + b_qkv,  head_i = softmax(Q_i K_i^T / sqrt(Dh) + M) V_i,  out = [head_1 .. head_H] W_O + b_O

    with M 0 where a query may read a key and -inf where not (ctx.mask; ALiBi adds ctx.bias). Every position gives
    keys and values; only ctx.rows ask queries, and the output is their rows (R, D). With ctx.kv the new keys and
    values are written at t0.. and the queries read every cached position before them. Returns (out, cache).
    """
    rows = ctx.answer_rows
    T = h.shape[0] // ctx.B if rows is None else rows.T
    qkv, _ = L.linear_forward(h, params[p + "attn.w_qkv"], params[p + "attn.b_qkv"])  # (N, 3D)
    q, k, v = _heads(qkv, T, cfg.n_heads, ctx)  # (B, H, Tq, Dh), (B, H, T, Dh), (B, H, T, Dh)
    q, k, qk_norms = _qk_norm(q, k, params, p, cfg)
    q, k, rope = _rotate(q, k, T, cfg, ctx)
    k, v = _extend_kv_cache(k, v, T, ctx)  # (B, H, T_k, Dh): T_k = t0 + T
    mask, bias = _visible_keys(T, cfg, ctx)  # each broadcasting to (B, H, Tq, T_k)
    y, c = L.attention_forward(q, k, v, mask, cfg.scaling, bias)  # (B, H, Tq, Dh); c.weights (B, H, Tq, T_k)
    weights = c.weights
    if ctx.hooks is not None:
        y, weights = _hook_pattern(y, weights, v, p, ctx)
    if ctx.head_mask is not None:
        y = y * ctx.head_mask[:, None, None]
    project = _project_out if ctx.hooks is None else _project_out_hooked
    out, merged = project(y, params[p + "attn.w_out"], params[p + "attn.b_out"], p, ctx)  # (R, D), (R, D)
    cache = SelfAttentionCache(h, c.q, c.k, c.v, weights, c.factor, merged, ctx.head_mask, ctx.rows, rope, *qk_norms)
    return out, cache


def _heads(qkv, T, H, ctx):
    """The fused projections (N, 3D) as each head's queries (B, H, Tq, Dh), keys and values (B, H, T, Dh)."""
    B, D, rows = ctx.B, qkv.shape[1] // 3, ctx.answer_rows
    if rows is not None and rows.present is not None:  # into the padded layout; padding stays 0 and is masked
        qkv, present = np.zeros((B * T, 3 * D), dtype=qkv.dtype), qkv
        qkv[rows.present] = present
    q, k, v = qkv.reshape(B, T, 3, H, D // H).transpose(2, 0, 3, 1, 4)  # each (B, H, T, Dh)
    if rows is None:
        q = q[:, :, ctx.rows :]  # (B, H, Tq, Dh)
    elif rows.window is not None:  # (B, H, W, Dh)
        q = qkv.reshape(B, T, 3, H, D // H)[rows.batch, rows.window, 0].transpose(0, 2, 1, 3)
    return q, k, v


def _qk_norm(q, k, params, p, cfg):
    """qk-norm: each head's q and k normalised over Dh, before RoPE and the scores (and the KV cache)."""
    if not cfg.qk_norm:
        return q, k, (None, None)
    q, q_norm = L.layernorm_forward(q, params[p + "attn.q_norm.gamma"], params[p + "attn.q_norm.beta"])
    k, k_norm = L.layernorm_forward(k, params[p + "attn.k_norm.gamma"], params[p + "attn.k_norm.beta"])
    return q, k, (q_norm, k_norm)


def _rope_at_queries(cos, sin, q_from):
    """RoPE's cos and sin (T, Dh/2) at the query positions: (Tq, Dh/2), or (B, 1, W, Dh/2) in windows."""
    if isinstance(q_from, int):
        return cos[q_from:], sin[q_from:]
    if q_from.window is None:
        return cos, sin
    return cos[q_from.window][:, None], sin[q_from.window][:, None]


def _rotate(q, k, T, cfg, ctx):
    """RoPE (Su et al. 2021) on q and k at their positions; the tables (T, Dh/2) are kept for the backward."""
    if cfg.position != "rope":
        return q, k, None
    if ctx.pos is None:
        cos, sin = L.rope_tables(ctx.t0 + T, cfg.d_head, cfg.dtype)
        cos, sin = cos[ctx.t0 :], sin[ctx.t0 :]  # (T, Dh/2)
    else:
        cos, sin = P.rope_at(ctx.pos, cfg.d_head, cfg.dtype)
    return L.rope_forward(q, *_rope_at_queries(cos, sin, ctx.rows)), L.rope_forward(k, cos, sin), (cos, sin)


def _extend_kv_cache(k, v, T, ctx):
    """With a KV cache: the chunk's keys and values written at t0..t0+T-1, and every cached one up to there read."""
    if ctx.kv is None:
        return k, v
    (K, V), end = ctx.kv, ctx.t0 + T
    K[:, :, ctx.t0 : end] = k
    V[:, :, ctx.t0 : end] = v
    return K[:, :, :end], V[:, :, :end]  # (B, H, t0 + T, Dh)


def _visible_keys(T, cfg, ctx):
    """The mask and ALiBi bias at the rows that ask queries."""
    mask, bias, rows = ctx.mask, ctx.bias, ctx.answer_rows
    if ctx.kv is not None:  # the chunk's queries are the last T of t0 + T keys; one new query sees every key
        mask = L.causal_bias(T, ctx.t0 + T, cfg.dtype) if T > 1 else None
        if cfg.position == "alibi" and bias is None:  # given: at the caller's positions
            bias = P.alibi_bias_cached(T, ctx.t0 + T, cfg.n_heads, cfg.dtype)
    elif rows is None:
        if ctx.rows:
            mask = None if mask is None else mask[..., ctx.rows :, :]
            bias = None if bias is None else bias[:, ctx.rows :]
    elif rows.window is not None:  # each sequence's window: the mask (B, 1, W, T), the bias (B, H, W, T)
        if mask is not None:
            mask = (mask[rows.window] if mask.ndim == 2 else mask[rows.batch, 0, rows.window])[:, None]
        bias = None if bias is None else bias[:, rows.window].transpose(1, 0, 2, 3)
    return mask, bias


def _hook_pattern(y, weights, v, p, ctx):
    """The attention weights through their hook point; replaced, the values are weighted anew."""
    weights = ctx.hooks(p + "attn.pattern", weights)
    if p + "attn.pattern" in ctx.hooks:
        y = weights @ v  # (B, H, Tq, Dh)
    return y, weights


def _project_out(y, w_out, b_out, p, ctx):
    """The heads (B, H, Tq, Dh) side by side, at the rows kept, through W_O: (R, D), and W_O's input (R, D)."""
    merged = L.merge_heads(y).reshape(-1, w_out.shape[0])  # (B*Tq, D)
    if ctx.answer_rows is not None:
        merged = merged[ctx.answer_rows.keep]  # the rows kept; from here on row-wise
    out, _ = L.linear_forward(merged, w_out, b_out)  # (R, D)
    return out, merged


def _project_out_hooked(y, w_out, b_out, p, ctx):
    """_project_out through the hook points, every row (int rows only): each head's output and its share of W_O
    seen apart; a replaced attn.result is summed over the heads in place of the fused product (equal up to
    rounding)."""
    B, H, Tq, Dh = y.shape
    D = H * Dh
    z = ctx.hooks(p + "attn.z", y.transpose(0, 2, 1, 3))  # (B, Tq, H, Dh)
    merged = np.ascontiguousarray(z).reshape(-1, D)  # (B*Tq, D)
    result = ctx.hooks(p + "attn.result", np.einsum("bthe,hed->bthd", z, w_out.reshape(H, Dh, D)))  # (B, Tq, H, D)
    if p + "attn.result" in ctx.hooks:
        out = (result.sum(axis=2) + b_out).reshape(-1, D)
    else:
        out, _ = L.linear_forward(merged, w_out, b_out)
    return ctx.hook(p + "attn_out", out), merged  # (B*Tq, D)


# --- backward --------------------------------------------------------------


def self_attention_backward(dout, cache: SelfAttentionCache, params, p, cfg, grads):
    """d(the sublayer's input) (N, D) from d(its output) dout (R, D); writes the attention's gradients."""
    B, H, T, Dh = cache.k.shape  # every position gives a key
    q_from = cache.q_from
    rows = None if isinstance(q_from, int) else q_from
    windowed = rows is not None and rows.window is not None
    D = H * Dh
    Tq = T - q_from if rows is None else rows.window.shape[1] if windowed else T
    out_grads = grads[p + "attn.w_out"], grads[p + "attn.b_out"]
    dmerged, *_ = L.linear_backward(dout, cache.merged, params[p + "attn.w_out"], out=out_grads)  # (R, D)
    if rows is not None:  # the kept rows back into the padded layout; the others gave no output
        dmerged, dkept = np.zeros((B * Tq, D), dtype=dmerged.dtype), dmerged  # (B*Tq, D)
        dmerged[rows.keep] = dkept
    dy = dmerged.reshape(B, Tq, H, Dh).transpose(0, 2, 1, 3)  # (B, H, Tq, Dh)
    if cache.head_mask is not None:
        dy = dy * cache.head_mask[:, None, None]
    dqkv = np.empty((B, T, 3, H, Dh), dtype=cache.x.dtype)
    dq, dk, dv = dqkv.transpose(2, 0, 3, 1, 4)  # views, each (B, H, T, Dh)
    if rows is None:
        dq[:, :, :q_from] = 0.0  # positions that asked no query
        dq = dq[:, :, q_from:]  # (B, H, Tq, Dh)
    elif windowed:
        dqkv[:, :, 0] = 0.0  # positions outside the windows asked no query
        dq = None  # the windows' gradient, put in place below
    if cfg.position == "rope" or cache.q_norm is not None:
        dq_r, dk_r = _rotated_qk_backward(dy, cache, p, cfg, grads, dv)
        if dq is None:
            dq = dq_r
        else:
            dq[...] = dq_r
        dk[...] = dk_r
    else:
        dq, *_ = L.attention_backward(dy, cache, out=(dq, dk, dv))
    if windowed:
        dqkv[rows.batch, rows.window, 0] = dq.transpose(0, 2, 1, 3)  # (B, W, H, Dh)
    dqkv = dqkv.reshape(B * T, 3 * D)
    if rows is not None and rows.present is not None:
        dqkv = dqkv[rows.present]  # (N, 3D) back to the present rows
    dh, *_ = L.linear_backward(
        dqkv, cache.x, params[p + "attn.w_qkv"], out=(grads[p + "attn.w_qkv"], grads[p + "attn.b_qkv"])
    )
    return dh  # (N, D)


def _rotated_qk_backward(dy, cache, p, cfg, grads, dv):
    """dq (B, H, Tq, Dh) and dk (B, H, T, Dh) back through RoPE and qk-norm; writes dv and qk-norm's gradients."""
    dq, dk, _ = L.attention_backward(dy, cache, out=(None, None, dv))  # (B, H, Tq, Dh), (B, H, T, Dh)
    if cfg.position == "rope":
        cos, sin = cache.rope  # at the forward's positions
        dq = L.rope_backward(dq, *_rope_at_queries(cos, sin, cache.q_from))
        dk = L.rope_backward(dk, cos, sin)
    if cache.q_norm is not None:  # back through qk-norm; its gain and bias summed over heads and positions
        names = ("attn.q_norm.gamma", "attn.q_norm.beta", "attn.k_norm.gamma", "attn.k_norm.beta")
        gq_gamma, gq_beta, gk_gamma, gk_beta = (grads[p + n] for n in names)
        dq, *_ = L.layernorm_backward(dq, cache.q_norm, out=(gq_gamma, gq_beta))
        dk, *_ = L.layernorm_backward(dk, cache.k_norm, out=(gk_gamma, gk_beta))
    return dq, dk
