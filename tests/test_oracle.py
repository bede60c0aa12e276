"""PyTorch as an independent oracle: the same weights and batch give the same loss, gradients and Adam steps."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from attncore import layers
from attncore.config import NORMS, POSITIONS, make_run
from attncore.model import flatten, loss_and_grads, param_shapes, unflatten
from attncore.optim import Adam
from attncore.task import task_of
from attncore.train import batch_rng, initial_params, train

torch = pytest.importorskip("torch")
F = torch.nn.functional
from torch_reference import TorchModel, torch_loss, torch_loss_and_grads  # noqa: E402

CONFIGS = list(itertools.product(POSITIONS, NORMS, (True, False)))


def max_relative(a: np.ndarray, b: np.ndarray) -> float:
    """Largest deviation relative to the tensor's own scale (elementwise would divide by near-zeros)."""
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def run_and_batch(position="learned", norm="pre", scaling=True, dtype="float64", batch=8):
    run = make_run("copy", 6, position=position, norm=norm, scaling=scaling, dtype=dtype)
    return run, task_of(run.task).sample_batch(run.task, batch, np.random.default_rng(5))


def test_the_oracle_runs_on_one_torch_thread():
    """conftest pins it: the suite's time does not depend on how busy the machine's other cores are."""
    assert torch.get_num_threads() == 1


# --- the whole model ---------------------------------------------------------


@pytest.mark.parametrize(("position", "norm", "scaling"), CONFIGS)
def test_loss_and_every_gradient_match_torch_autograd(random_params, position, norm, scaling):
    run, seqs = run_and_batch(position, norm, scaling)
    params = random_params(run.model, seed=3)
    loss, grads = loss_and_grads(params, seqs, run.model, run.task.length)
    torch_loss_value, torch_grads = torch_loss_and_grads(TorchModel(run.model, params), seqs, run.task.length)
    assert abs(loss - torch_loss_value) <= 1e-12 * abs(torch_loss_value)
    assert grads.keys() == torch_grads.keys()
    for name, g in grads.items():
        assert g.shape == torch_grads[name].shape, name
        assert max_relative(g, torch_grads[name]) < 1e-9, name


@pytest.mark.parametrize(("position", "norm"), list(itertools.product(POSITIONS, NORMS)))
def test_the_every_position_loss_and_its_gradients_match_torch_autograd(random_params, position, norm):
    """The induction task's loss: next-token cross-entropy on every one of the T - 1 positions."""
    run = make_run("induction", 12, position=position, norm=norm, dtype="float64", vocab=9, k_min=2)
    seqs = task_of(run.task).sample_batch(run.task, 8, np.random.default_rng(5))
    params = random_params(run.model, seed=3)
    assert run.task.answer_len == seqs.shape[1] - 1
    loss, grads = loss_and_grads(params, seqs, run.model, run.task.answer_len)
    torch_value, torch_grads = torch_loss_and_grads(TorchModel(run.model, params), seqs, run.task.answer_len)
    assert abs(loss - torch_value) <= 1e-12 * abs(torch_value)
    for name, g in grads.items():
        assert max_relative(g, torch_grads[name]) < 1e-9, name


def test_float32_model_matches_torch_float32(random_params):
    """The benchmark's float32 peer computes the same model as attncore's float32 training."""
    run, seqs = run_and_batch(dtype="float32", batch=32)
    params = random_params(run.model, seed=4)
    assert params["head.w"].dtype == np.float32
    loss, grads = loss_and_grads(params, seqs, run.model, run.task.length)
    torch_loss_value, torch_grads = torch_loss_and_grads(TorchModel(run.model, params), seqs, run.task.length)
    assert abs(loss - torch_loss_value) <= 1e-5 * abs(torch_loss_value)
    for name, g in grads.items():
        assert max_relative(g, torch_grads[name]) < 1e-4, name


def test_training_steps_match_torch(random_params):
    """Three steps of loss, backward and Adam in both frameworks land on the same weights."""
    run, _ = run_and_batch(position="rope", norm="post")
    tc = run.train
    shapes = param_shapes(run.model)
    flat = flatten(random_params(run.model, seed=6), shapes)
    params, grad_flat = unflatten(flat, shapes), np.empty_like(flat)
    grads = unflatten(grad_flat, shapes)
    model = TorchModel(run.model, params)
    opt = Adam(flat, tc.lr, tc.beta1, tc.beta2, tc.eps)
    torch_opt = torch.optim.Adam(model.parameters(), lr=tc.lr, betas=(tc.beta1, tc.beta2), eps=tc.eps)
    rng = np.random.default_rng(7)
    for _ in range(3):
        seqs = task_of(run.task).sample_batch(run.task, 8, rng)
        loss, _ = loss_and_grads(params, seqs, run.model, run.task.length, grads)
        opt.step(grad_flat)
        torch_opt.zero_grad()
        torch_value = torch_loss(model, seqs, run.task.length)
        torch_value.backward()
        torch_opt.step()
        assert abs(loss - torch_value.item()) <= 1e-10 * loss
    for name, p in model.to_attncore().items():
        assert max_relative(params[name], p) < 1e-10, name


# --- attention against scaled_dot_product_attention ----------------------------


def _qkv(rng, B=3, H=4, T=7, D=8):
    return tuple(rng.standard_normal((B, H, T, D)) for _ in range(3))  # each (B, H, T, D)


@pytest.mark.parametrize("scale", [True, False])
@pytest.mark.parametrize("masking", ["none", "causal", "padding", "padding+causal"])
def test_attention_matches_scaled_dot_product_attention(masking, scale):
    rng = np.random.default_rng(8)
    q, k, v = _qkv(rng)
    T = q.shape[2]
    padding = layers.padding_mask([7, 3, 1], T)  # every query keeps at least key 0
    mask = {
        "none": None,
        "causal": layers.causal_mask(T),
        "padding": layers.attention_mask(None, padding),
        "padding+causal": layers.attention_mask(layers.causal_mask(T), padding),
    }[masking]
    y, _ = layers.attention_forward(q, k, v, mask, scale)
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    kwargs = {} if scale else {"scale": 1.0}
    if masking == "causal":
        expected = F.scaled_dot_product_attention(tq, tk, tv, is_causal=True, **kwargs)
    else:
        attn_mask = None if mask is None else torch.from_numpy(np.ascontiguousarray(mask))
        expected = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=attn_mask, **kwargs)
    assert np.abs(y - expected.numpy()).max() < 1e-12


def test_causal_attention_matches_sdpa_is_causal_in_the_model_shape():
    """The mask the model builds, not just a hand-built one, is torch's causal mask."""
    q, k, v = _qkv(np.random.default_rng(9), T=13)
    y, _ = layers.attention_forward(q, k, v, layers.causal_mask(13), True)
    expected = F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)), is_causal=True)
    assert np.abs(y - expected.numpy()).max() < 1e-12
    unmasked = F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)))
    assert np.abs(y - unmasked.numpy()).max() > 1e-3  # the mask matters: the comparison can fail


def test_fully_masked_rows_give_zeros_like_torch():
    """A sequence of length 0 (all keys padded) gives zeros, not NaN, in both."""
    q, k, v = _qkv(np.random.default_rng(10))
    mask = layers.attention_mask(None, layers.padding_mask([7, 0, 2], q.shape[2]))
    y, _ = layers.attention_forward(q, k, v, mask, True)
    expected = F.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (q, k, v)), attn_mask=torch.from_numpy(np.ascontiguousarray(mask))
    )
    assert np.isfinite(y).all() and np.all(y[1] == 0)
    assert np.abs(y - expected.numpy()).max() < 1e-12


# --- Adam ----------------------------------------------------------------------


@pytest.mark.parametrize("n_steps", [1, 10])
@pytest.mark.parametrize(
    "hyper", [dict(lr=3e-3, beta1=0.9, beta2=0.999, eps=1e-8), dict(lr=1e-2, beta1=0.8, beta2=0.99, eps=1e-6)]
)
def test_adam_matches_torch_optim_adam(n_steps, hyper):
    rng = np.random.default_rng(11)
    start = rng.standard_normal(200)
    flat = start.copy()
    opt = Adam(flat, **hyper)
    weights = torch.nn.Parameter(torch.from_numpy(start.copy()))
    torch_opt = torch.optim.Adam(
        [weights], lr=hyper["lr"], betas=(hyper["beta1"], hyper["beta2"]), eps=hyper["eps"], foreach=False
    )
    for _ in range(n_steps):
        # gradients over many scales, some near eps, so the eps placement matters
        grad = rng.standard_normal(200) * 10.0 ** rng.uniform(-9, 1, 200)
        opt.step(grad)
        weights.grad = torch.from_numpy(grad.copy())
        torch_opt.step()
    expected = weights.detach().numpy()
    assert np.abs(flat - start).max() > 1e-3  # the steps moved the weights
    assert np.abs(flat - expected).max() < 1e-12


@pytest.mark.parametrize("weight_decay", [0.01, 0.5])
def test_weight_decay_matches_torch_optim_adamw_under_a_schedule(weight_decay):
    """Decoupled weight decay: each step scales the weights by 1 - lr_t·λ with the step's scheduled rate, then
    takes the Adam step, as torch.optim.AdamW under LambdaLR (warm-up, then a cosine decay)."""
    rng = np.random.default_rng(12)
    start = rng.standard_normal(300)
    flat, plain = start.copy(), start.copy()
    lr, steps = 3e-2, 12
    multipliers = [schedule_multiplier(t, steps, 4, "cosine", 0.1) for t in range(steps + 1)]  # LambdaLR reads one more
    opt, adam = Adam(flat, lr, weight_decay=weight_decay), Adam(plain, lr)
    weights = torch.nn.Parameter(torch.from_numpy(start.copy()))
    torch_opt = torch.optim.AdamW([weights], lr=lr, weight_decay=weight_decay, foreach=False)
    schedule = torch.optim.lr_scheduler.LambdaLR(torch_opt, lambda t: multipliers[t])
    for t in range(steps):
        grad = rng.standard_normal(300) * 10.0 ** rng.uniform(-9, 1, 300)
        opt.lr = adam.lr = lr * multipliers[t]
        opt.step(grad)
        adam.step(grad)
        weights.grad = torch.from_numpy(grad.copy())
        torch_opt.step()
        schedule.step()
    assert np.abs(flat - weights.detach().numpy()).max() < 1e-12
    assert np.abs(flat - plain).max() > 1e-4  # the decay moved the weights


def test_adamw_with_no_decay_is_adam_bit_for_bit():
    """weight_decay=0 adds no operation: the same bits as Adam, as torch.optim.AdamW(weight_decay=0) gives Adam's."""
    rng = np.random.default_rng(13)
    start = rng.standard_normal(100).astype(np.float32)
    a, b = start.copy(), start.copy()
    opt_a, opt_b = Adam(a, 1e-2), Adam(b, 1e-2, weight_decay=0.0)
    for _ in range(5):
        grad = rng.standard_normal(100).astype(np.float32)
        opt_a.step(grad)
        opt_b.step(grad)
    assert a.tobytes() == b.tobytes()


@pytest.mark.slow
def test_training_with_weight_decay_matches_torch_adamw():
    """A whole run with AdamW and a warm-up gives torch's loss history (AdamW(model.parameters()) under LambdaLR):
    every trained tensor decays, biases, LayerNorm gains and embeddings included."""
    run = make_run(
        "copy", 4, 3, steps=120, batch_size=8, d_model=16, n_heads=2, dtype="float64", lr=1e-2, warmup=20,
        weight_decay=0.3,
    )  # fmt: skip
    tc = run.train
    model = TorchModel(run.model, initial_params(run))
    opt = torch.optim.AdamW(
        model.parameters(), lr=tc.lr, betas=(tc.beta1, tc.beta2), eps=tc.eps, weight_decay=tc.weight_decay,
        foreach=False,
    )  # fmt: skip
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: schedule_multiplier(t, tc.steps, tc.warmup, "none", 0))
    rng, theirs = batch_rng(tc.seed), []
    for _ in range(tc.steps):
        seqs = task_of(run.task).sample_batch(run.task, tc.batch_size, rng)
        opt.zero_grad()
        loss = torch_loss(model, seqs, run.task.length)
        loss.backward()
        opt.step()
        schedule.step()
        theirs.append(loss.item())
    result = train(run, snapshots=False)
    assert np.abs(result.loss_history - np.array(theirs)).max() <= 1e-12 * max(theirs)
    # the key bias's true gradient is 0 (it adds one constant to a query's scores): Adam scales its rounding noise
    # up to steps of lr, so over 120 steps the weights agree to 1e-8 rather than the 3-step test's 1e-10
    for name, p in model.to_attncore().items():
        assert max_relative(result.params[name], p) < 1e-8, name


# --- the learning-rate schedule against torch.optim.lr_scheduler.LambdaLR -------


def schedule_multiplier(t: int, steps: int, warmup: int, decay: str, r: float) -> float:
    """The learning-rate schedule written out again, independently of attncore.optim: warm-up, then the decay
    to r at T - 1."""
    if warmup and t < warmup:
        return min(1.0, (t + 1) / warmup)
    if decay == "cosine":
        return r + (1 - r) * 0.5 * (1 + math.cos(math.pi * (t - warmup) / (steps - 1 - warmup)))
    if decay == "linear":
        return r + (1 - r) * (steps - 1 - t) / (steps - 1 - warmup)
    return 1.0


def torch_schedule_history(run) -> np.ndarray:
    """The run trained by torch: attncore's initial weights and batches, Adam under LambdaLR, step for step."""
    tc = run.train
    model = TorchModel(run.model, initial_params(run))
    opt = torch.optim.Adam(model.parameters(), lr=tc.lr, betas=(tc.beta1, tc.beta2), eps=tc.eps, foreach=False)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda t: schedule_multiplier(t, tc.steps, tc.warmup, tc.decay, tc.min_lr_ratio)
    )
    rng, history = batch_rng(tc.seed), []
    for _ in range(tc.steps):
        seqs = task_of(run.task).sample_batch(run.task, tc.batch_size, rng)
        opt.zero_grad()
        loss = torch_loss(model, seqs, run.task.length)
        loss.backward()
        opt.step()
        schedule.step()
        history.append(loss.item())
    return np.array(history)


SCHEDULES = [(60, "none", 0.0), (60, "linear", 0.0), (60, "cosine", 0.1), (0, "cosine", 0.0)]


@pytest.mark.slow
@pytest.mark.parametrize(("warmup", "decay", "min_lr_ratio"), SCHEDULES)
def test_schedule_matches_torch_lambda_lr(warmup, decay, min_lr_ratio):
    """Training with warm-up and each decay gives torch's loss history (Adam under LambdaLR) to 1e-12."""
    run = make_run(
        "copy", 4, 3, steps=300, batch_size=8, d_model=16, n_heads=2, dtype="float64", lr=1e-2,
        warmup=warmup, decay=decay, min_lr_ratio=min_lr_ratio,
    )  # fmt: skip
    ours = train(run, snapshots=False).loss_history
    theirs = torch_schedule_history(run)
    assert ours[-1] < 0.5 * ours[0]  # it learned: the steps were real
    assert np.abs(ours - theirs).max() <= 1e-12 * np.abs(theirs).max()
    constant = train(make_run("copy", 4, 3, steps=300, batch_size=8, d_model=16, n_heads=2, dtype="float64", lr=1e-2))
    assert np.abs(ours - constant.loss_history).max() > 1e-6  # the schedule changed the run
