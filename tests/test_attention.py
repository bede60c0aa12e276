"""The self-attention sublayer (attncore.attention) on its own: its plain path is the formula, the rows it is asked
for are the full output's rows, the KV cache gives what one pass gives, and the Context's row selection has the
backward's row addition as its adjoint."""

import numpy as np
import pytest

from attncore import layers as L
from attncore.attention import AnswerRows, Context, self_attention_backward, self_attention_forward
from attncore.config import make_run
from attncore.model import _add_query_rows, init_params
from attncore.positions import alibi_bias_cached

B, T = 3, 7


def setup(position="learned", qk_norm=False, seed=0):
    cfg = make_run("copy", 3, d_model=16, n_heads=4, d_ff=32, position=position, qk_norm=qk_norm, dtype="float64").model
    params = init_params(cfg, seed)
    for name in params:  # biases and gains away from 0 and 1, so a term dropped would show
        if name.endswith(("b_qkv", "b_out")):
            params[name][...] = np.random.default_rng(7).standard_normal(params[name].shape) * 0.3
    h = np.random.default_rng(seed + 1).standard_normal((B * T, cfg.d_model))
    return cfg, params, h


def formula(h, params, cfg, mask):
    """softmax(Q K^T / sqrt(Dh) + M) V per head, the heads side by side through W_O, written out head by head."""
    D, H, Dh = cfg.d_model, cfg.n_heads, cfg.d_head
    qkv = h @ params["blocks.0.attn.w_qkv"] + params["blocks.0.attn.b_qkv"]
    out = np.empty((B, T, D))
    for b in range(B):
        x = qkv[b * T : (b + 1) * T]
        heads = []
        for i in range(H):
            q, k, v = (x[:, j * D + i * Dh : j * D + (i + 1) * Dh] for j in range(3))
            s = np.where(mask, q @ k.T / np.sqrt(Dh), -np.inf)
            w = np.exp(s - s.max(axis=1, keepdims=True))
            heads.append(w / w.sum(axis=1, keepdims=True) @ v)
        out[b] = np.concatenate(heads, axis=1) @ params["blocks.0.attn.w_out"] + params["blocks.0.attn.b_out"]
    return out.reshape(B * T, D)


def test_the_plain_path_is_softmax_of_scaled_scores_masked_before_it_times_v():
    cfg, params, h = setup()
    out, cache = self_attention_forward(h, params, "blocks.0.", cfg, Context(B, mask=L.causal_bias(T, T)))
    assert np.allclose(out, formula(h, params, cfg, L.causal_mask(T)), rtol=1e-12, atol=1e-12)
    assert np.allclose(cache.weights.sum(axis=-1), 1.0) and np.all(np.triu(cache.weights[0, 0], k=1) == 0)
    no_mask, _ = self_attention_forward(h, params, "blocks.0.", cfg, Context(B))  # the mask does act
    assert not np.allclose(no_mask, out, atol=1e-3)


@pytest.mark.parametrize("position", ["learned", "rope", "alibi"])
def test_asking_the_last_rows_gives_those_rows_of_the_full_output(position):
    cfg, params, h = setup(position, qk_norm=position == "rope")
    bias = L.causal_bias(T, T)
    alibi = alibi_bias_cached(T, T, cfg.n_heads, cfg.dtype) if position == "alibi" else None
    full, _ = self_attention_forward(h, params, "blocks.0.", cfg, Context(B, mask=bias, bias=alibi))
    last, c = self_attention_forward(h, params, "blocks.0.", cfg, Context(B, rows=4, mask=bias, bias=alibi))
    assert last.shape == (B * (T - 4), cfg.d_model) and c.weights.shape == (B, cfg.n_heads, T - 4, T)
    assert np.allclose(last, full.reshape(B, T, -1)[:, 4:].reshape(-1, cfg.d_model), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("position", ["learned", "rope", "alibi"])
def test_a_kv_cache_fed_in_two_chunks_gives_the_one_pass_output(position):
    cfg, params, h = setup(position)
    alibi = alibi_bias_cached(T, T, cfg.n_heads, cfg.dtype) if position == "alibi" else None
    full, _ = self_attention_forward(h, params, "blocks.0.", cfg, Context(B, mask=L.causal_bias(T, T), bias=alibi))
    shape = (B, cfg.n_heads, T, cfg.d_head)
    kv = np.full(shape, np.nan), np.full(shape, np.nan)  # a position not written would poison the output
    rows = h.reshape(B, T, -1)
    first, _ = self_attention_forward(rows[:, :5].reshape(-1, cfg.d_model), params, "blocks.0.", cfg, Context(B, kv=kv))
    second, _ = self_attention_forward(rows[:, 5:].reshape(-1, cfg.d_model), params, "blocks.0.", cfg,
                                       Context(B, t0=5, kv=kv))  # fmt: skip
    chunks = np.concatenate([first.reshape(B, 5, -1), second.reshape(B, 2, -1)], axis=1).reshape(B * T, -1)
    assert np.isfinite(kv[0]).all() and np.isfinite(kv[1]).all()
    assert np.allclose(chunks, full, rtol=1e-12, atol=1e-12)


def test_context_hook_is_the_identity_without_hooks_and_shows_each_sequence_with_them():
    x = np.arange(B * T * 2, dtype=float).reshape(B * T, 2)
    assert Context(B).hook("embed", x) is x
    seen = {}
    doubled = Context(B, hooks=lambda name, a: seen.setdefault(name, a) * 2).hook("embed", x)
    assert seen["embed"].shape == (B, T, 2) and np.array_equal(seen["embed"][1], x[T : 2 * T])
    assert doubled.shape == x.shape and np.array_equal(doubled, 2 * x)


@pytest.mark.parametrize(
    "rows", [0, 3, AnswerRows.of([1, 2, 0], [2, 3, 1], T), AnswerRows.of([2, 1, 3], [2, 2, 1], T, computed=[5, 7, 4])]
)
def test_adding_rows_back_is_the_adjoint_of_taking_them(rows):
    """<take(x), d> = <x, add(d)> for every x and d: the backward's row addition is the forward's row selection's
    transpose."""
    rng = np.random.default_rng(3)
    n = B * T if isinstance(rows, int) or rows.present is None else len(rows.present)
    ctx = Context(B, rows=rows)
    x = rng.standard_normal((n, 4))
    taken = ctx.query_rows(x)
    d = rng.standard_normal(taken.shape)
    added = np.zeros_like(x)
    _add_query_rows(added, d, B, rows)
    assert np.isclose((taken * d).sum(), (x * added).sum(), rtol=1e-12)
    assert (taken.shape[0] == n) == (isinstance(rows, int) and rows == 0)  # only rows 0 takes every row


def test_the_backward_matches_finite_differences_with_query_rows_rope_and_qk_norm():
    cfg, params, h = setup("rope", qk_norm=True)
    ctx = Context(B, rows=2, mask=L.causal_bias(T, T))
    out, cache = self_attention_forward(h, params, "blocks.0.", cfg, ctx)
    dout = np.random.default_rng(4).standard_normal(out.shape)
    grads = {name: np.zeros_like(a) for name, a in params.items()}
    dh = self_attention_backward(dout, cache, params, "blocks.0.", cfg, grads)
    eps, rng = 1e-6, np.random.default_rng(5)
    for _ in range(6):
        i, j = rng.integers(h.shape[0]), rng.integers(h.shape[1])
        hp, hm = h.copy(), h.copy()
        hp[i, j] += eps
        hm[i, j] -= eps
        f = (self_attention_forward(hp, params, "blocks.0.", cfg, ctx)[0] * dout).sum()
        g = (self_attention_forward(hm, params, "blocks.0.", cfg, ctx)[0] * dout).sum()
        assert np.isclose(dh[i, j], (f - g) / (2 * eps), rtol=1e-5, atol=1e-8)
    for name in ("blocks.0.attn.w_qkv", "blocks.0.attn.q_norm.gamma", "blocks.0.attn.w_out"):
        flat = params[name].reshape(-1)
        k = rng.integers(flat.size)
        old = flat[k]
        flat[k] = old + eps
        f = (self_attention_forward(h, params, "blocks.0.", cfg, ctx)[0] * dout).sum()
        flat[k] = old - eps
        g = (self_attention_forward(h, params, "blocks.0.", cfg, ctx)[0] * dout).sum()
        flat[k] = old
        assert np.isclose(grads[name].reshape(-1)[k], (f - g) / (2 * eps), rtol=1e-5, atol=1e-8), name
