"""The decoder: forward, backward, the padded batch's losses, and generation with a KV cache.

Parameters are a dict of dotted names to arrays (views into one flat buffer when
built by `init_params`; their layout and init are attncore.params'), so Adam, the gradient check and the
PyTorch oracle walk the same names. The forward hands its backward a ModelCache (a BlockCache per block, of named
layer caches), and takes optional hook points (`hooks`) that the interpretability tools record
and patch activations through. Each block reads one attention.Context (the rows that ask queries, the
keys they may read, the KV cache, the hooks); the self-attention sublayer is attncore.attention's.
Shapes: B batch, T time, D model width, H heads, Dh = D / H.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import layers as L
from . import positions as P
from ._blas import on_one_blas_thread
from .attention import AnswerRows, Context, SelfAttentionCache, self_attention_backward, self_attention_forward
from .config import ModelConfig
from .params import count_params, flatten, init_params, param_shapes, tensor_rng, unflatten

__all__ = [  # the decoder's public names; its parameters' (attncore.params) read here too, as they always were
    "AnswerRows", "BlockCache", "ModelCache", "SelfAttentionCache", "attention_weights", "backward", "count_params",
    "flatten", "forward", "generate", "init_params", "loss_and_grads", "padded_forward", "param_shapes",
    "sequence_losses", "tensor_rng", "unflatten",
]  # fmt: skip

# --- caches between forward and backward ----------------------------------


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


def _block_forward(x, params, i, cfg, ctx: Context):
    """One block, pre-LN or post-LN (Xiong et al. 2020), on x (N, D): N = B*T rows, or a padded batch's present rows.

    Returns x at the query rows (R, D) (ctx.query_rows) and the backward cache.
    """
    p = f"blocks.{i}."
    ln1, ln2 = (params[p + "ln1.gamma"], params[p + "ln1.beta"]), (params[p + "ln2.gamma"], params[p + "ln2.beta"])
    ffn = params[p + "ffn.w1"], params[p + "ffn.b1"], params[p + "ffn.w2"], params[p + "ffn.b2"]
    x = ctx.hook(p + "resid_pre", x)
    if cfg.norm == "pre":  # x + Attn(LN(x)), then x1 + FFN(LN(x1))
        h, c_ln1 = L.layernorm_forward(x, *ln1)  # (N, D)
        a, c_attn = self_attention_forward(h, params, p, cfg, ctx)  # (R, D)
        x1 = ctx.hook(p + "resid_mid", ctx.query_rows(x) + a)  # (R, D)
        h2, c_ln2 = L.layernorm_forward(x1, *ln2)
        f, c_ffn = L.ffn_forward(h2, *ffn)
        x2 = x1 + ctx.hook(p + "mlp_out", f)
    else:  # LN(x + Attn(x)), then LN(x1 + FFN(x1))
        a, c_attn = self_attention_forward(x, params, p, cfg, ctx)  # (R, D)
        x1, c_ln1 = L.layernorm_forward(ctx.query_rows(x) + a, *ln1)  # (R, D)
        x1 = ctx.hook(p + "resid_mid", x1)
        f, c_ffn = L.ffn_forward(x1, *ffn)
        x2, c_ln2 = L.layernorm_forward(x1 + ctx.hook(p + "mlp_out", f), *ln2)
    x2 = ctx.hook(p + "resid_post", x2)
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
            positions=None, hooks=None, keys=None):  # fmt: skip
    """Logits (B, T - out_from, V) for tokens idx (B, T), and the ModelCache for `backward`.

    out_from skips the last block's queries and the output head on positions that carry no loss; AnswerRows
    instead compute their present rows only and give the packed logits (R, V) of their output rows (a padded
    batch: padded_forward). head_mask
    (n_layers, H) of 0/1 zeroes chosen heads' outputs; padding (B, T) bool masks keys
    (combined with the causal mask in L.attention_mask, the one place masks meet);
    positions (T,) increasing ints: the batch's positions in place of 0..T-1 (randomized positions);
    keys (T, T) bool: the keys each query may read, ANDed with the causal mask (a sliding window,
    L.window_mask); every query must keep its own key.

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
    if padding is None and keys is None:
        mask = L.causal_bias(T, T, cfg.dtype)
    else:
        mask = L.attention_mask(L.causal_mask(T) if keys is None else L.causal_mask(T) & keys, padding)
        if keys is None and padding[:, 0].all():  # every query may read key 0: no row is fully masked
            mask = L.as_bias(mask, cfg.dtype)
    bias = None
    if cfg.position == "alibi":
        bias = (
            P.alibi_bias_cached(T, T, cfg.n_heads, cfg.dtype)
            if pos is None
            else P.alibi_bias(pos, pos, cfg.n_heads, cfg.dtype)
        )
    ctx = Context(B, mask=mask, bias=bias, pos=pos, hooks=hooks)
    x = ctx.hook("embed", _embed(params, idx, cfg, pos=pos))  # (B*T, D)
    inner = 0
    if not isinstance(out_from, int):
        if (out_from.B, out_from.T) != (B, T):
            raise ValueError(f"AnswerRows of a ({out_from.B}, {out_from.T}) batch given for ({B}, {T})")
        x = x if out_from.present is None else x[out_from.present]  # (N, D)
        inner = out_from.inner()
    blocks = []
    for i in range(cfg.n_layers):
        rows = out_from if i == cfg.n_layers - 1 else inner  # the last block computes only the outputs asked for
        hm = None if head_mask is None else head_mask[i]
        x, c = _block_forward(x, params, i, cfg, ctx._replace(rows=rows, head_mask=hm))  # (R, D) after the last
        blocks.append(c)
    xf, c_lnf = L.layernorm_forward(x, params["ln_f.gamma"], params["ln_f.beta"])  # (R, D) the output rows
    xf = ctx.hook("ln_final", xf)
    logits, _ = L.linear_forward(xf, params["head.w"], params["head.b"])  # (R, V)
    logits = ctx.hook("logits", logits)
    cache = ModelCache(idx, out_from, blocks, c_lnf, xf, pos)
    if not isinstance(out_from, int):
        return logits, cache  # (R, V)
    return logits.reshape(B, T - out_from, -1), cache


# --- backward --------------------------------------------------------------


def _add_query_rows(dx, d_rows, B, q_from):
    """dx += d_rows on the rows Context.query_rows took (its adjoint)."""
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
        dh = self_attention_backward(dx1, cache.attn, params, p, cfg, grads)  # (N, D)
        dx, *_ = L.layernorm_backward(dh, cache.ln1, out=g_ln1)  # (N, D)
        _add_query_rows(dx, dx1, B, q_from)
    else:
        dz2, *_ = L.layernorm_backward(dx2, cache.ln2, out=g_ln2)  # (R, D)
        dx1, *_ = L.ffn_backward(dz2, cache.ffn, w1, w2, out=g_ffn)  # (R, D)
        dx1 += dz2
        dz1, *_ = L.layernorm_backward(dx1, cache.ln1, out=g_ln1)  # (R, D)
        dx = self_attention_backward(dz1, cache.attn, params, p, cfg, grads)  # (N, D)
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
    x = _embed(params, idx, cfg, t0, pos=pos)  # (B*T, D)
    for i in range(cfg.n_layers):
        hm = None if head_mask is None else head_mask[i]
        x, _ = _block_forward(x, params, i, cfg, Context(B, bias=bias, pos=pos, t0=t0, kv=kv_cache[i], head_mask=hm))
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
