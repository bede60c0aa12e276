"""qk-norm (a LayerNorm over each head's queries and keys) and the output z-loss: their hand-written backward
against finite differences in float64 and against PyTorch autograd, on every forward path (training, padded
batches, randomized positions, the KV-cached generation, the hooked forward); their parameters, initial weights
and measured logits."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from test_gradients import agrees, centred_difference
from test_length_numerics import padded_batch

from attncore import layers
from attncore.config import NORMS, POSITIONS, make_run
from attncore.interpret import norms
from attncore.interpret.hooks import run_with_hooks
from attncore.memory import _param_count
from attncore.model import count_params, forward, generate, init_params, loss_and_grads, param_shapes
from attncore.task import task_of
from attncore.tasks import draw_positions

QK = ("attn.q_norm.gamma", "attn.q_norm.beta", "attn.k_norm.gamma", "attn.k_norm.beta")
Z = 0.05  # large enough that the z term moves every gradient well above the finite differences' noise


def small(position="learned", norm="pre", *, task="sort", qk_norm=True, **settings):
    lengths = {"length": 10, "vocab": 12, "k_min": 2} if task == "induction" else {"length": 4}
    return make_run(
        task, d_model=16, n_heads=4, n_layers=2, d_ff=32, position=position, norm=norm, dtype="float64",
        qk_norm=qk_norm, **lengths, **settings,
    )  # fmt: skip


def objective(params, seqs, run, n, z_loss=0.0, positions=None, lengths=None) -> float:
    """cross-entropy + z_loss · mean (log Z)², from the forward pass alone (no backward)."""
    if lengths is not None:
        from attncore.model import padded_forward

        logits, targets, _, _ = padded_forward(params, seqs, lengths, run.model, positions=positions)
    else:
        idx, targets = seqs[:, :-1], seqs[:, -n:].ravel()
        logits = forward(params, idx, run.model, out_from=idx.shape[1] - n, positions=positions)[0]
        logits = logits.reshape(len(targets), -1)
    ce, zsq, _ = layers.cross_entropy_z_forward(logits, targets, z_loss)
    return ce + z_loss * zsq


def fd_check(run, params, seqs, n, z_loss=0.0, positions=None, lengths=None, n_coords=6):
    """Sampled coordinates of every tensor: the analytic gradient against a centred difference (EPS / 10 at a
    ReLU kink)."""
    _, grads = loss_and_grads(params, seqs, run.model, n, positions=positions, lengths=lengths, z_loss=z_loss)
    assert grads.keys() == params.keys()
    rng = np.random.default_rng(2)

    def loss():
        return objective(params, seqs, run, n, z_loss, positions, lengths)

    for name, array in params.items():
        g = grads[name].reshape(-1)
        resolvable = np.flatnonzero(np.abs(g) > 1e-6)
        if name.endswith("k_norm.beta") and run.model.position != "rope":
            # adds one vector to every key: one constant per query's scores, which the softmax ignores (RoPE
            # rotates it differently at each position, where it counts)
            assert np.abs(g).max() < 1e-12 and abs(centred_difference(loss, array, 0, 1e-6)) < 5e-9, name
            continue
        assert resolvable.size, f"{name}: nothing to check"
        for i in rng.choice(resolvable, size=min(n_coords, resolvable.size), replace=False):
            fd = centred_difference(loss, array, i, 1e-6)
            if not agrees(fd, g[i], 5e-9):
                fd = centred_difference(loss, array, i, 1e-7)
                assert agrees(fd, g[i], 5e-8), f"{name}[{i}]: analytic {g[i]} vs finite difference {fd}"


# --- parameters and initial weights ----------------------------------------------


def test_qk_norm_adds_a_gain_and_bias_over_d_head_for_queries_and_keys_per_block():
    off, on = small(qk_norm=False).model, small().model
    added = {k: v for k, v in param_shapes(on).items() if k not in param_shapes(off)}
    assert added == {f"blocks.{i}.{n}": (on.d_head,) for i in range(on.n_layers) for n in QK}
    assert count_params(on) - count_params(off) == 4 * on.d_head * on.n_layers
    assert _param_count(small()) == count_params(on)  # the memory estimate counts them too


def test_qk_norm_starts_at_gain_1_bias_0_and_leaves_every_other_initial_tensor_unchanged():
    off, on = init_params(small(qk_norm=False).model, 7), init_params(small().model, 7)
    for name, value in off.items():
        assert np.array_equal(on[name], value), name
    for i in range(2):
        for kind in ("q_norm", "k_norm"):
            assert np.all(on[f"blocks.{i}.attn.{kind}.gamma"] == 1.0)
            assert np.all(on[f"blocks.{i}.attn.{kind}.beta"] == 0.0)


def test_the_run_key_holds_qk_norm_and_z_loss_only_when_set():
    assert make_run(qk_norm=False, z_loss=0).to_dict() == make_run().to_dict()
    d = make_run(qk_norm=True, z_loss=1e-4).to_dict()
    assert d["model"]["qk_norm"] is True and d["train"]["z_loss"] == 1e-4


# --- the forward: what qk-norm computes ---------------------------------------------


def test_queries_and_keys_are_normalised_per_head_before_rope():
    """With gain 1 and bias 0 each head's q and k have mean 0 and variance ~1 over Dh (RoPE rotates pairs, which
    keeps the norm of a head's vector: its squared mean is still Dh · 1)."""
    run = small("rope")
    params = init_params(run.model, 0)
    idx = task_of(run.task).sample_batch(run.task, 3, np.random.default_rng(0))[:, :-1]
    _, cache = forward(params, idx, run.model)
    for block in cache.blocks:
        for a in (block.attn.q, block.attn.k):  # (B, H, T, Dh), after RoPE
            assert np.allclose((a * a).sum(-1), run.model.d_head, rtol=1e-2)  # var / (var + LN eps) of 1
        for c in (block.attn.q_norm, block.attn.k_norm):
            assert np.allclose(c.xhat.mean(-1), 0.0, atol=1e-12)


# --- finite differences -------------------------------------------------------------


CONFIGS = list(itertools.product(POSITIONS, NORMS))


@pytest.mark.parametrize(("position", "norm"), CONFIGS)
def test_qk_norm_gradients_match_finite_differences(random_params, position, norm):
    run = small(position, norm)
    params = random_params(run.model, seed=0)
    fd_check(run, params, task_of(run.task).sample_batch(run.task, 3, np.random.default_rng(1)), 4)


@pytest.mark.parametrize("norm", NORMS)
def test_qk_norm_gradients_on_every_position_match_finite_differences(random_params, norm):
    run = small("rope", norm, task="induction")
    params = random_params(run.model, seed=0)
    fd_check(run, params, task_of(run.task).sample_batch(run.task, 3, np.random.default_rng(1)), run.task.answer_len)


@pytest.mark.parametrize("position", ["learned", "rope", "alibi"])
def test_qk_norm_padded_batch_gradients_match_finite_differences(random_params, position):
    run = small(position, train_lengths=(1, 4))
    params = random_params(run.model, seed=0)
    seqs, ns = padded_batch(np.random.default_rng(1), [4, 1, 3])
    fd_check(run, params, seqs, 4, lengths=ns)


def test_qk_norm_randomized_position_gradients_match_finite_differences(random_params):
    run = small("rope", randomized_positions=24)
    params = random_params(run.model, seed=0)
    rng = np.random.default_rng(1)
    seqs = task_of(run.task).sample_batch(run.task, 3, rng)
    fd_check(run, params, seqs, 4, positions=draw_positions(rng, 8, 24))


@pytest.mark.parametrize("qk_norm", [False, True])
def test_z_loss_gradients_match_finite_differences(random_params, qk_norm):
    run = small("rope", qk_norm=qk_norm)
    params = random_params(run.model, seed=0)
    fd_check(run, params, task_of(run.task).sample_batch(run.task, 3, np.random.default_rng(1)), 4, z_loss=Z)


def test_z_loss_padded_batch_gradients_match_finite_differences(random_params):
    run = small("learned", train_lengths=(1, 4))
    params = random_params(run.model, seed=0)
    seqs, ns = padded_batch(np.random.default_rng(1), [4, 2, 3])
    fd_check(run, params, seqs, 4, z_loss=Z, lengths=ns)


def test_the_z_loss_layer_is_the_cross_entropy_plus_c_log_z_squared():
    rng = np.random.default_rng(3)
    logits, targets = 3.0 * rng.standard_normal((7, 5)), rng.integers(0, 5, 7)
    ce, zsq, cache = layers.cross_entropy_z_forward(logits, targets, 0.3)
    log_z = np.log(np.exp(logits).sum(-1))
    assert ce == pytest.approx(layers.cross_entropy_forward(logits, targets)[0], rel=1e-14)
    assert zsq == pytest.approx((log_z**2).mean(), rel=1e-13)
    d = layers.cross_entropy_z_backward(cache).reshape(-1)

    def f():
        c, z, _ = layers.cross_entropy_z_forward(logits, targets, 0.3)
        return c + 0.3 * z

    fd = np.array([centred_difference(f, logits, i, 1e-6) for i in range(logits.size)])
    assert agrees(fd, d, 5e-9).all()


def test_z_loss_zero_leaves_the_gradient_bit_identical(random_params):
    run = small("rope", qk_norm=False)
    params = random_params(run.model, seed=1)
    seqs = task_of(run.task).sample_batch(run.task, 4, np.random.default_rng(2))
    loss, grads = loss_and_grads(params, seqs, run.model, 4)
    loss0, grads0 = loss_and_grads(params, seqs, run.model, 4, z_loss=0.0)
    assert loss == loss0 and all(np.array_equal(grads[k], grads0[k]) for k in grads)
    loss_z, grads_z = loss_and_grads(params, seqs, run.model, 4, z_loss=Z)
    assert loss_z == loss  # the loss reported is the cross-entropy
    assert not np.array_equal(grads_z["head.b"], grads["head.b"])


# --- the PyTorch oracle ---------------------------------------------------------------


def oracle(run, params, seqs, n, positions=None, lengths=None, z_loss=0.0):
    torch_reference = pytest.importorskip("torch_reference")
    loss, grads = loss_and_grads(params, seqs, run.model, n, positions=positions, lengths=lengths, z_loss=z_loss)
    model = torch_reference.TorchModel(run.model, params)
    t_objective, t_grads = torch_reference.torch_loss_and_grads(model, seqs, n, positions, lengths, z_loss)
    t_loss = torch_reference.torch_loss(model, seqs, n, positions, lengths).item()
    assert abs(loss - t_loss) <= 1e-12 * abs(t_loss)  # the cross-entropy
    assert grads.keys() == t_grads.keys()
    for name, g in grads.items():
        ref = t_grads[name]
        # the key norm's bias has a zero gradient without RoPE (module rounding): held to 1e-9 of 1e-6
        assert np.abs(g - ref).max() <= 1e-9 * max(np.abs(ref).max(), 1e-6), name
    return t_objective - t_loss


@pytest.mark.parametrize(("position", "norm"), CONFIGS)
def test_qk_norm_loss_and_every_gradient_match_torch(random_params, position, norm):
    run = small(position, norm)
    seqs = task_of(run.task).sample_batch(run.task, 8, np.random.default_rng(5))
    oracle(run, random_params(run.model, seed=3), seqs, 4)


@pytest.mark.parametrize("position", ["learned", "rope", "alibi", "none"])
def test_qk_norm_padded_mixed_batch_matches_torch(random_params, position):
    run = small(position, train_lengths=(1, 4))
    seqs, ns = padded_batch(np.random.default_rng(4), [2, 4, 1, 3, 4])
    oracle(run, random_params(run.model, seed=4), seqs, 4, lengths=ns)


def test_qk_norm_randomized_positions_match_torch(random_params):
    run = small("rope", randomized_positions=24)
    rng = np.random.default_rng(3)
    seqs = task_of(run.task).sample_batch(run.task, 5, rng)
    oracle(run, random_params(run.model, seed=3), seqs, 4, positions=draw_positions(rng, 8, 24))


@pytest.mark.parametrize("qk_norm", [False, True])
def test_z_loss_gradients_match_torch_autograd(random_params, qk_norm):
    run = small("learned", qk_norm=qk_norm)
    seqs = task_of(run.task).sample_batch(run.task, 8, np.random.default_rng(6))
    z_term = oracle(run, random_params(run.model, seed=6), seqs, 4, z_loss=Z)
    assert z_term > 1e-3  # the term was there


def test_z_loss_on_a_padded_batch_matches_torch(random_params):
    run = small("rope", train_lengths=(1, 4))
    seqs, ns = padded_batch(np.random.default_rng(7), [2, 4, 1, 3])
    oracle(run, random_params(run.model, seed=7), seqs, 4, lengths=ns, z_loss=Z)


# --- generation, hooks and the lab's norms ------------------------------------------


@pytest.mark.parametrize("position", POSITIONS)
def test_qk_norm_generation_with_the_kv_cache_matches_recomputation(random_params, position):
    """The cache holds the keys after the norm (and RoPE): decoding from it gives the recomputed logits."""
    run = small(position, task="copy")
    params = random_params(run.model, seed=8)
    prompt = task_of(run.task).sample_batch(run.task, 3, np.random.default_rng(8))[:, :5]
    tokens, logits = generate(params, prompt, 4, run.model)
    tokens_full, logits_full = generate(params, prompt, 4, run.model, use_cache=False)
    assert np.array_equal(tokens, tokens_full)
    assert np.abs(logits - logits_full).max() < 1e-12


def test_the_hooked_forward_computes_the_same_qk_norm_model(random_params):
    run = small("rope")
    params = random_params(run.model, seed=9)
    idx = task_of(run.task).sample_batch(run.task, 3, np.random.default_rng(9))[:, :-1]
    logits, acts, _ = run_with_hooks(params, idx, run.model, keep_caches=True)
    assert np.abs(logits - forward(params, idx, run.model)[0]).max() < 1e-12


def test_the_max_attention_logit_is_the_one_after_qk_norm(random_params):
    """attncore.interpret.norms reads q·k/√Dh from the attention's cache: the logits the softmax took."""
    run = small("learned", task="copy")
    params = random_params(run.model, seed=10)
    for i in range(run.model.n_layers):  # a large gain: the logits scale with it
        params[f"blocks.{i}.attn.q_norm.gamma"] *= 5.0
    seqs = norms.fixed_batches(run, 1)[0]
    measured = norms._forward_sums(params, run, seqs)[:, 1]
    _, cache = forward(params, seqs[:, :-1], run.model)
    T = seqs.shape[1] - 1
    causal = np.tril(np.ones((T, T), dtype=bool))
    for i, block in enumerate(cache.blocks):
        a = block.attn
        scores = np.abs(a.q @ a.k.swapaxes(-1, -2)) / np.sqrt(run.model.d_head)
        # the softmax of these scores is the cached weights: they are the logits the model used
        expected = np.exp(a.q @ a.k.swapaxes(-1, -2) / np.sqrt(run.model.d_head) - 1e9 * ~causal)
        assert np.allclose(expected / expected.sum(-1, keepdims=True), a.weights, atol=1e-12)
        assert measured[i] == pytest.approx(scores[..., causal].max(), rel=1e-12)


@pytest.mark.parametrize("position", ["learned", "rope"])
def test_the_pattern_row_gradient_through_a_later_qk_norm_block_matches_finite_differences(position):
    """The interpretability backward (hooks.backward_to_pattern_row) goes back through block 1's qk-norm."""
    from attncore.interpret import explain
    from attncore.task import task_of
    from attncore.train import train

    run = make_run(steps=20, position=position, dtype="float64", qk_norm=True)
    params = train(run).params
    t = explain.target(params, run, task_of(run.task).probe(run.task), 0, 2, 8)
    rng = np.random.default_rng(0)
    rows = rng.dirichlet(np.ones(len(t.row)), size=2)
    dprobs = rng.normal(size=(2, run.model.vocab_size))
    _, grad = explain.row_gradient(t, rows, dprobs)
    eps = 1e-6
    for key in range(len(t.row)):
        bump = np.zeros_like(rows)
        bump[:, key] = eps
        up = (explain.outputs_with_rows(t, rows + bump) * dprobs).sum(-1)
        down = (explain.outputs_with_rows(t, rows - bump) * dprobs).sum(-1)
        assert np.allclose((up - down) / (2 * eps), grad[:, key], rtol=1e-5, atol=1e-8)


# --- a whole run: the trainer's wiring against torch ------------------------------------


@pytest.mark.slow
def test_training_with_qk_norm_z_loss_and_weight_decay_matches_torch():
    """Steps of the trainer with all three on (its loss history the cross-entropy) against torch.optim.AdamW on
    the cross-entropy plus the z term."""
    torch = pytest.importorskip("torch")
    torch_reference = pytest.importorskip("torch_reference")
    from attncore.train import batch_rng, initial_params, train

    run = make_run(
        "copy", 4, 3, steps=8, batch_size=8, d_model=16, n_heads=2, dtype="float64", lr=1e-2, position="rope",
        qk_norm=True, z_loss=Z, weight_decay=0.1,
    )  # fmt: skip
    tc = run.train
    model = torch_reference.TorchModel(run.model, initial_params(run))
    opt = torch.optim.AdamW(model.parameters(), lr=tc.lr, weight_decay=tc.weight_decay, foreach=False)
    rng, history = batch_rng(tc.seed), []
    for _ in range(tc.steps):
        seqs = task_of(run.task).sample_batch(run.task, tc.batch_size, rng)
        opt.zero_grad()
        torch_reference.torch_loss(model, seqs, 4, z_loss=tc.z_loss).backward()
        history.append(torch_reference.torch_loss(model, seqs, 4).item())  # the cross-entropy, before the step
        opt.step()
    result = train(run, snapshots=False)
    assert np.abs(result.loss_history - history).max() <= 1e-12 * max(history)
    for name, p in model.to_attncore().items():
        assert np.abs(result.params[name] - p).max() <= 1e-9 * max(np.abs(p).max(), 1e-6), name
    plain = train(make_run("copy", 4, 3, steps=8, batch_size=8, d_model=16, n_heads=2, dtype="float64", lr=1e-2,
                           position="rope", qk_norm=True), snapshots=False)  # fmt: skip
    assert plain.loss_history[0] == result.loss_history[0]  # the first loss: before any step, z or decay
    assert not np.array_equal(plain.loss_history, result.loss_history)


# --- the store and the command line -----------------------------------------------------


@pytest.mark.slow
def test_a_run_with_all_three_is_stored_and_read_back_bit_for_bit(cache):
    from attncore.train import train
    from lab import store
    from lab.store import backend

    run = make_run(steps=30, qk_norm=True, z_loss=1e-4, weight_decay=0.1)
    first = store.get_run(run)
    assert store.is_cached(run)
    again = store.stored_run(run)
    assert again is not None and again.config == run
    assert np.array_equal(again.loss_history, first.loss_history)
    assert all(np.array_equal(again.params[k], first.params[k]) for k in first.params)
    assert again.n_params == count_params(run.model) and "blocks.1.attn.k_norm.beta" in again.params
    assert np.array_equal(train(run, snapshots=False).loss_history, first.loss_history)  # a pure function
    assert [s["config"] for s in store.list_cached()] == [run.to_dict()]
    assert list(cache.rglob(backend.RECORD_FILE))


@pytest.mark.slow
def test_the_command_line_trains_all_three_and_serves_the_stored_run(tmp_path):
    import json

    from test_cli import attncore, stored

    cache = tmp_path / "cache"
    flags = ["--qk-norm", "--z-loss", "1e-4", "--weight-decay", "0.1", "--steps", "50"]
    r = attncore(cache, "train", *flags, "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["config"]["model"]["qk_norm"] is True
    assert (summary["config"]["train"]["z_loss"], summary["config"]["train"]["weight_decay"]) == (1e-4, 0.1)
    assert summary["n_params"] == count_params(make_run(qk_norm=True).model)
    assert stored(cache)
    second = json.loads(attncore(cache, "train", *flags, "--json").stdout)
    assert second.get("cached") and second["final_loss"] == summary["final_loss"]
    text = attncore(cache, "train", *flags).stdout
    assert "weight decay 0.1" in text and "z-loss 0.0001" in text and " · qk-norm · " in text  # the run's description


BAD = {
    "--weight-decay": (["--weight-decay", "-0.1"], "[0.0, 10.0)"),
    "--weight-decay too large": (["--weight-decay", "10"], "[0.0, 10.0)"),
    "--z-loss": (["--z-loss", "-1e-4"], "[0.0, 1.0)"),
    "--z-loss too large": (["--z-loss", "2"], "[0.0, 1.0)"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", BAD)
def test_a_bad_value_exits_2_with_one_sentence_naming_the_flag(tmp_path, case):
    from test_cli import attncore, stored

    argv, allowed = BAD[case]
    cache = tmp_path / "cache"
    r = attncore(cache, "train", "--steps", "5", *argv)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {argv[0]}: ") and allowed in lines[0], r.stderr
    assert stored(cache) == []
