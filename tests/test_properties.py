"""Properties the science requires: masks, equivariance, heads, the KV cache, determinism, size."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attncore import layers
from attncore.config import ModelConfig, make_run
from attncore.model import attention_weights, count_params, forward, generate, init_params, param_shapes
from attncore.task import task_of
from attncore.train import train

ROOT = Path(__file__).resolve().parents[1]


# --- masks and softmax -----------------------------------------------------------


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "rope", "none"])
def test_model_attention_rows_sum_to_one_and_never_look_ahead(random_params, position):
    run = make_run("copy", 6, position=position, dtype="float64")
    params = random_params(run.model, seed=1)
    idx = task_of(run.task).test_set(run.task, 4)[:, :-1]
    weights = attention_weights(params, idx, run.model)  # (layers, B, H, T, T)
    T = weights.shape[-1]
    assert weights.shape == (run.model.n_layers, 4, run.model.n_heads, T, T)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    assert np.all(weights[..., ~layers.causal_mask(T)] == 0)
    assert np.all(weights >= 0)


def test_rows_sum_to_one_under_causal_and_padding_masks():
    rng = np.random.default_rng(0)
    B, H, T = 3, 2, 6
    scores = 3 * rng.standard_normal((B, H, T, T))
    mask = layers.attention_mask(layers.causal_mask(T), layers.padding_mask([6, 4, 1], T))  # (B, 1, T, T)
    weights = layers.softmax_forward(scores.copy(), mask)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    assert np.all(weights[np.broadcast_to(~mask, weights.shape)] == 0)
    assert np.all(weights[1, :, :, 4:] == 0) and np.all(weights[2, :, :, 1:] == 0)  # padded keys


def test_fully_masked_rows_give_zero_not_nan(random_params):
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 2, 5, 4)) for _ in range(3))
    mask = layers.attention_mask(None, layers.padding_mask([5, 0], 5))  # sequence 1: every key padded
    y, _ = layers.attention_forward(q, k, v, mask, True)
    assert np.isfinite(y).all()
    assert np.all(y[1] == 0)
    assert np.abs(y[0]).max() > 0.1
    run = make_run("copy", 4, dtype="float64")
    params = random_params(run.model, seed=2)
    idx = task_of(run.task).test_set(run.task, 2)[:, :-1]
    logits, _ = forward(params, idx, run.model, padding=layers.padding_mask([0, 8], idx.shape[1]))
    assert np.isfinite(logits).all()


def test_masking_before_softmax_differs_from_zeroing_after():
    """Zeroing weights after the softmax (the bug) leaves rows that no longer sum to 1."""
    scores = 2 * np.random.default_rng(2).standard_normal((8, 8))
    causal = layers.causal_mask(8)
    right = layers.softmax_forward(scores.copy(), causal)
    buggy = layers.softmax_forward(scores.copy()) * causal
    np.testing.assert_allclose(right.sum(axis=-1), 1.0, rtol=0, atol=1e-12)
    buggy_sums = buggy.sum(axis=-1)
    assert np.all(buggy_sums[:-1] < 1 - 1e-3)  # every row that has a future loses weight
    assert buggy_sums[-1] == pytest.approx(1.0)  # the last row sees every key: no difference there
    assert np.abs(right - buggy).max() > 0.1


# --- multi-head attention ------------------------------------------------------


def _self_attention(x, w_q, w_k, w_v, n_heads, mask=None):
    """Multi-head self-attention of x (B, T, D), no position information."""
    q, k, v = (layers.split_heads(x @ w, n_heads) for w in (w_q, w_k, w_v))  # each (B, H, T, Dh)
    return layers.merge_heads(layers.attention_forward(q, k, v, mask, True)[0])  # (B, T, D)


def test_attention_without_position_is_permutation_equivariant():
    rng = np.random.default_rng(3)
    B, T, D, H = 2, 7, 16, 4
    x = rng.standard_normal((B, T, D))
    w_q, w_k, w_v = (rng.standard_normal((D, D)) / 4 for _ in range(3))
    perm = rng.permutation(T)
    assert np.any(perm != np.arange(T))
    y = _self_attention(x, w_q, w_k, w_v, H)
    y_perm = _self_attention(x[:, perm], w_q, w_k, w_v, H)
    assert np.abs(y_perm - y[:, perm]).max() < 1e-12  # attn(PX) = P attn(X)
    assert np.abs(y_perm - y).max() > 1e-2  # and differs from attn(X)
    causal = layers.causal_mask(T)  # a causal mask is position information: equivariance breaks
    y_causal = _self_attention(x, w_q, w_k, w_v, H, causal)
    assert np.abs(_self_attention(x[:, perm], w_q, w_k, w_v, H, causal) - y_causal[:, perm]).max() > 1e-2


def test_split_heads_gives_head_h_its_columns_and_merge_inverts_it():
    rng = np.random.default_rng(4)
    B, T, D, H = 2, 5, 12, 3
    Dh = D // H
    x = rng.standard_normal((B, T, D))
    heads = layers.split_heads(x, H)
    assert heads.shape == (B, H, T, Dh)
    np.testing.assert_array_equal(heads, x.reshape(B, T, H, Dh).transpose(0, 2, 1, 3))  # (B, H, T, Dh)
    np.testing.assert_array_equal(heads[1, 2, 3], x[1, 3, 2 * Dh : 3 * Dh])  # head h owns columns h*Dh..
    np.testing.assert_array_equal(layers.merge_heads(heads), x)
    y = rng.standard_normal((B, H, T, Dh))
    np.testing.assert_array_equal(layers.split_heads(layers.merge_heads(y), H), y)


# --- generation ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("position", "norm", "scaling"),
    [("learned", "pre", True), ("rope", "pre", True), ("sinusoidal", "post", True), ("none", "post", False)],
)
def test_generation_with_and_without_kv_cache_is_identical(random_params, position, norm, scaling):
    run = make_run("copy", 6, position=position, norm=norm, scaling=scaling, dtype="float64")
    params = random_params(run.model, seed=5)
    L = run.task.length
    prompt = task_of(run.task).test_set(run.task, 16)[:, : L + 1]
    tokens, logits = generate(params, prompt, L, run.model, use_cache=True)
    tokens_full, logits_full = generate(params, prompt, L, run.model, use_cache=False)
    np.testing.assert_array_equal(tokens, tokens_full)
    assert np.abs(logits - logits_full).max() < 1e-10
    # and both equal one teacher-forced pass over the generated sequence
    fed = np.concatenate([prompt, tokens[:, :-1]], axis=1)
    assert np.abs(forward(params, fed, run.model, out_from=L)[0] - logits).max() < 1e-10
    assert np.array_equal(tokens, logits.argmax(axis=-1))


def test_generation_with_ablated_heads_matches_without_cache(random_params):
    run = make_run("copy", 4, position="rope", dtype="float64")
    params = random_params(run.model, seed=6)
    head_mask = np.ones((run.model.n_layers, run.model.n_heads))
    head_mask[0, [0, 2]] = 0
    prompt = task_of(run.task).test_set(run.task, 8)[:, :5]
    cached = generate(params, prompt, 4, run.model, use_cache=True, head_mask=head_mask)
    full = generate(params, prompt, 4, run.model, use_cache=False, head_mask=head_mask)
    plain = generate(params, prompt, 4, run.model, use_cache=True)
    np.testing.assert_array_equal(cached[0], full[0])
    assert np.abs(cached[1] - full[1]).max() < 1e-10
    assert np.abs(cached[1] - plain[1]).max() > 1e-6  # the ablation changed something


# --- determinism ------------------------------------------------------------------

SHORT = dict(steps=30)
TRAIN_IN_SUBPROCESS = (
    "import sys; from attncore import make_run; from attncore.train import train; "
    "sys.stdout.write(train(make_run('sort', 4, seed={seed}, steps=30)).loss_history.tobytes().hex())"
)


def test_same_seed_gives_a_bit_identical_loss_history():
    run = make_run("sort", 4, seed=7, **SHORT)
    first, second = train(run), train(run)
    assert first.loss_history.dtype == np.float64 and first.loss_history.shape == (30,)
    assert first.loss_history.tobytes() == second.loss_history.tobytes()
    for name, p in first.params.items():
        assert p.tobytes() == second.params[name].tobytes(), name


@pytest.mark.slow
@pytest.mark.parametrize("threads", [{}, {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}])
def test_same_seed_gives_a_bit_identical_loss_history_in_another_process(threads):
    """Another interpreter, with the default or a single BLAS thread, reproduces the history byte for byte."""
    here = train(make_run("sort", 4, seed=7, **SHORT)).loss_history.tobytes().hex()
    env = os.environ | threads | {"PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run(
        [sys.executable, "-c", TRAIN_IN_SUBPROCESS.format(seed=7)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout == here


def test_training_runs_on_one_blas_thread_whatever_it_inherits_and_restores_the_count():
    """attncore.train pins OpenBLAS to one thread itself (not only the store): a process with 2 BLAS threads
    trains on 1 (seen from inside the callback) and has its 2 back afterwards; the bits equal a 1-thread run."""
    from threadpoolctl import threadpool_info, threadpool_limits

    if not any(i["internal_api"] == "openblas" for i in threadpool_info()):
        pytest.skip("NumPy is not linked to OpenBLAS here")
    run = make_run("sort", 4, seed=7, **SHORT)
    seen = []

    def blas_threads():
        return {i["num_threads"] for i in threadpool_info() if i["internal_api"] == "openblas"}

    with threadpool_limits(limits=1, user_api="blas"):
        one = train(run).loss_history
    with threadpool_limits(limits=2, user_api="blas"):
        two = train(run, lambda step, loss: seen.append(blas_threads())).loss_history
        after = blas_threads()
    assert seen and all(s == {1} for s in seen)
    assert after == {2}
    assert one.tobytes() == two.tobytes()


SECOND_OPENBLAS = """
import ctypes, json, shutil, sys
import numpy
from threadpoolctl import threadpool_info
from attncore.config import make_run
from attncore.train import train
numpys = [i["filepath"] for i in threadpool_info() if i["internal_api"] == "openblas"]
if not numpys:
    print("no openblas"); sys.exit(0)
shutil.copy(numpys[0], sys.argv[1])
ctypes.CDLL(sys.argv[1])  # a second OpenBLAS, loaded after NumPy's as SciPy's or another package's would be
libs = [i for i in threadpool_info() if i["internal_api"] == "openblas"]
assert len(libs) == 2, libs
from threadpoolctl import threadpool_limits
with threadpool_limits(limits=2, user_api="blas"):
    counts = lambda: sorted(i["num_threads"] for i in threadpool_info() if i["internal_api"] == "openblas")
    seen = []
    train(make_run("sort", 4, seed=7, steps=3, d_model=16, n_heads=2), lambda step, loss: seen.append(counts()))
    after = counts()
print(json.dumps({"seen": seen, "after": after}))
"""


@pytest.mark.slow
def test_every_loaded_openblas_is_pinned_not_only_the_first_the_maps_list(tmp_path):
    """CI found training on 2 threads in the full suite: another package had loaded a second OpenBLAS, and the pin
    took whichever the process's maps listed first. Here a copy of NumPy's is loaded beside it (in a subprocess)."""
    out = subprocess.run(
        [sys.executable, "-c", SECOND_OPENBLAS, str(tmp_path / "libopenblas_second.so")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout.strip()
    if out == "no openblas":
        pytest.skip("NumPy is not linked to OpenBLAS here")
    found = json.loads(out)
    assert found["seen"] and all(counts == [1, 1] for counts in found["seen"]), found
    assert found["after"] == [2, 2], found


def test_without_an_openblas_the_pin_is_a_no_op(monkeypatch):
    from attncore import _blas

    monkeypatch.setattr(_blas, "_modules", -1)
    monkeypatch.setattr(_blas, "_funcs", [])
    monkeypatch.setattr(_blas, "_loaded_openblas_paths", lambda: [])
    with _blas.one_blas_thread():
        assert _blas.blas_threads() is None
    monkeypatch.setattr(_blas, "_modules", -1)  # the next caller searches again


def test_different_seeds_give_different_histories():
    a = train(make_run("sort", 4, seed=7, **SHORT)).loss_history
    b = train(make_run("sort", 4, seed=8, **SHORT)).loss_history
    assert a[0] != b[0]
    assert not np.any(a == b)


# --- size ---------------------------------------------------------------------


def test_default_experiment_model_has_27253_parameters():
    """The article's model: vocab 21, d 32, 4 heads, 2 blocks, d_ff 128, t_max 13."""
    cfg = make_run("copy", 6).model
    assert cfg == ModelConfig()
    assert count_params(cfg) == 27_253
    assert sum(p.size for p in init_params(cfg, np.random.default_rng(0)).values()) == 27_253


@pytest.mark.parametrize("d", [16, 32, 64, 256])
def test_block_has_12d2_plus_13d_parameters_whatever_the_heads(d):
    counts = set()
    for n_heads in (1, 2, 4, 8):
        shapes = param_shapes(ModelConfig(d_model=d, n_heads=n_heads, d_ff=4 * d))
        counts.add(sum(int(np.prod(s)) for name, s in shapes.items() if name.startswith("blocks.0.")))
        one = count_params(ModelConfig(d_model=d, n_heads=n_heads, n_layers=1, d_ff=4 * d))
        two = count_params(ModelConfig(d_model=d, n_heads=n_heads, n_layers=2, d_ff=4 * d))
        assert two - one == 12 * d * d + 13 * d
    assert counts == {12 * d * d + 13 * d}
    assert {64: 49_984, 256: 789_760}.get(d, 12 * d * d + 13 * d) == 12 * d * d + 13 * d  # docs/model.md's figures
