"""A hooked forward pass: the decoder run from the same parameters with the same layer functions as
attncore.model.forward, recording every activation by name and letting a hook replace any of them
(the idea of TransformerLens's HookedTransformer, written for this model).

Activation names (B batch, T time, H heads, Dh head size, D width, V vocabulary):
  embed (B, T, D)                          token + position embedding
  blocks.{i}.resid_pre (B, T, D)           the residual stream entering block i
  blocks.{i}.attn.pattern (B, H, T, T)     attention weights
  blocks.{i}.attn.z (B, T, H, Dh)          each head's weighted values (its output before W_O)
  blocks.{i}.attn.result (B, T, H, D)      each head's contribution z_h W_O[h]; hooked, their sum + b_O is attn_out
  blocks.{i}.attn_out (B, T, D)            the attention sublayer's output (all heads, W_O and its bias)
  blocks.{i}.resid_mid (B, T, D)           after the attention sublayer (post-LN: after LN1)
  blocks.{i}.mlp_out (B, T, D)             the FFN's output
  blocks.{i}.resid_post (B, T, D)          leaving block i (post-LN: after LN2)
  ln_final (B, T, D), logits (B, T, V)
A hook is a function of the activation returning its replacement (same shape); it runs before the
activation is used, and the recorded activation is the replacement.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from .. import layers as L
from .. import positions as P
from .._blas import on_one_blas_thread
from ..config import ConfigError, ModelConfig

SUPPORTED_POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "none")
KNOWN_FIELDS = {f.name for f in dataclasses.fields(ModelConfig)}  # at the time this module was written
Hook = Callable[[np.ndarray], np.ndarray]


def check_supported(cfg: ModelConfig) -> None:
    """ConfigError for a model this pass does not reproduce (a position encoding or model field it does not know)."""
    if cfg.position not in SUPPORTED_POSITIONS:
        raise ConfigError("position", f"interventions support {', '.join(SUPPORTED_POSITIONS)}; got {cfg.position!r}")
    for f in dataclasses.fields(cfg):  # a field added later, set away from its default, may change the forward
        if f.name not in KNOWN_FIELDS and getattr(cfg, f.name) != f.default:
            raise ConfigError(f.name, f"interventions do not support {f.name}={getattr(cfg, f.name)!r} yet")


def block_names(i: int) -> list[str]:
    p = f"blocks.{i}."
    names = ("resid_pre", "attn.pattern", "attn.z", "attn.result", "attn_out", "resid_mid", "mlp_out", "resid_post")
    return [p + n for n in names]


def _hooked(name: str, value: np.ndarray, hooks: dict[str, Hook], acts: dict[str, np.ndarray]) -> np.ndarray:
    hook = hooks.get(name)
    if hook is not None:
        new = np.asarray(hook(value), dtype=value.dtype)
        if new.shape != value.shape:
            raise ValueError(f"hook {name}: shape {new.shape}, expected {value.shape}")
        value = new
    acts[name] = value
    return value


def embed(params, idx: np.ndarray, cfg: ModelConfig) -> np.ndarray:
    """(B, T, D): as attncore.model's embedding at positions 0..T-1."""
    T = idx.shape[1]
    if T > cfg.max_len and cfg.position in ("learned", "sinusoidal"):
        raise ConfigError("sequence", f"{T} positions is more than max_len={cfg.max_len}")
    x = params["tok_emb"][idx]  # (B, T, D)
    if cfg.position == "learned":
        x += params["pos_emb"][:T]
    elif cfg.position == "sinusoidal":
        x += L.sinusoidal_table(cfg.max_len, cfg.d_model, cfg.dtype)[:T]
    return x


def _attention(h, params, p, cfg, B, T, name, hooks, acts, caches):
    """Multi-head causal attention of h (B*T, D) -> (B*T, D), recording pattern, z and result."""
    H, Dh, D = cfg.n_heads, cfg.d_head, cfg.d_model
    qkv, _ = L.linear_forward(h, params[p + "attn.w_qkv"], params[p + "attn.b_qkv"])  # (B*T, 3D)
    q, k, v = qkv.reshape(B, T, 3, H, Dh).transpose(2, 0, 3, 1, 4)  # each (B, H, T, Dh)
    if cfg.position == "rope":
        cos, sin = L.rope_tables(T, Dh, cfg.dtype)
        q, k = L.rope_forward(q, cos, sin), L.rope_forward(k, cos, sin)
    bias = P.alibi_bias_cached(T, T, H, cfg.dtype) if cfg.position == "alibi" else None  # as attncore.model
    y, (_, _, _, pattern, factor) = L.attention_forward(q, k, v, L.causal_bias(T, T, cfg.dtype), cfg.scaling, bias)
    if name + "attn.pattern" in hooks:
        pattern = _hooked(name + "attn.pattern", pattern, hooks, acts)
        y = pattern @ v  # (B, H, T, Dh)
    else:
        acts[name + "attn.pattern"] = pattern
    z = _hooked(name + "attn.z", y.transpose(0, 2, 1, 3), hooks, acts)  # (B, T, H, Dh)
    merged = np.ascontiguousarray(z).reshape(B * T, D)
    w_out = params[p + "attn.w_out"]
    result = np.einsum("bthe,hed->bthd", z, w_out.reshape(H, Dh, D))  # (B, T, H, D)
    if name + "attn.result" in hooks:  # the heads' sum replaces the fused product (equal up to rounding)
        result = _hooked(name + "attn.result", result, hooks, acts)
        out = (result.sum(axis=2) + params[p + "attn.b_out"]).reshape(B * T, D)
    else:
        acts[name + "attn.result"] = result
        out, _ = L.linear_forward(merged, w_out, params[p + "attn.b_out"])
    caches[name + "attn"] = (h, q, k, v, pattern, factor, merged)
    return _hooked(name + "attn_out", out.reshape(B, T, D), hooks, acts).reshape(B * T, D)


@on_one_blas_thread
def run_with_hooks(params, idx, cfg: ModelConfig, hooks: dict[str, Hook] | None = None, *, keep_caches=False):
    """Logits (B, T, V) of tokens idx (B, T) and every activation by name; hooks replace activations.

    Without hooks the logits equal attncore.model.forward(params, idx, cfg)[0] bit for bit. With
    keep_caches the third value holds what `backward_to_pattern_row` needs.
    """
    check_supported(cfg)
    hooks = hooks or {}
    unknown = set(hooks) - set(activation_names(cfg))
    if unknown:
        raise ConfigError("hook", f"no activation named {sorted(unknown)[0]!r}")
    idx = np.asarray(idx)
    B, T = idx.shape
    D = cfg.d_model
    acts: dict[str, np.ndarray] = {}
    caches: dict[str, tuple] = {}
    x = _hooked("embed", embed(params, idx, cfg), hooks, acts).reshape(B * T, D)
    for i in range(cfg.n_layers):
        p = f"blocks.{i}."
        ln1 = params[p + "ln1.gamma"], params[p + "ln1.beta"]
        ln2 = params[p + "ln2.gamma"], params[p + "ln2.beta"]
        ffn = params[p + "ffn.w1"], params[p + "ffn.b1"], params[p + "ffn.w2"], params[p + "ffn.b2"]
        x = _hooked(p + "resid_pre", x.reshape(B, T, D), hooks, acts).reshape(B * T, D)
        if cfg.norm == "pre":
            h, c_ln1 = L.layernorm_forward(x, *ln1)
            a = _attention(h, params, p, cfg, B, T, p, hooks, acts, caches)
            x1 = _hooked(p + "resid_mid", (x + a).reshape(B, T, D), hooks, acts).reshape(B * T, D)
            h2, c_ln2 = L.layernorm_forward(x1, *ln2)
            f, c_ffn = L.ffn_forward(h2, *ffn)
            f = _hooked(p + "mlp_out", f.reshape(B, T, D), hooks, acts).reshape(B * T, D)
            x2 = x1 + f
        else:
            a = _attention(x, params, p, cfg, B, T, p, hooks, acts, caches)
            x1, c_ln1 = L.layernorm_forward(x + a, *ln1)
            x1 = _hooked(p + "resid_mid", x1.reshape(B, T, D), hooks, acts).reshape(B * T, D)
            f, c_ffn = L.ffn_forward(x1, *ffn)
            f = _hooked(p + "mlp_out", f.reshape(B, T, D), hooks, acts).reshape(B * T, D)
            x2, c_ln2 = L.layernorm_forward(x1 + f, *ln2)
        x = _hooked(p + "resid_post", x2.reshape(B, T, D), hooks, acts).reshape(B * T, D)
        caches[p + "block"] = (c_ln1, c_ln2, c_ffn)
    xf, c_lnf = L.layernorm_forward(x, params["ln_f.gamma"], params["ln_f.beta"])
    xf = _hooked("ln_final", xf.reshape(B, T, D), hooks, acts).reshape(B * T, D)
    logits, _ = L.linear_forward(xf, params["head.w"], params["head.b"])
    logits = _hooked("logits", logits.reshape(B, T, -1), hooks, acts)
    caches["ln_f"] = c_lnf
    return (logits, acts, caches) if keep_caches else (logits, acts)


def activation_names(cfg: ModelConfig) -> list[str]:
    return ["embed"] + [n for i in range(cfg.n_layers) for n in block_names(i)] + ["ln_final", "logits"]


@on_one_blas_thread
def unembed(params, resid: np.ndarray) -> np.ndarray:
    """Logits (..., V) of a residual stream (..., D) through the final LayerNorm and the output head."""
    shape = resid.shape
    xf, _ = L.layernorm_forward(resid.reshape(-1, shape[-1]), params["ln_f.gamma"], params["ln_f.beta"])
    logits, _ = L.linear_forward(xf, params["head.w"], params["head.b"])
    return logits.reshape(*shape[:-1], -1)


# --- backward from logits to an overridden attention row ----------------------------------------


def _attention_input_backward(dout, cache, params, p, cfg, B, T):
    """d(attention input h) (B*T, D) from d(attn_out) (B*T, D), through W_O, the softmax and Q, K, V."""
    h, q, k, v, pattern, factor, merged = cache
    H, Dh, D = cfg.n_heads, cfg.d_head, cfg.d_model
    dmerged = dout @ params[p + "attn.w_out"].T  # (B*T, D)
    dy = dmerged.reshape(B, T, H, Dh).transpose(0, 2, 1, 3)  # (B, H, T, Dh)
    dq, dk, dv = L.attention_backward(dy, (q, k, v, pattern, factor))
    if cfg.position == "rope":
        cos, sin = L.rope_tables(T, Dh, cfg.dtype)
        dq, dk = L.rope_backward(dq, cos, sin), L.rope_backward(dk, cos, sin)
    dqkv = np.stack([dq, dk, dv]).transpose(1, 3, 0, 2, 4).reshape(B * T, 3 * D)  # (B*T, 3D)
    return dqkv @ params[p + "attn.w_qkv"].T


def _block_input_backward(dx2, caches, params, i, cfg, B, T):
    """d(resid_pre of block i) from d(resid_post of block i), both (B*T, D)."""
    p = f"blocks.{i}."
    c_ln1, c_ln2, c_ffn = caches[p + "block"]
    w1, w2 = params[p + "ffn.w1"], params[p + "ffn.w2"]
    if cfg.norm == "pre":
        dh2 = L.ffn_backward(dx2, c_ffn, w1, w2)[0]
        dx1 = L.layernorm_backward(dh2, c_ln2)[0] + dx2
        dh = _attention_input_backward(dx1, caches[p + "attn"], params, p, cfg, B, T)
        return L.layernorm_backward(dh, c_ln1)[0] + dx1
    dz2 = L.layernorm_backward(dx2, c_ln2)[0]
    dx1 = L.ffn_backward(dz2, c_ffn, w1, w2)[0] + dz2
    dz1 = L.layernorm_backward(dx1, c_ln1)[0]
    return _attention_input_backward(dz1, caches[p + "attn"], params, p, cfg, B, T) + dz1


@on_one_blas_thread
def backward_to_pattern_row(dlogits, caches, params, cfg: ModelConfig, layer: int, head: int, query: int):
    """d(sum dlogits * logits) / d(attn.pattern[:, head, query, :] of `layer`) -> (B, T).

    dlogits (B, T, V) is the upstream gradient of the logits; the pass must have run with keep_caches
    (and the row overridden by a hook, if it was). Written by hand through the final LayerNorm, the output
    head, the later blocks and block `layer`'s FFN and W_O; checked against finite differences in the tests.
    """
    B, T, V = dlogits.shape
    dxf = dlogits.reshape(B * T, V) @ params["head.w"].T
    dx = L.layernorm_backward(dxf, caches["ln_f"])[0]  # d resid_post of the last block
    for i in reversed(range(layer + 1, cfg.n_layers)):
        dx = _block_input_backward(dx, caches, params, i, cfg, B, T)
    p = f"blocks.{layer}."
    c_ln1, c_ln2, c_ffn = caches[p + "block"]
    w1, w2 = params[p + "ffn.w1"], params[p + "ffn.w2"]
    if cfg.norm == "pre":
        dh2 = L.ffn_backward(dx, c_ffn, w1, w2)[0]
        da = L.layernorm_backward(dh2, c_ln2)[0] + dx  # d attn_out
    else:
        dz2 = L.layernorm_backward(dx, c_ln2)[0]
        dx1 = L.ffn_backward(dz2, c_ffn, w1, w2)[0] + dz2
        da = L.layernorm_backward(dx1, c_ln1)[0]
    dmerged = da @ params[p + "attn.w_out"].T  # (B*T, D)
    dz = dmerged.reshape(B, T, cfg.n_heads, cfg.d_head)[:, query, head]  # (B, Dh)
    v = caches[p + "attn"][3][:, head]  # (B, T, Dh)
    return np.einsum("be,bte->bt", dz, v)  # d pattern row = dz @ V_h^T
