"""The mechanism measurements against the theory and the reference figures."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attncore import layers
from attncore.config import ConfigError, ModelConfig
from attncore.mechanisms import demos as mech
from attncore.mechanisms import gradcheck
from attncore.mechanisms.attention_cost import attention_memory, loglog_slope, time_attention
from attncore.model import count_params, init_params, loss_and_grads, param_shapes

# the article's scaling table: (d_k, scaled) -> Var(q.k), sd of scores, mean max weight, entropy, sensitivity
SCALING_TABLE = {
    (8, False): (7.98, 2.825, 0.4240, 2.0727, 0.7203),
    (8, True): (7.98, 0.999, 0.1063, 3.6936, 0.9596),
    (64, False): (63.99, 8.000, 0.7913, 0.5835, 0.2908),
    (64, True): (63.99, 1.000, 0.1072, 3.6861, 0.9610),
    (512, False): (512.59, 22.641, 0.9303, 0.1760, 0.0998),
    (512, True): (512.59, 1.001, 0.1075, 3.6848, 0.9611),
}


# --- scaling -----------------------------------------------------------------


@pytest.fixture(scope="module")
def scaling_rows():
    return mech.scaling_statistics((8, 64, 512), n_keys=64, repetitions=400, seed=0)


def test_scaling_variance_and_sd_follow_theory(scaling_rows):
    assert [(r["d_k"], r["scaled"]) for r in scaling_rows] == list(SCALING_TABLE)
    for r in scaling_rows:
        assert r["var_dot_theory"] == r["d_k"]
        assert abs(r["var_dot"] / r["d_k"] - 1) < 0.05
        expected_sd = 1.0 if r["scaled"] else math.sqrt(r["d_k"])
        assert r["sd_scores_theory"] == expected_sd
        assert abs(r["sd_scores"] / expected_sd - 1) < 0.03


def test_scaling_statistics_match_the_articles_table(scaling_rows):
    """The table is one draw of 400 repetitions: compare within 4 standard errors of the difference of two draws."""
    for r in scaling_rows:
        _, _, max_weight, ent, sens = SCALING_TABLE[(r["d_k"], r["scaled"])]
        for name, ref in (("mean_max_weight", max_weight), ("entropy", ent), ("sensitivity", sens)):
            se = r[f"{name}_se"]
            assert 0 < se < 0.1 * ref
            assert abs(r[name] - ref) < 4 * math.sqrt(2) * se, (r["d_k"], r["scaled"], name, r[name], ref)
        if r["scaled"]:  # near the maximum these are tight: within 2%
            assert abs(r["entropy"] / ent - 1) < 0.02
            assert abs(r["sensitivity"] / sens - 1) < 0.02


def test_scaling_limits_and_trend(scaling_rows):
    for r in scaling_rows:
        assert r["max_entropy"] == pytest.approx(math.log(64)) == pytest.approx(4.1589, abs=1e-4)
        assert r["max_sensitivity"] == pytest.approx(1 - 1 / 64)
        assert r["entropy"] < r["max_entropy"] and r["sensitivity"] < r["max_sensitivity"]
        assert r["mean_max_weight"] > r["min_max_weight"] == 1 / 64
    unscaled = [r["sensitivity"] for r in scaling_rows if not r["scaled"]]
    scaled = [r["sensitivity"] for r in scaling_rows if r["scaled"]]
    assert unscaled[0] > unscaled[1] > unscaled[2]  # saturation grows with d_k
    assert max(scaled) - min(scaled) < 0.01  # the division removes the d_k dependence


def test_scaling_row_depends_only_on_its_own_d_k(scaling_rows):
    alone = mech.scaling_statistics((64,), seed=0)
    assert alone == [r for r in scaling_rows if r["d_k"] == 64]
    assert mech.scaling_statistics((64,), seed=1) != alone


def test_sensitivity_is_the_trace_of_the_softmax_jacobian():
    rng = np.random.default_rng(0)
    s = rng.standard_normal((5, 7)) * 3
    p = layers.softmax_forward(s)
    jac = mech.softmax_jacobian(p)  # (5, 7, 7)
    explicit = np.array([[[p[b, i] * ((i == j) - p[b, j]) for j in range(7)] for i in range(7)] for b in range(5)])
    np.testing.assert_allclose(jac, explicit, rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.trace(jac, axis1=-2, axis2=-1), mech.sensitivity(p), rtol=1e-14)
    eps = 1e-6  # the Jacobian is the derivative of the layer's softmax
    for j in range(7):
        step = np.zeros(7)
        step[j] = eps
        numeric = (layers.softmax_forward(s + step) - layers.softmax_forward(s - step)) / (2 * eps)
        np.testing.assert_allclose(numeric, jac[:, :, j], atol=1e-9)


def test_entropy_limits():
    assert mech.entropy(np.full(64, 1 / 64)) == pytest.approx(math.log(64))
    assert mech.entropy(np.eye(4)[0]) == 0.0


# --- masks -------------------------------------------------------------------


def test_mask_before_softmax_sums_to_one_and_after_does_not():
    demo = mech.mask_order_demo(t=6, seed=0)
    causal = np.tri(6, dtype=bool)
    np.testing.assert_array_equal(demo["causal"], causal)
    for key in ("weights_before", "weights_after"):
        assert np.all(demo[key][~causal] == 0)
    np.testing.assert_allclose(demo["row_sums_before"], 1.0, rtol=0, atol=1e-15)
    assert np.all(demo["row_sums_after"][:-1] < 1 - 1e-3)  # every row missing a key loses weight
    assert demo["row_sums_after"][-1] == pytest.approx(1.0)  # the last row reads every key
    full = layers.softmax_forward(demo["scores"])
    assert demo["row_sums_after"][0] == pytest.approx(full[0, 0])
    renormalised = demo["weights_after"] / demo["row_sums_after"][:, None]
    np.testing.assert_allclose(renormalised, demo["weights_before"], rtol=1e-12)


def test_padding_and_causal_combine_and_empty_rows_stay_finite():
    demo = mech.padding_demo(lengths=(5, 3, 0), seed=0)
    expected_padding = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [0, 0, 0, 0, 0]], dtype=bool)
    np.testing.assert_array_equal(demo["padding"], expected_padding)
    np.testing.assert_array_equal(demo["causal"], np.tri(5, dtype=bool))
    assert demo["combined"].shape == (3, 5, 5)
    for b in range(3):
        for i in range(5):
            for j in range(5):
                assert demo["combined"][b, i, j] == (j <= i and j < (5, 3, 0)[b])
    w = demo["weights"]
    assert demo["all_finite"] and np.isfinite(w).all()
    assert np.all(w[~demo["combined"]] == 0)
    np.testing.assert_array_equal(demo["fully_masked_rows"], np.array([[0] * 5, [0] * 5, [1] * 5], dtype=bool))
    np.testing.assert_allclose(demo["row_sums"][:2], 1.0, atol=1e-15)
    assert np.all(demo["row_sums"][2] == 0)


def test_padding_demo_rejects_bad_lengths():
    with pytest.raises(ConfigError) as err:
        mech.padding_demo(lengths=(3, 7), t=5)
    assert err.value.field == "lengths"


# --- heads and position ------------------------------------------------------


def test_attention_parameters_do_not_depend_on_heads():
    rows = mech.attention_param_counts(64)
    assert [r["n_heads"] for r in rows] == [1, 2, 4, 8, 16, 32, 64]
    assert {r["attention_params"] for r in rows} == {4 * 64**2 + 4 * 64} == {16_640}
    assert {r["block_params"] for r in rows} == {49_984}  # 12d² + 13d at d = 64
    assert all(r["attention_params"] == r["attention_theory"] and r["block_params"] == r["block_theory"] for r in rows)
    assert mech.attention_param_counts(256, heads=[1, 8])[1]["block_params"] == 789_760
    shapes = param_shapes(ModelConfig(d_model=64, n_heads=8, n_layers=1, d_ff=256))
    assert sum(math.prod(s) for n, s in shapes.items() if ".attn." in n) == 16_640
    assert count_params(ModelConfig()) == 27_253


def test_permutation_equivariance_only_without_position():
    rows = {(r["position"], r["causal"]): r for r in mech.permutation_test(t=8, d_model=16, n_heads=4, seed=0)}
    assert set(rows) == {("none", False), ("sinusoidal", False), ("learned", False), ("rope", False), ("none", True)}
    assert rows[("none", False)]["equivariance_error"] < 1e-14
    for key, r in rows.items():
        assert r["change"] > 1e-2  # attn(PX) != attn(X): the outputs move with the tokens
        if key != ("none", False):
            assert r["equivariance_error"] > 1e-2, key


def test_position_encodings():
    enc = mech.position_encodings(t=32, d_model=16, seed=0)
    pos, i = 7, 3
    assert enc["sinusoidal"][pos, 2 * i] == pytest.approx(math.sin(pos / 10000 ** (2 * i / 16)))
    assert enc["sinusoidal"][pos, 2 * i + 1] == pytest.approx(math.cos(pos / 10000 ** (2 * i / 16)))
    assert enc["learned"].shape == (32, 16) and 0.08 < enc["learned"].std() < 0.12
    assert not enc["none"].any() and enc["none"].shape == (32, 16)
    np.testing.assert_allclose(enc["rope_cos"] ** 2 + enc["rope_sin"] ** 2, 1.0)
    assert enc["rope_cos"].shape == (32, 8) and np.all(enc["rope_cos"][0] == 1)


def test_rope_dot_products_depend_only_on_distance():
    out = mech.rope_relative_dots(t=16, d_head=16, offsets=(0, 1, 3, -2), seed=0)
    assert out["spread"] < 1e-12
    assert out["additive_spread"] > 1e-2  # added sinusoids do not have the property
    np.testing.assert_allclose(np.diagonal(out["dots"]), out["unrotated_dot"], rtol=1e-12)
    by_offset = {}
    for r in out["rows"]:
        assert r["m"] - r["n"] == r["m_minus_n"] and 0 <= r["n"] < 16
        by_offset.setdefault(r["m_minus_n"], []).append(r["dot_rope"])
    assert {k: len(v) for k, v in by_offset.items()} == {0: 16, 1: 15, 3: 13, -2: 14}
    assert max(np.ptp(v) for v in by_offset.values()) < 1e-12
    assert len({round(v[0], 6) for v in by_offset.values()}) == 4  # different distances, different dots


# --- cost --------------------------------------------------------------------


def test_attention_memory_figures():
    big = attention_memory(2048, d_k=64, bytes_per_element=8)
    assert big["scores_bytes"] == 32 * 2**20 and big["scores_mib"] == 32.0
    assert big["qkv_bytes"] == 3 * 2**20 and big["qkv_mib"] == 3.0
    assert attention_memory(128)["scores_mib"] == 0.125 and attention_memory(512)["scores_mib"] == 2.0


def test_time_attention_rows_and_progress():
    calls = []
    rows = time_attention((8, 32, 256), d_k=64, trials=3, progress=lambda i, n: calls.append((i, n)))
    assert calls == [(1, 3), (2, 3), (3, 3)]
    assert [r["T"] for r in rows] == [8, 32, 256]
    assert all(r["seconds"] > 0 for r in rows)
    assert rows[-1]["seconds"] > rows[0]["seconds"]  # 1000x the work; not a speed assertion
    assert rows[-1]["scores_bytes"] == 256 * 256 * 8


def test_time_attention_cap_refuses_before_running():
    calls = []
    with pytest.raises(ConfigError) as err:
        time_attention((64, 4096), max_t=2048, progress=lambda i, n: calls.append(i))
    assert err.value.field == "lengths" and calls == []


def test_loglog_slope():
    t = np.array([128, 256, 512, 1024])
    assert loglog_slope(t, 3e-8 * t**2.0) == pytest.approx(2.0)
    assert loglog_slope(t, 1e-6 * t) == pytest.approx(1.0)


# --- gradient check ----------------------------------------------------------


@pytest.fixture(scope="module")
def grad_rows():
    return {norm: gradcheck.gradient_check(norm, eps_values=(1e-6, 1e-4), seed=0) for norm in ("pre", "post")}


def test_check_loss_is_the_training_loss():
    cfg = gradcheck.small_model("post")
    rng = np.random.default_rng(0)
    params = init_params(cfg, rng)
    seqs = rng.integers(0, 20, (3, 13))
    assert gradcheck.check_loss(params, seqs, cfg, 6) == loss_and_grads(params, seqs, cfg, 6)[0]


@pytest.mark.slow
@pytest.mark.parametrize("norm", ["pre", "post"])
def test_gradient_check_passes_at_small_eps(grad_rows, norm):
    rows = grad_rows[norm]
    names = list(param_shapes(gradcheck.small_model(norm)))
    assert [r["tensor"] for r in rows if r["eps"] == 1e-6] == names
    assert [r["tensor"] for r in rows if r["eps"] == 1e-4] == names
    for r in rows:
        assert r["norm"] == norm and 0 < r["n_checked"] <= min(24, r["n_eligible"])
    worst = max(r["max_rel_dev"] for r in rows if r["eps"] == 1e-6)
    assert 0 < worst < 1e-4
    summary = {s["eps"]: s for s in gradcheck.gradient_check_summary(rows)}
    assert summary[1e-6]["max_rel_dev"] == worst
    assert summary[1e-6]["n_checked"] == summary[1e-4]["n_checked"] == sum(r["n_checked"] for r in rows) // 2


def test_gradient_check_catches_a_wrong_gradient(monkeypatch):
    def off_by_one_percent(*args, **kwargs):
        loss, grads = loss_and_grads(*args, **kwargs)
        grads["blocks.0.ffn.b1"] *= 1.01
        return loss, grads

    monkeypatch.setattr(gradcheck, "loss_and_grads", off_by_one_percent)
    rows = {r["tensor"]: r for r in gradcheck.gradient_check("pre", eps_values=(1e-6,), max_per_tensor=4)}
    assert rows["blocks.0.ffn.b1"]["max_rel_dev"] == pytest.approx(0.01 / 1.01, rel=1e-2)
    assert rows["blocks.0.ffn.w1"]["max_rel_dev"] < 1e-4


def test_gradient_check_rejects_float32():
    with pytest.raises(ConfigError):
        gradcheck.gradient_check(cfg=ModelConfig(d_model=16, dtype="float32"))


def test_the_padding_trap_calls_losses_equal_to_rounding_only():
    from attncore.mechanisms.padding import same_losses

    base = np.array([0.0023, 0.5, 8.8], dtype=np.float32)
    assert same_losses(np.nextafter(base, np.float32(10)), base, "float32")  # one unit in the last place
    assert not same_losses(base * np.float32(1.001), base, "float32")
    one_float32_ulp = np.nextafter(base, np.float32(10)).astype(np.float64)
    assert not same_losses(one_float32_ulp, base.astype(np.float64), "float64")  # float64 rounds finer
