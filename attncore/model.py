"""The decoder: parameter layout and init, forward, backward, and generation with a KV cache.

Parameters are a dict of dotted names to arrays (views into one flat buffer when
built by `init_params`), so Adam, the gradient check and the PyTorch oracle walk
the same names. The forward hands its backward a ModelCache (a BlockCache per block, of named
layer caches), and takes optional hook points (`hooks`) that the interpretability tools record
and patch activations through. Shapes: B batch, T time, D model width, H heads, Dh = D / H.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from . import layers as L
from . import positions as P
from ._blas import on_one_blas_thread
from .config import ModelConfig

# --- parameters ------------------------------------------------------------


def param_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every trained tensor with its shape, in a fixed order."""
    d, f, v = cfg.d_model, cfg.d_ff, cfg.vocab_size
    shapes = {"tok_emb": (v, d)}
    if cfg.position == "learned":
        shapes["pos_emb"] = (cfg.max_len, d)
    for i in range(cfg.n_layers):
        p = f"blocks.{i}."
        shapes |= {
            p + "ln1.gamma": (d,),
            p + "ln1.beta": (d,),
            p + "attn.w_qkv": (d, 3 * d),  # Q, K, V projections fused along the columns
            p + "attn.b_qkv": (3 * d,),
        }
        if cfg.qk_norm:  # one gain and bias over d_head for every head's queries, one for its keys
            dh = cfg.d_head
            shapes |= {
                p + n: (dh,) for n in ("attn.q_norm.gamma", "attn.q_norm.beta", "attn.k_norm.gamma", "attn.k_norm.beta")
            }
        shapes |= {
            p + "attn.w_out": (d, d),
            p + "attn.b_out": (d,),
            p + "ln2.gamma": (d,),
            p + "ln2.beta": (d,),
            p + "ffn.w1": (d, f),
            p + "ffn.b1": (f,),
            p + "ffn.w2": (f, d),
            p + "ffn.b2": (d,),
        }
    shapes |= {"ln_f.gamma": (d,), "ln_f.beta": (d,), "head.w": (d, v), "head.b": (v,)}
    return shapes


def count_params(cfg: ModelConfig) -> int:
    return sum(int(np.prod(s)) for s in param_shapes(cfg).values())


def unflatten(flat: np.ndarray, shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    """Views into `flat`, one per name: writing a view writes the buffer."""
    out, offset = {}, 0
    for name, shape in shapes.items():
        n = int(np.prod(shape))
        out[name] = flat[offset : offset + n].reshape(shape)
        offset += n
    assert offset == flat.size, "flat buffer does not match the shapes"
    return out


def flatten(tensors: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]]) -> np.ndarray:
    return np.concatenate([tensors[name].ravel() for name in shapes])


def tensor_rng(seed: int, name: str) -> np.random.Generator:
    """The random stream of one initial tensor: a function of (seed, name) only.

    Spawn key (0, crc32(name)) under the run's seed: the initial-weights branch (0) of the
    SeedSequence whose branch 1 draws the training batches. A stable hash (never the salted hash()).
    """
    key = zlib.crc32(name.encode("utf-8"))
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0, key)))


def init_params(cfg: ModelConfig, rng: np.random.Generator | int) -> dict[str, np.ndarray]:
    """The article's initialisation: weights N(0, 1)/sqrt(fan_in), biases 0, LN gamma 1 beta 0, embeddings
    N(0, 1)*0.1 (cfg.embed_std).

    rng an int seed: every tensor draws from its own stream `tensor_rng(seed, name)`, so variants
    at one seed (no position table, post-LN, ...) start bit-identical on every tensor they share.
    rng a Generator: the tensors draw from it one after another, in `param_shapes` order.
    """
    shapes = param_shapes(cfg)
    flat = np.zeros(sum(int(np.prod(s)) for s in shapes.values()), dtype=cfg.dtype)
    params = unflatten(flat, shapes)
    seeded = not isinstance(rng, np.random.Generator)
    for name, shape in shapes.items():
        leaf = name.rsplit(".", 1)[-1]
        if name in ("tok_emb", "pos_emb") or leaf.startswith("w"):
            draw = (tensor_rng(rng, name) if seeded else rng).standard_normal(shape)
            params[name][...] = draw * cfg.embed_std if name in ("tok_emb", "pos_emb") else draw / np.sqrt(shape[0])
        elif leaf == "gamma":
            params[name][...] = 1.0
    return params


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


# --- caches between forward and backward ----------------------------------


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
    q_from: int | AnswerRows  # the positions that asked queries
    rope: tuple[np.ndarray, np.ndarray] | None  # RoPE's cos and sin (T, Dh/2) at the positions, or None
    q_norm: L.LayerNormCache | None = None  # qk-norm: the queries' LayerNorm over Dh, or None without it
    k_norm: L.LayerNormCache | None = None  # and the keys'


class BlockCache(NamedTuple):
    ln1: L.LayerNormCache
    attn: SelfAttentionCache
    ln2: L.LayerNormCache
    ffn: L.FFNCache


class ModelCache(NamedTuple):
    idx: np.ndarray  # (B, T) the tokens
    out_from: int | AnswerRows  # the rows output
    blocks: list[BlockCache]
    ln_f: L.LayerNormCache
    xf: np.ndarray  # (R, D) the final LayerNorm's output: the head's input
    pos: np.ndarray | None  # (T,) randomized positions, or None for 0..T-1


# --- forward ---------------------------------------------------------------


def _rope_at_queries(cos, sin, q_from):
    """RoPE's cos and sin (T, Dh/2) at the query positions: (Tq, Dh/2), or (B, 1, W, Dh/2) in windows."""
    if isinstance(q_from, int):
        return cos[q_from:], sin[q_from:]
    if q_from.window is None:
        return cos, sin
    return cos[q_from.window][:, None], sin[q_from.window][:, None]


def _hook(hooks, name, x, B):
    """x (B*T, D) through the hook point `name`, which sees it as (B, T, D)."""
    return hooks(name, x.reshape(B, -1, x.shape[-1])).reshape(x.shape)


def _mha_forward(h, params, p, cfg, B, t0=0, mask=None, kv=None, head_mask=None, q_from=0, pos=None, bias=None,
                 hooks=None):  # fmt: skip
    """Multi-head causal self-attention of h (B*T, D) at positions t0..t0+T-1 (or `pos` (T,), randomized).

    Every position gives keys and values; only positions q_from.. ask queries,
    so the output is (B*(T-q_from), D) (the last block needs only the answer
    positions). With q_from AnswerRows, h is their present rows (N, D) and the output their kept rows.
    With kv = (K, V) cache arrays (B, H, T_max, Dh) the new keys and
    values are written at t0.. and the queries read every cached position before them.
    bias (H, T, T): ALiBi's score bias over all T positions (its query rows are used).
    """
    N, D = h.shape  # activations stay 2-D (B*T, D): a 2-D matrix product is one BLAS call
    rows = None if isinstance(q_from, int) else q_from
    T, H, Dh = N // B if rows is None else rows.T, cfg.n_heads, cfg.d_head
    qkv, _ = L.linear_forward(h, params[p + "attn.w_qkv"], params[p + "attn.b_qkv"])  # (B*T, 3D)
    if rows is not None and rows.present is not None:  # into the padded layout; padding stays 0 and is masked
        qkv, present = np.zeros((B * T, 3 * D), dtype=qkv.dtype), qkv
        qkv[rows.present] = present
    q, k, v = qkv.reshape(B, T, 3, H, Dh).transpose(2, 0, 3, 1, 4)  # each (B, H, T, Dh)
    if rows is None:
        q = q[:, :, q_from:]  # (B, H, Tq, Dh)
    elif rows.window is not None:  # (B, H, W, Dh)
        q = qkv.reshape(B, T, 3, H, Dh)[rows.batch, rows.window, 0].transpose(0, 2, 1, 3)
    q_norm = k_norm = None
    if cfg.qk_norm:  # each head's q and k normalised over Dh, before RoPE and the scores (and the KV cache)
        q, q_norm = L.layernorm_forward(q, params[p + "attn.q_norm.gamma"], params[p + "attn.q_norm.beta"])
        k, k_norm = L.layernorm_forward(k, params[p + "attn.k_norm.gamma"], params[p + "attn.k_norm.beta"])
    rope = None
    if cfg.position == "rope":
        if pos is None:
            cos, sin = L.rope_tables(t0 + T, Dh, cfg.dtype)
            cos, sin = cos[t0:], sin[t0:]  # (T, Dh/2)
        else:
            cos, sin = P.rope_at(pos, Dh, cfg.dtype)
        rope = cos, sin
        q = L.rope_forward(q, *_rope_at_queries(cos, sin, q_from))
        k = L.rope_forward(k, cos, sin)
    if kv is not None:
        kv[0][:, :, t0 : t0 + T] = k
        kv[1][:, :, t0 : t0 + T] = v
        k, v = kv[0][:, :, : t0 + T], kv[1][:, :, : t0 + T]  # (B, H, t0 + T, Dh)
        mask = L.causal_bias(T, t0 + T, cfg.dtype) if T > 1 else None  # one new query sees every key
        if cfg.position == "alibi" and bias is None:  # given: at the caller's positions
            bias = P.alibi_bias_cached(T, t0 + T, H, cfg.dtype)
    elif rows is None:
        if q_from:
            mask = None if mask is None else mask[..., q_from:, :]
            bias = None if bias is None else bias[:, q_from:]
    elif rows.window is not None:  # each sequence's window: the mask (B, 1, W, T), the bias (B, H, W, T)
        if mask is not None:
            mask = (mask[rows.window] if mask.ndim == 2 else mask[rows.batch, 0, rows.window])[:, None]
        bias = None if bias is None else bias[:, rows.window].transpose(1, 0, 2, 3)
    y, c = L.attention_forward(q, k, v, mask, cfg.scaling, bias)  # (B, H, Tq, Dh)
    weights = c.weights  # (B, H, Tq, T)
    if hooks is not None:
        weights = hooks(p + "attn.pattern", weights)
        if p + "attn.pattern" in hooks:  # replaced: the values weighted anew
            y = weights @ v  # (B, H, Tq, Dh)
    if head_mask is not None:
        y = y * head_mask[:, None, None]
    w_out, b_out = params[p + "attn.w_out"], params[p + "attn.b_out"]
    if hooks is None:
        merged = L.merge_heads(y).reshape(-1, D)  # (B*Tq, D)
        if rows is not None:
            merged = merged[rows.keep]  # the rows kept; from here on row-wise
        out, _ = L.linear_forward(merged, w_out, b_out)  # (R, D)
    else:  # every row (out_from an int); each head's output and its share of W_O seen apart
        z = hooks(p + "attn.z", y.transpose(0, 2, 1, 3))  # (B, Tq, H, Dh)
        merged = np.ascontiguousarray(z).reshape(-1, D)  # (B*Tq, D)
        result = hooks(p + "attn.result", np.einsum("bthe,hed->bthd", z, w_out.reshape(H, Dh, D)))  # (B, Tq, H, D)
        if p + "attn.result" in hooks:  # the heads' sum replaces the fused product (equal up to rounding)
            out = (result.sum(axis=2) + b_out).reshape(-1, D)
        else:
            out, _ = L.linear_forward(merged, w_out, b_out)
        out = _hook(hooks, p + "attn_out", out, B)  # (B*Tq, D)
    cache = SelfAttentionCache(h, c.q, c.k, c.v, weights, c.factor, merged, head_mask, q_from, rope, q_norm, k_norm)
    return out, cache


def _query_rows(x, B, q_from):
    """Rows of x (B*T, D) at positions q_from.. -> (B*(T-q_from), D); of AnswerRows' present rows, the kept."""
    if not isinstance(q_from, int):
        return x if q_from.out is None else x[q_from.out]
    return x if not q_from else x.reshape(B, -1, x.shape[-1])[:, q_from:].reshape(-1, x.shape[-1])


def _block_forward(x, params, i, cfg, B, t0=0, mask=None, kv=None, head_mask=None, q_from=0, pos=None, bias=None,
                   hooks=None):  # fmt: skip
    """One block, pre-LN or post-LN (Xiong et al. 2020), on x (B*T, D).

    Returns x at the query rows (_query_rows) and the backward cache.
    """
    p = f"blocks.{i}."
    ln = (params[p + "ln1.gamma"], params[p + "ln1.beta"]), (params[p + "ln2.gamma"], params[p + "ln2.beta"])
    ffn = params[p + "ffn.w1"], params[p + "ffn.b1"], params[p + "ffn.w2"], params[p + "ffn.b2"]
    if hooks is not None:
        x = _hook(hooks, p + "resid_pre", x, B)
    if cfg.norm == "pre":
        h, c_ln1 = L.layernorm_forward(x, *ln[0])  # (N, D)
        a, c_attn = _mha_forward(h, params, p, cfg, B, t0, mask, kv, head_mask, q_from, pos, bias, hooks)
        x1 = _query_rows(x, B, q_from) + a  # (R, D)
        if hooks is not None:
            x1 = _hook(hooks, p + "resid_mid", x1, B)
        h2, c_ln2 = L.layernorm_forward(x1, *ln[1])
        f, c_ffn = L.ffn_forward(h2, *ffn)
        if hooks is not None:
            f = _hook(hooks, p + "mlp_out", f, B)
        x2 = x1 + f
    else:
        a, c_attn = _mha_forward(x, params, p, cfg, B, t0, mask, kv, head_mask, q_from, pos, bias, hooks)
        x1, c_ln1 = L.layernorm_forward(_query_rows(x, B, q_from) + a, *ln[0])  # (R, D)
        if hooks is not None:
            x1 = _hook(hooks, p + "resid_mid", x1, B)
        f, c_ffn = L.ffn_forward(x1, *ffn)
        if hooks is not None:
            f = _hook(hooks, p + "mlp_out", f, B)
        x2, c_ln2 = L.layernorm_forward(x1 + f, *ln[1])
    if hooks is not None:
        x2 = _hook(hooks, p + "resid_post", x2, B)
    return x2, BlockCache(c_ln1, c_attn, c_ln2, c_ffn)


def _embed(params, idx, cfg, t0=0, pos=None):
    T = idx.shape[1]
    x = params["tok_emb"][idx]  # (B, T, D)
    last = t0 + T - 1 if pos is None else int(np.max(pos))
    if last >= cfg.max_len and cfg.position in ("learned", "sinusoidal"):
        raise ValueError(f"position {last} is beyond max_len={cfg.max_len}")
    if pos is not None:
        if cfg.position == "learned":
            x += params["pos_emb"][pos]
        elif cfg.position == "sinusoidal":
            x += P.sinusoidal_at(pos, cfg.max_len, cfg.d_model, cfg.dtype)
    elif cfg.position == "learned":
        x += params["pos_emb"][t0 : t0 + T]
    elif cfg.position == "sinusoidal":
        x += L.sinusoidal_table(cfg.max_len, cfg.d_model, cfg.dtype)[t0 : t0 + T]
    return x.reshape(-1, cfg.d_model)  # (B*T, D)


@on_one_blas_thread  # the bits must not depend on the inherited BLAS thread count (attncore._blas)
def forward(params, idx, cfg: ModelConfig, *, out_from: int | AnswerRows = 0, head_mask=None, padding=None,
            positions=None, hooks=None):  # fmt: skip
    """Logits (B, T - out_from, V) for tokens idx (B, T), and the ModelCache for `backward`.

    out_from skips the last block's queries and the output head on positions that carry no loss; AnswerRows
    instead compute their present rows only and give the packed logits (R, V) of their output rows (a padded
    batch: padded_forward). head_mask
    (n_layers, H) of 0/1 zeroes chosen heads' outputs; padding (B, T) bool masks keys
    (combined with the causal mask in L.attention_mask, the one place masks meet);
    positions (T,) increasing ints: the batch's positions in place of 0..T-1 (randomized positions).

    hooks (as TransformerLens's hook points; attncore.interpret.hooks lists the names and shapes, and its
    HookPoints records and replaces): called as hooks(name, activation) at each point, in forward order, it
    returns the activation the forward goes on with; `name in hooks` says it may differ, so replaced attention
    weights are applied to the values anew and a replaced attn.result is summed over the heads in place of the
    fused W_O product. With an int out_from only (the last block's rows from resid_mid on are its queries).
    None (training, evaluation, generation) skips every point.
    """
    B, T = idx.shape
    pos = None if positions is None else np.asarray(positions, dtype=np.int64)
    if pos is not None and pos.shape != (T,):
        raise ValueError(f"positions must have shape ({T},), got {pos.shape}")
    if hooks is not None and not isinstance(out_from, int):
        raise ValueError("hooks see whole sequences: out_from must be an int, not AnswerRows")
    if padding is None:
        mask = L.causal_bias(T, T, cfg.dtype)
    else:
        mask = L.attention_mask(L.causal_mask(T), padding)
        if padding[:, 0].all():  # every query may read key 0, so no row is fully masked: the additive form
            mask = L.as_bias(mask, cfg.dtype)
    bias = None
    if cfg.position == "alibi":
        bias = (
            P.alibi_bias_cached(T, T, cfg.n_heads, cfg.dtype)
            if pos is None
            else P.alibi_bias(pos, pos, cfg.n_heads, cfg.dtype)
        )
    x = _embed(params, idx, cfg, pos=pos)  # (B*T, D)
    if hooks is not None:
        x = _hook(hooks, "embed", x, B)
    inner = 0
    if not isinstance(out_from, int):
        if (out_from.B, out_from.T) != (B, T):
            raise ValueError(f"AnswerRows of a ({out_from.B}, {out_from.T}) batch given for ({B}, {T})")
        x = x if out_from.present is None else x[out_from.present]  # (N, D)
        inner = out_from.inner()
    blocks = []
    for i in range(cfg.n_layers):
        hm = None if head_mask is None else head_mask[i]
        q_from = out_from if i == cfg.n_layers - 1 else inner  # the last block computes only the outputs asked for
        x, c = _block_forward(x, params, i, cfg, B, mask=mask, head_mask=hm, q_from=q_from, pos=pos, bias=bias,
                              hooks=hooks)  # fmt: skip
        blocks.append(c)
    xf, c_lnf = L.layernorm_forward(x, params["ln_f.gamma"], params["ln_f.beta"])  # (R, D) the output rows
    if hooks is not None:
        xf = _hook(hooks, "ln_final", xf, B)
    logits, _ = L.linear_forward(xf, params["head.w"], params["head.b"])  # (R, V)
    if hooks is not None:
        logits = _hook(hooks, "logits", logits, B)
    cache = ModelCache(idx, out_from, blocks, c_lnf, xf, pos)
    if not isinstance(out_from, int):
        return logits, cache  # (R, V)
    return logits.reshape(B, T - out_from, -1), cache


# --- backward --------------------------------------------------------------


def _mha_backward(dout, cache: SelfAttentionCache, params, p, cfg, grads):
    """d(the sublayer's input) (N, D) from d(its output) dout (R, D); writes the four attention gradients."""
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
        dq_r, dk_r, _ = L.attention_backward(dy, cache, out=(None, None, dv))  # (B, H, Tq, Dh), (B, H, T, Dh)
        if cfg.position == "rope":
            cos, sin = cache.rope  # at the forward's positions
            dq_r = L.rope_backward(dq_r, *_rope_at_queries(cos, sin, q_from))
            dk_r = L.rope_backward(dk_r, cos, sin)
        if cache.q_norm is not None:  # back through qk-norm; its gain and bias summed over heads and positions
            names = ("attn.q_norm.gamma", "attn.q_norm.beta", "attn.k_norm.gamma", "attn.k_norm.beta")
            gq_gamma, gq_beta, gk_gamma, gk_beta = (grads[p + n] for n in names)
            dq_r, *_ = L.layernorm_backward(dq_r, cache.q_norm, out=(gq_gamma, gq_beta))
            dk_r, *_ = L.layernorm_backward(dk_r, cache.k_norm, out=(gk_gamma, gk_beta))
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


def _add_query_rows(dx, d_rows, B, q_from):
    """dx += d_rows on the rows _query_rows took (its adjoint)."""
    if isinstance(q_from, int) and q_from:
        D = dx.shape[-1]
        dx.reshape(B, -1, D)[:, q_from:] += d_rows.reshape(B, -1, D)
    elif isinstance(q_from, int) or q_from.out is None:  # every row
        dx += d_rows
    else:
        dx[q_from.out] += d_rows  # distinct rows: fancy += adds each once


def _block_backward(dx2, cache: BlockCache, params, i, cfg, grads):
    """d(the block's input) (N, D) from d(its output) dx2 (R, D); writes the block's gradients."""
    p = f"blocks.{i}."
    q_from, B = cache.attn.q_from, cache.attn.k.shape[0]
    w1, w2 = params[p + "ffn.w1"], params[p + "ffn.w2"]
    g_ffn = tuple(grads[p + n] for n in ("ffn.w1", "ffn.b1", "ffn.w2", "ffn.b2"))
    g_ln1, g_ln2 = (grads[p + "ln1.gamma"], grads[p + "ln1.beta"]), (grads[p + "ln2.gamma"], grads[p + "ln2.beta"])
    if cfg.norm == "pre":
        dh2, *_ = L.ffn_backward(dx2, cache.ffn, w1, w2, out=g_ffn)  # (R, D)
        dx1, *_ = L.layernorm_backward(dh2, cache.ln2, out=g_ln2)  # (R, D)
        dx1 += dx2
        dh = _mha_backward(dx1, cache.attn, params, p, cfg, grads)  # (N, D)
        dx, *_ = L.layernorm_backward(dh, cache.ln1, out=g_ln1)  # (N, D)
        _add_query_rows(dx, dx1, B, q_from)
    else:
        dz2, *_ = L.layernorm_backward(dx2, cache.ln2, out=g_ln2)  # (R, D)
        dx1, *_ = L.ffn_backward(dz2, cache.ffn, w1, w2, out=g_ffn)  # (R, D)
        dx1 += dz2
        dz1, *_ = L.layernorm_backward(dx1, cache.ln1, out=g_ln1)  # (R, D)
        dx = _mha_backward(dz1, cache.attn, params, p, cfg, grads)  # (N, D)
        _add_query_rows(dx, dz1, B, q_from)
    return dx


@on_one_blas_thread
def backward(dlogits, cache: ModelCache, params, cfg: ModelConfig, grads: dict[str, np.ndarray]) -> None:
    """Writes d(loss)/d(param) into grads (same names and shapes) given dlogits."""
    (B, T), D, pos = cache.idx.shape, cfg.d_model, cache.pos
    dlogits = dlogits.reshape(-1, dlogits.shape[-1])  # (R, V)
    dxf, *_ = L.linear_backward(dlogits, cache.xf, params["head.w"], out=(grads["head.w"], grads["head.b"]))
    dx, *_ = L.layernorm_backward(dxf, cache.ln_f, out=(grads["ln_f.gamma"], grads["ln_f.beta"]))  # (R, D)
    for i in reversed(range(cfg.n_layers)):  # the last block widens dx back to every position
        dx = _block_backward(dx, cache.blocks[i], params, i, cfg, grads)  # (N, D)
    if not isinstance(cache.out_from, int) and cache.out_from.present is not None:  # padding: no gradient
        dx, d_present = np.zeros((B * T, D), dtype=dx.dtype), dx  # (B*T, D)
        dx[cache.out_from.present] = d_present
    L.embedding_backward(dx, cache.idx, cfg.vocab_size, out=grads["tok_emb"])
    if cfg.position == "learned":
        grads["pos_emb"][...] = 0.0
        if pos is None:
            grads["pos_emb"][:T] = dx.reshape(B, T, D).sum(axis=0)
        else:  # the rows the positions read (distinct when drawn without replacement; add.at sums repeats)
            np.add.at(grads["pos_emb"], pos, dx.reshape(B, T, D).sum(axis=0))


@on_one_blas_thread
def padded_forward(params, seqs, lengths, cfg: ModelConfig, *, key_padding=True, positions=None, through=None):
    """Logits (R, V), targets (R,), AnswerRows and cache of a right-padded batch seqs (B, 2·max n + 1) of lengths n.

    The rows are each sequence's answer positions n..2n-1, and only its 2n real positions are computed
    (AnswerRows); through=t makes them n..t-1 and computes every position (padding included: the tests and
    the Masks page). The key padding mask (True on each sequence's 2n inputs) is combined with the causal mask
    in L.attention_mask; key_padding=False drops it (the article's trap) and computes every position too.
    """
    idx = seqs[:, :-1]
    T = idx.shape[1]
    n = np.asarray(lengths, dtype=np.int64)
    if through is None and key_padding:
        rows = AnswerRows.of(n, n, T, computed=2 * n)
    else:
        rows = AnswerRows.of(n, (n if through is None else through - n), T)
    padding = L.padding_mask(2 * n, T) if key_padding else None
    logits, cache = forward(params, idx, cfg, out_from=rows, padding=padding, positions=positions)
    return logits, seqs[rows.sequence, rows.window.reshape(-1)[rows.keep] + 1], rows, cache


@on_one_blas_thread
def sequence_losses(params, seqs, lengths, cfg: ModelConfig, *, key_padding=True, loss_mask=True) -> np.ndarray:
    """(B,) each sequence's mean cross-entropy over its own answer tokens in a padded batch.

    loss_mask=False averages over every position from its first answer on, the padding after it included.
    """
    through = None if loss_mask else seqs.shape[1] - 1
    logits, targets, rows, _ = padded_forward(params, seqs, lengths, cfg, key_padding=key_padding, through=through)
    z = logits - logits.max(axis=-1, keepdims=True)
    nll = np.log(np.exp(z).sum(axis=-1)) - z[np.arange(len(targets)), targets]
    return np.bincount(rows.sequence, nll, len(seqs)) / np.bincount(rows.sequence, minlength=len(seqs))


def _loss_backward(logits, targets, z_loss: float):
    """The cross-entropy of logits (N, V) and d(objective)/d logits: the cross-entropy's, plus z_loss · mean
    (log Z)² when z_loss > 0 (L.cross_entropy_z_forward). The loss returned is the cross-entropy alone."""
    if not z_loss:
        loss, ce_cache = L.cross_entropy_forward(logits, targets)
        return loss, L.cross_entropy_backward(ce_cache)
    loss, _, z_cache = L.cross_entropy_z_forward(logits, targets, z_loss)
    return loss, L.cross_entropy_z_backward(z_cache)


@on_one_blas_thread
def loss_and_grads(
    params, seqs, cfg: ModelConfig, answer_len: int, grads=None, *, positions=None, lengths=None, z_loss=0.0
):
    """Cross-entropy on the last `answer_len` targets of seqs (B, 2L+1) and its gradient.

    The input is seqs[:, :-1], the target seqs[:, 1:] (next token); only the
    answer positions carry loss (the article's tasks). grads may be preallocated views. positions (2L,): randomized
    positions; lengths (B,): seqs is a right-padded batch of these lengths (the loss masked on padding).
    z_loss c > 0: the gradient is the objective's, cross-entropy + c · mean over the same targets of (log Z)²
    (Z the output softmax's normaliser); the loss returned is still the cross-entropy.
    """
    if lengths is not None:  # the mean over every answer token of the batch, padding left out
        logits, targets, _, cache = padded_forward(params, seqs, lengths, cfg, positions=positions)
        loss, dlogits = _loss_backward(logits, targets, z_loss)
        if grads is None:
            grads = {name: np.empty_like(a) for name, a in params.items()}
        backward(dlogits, cache, params, cfg, grads)
        return loss, grads
    idx, targets = seqs[:, :-1], seqs[:, -answer_len:]
    logits, cache = forward(params, idx, cfg, out_from=idx.shape[1] - answer_len, positions=positions)
    B, A, V = logits.shape
    loss, dlogits = _loss_backward(logits.reshape(B * A, V), targets.ravel(), z_loss)
    dlogits = dlogits.reshape(B, A, V)
    if grads is None:
        grads = {name: np.empty_like(a) for name, a in params.items()}
    backward(dlogits, cache, params, cfg, grads)
    return loss, grads


# --- generation ------------------------------------------------------------


def _forward_cached(params, idx, cfg, kv_cache, t0, head_mask=None, positions=None):
    """Logits (B, T, V) of the chunk idx at positions t0.., reading and extending kv_cache.

    positions: every position of the whole sequence (randomized); the chunk uses positions[t0 : t0 + T].
    """
    B, T = idx.shape
    pos = bias = None
    if positions is not None:
        pos = positions[t0 : t0 + T]
        if cfg.position == "alibi":
            bias = P.alibi_bias(pos, positions[: t0 + T], cfg.n_heads, cfg.dtype)
    x = _embed(params, idx, cfg, t0, pos=pos)
    for i in range(cfg.n_layers):
        hm = None if head_mask is None else head_mask[i]
        x, _ = _block_forward(x, params, i, cfg, B, t0=t0, kv=kv_cache[i], head_mask=hm, pos=pos, bias=bias)
    xf, _ = L.layernorm_forward(x, params["ln_f.gamma"], params["ln_f.beta"])
    return L.linear_forward(xf, params["head.w"], params["head.b"])[0].reshape(B, T, -1)


@on_one_blas_thread
def generate(params, prompt, n_new: int, cfg: ModelConfig, *, use_cache=True, head_mask=None, positions=None):
    """Greedy decoding of n_new tokens after prompt (B, T0); positions (T0 + n_new - 1,): randomized positions of
    every token fed in, shared by the batch (default 0..).

    Returns tokens (B, n_new) and the logits that chose them (B, n_new, V). With
    the cache each step computes one position and reads past keys and values;
    without it every step recomputes the whole prefix.
    """
    B, T0 = prompt.shape
    total = T0 + n_new - 1  # the last generated token is never fed back
    tokens = np.empty((B, n_new), dtype=np.int64)
    logits_out = np.empty((B, n_new, cfg.vocab_size), dtype=cfg.dtype)
    if use_cache:
        shape = (B, cfg.n_heads, total, cfg.d_head)
        kv_cache = [(np.empty(shape, cfg.dtype), np.empty(shape, cfg.dtype)) for _ in range(cfg.n_layers)]
        logits = _forward_cached(params, prompt, cfg, kv_cache, 0, head_mask, positions)[:, -1]
    else:
        seq = np.empty((B, total + 1), dtype=np.int64)
        seq[:, :T0] = prompt
        pos = None if positions is None else positions[:T0]
        logits = forward(params, prompt, cfg, out_from=T0 - 1, head_mask=head_mask, positions=pos)[0][:, -1]
    for step in range(n_new):
        tokens[:, step] = logits.argmax(axis=-1)
        logits_out[:, step] = logits
        if step == n_new - 1:
            break
        t = T0 + step  # position of the token just chosen
        if use_cache:
            chunk = tokens[:, step : step + 1]
            logits = _forward_cached(params, chunk, cfg, kv_cache, t, head_mask, positions)[:, -1]
        else:
            seq[:, t] = tokens[:, step]
            pos = None if positions is None else positions[: t + 1]
            logits = forward(params, seq[:, : t + 1], cfg, out_from=t, head_mask=head_mask, positions=pos)[0][:, -1]
    return tokens, logits_out


@on_one_blas_thread
def attention_weights(params, idx, cfg: ModelConfig, head_mask=None) -> np.ndarray:
    """Attention weights (n_layers, B, H, T, T) of every layer and head for tokens idx (B, T)."""
    _, cache = forward(params, idx, cfg, head_mask=head_mask)  # out_from=0: every query of every layer
    return np.stack([block.attn.weights for block in cache.blocks])
