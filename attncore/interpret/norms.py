"""Why depth and width matter (docs/regimes.md): per block, the gradient norm of each weight matrix and the
residual stream's norm after the block on fixed batches, and per layer the largest attention logit |q·k|/scale,
the attention entropy and the share of saturated rows; at initialisation and at the training snapshots.

Xiong et al. 2020's Figure 3 is the picture: at initialisation post-LN's gradients near the output grow with
depth, pre-LN's do not. Every figure is read from the weights only (no batch of the training stream is drawn),
so measuring at the snapshots leaves a run's loss history and weights bit-identical.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from .._blas import one_blas_thread
from ..config import ModelConfig, RunConfig
from ..model import loss_and_grads
from ..task import task_of
from ..train import initial_params, train
from .hooks import run_with_hooks

N_BATCHES = 16  # the fixed batches every figure is averaged over
BATCH_SEED = 20_260_302  # their own seed: the same batches for every run of a task and length, any training seed
SNAPSHOT_BATCHES = 1  # a training snapshot is measured on the first fixed batch (the 20: ~2 % of a default run)
SATURATED = 0.99  # a row is saturated when one key takes more than this weight
CHUNK_SCORES = 1 << 18  # attention-score entries (B·H·T·T) of one measuring forward: 2 MiB of float64, so the
# hooked forward and its caches stay within attncore.memory's training estimate (tests/test_cli.py checks the peak)
MATRICES = {"attn_in": "attn.w_qkv", "attn_out": "attn.w_out", "ffn_in": "ffn.w1", "ffn_out": "ffn.w2"}


def fixed_batches(run: RunConfig, n: int = N_BATCHES) -> list[np.ndarray]:
    """n batches (B, 2L+1) of the run's task at its longest length L, drawn from BATCH_SEED and L only (the
    induction task: (B, T) of its T, V and k_min)."""
    task = dataclasses.replace(run.task, train_lengths=None, mixed_lengths=False)
    rng = np.random.default_rng([BATCH_SEED, task.length])
    return [task_of(task).sample_batch(task, run.train.batch_size, rng) for _ in range(n)]


def _grad_norms(params, run: RunConfig, batch: np.ndarray) -> np.ndarray:
    """(n_layers, 4): ‖∂loss/∂W‖_F of each block's four weight matrices (MATRICES' order) on one batch."""
    _, grads = loss_and_grads(params, batch, run.model, run.task.answer_len)
    return np.array(
        [[np.linalg.norm(grads[f"blocks.{i}.{m}"]) for m in MATRICES.values()] for i in range(run.model.n_layers)]
    )


def measured_rows(length: int) -> range:
    """The query rows the attention entropy and the saturated share are over, for task length L: 1..2L−1 of the 2L
    input positions, the prompt's and the answer's alike (row 0 sees one key only and is trivially saturated)."""
    return range(1, 2 * length)


def _forward_sums(params, run: RunConfig, seqs: np.ndarray) -> np.ndarray:
    """(n_layers, 4) over some sequences' inputs, per layer: the sum over tokens of the residual norm ‖x‖₂ after
    the block, the largest |q·k|·scale over allowed (causal) pairs, and over the queries that see two keys or
    more (row 0 sees one and is trivially saturated) the sum of the attention rows' entropies (nats) and the
    count of saturated rows."""
    cfg = run.model
    idx = seqs[:, :-1]
    _, acts, cache = run_with_hooks(params, idx, cfg, keep_caches=True)
    causal = np.tril(np.ones((idx.shape[1],) * 2, dtype=bool))
    out = np.empty((cfg.n_layers, 4))
    for i in range(cfg.n_layers):
        p = f"blocks.{i}."
        resid = acts[p + "resid_post"].astype(np.float64)  # (B, T, D)
        attn = cache.blocks[i].attn
        scores = np.abs(attn.q.astype(np.float64) @ attn.k.astype(np.float64).swapaxes(-1, -2)) * (attn.factor or 1.0)
        rows = attn.weights[:, :, 1:].astype(np.float64)  # (B, H, T-1, T)
        logs = np.log(np.where(rows > 0, rows, 1.0))
        out[i] = (
            np.linalg.norm(resid, axis=-1).sum(),
            scores[..., causal].max(),  # (B, H, T, T) -> the allowed pairs
            -(rows * logs).sum(),
            (rows.max(axis=-1) > SATURATED).sum(),
        )
    return out


def attention_figures(params, run: RunConfig, batches: list[np.ndarray] | None = None) -> dict:
    """The forward-only figures per layer over the fixed batches' sequences: {"residual_norm" (mean over tokens),
    "max_logit" (the largest), "entropy" and "saturated" (mean and share over the rows)}, each a list from the
    input. The sequences go through the model a chunk of CHUNK_SCORES score entries at a time."""
    seqs = np.concatenate(fixed_batches(run) if batches is None else batches)
    n, T, H = len(seqs), seqs.shape[1] - 1, run.model.n_heads
    per = max(1, CHUNK_SCORES // (H * T * T))
    with one_blas_thread():
        sums = np.stack([_forward_sums(params, run, seqs[i : i + per]) for i in range(0, n, per)])
    rows = n * H * (T - 1)
    figures = {
        "residual_norm": sums[:, :, 0].sum(axis=0) / (n * T),
        "max_logit": sums[:, :, 1].max(axis=0),
        "entropy": sums[:, :, 2].sum(axis=0) / rows,
        "saturated": sums[:, :, 3].sum(axis=0) / rows,
    }
    return {k: [float(x) for x in v] for k, v in figures.items()}


def measure(params, run: RunConfig, batches: list[np.ndarray] | None = None) -> dict:
    """The figures of one set of weights over the fixed batches: the gradient norms' mean and, over two batches
    or more, their spread (the standard deviation over the batches); the forward figures over all their
    sequences. JSON-able: {"blocks": [{block, grad_norm: {attn_in, attn_out, ffn_in, ffn_out}, grad_norm_spread:
    {…}, residual_norm}, …], "max_logit": [...], "entropy": [...], "saturated": [...]}, blocks and layers from the
    input."""
    batches = fixed_batches(run) if batches is None else batches
    layers = attention_figures(params, run, batches)
    with one_blas_thread():
        grads = np.stack([_grad_norms(params, run, b) for b in batches])  # (n, n_layers, 4)
    mean, spread = grads.mean(axis=0), grads.std(axis=0)
    blocks = []
    for i in range(run.model.n_layers):
        block = {"block": i, "grad_norm": {m: float(mean[i, j]) for j, m in enumerate(MATRICES)}}
        if len(batches) > 1:
            block["grad_norm_spread"] = {m: float(spread[i, j]) for j, m in enumerate(MATRICES)}
        blocks.append(block | {"residual_norm": layers["residual_norm"][i]})
    return {"blocks": blocks} | {k: layers[k] for k in ("max_logit", "entropy", "saturated")}


def at_init(run: RunConfig) -> dict:
    """`measure` on the run's initial weights."""
    return measure(initial_params(run), run)


def at_snapshots(run: RunConfig) -> Callable[[dict, int], dict]:
    """attncore.train's on_snapshot for these figures: (weights, step) -> {"step": step} | measure(...) on the
    first SNAPSHOT_BATCHES fixed batches (a record stores them; the initial figures, over all N_BATCHES, follow
    from the config and are computed when asked: at_init)."""
    batches = fixed_batches(run, SNAPSHOT_BATCHES)
    return lambda params, step: {"step": step} | measure(params, run, batches)


def over_training(run: RunConfig) -> tuple[list[dict], dict]:
    """(the figures at each snapshot [{"step": s, …}, …], final weights) of a run whose record does not hold them
    (stored before records carried their norms): trains `run` again through attncore.train with at_snapshots, as
    a record's training measures them (the same steps, bit for bit)."""
    result = train(run, on_snapshot=at_snapshots(run))
    return result.measured, result.params


def snapshot_sequences(run: RunConfig) -> int:
    """How many fixed sequences of the task a training snapshot is measured on (a batch holds fewer where the task's
    training set is smaller: Task.batch_rows)."""
    return SNAPSHOT_BATCHES * task_of(run.task).batch_rows(run.task, run.train.batch_size)


# --- storage: a run's snapshot figures as arrays, beside its snapshots (lab.store.codec) --------------------

LAYER_FIGURES = ("residual_norm", "max_logit", "entropy", "saturated")  # one number per block or layer


def array_shapes(n_layers: int, n_snapshots: int) -> dict[str, tuple[int, ...]]:
    """name -> shape of the arrays `stack` makes (leading axis: the snapshot)."""
    out = {"step": (n_snapshots,), "grad_norm": (n_snapshots, n_layers, len(MATRICES))}
    return out | {k: (n_snapshots, n_layers) for k in LAYER_FIGURES}


def stack(snapshots: list[dict]) -> dict[str, np.ndarray]:
    """at_snapshots' results in step order -> arrays named as array_shapes (float64; step int64)."""
    out = {
        "step": np.array([s["step"] for s in snapshots], dtype=np.int64),
        "grad_norm": np.array([[[b["grad_norm"][m] for m in MATRICES] for b in s["blocks"]] for s in snapshots]),
        "residual_norm": np.array([[b["residual_norm"] for b in s["blocks"]] for s in snapshots]),
    }
    return out | {k: np.array([s[k] for s in snapshots], dtype=np.float64) for k in LAYER_FIGURES[1:]}


def figure_bounds(model: ModelConfig) -> dict[str, float]:
    """The largest value each stored norm can take, for a model of this dtype, in a run whose numbers stayed finite:
    past it the measurement itself overflows to inf. Loose (no trained run comes near), and they need no weights:
    a forged 1e308 or 1e300 is far past them in float32 (infinite bounds for float64 models' logits and residuals,
    where the overflow is float64's own)."""
    biggest = float(np.finfo(model.dtype).max)  # the largest finite number of the model's dtype (3.4e38 in float32)
    scale = 1 / math.sqrt(model.d_head) if model.scaling else 1.0
    with np.errstate(over="ignore"):
        return {
            # ‖∂L/∂W‖_F is np.linalg.norm of gradients in the model's dtype: the square root of a sum of squares
            # computed in that dtype, which is inf past its largest number: a finite one is at most √max (1.8e19)
            "grad_norm": math.sqrt(biggest),
            # the residual stream after a block: d finite numbers of the model's dtype, its L2 norm taken in float64:
            # at most √d · max (5.4e39 at d = 256 in float32), the mean over tokens no more
            "residual_norm": float(np.float64(math.sqrt(model.d_model)) * np.float64(biggest)),
            # |q·k|·scale in float64 from q and k in the model's dtype: d_head products of two finite numbers
            # (1.2e77·d_head in float32, scaled)
            "max_logit": float(np.float64(model.d_head) * np.float64(biggest) ** 2 * scale),
        }


def check(arrays: dict[str, np.ndarray], model: ModelConfig, seq_len: int, losses=None) -> None:
    """ValueError naming the first figure that cannot be: norms and logits from 0 to figure_bounds (NaN or +inf where
    training diverged), entropies from 0 to log(seq_len) nats, saturated shares from 0 to 1. Given the run's
    training `losses` (an imported run's, which are finite), also: every figure finite, and the gradient norms not 0
    at every snapshot. A gradient is exactly 0 only where the model gives each answer of the batch probability 1 in
    its dtype, and the first snapshot comes within the first percent of training: a loss above ZERO_GRAD_LOSS at
    that step says the model did not."""
    floats = {k: np.asarray(v, dtype=np.float64) for k, v in arrays.items() if k != "step"}
    bounds = figure_bounds(model)
    highs = bounds | {"entropy": np.log(seq_len) + 1e-9, "saturated": 1.0}
    for name, a in floats.items():
        if losses is not None and not np.isfinite(a).all():
            raise ValueError(f"{name} holds a number that is not finite, in a run whose losses are")
        diverged = np.isnan(a) | ((a == np.inf) if name in bounds else False)  # what a diverged training measures
        bad = a[~(diverged | ((a >= 0) & (a <= highs[name])))]
        if bad.size and name in bounds and bad.min() >= 0:
            raise ValueError(
                f"{name} holds {bad.max():.3g}, above the {highs[name]:.3g} a {model.dtype} model can produce "
                "without overflowing"
            )
        if bad.size:
            raise ValueError(f"{name} holds a number its figure cannot take")
    steps = np.asarray(arrays["step"])
    if losses is not None and len(steps) and not floats["grad_norm"].any():
        first = float(np.asarray(losses)[int(steps[0]) - 1])
        if first > ZERO_GRAD_LOSS:
            raise ValueError(
                f"grad_norm is 0 at every snapshot, while the loss at the first (step {int(steps[0])}) is "
                f"{first:.3g}: a gradient vanishes only where every answer is predicted with certainty"
            )


ZERO_GRAD_LOSS = 1e-3  # a training loss above this is not a model that predicts every answer with certainty


def unstack(arrays: dict[str, np.ndarray], model: ModelConfig, seq_len: int, losses=None) -> list[dict]:
    """The inverse of `stack`, after `check` (ValueError)."""
    check(arrays, model, seq_len, losses)
    floats = {k: np.asarray(v, dtype=np.float64) for k, v in arrays.items() if k != "step"}
    g, n_layers = floats["grad_norm"], floats["grad_norm"].shape[1]
    return [
        {
            "step": int(step),
            "blocks": [
                {
                    "block": i,
                    "grad_norm": {m: float(g[s, i, j]) for j, m in enumerate(MATRICES)},
                    "residual_norm": float(floats["residual_norm"][s, i]),
                }
                for i in range(n_layers)
            ],
        }
        | {k: [float(x) for x in floats[k][s]] for k in LAYER_FIGURES[1:]}
        for s, step in enumerate(np.asarray(arrays["step"]))
    ]
