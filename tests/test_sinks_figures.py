"""The Attention sinks experiment's per-head figures (docs/sinks.md): Gu et al.'s importance against a head that
attends uniformly, the window test's equal-cache conditions and controls (which keys each lets a query read), the
roles and sentences computed from the seeds, and the command's JSON keys per seed and per head."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attncore import layers as L
from attncore.model import forward, init_params
from attncore.tasks import bigram_backcopy as bb
from attncore.tasks.bigram_backcopy import make_backcopy
from lab.experiments import sinks, sinks_text


def _uniform_params(run):
    """Weights whose queries and keys are zero: every score 0, so each query spreads its attention evenly."""
    params = init_params(run.model, 0)
    d = run.model.d_model
    for i in range(run.model.n_layers):
        params[f"blocks.{i}.attn.w_qkv"][:, : 2 * d] = 0
        params[f"blocks.{i}.attn.b_qkv"][: 2 * d] = 0
    return params


def test_gu_importance_of_a_uniform_head_is_the_mean_of_one_over_t_plus_one():
    run = make_backcopy(length=12, n_heads=2, steps=1)
    got = bb.sink_importance(_uniform_params(run), run, n=20)
    expected = np.mean(1.0 / np.arange(1, 12))  # queries t = 0 .. 10, each reading t + 1 keys
    assert np.allclose(got.importance, expected, rtol=0, atol=1e-6) and got.importance.shape == (1, 2)
    assert (got.rate == float(expected > bb.GU_EPSILON)).all() and got.sink_rate == float(expected > 0.3)
    strict = bb.sink_importance(_uniform_params(run), run, n=20, epsilon=expected - 0.01)
    assert (strict.rate == 1).all()  # every sequence's head sits just above this ε


def test_each_window_condition_lets_a_query_read_its_keys_and_no_other():
    T, W = 14, 4
    for key in (0, 1, 2):
        mask = bb.kept_key_mask(T, W, key)
        assert mask[10].sum() == W + 1 and mask[10, key] and mask[10, 7:11].all()
    assert L.window_mask(T, W + 1)[10].sum() == W + 1 and not L.window_mask(T, W + 1)[10, 0]
    run = make_backcopy(length=T + 1, steps=1)
    tokens = bb.test_sequences(run.task)[:2, :-1]
    _, cache = forward(init_params(run.model, 0), tokens, run.model, keys=bb.kept_key_mask(T, W, 1))
    w = cache.blocks[0].attn.weights  # (B, H, T, T)
    assert (w[..., W + 1 :, 0] == 0).all() and (w[..., W + 1 :, 1] > 0).all()


def test_the_window_test_measures_equal_caches_and_its_range_leaves_a_query_without_key_0():
    run = make_backcopy(length=12, steps=1)
    w = bb.window_losses(init_params(run.model, 0), run, 4, n=20)
    assert w.queries == 11 - 5  # t = 5 .. 10: the window of 5 keys has lost key 0
    losses = [w.full_loss, w.window_loss, w.window_wide_loss, w.window_sink_loss, w.window_key1_loss]
    losses.append(w.window_key2_loss)
    assert all(np.isfinite(losses)) and len(set(losses)) > 1
    bb.window_losses(init_params(run.model, 0), run, 9, n=5)  # N - 3: one query left
    with pytest.raises(Exception, match=r"window: .*1 to 9"):
        bb.window_losses(init_params(run.model, 0), run, 10, n=5)


def _seed(seed, shares, copies, gu=(0.9,), cost=0.05):
    heads = [{"head": f"L0H{h}", "share": s, "gu_importance": g, "sink_rate": float(g > 0.3), "copy_attention": c}
             for h, (s, c, g) in enumerate(zip(shares, copies, gu, strict=True))]  # fmt: skip
    sink, copy = int(np.argmax(shares)), int(np.argmax(copies))
    return {"seed": seed, "first_token_attention": max(shares), "mean_share": float(np.mean(shares)),
            "uniform_share": 0.1, "sink_head": [0, sink], "copy_head": [0, copy], "gu_importance": gu[sink],
            "sink_heads": sum(g > 0.3 for g in gu), "epsilon": 0.3, "copy_attention": max(copies),
            "roles": sinks.BOTH if sink == copy else sinks.SPLIT, "heads": heads, "window": 8,
            "full_loss": 2.3, "window_loss": 2.3 + cost, "window_wide_loss": 2.3 + cost, "window_sink_loss": 2.3,
            "window_key1_loss": 2.3 + cost, "window_key2_loss": 2.3 + cost, "bayes_loss": 2.28,
            "value_norm_first": 0.5, "value_norm_rest": 5.0, "resid_norm_first": 10.0, "resid_norm_rest": 8.0,
            "test_loss": 2.4, "bayes_test_loss": 2.3, "bigram_loss": 2.5, "bayes_bigram_loss": 2.45,
            "copy_loss": 0.05}  # fmt: skip


def test_the_roles_and_the_sentences_are_counted_from_the_seeds():
    split = [_seed(s, (0.9, 0.1), (0.2, 0.9), (0.8, 0.1)) for s in range(4)]
    both = [_seed(s, (0.9, 0.1), (0.9, 0.2), (0.8, 0.1)) for s in range(4, 6)]
    text = sinks_text.sink_sentence(split + both)
    assert "copy head" in text and "on 2 of 6 seeds, and another head copies on 4" in text
    assert "6 of 6 seeds have a sink head" in text
    weak = [_seed(s, (0.2,), (0.9,), (0.1,)) for s in range(6)]
    assert "is a sink head on 0 of 6 seeds" in sinks_text.sink_sentence(weak) and "active-dormant" not in (
        sinks_text.sink_sentence(weak)
    )
    rows = sinks.comparisons(both + split)
    said = sinks_text.window_sentence(both + split, rows)
    assert "costs +0.0500 nats, a perplexity factor of 1.051" in said and "key 0 change it by −0.0500 nats" in said
    assert "keeping key 1 instead, 0 nats, a perplexity factor of 1.000" in said
    assert "on 6 of 6 seeds" in sinks_text.norms_sentence(both + split)
    frame = sinks.heads_frame(split[:1] + both[:1])
    assert frame["role"].tolist() == ["sink head", "copy head", "sink head and copy head", "—"]


def test_the_json_gives_each_seed_its_sink_head_and_each_head_its_figures(tmp_path, monkeypatch, capsys):
    from cli.main import main

    monkeypatch.setenv("ATTNCORE_CACHE_DIR", str(tmp_path))
    argv = ["sinks", "--seeds", "0", "1", "--steps", "20", "--N", "12", "--heads", "2", "--window", "4", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["settings"]["embed_std"] == bb.BB_RUN["embed_std"] and out["settings"]["window"] == 4
    for s in out["seeds"]:
        keys = {"first_token_attention", "window_loss", "window_sink_loss", "full_loss", "window_wide_loss",
                "window_key1_loss", "window_key2_loss", "gu_importance", "sink_rate", "heads", "roles"}  # fmt: skip
        assert keys <= set(s) and len(s["heads"]) == 2
        shares = [h["share"] for h in s["heads"]]
        assert s["first_token_attention"] == max(shares) and s["mean_share"] == pytest.approx(np.mean(shares))
        assert {"share", "gu_importance", "sink_rate", "copy_attention"} <= set(s["heads"][0])
        assert s["gu_importance"] == s["heads"][s["sink_head"][1]]["gu_importance"]
    assert len(out["verdicts"]) == 5
    assert main([*argv[:-1], "--embed-std", "0"]) == 2
    assert "--embed-std: must be above 0" in capsys.readouterr().err
