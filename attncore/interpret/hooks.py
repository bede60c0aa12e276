"""Hook points on the decoder's one forward pass (attncore.model.forward, as TransformerLens's HookPoints): every
activation recorded by name, any of them replaced by a hook; and the backward from one query's logits to an
overridden attention row.

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

from collections.abc import Callable

import numpy as np

from .. import layers as L
from .._blas import on_one_blas_thread
from ..config import ConfigError, ModelConfig
from ..model import ModelCache, SelfAttentionCache, forward

Hook = Callable[[np.ndarray], np.ndarray]


def block_names(i: int) -> list[str]:
    p = f"blocks.{i}."
    names = ("resid_pre", "attn.pattern", "attn.z", "attn.result", "attn_out", "resid_mid", "mlp_out", "resid_post")
    return [p + n for n in names]


def activation_names(cfg: ModelConfig) -> list[str]:
    return ["embed"] + [n for i in range(cfg.n_layers) for n in block_names(i)] + ["ln_final", "logits"]


class HookPoints:
    """The `hooks` of attncore.model.forward: records each activation by name in `acts`; the hook given for a name
    replaces its activation (same shape, cast to its dtype)."""

    def __init__(self, hooks: dict[str, Hook] | None = None):
        self.hooks = dict(hooks or {})
        self.acts: dict[str, np.ndarray] = {}

    def __contains__(self, name: str) -> bool:
        return name in self.hooks

    def __call__(self, name: str, value: np.ndarray) -> np.ndarray:
        hook = self.hooks.get(name)
        if hook is not None:
            new = np.asarray(hook(value), dtype=value.dtype)
            if new.shape != value.shape:
                raise ValueError(f"hook {name}: shape {new.shape}, expected {value.shape}")
            value = new
        self.acts[name] = value
        return value


def run_with_hooks(params, idx, cfg: ModelConfig, hooks: dict[str, Hook] | None = None, *, keep_caches=False):
    """Logits (B, T, V) of tokens idx (B, T) and every activation by name; hooks replace activations.

    The model's own forward with HookPoints: without hooks the logits are attncore.model.forward(params, idx,
    cfg)[0], bit for bit. With keep_caches the third value is the forward's ModelCache (its attention weights the
    hooked ones), which `backward_to_pattern_row` reads.
    """
    points = HookPoints(hooks)
    unknown = set(points.hooks) - set(activation_names(cfg))
    if unknown:
        raise ConfigError("hook", f"no activation named {sorted(unknown)[0]!r}")
    idx = np.asarray(idx)
    T = idx.shape[1]
    if T > cfg.max_len and cfg.position in ("learned", "sinusoidal"):
        raise ConfigError("sequence", f"{T} positions is more than max_len={cfg.max_len}")
    logits, cache = forward(params, idx, cfg, hooks=points)
    return (logits, points.acts, cache) if keep_caches else (logits, points.acts)


@on_one_blas_thread
def unembed(params, resid: np.ndarray) -> np.ndarray:
    """Logits (..., V) of a residual stream (..., D) through the final LayerNorm and the output head."""
    shape = resid.shape
    xf, _ = L.layernorm_forward(resid.reshape(-1, shape[-1]), params["ln_f.gamma"], params["ln_f.beta"])
    logits, _ = L.linear_forward(xf, params["head.w"], params["head.b"])
    return logits.reshape(*shape[:-1], -1)


# --- backward from logits to an overridden attention row ----------------------------------------
# Input gradients only: attncore.model.backward also computes every weight's gradient, which the row search
# (explain's adversarial attention, one backward per step and restart) does not need.


def _attention_input_backward(dout, cache: SelfAttentionCache, params, p, cfg, B, T):
    """d(attention input h) (B*T, D) from d(attn_out) (B*T, D), through W_O, the softmax and Q, K, V."""
    H, Dh, D = cfg.n_heads, cfg.d_head, cfg.d_model
    dmerged = dout @ params[p + "attn.w_out"].T  # (B*T, D)
    dy = dmerged.reshape(B, T, H, Dh).transpose(0, 2, 1, 3)  # (B, H, T, Dh)
    dq, dk, dv = L.attention_backward(dy, cache)  # each (B, H, T, Dh)
    if cfg.position == "rope":
        cos, sin = cache.rope
        dq, dk = L.rope_backward(dq, cos, sin), L.rope_backward(dk, cos, sin)
    if cache.q_norm is not None:  # qk-norm: back through each head's LayerNorm of q and k
        dq, dk = L.layernorm_backward(dq, cache.q_norm)[0], L.layernorm_backward(dk, cache.k_norm)[0]
    dqkv = np.stack([dq, dk, dv]).transpose(1, 3, 0, 2, 4).reshape(B * T, 3 * D)  # (B*T, 3D)
    return dqkv @ params[p + "attn.w_qkv"].T  # (B*T, D)


def _block_input_backward(dx2, cache: ModelCache, params, i, cfg, B, T):
    """d(resid_pre of block i) from d(resid_post of block i), both (B*T, D)."""
    p, c = f"blocks.{i}.", cache.blocks[i]
    w1, w2 = params[p + "ffn.w1"], params[p + "ffn.w2"]
    if cfg.norm == "pre":
        dh2 = L.ffn_backward(dx2, c.ffn, w1, w2)[0]  # (B*T, D)
        dx1 = L.layernorm_backward(dh2, c.ln2)[0] + dx2  # d resid_mid
        dh = _attention_input_backward(dx1, c.attn, params, p, cfg, B, T)  # d LN1's output
        return L.layernorm_backward(dh, c.ln1)[0] + dx1
    dz2 = L.layernorm_backward(dx2, c.ln2)[0]  # (B*T, D)
    dx1 = L.ffn_backward(dz2, c.ffn, w1, w2)[0] + dz2  # d resid_mid
    dz1 = L.layernorm_backward(dx1, c.ln1)[0]  # d attn_out
    return _attention_input_backward(dz1, c.attn, params, p, cfg, B, T) + dz1


@on_one_blas_thread
def backward_to_pattern_row(dlogits, cache: ModelCache, params, cfg: ModelConfig, layer: int, head: int, query: int):
    """d(sum dlogits * logits) / d(attn.pattern[:, head, query, :] of `layer`) -> (B, T).

    dlogits (B, T, V) is the upstream gradient of the logits; cache is run_with_hooks's with keep_caches
    (the row overridden by a hook, if it was). Written by hand through the final LayerNorm, the output
    head, the later blocks and block `layer`'s FFN and W_O; checked against finite differences in the tests.
    """
    B, T, V = dlogits.shape
    dxf = dlogits.reshape(B * T, V) @ params["head.w"].T  # (B*T, D)
    dx = L.layernorm_backward(dxf, cache.ln_f)[0]  # d resid_post of the last block
    for i in reversed(range(layer + 1, cfg.n_layers)):
        dx = _block_input_backward(dx, cache, params, i, cfg, B, T)
    p, c = f"blocks.{layer}.", cache.blocks[layer]
    w1, w2 = params[p + "ffn.w1"], params[p + "ffn.w2"]
    if cfg.norm == "pre":
        dh2 = L.ffn_backward(dx, c.ffn, w1, w2)[0]
        da = L.layernorm_backward(dh2, c.ln2)[0] + dx  # d attn_out (B*T, D)
    else:
        dz2 = L.layernorm_backward(dx, c.ln2)[0]
        dx1 = L.ffn_backward(dz2, c.ffn, w1, w2)[0] + dz2
        da = L.layernorm_backward(dx1, c.ln1)[0]  # d attn_out (B*T, D)
    dmerged = da @ params[p + "attn.w_out"].T  # (B*T, D)
    dz = dmerged.reshape(B, T, cfg.n_heads, cfg.d_head)[:, query, head]  # (B, Dh)
    v = c.attn.v[:, head]  # (B, T, Dh)
    return np.einsum("be,bte->bt", dz, v)  # d pattern row = dz @ V_h^T
