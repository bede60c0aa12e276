"""Why depth and width matter (SPEC §13, issue 30.3): per block, the gradient norm of each weight matrix and the
residual stream's norm after the block on fixed batches, and per layer the largest attention logit |q·k|/scale,
the attention entropy and the share of saturated rows; at initialisation and at the training snapshots.

Xiong et al. 2020's Figure 3 is the picture: at initialisation post-LN's gradients near the output grow with
depth, pre-LN's do not. Every figure is read from the weights only (no batch of the training stream is drawn),
so measuring at the snapshots leaves a run's loss history and weights bit-identical.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._blas import one_blas_thread
from ..config import RunConfig, TaskConfig
from ..model import loss_and_grads
from ..snapshots import snapshot_steps
from ..tasks import sample_batch
from ..train import Trainer, initial_params
from .hooked import check_supported, run_with_hooks

N_BATCHES = 16  # the fixed batches every figure is averaged over
BATCH_SEED = 20_260_302  # their own seed: the same batches for every run of a task and length, any training seed
SATURATED = 0.99  # a row is saturated when one key takes more than this weight
MATRICES = {"attn_in": "attn.w_qkv", "attn_out": "attn.w_out", "ffn_in": "ffn.w1", "ffn_out": "ffn.w2"}


def fixed_batches(run: RunConfig, n: int = N_BATCHES) -> list[np.ndarray]:
    """n batches (B, 2L+1) of the run's task at its longest length L, drawn from BATCH_SEED and L only."""
    task = TaskConfig(run.task.name, run.task.length)
    rng = np.random.default_rng([BATCH_SEED, task.length])
    return [sample_batch(task, run.train.batch_size, rng) for _ in range(n)]


def _grad_norms(params, run: RunConfig, batch: np.ndarray) -> np.ndarray:
    """(n_layers, 4): ‖∂loss/∂W‖_F of each block's four weight matrices (MATRICES' order) on one batch."""
    _, grads = loss_and_grads(params, batch, run.model, run.task.length)
    return np.array(
        [[np.linalg.norm(grads[f"blocks.{i}.{m}"]) for m in MATRICES.values()] for i in range(run.model.n_layers)]
    )


def _forward_stats(params, run: RunConfig, batch: np.ndarray) -> dict[str, np.ndarray]:
    """Per layer on one batch's inputs: the residual norm after the block (mean over tokens of ‖x‖₂), the largest
    |q·k|·scale over allowed (causal) pairs, and over the queries that see two keys or more (row 0 sees one and
    is trivially saturated) the mean entropy of the attention row (nats) and the share of saturated rows."""
    cfg = run.model
    idx = batch[:, :-1]
    _, acts, caches = run_with_hooks(params, idx, cfg, keep_caches=True)
    T = idx.shape[1]
    causal = np.tril(np.ones((T, T), dtype=bool))
    out = {"residual_norm": [], "max_logit": [], "entropy": [], "saturated": []}
    for i in range(cfg.n_layers):
        p = f"blocks.{i}."
        resid = acts[p + "resid_post"].astype(np.float64)  # (B, T, D)
        out["residual_norm"].append(np.linalg.norm(resid, axis=-1).mean())
        _, q, k, _, pattern, factor, _ = caches[p + "attn"]
        scores = np.abs(q.astype(np.float64) @ k.astype(np.float64).swapaxes(-1, -2)) * (factor or 1.0)
        out["max_logit"].append(scores[..., causal].max())  # (B, H, T, T) -> the allowed pairs
        rows = pattern[:, :, 1:].astype(np.float64)  # (B, H, T-1, T)
        logs = np.log(np.where(rows > 0, rows, 1.0))
        out["entropy"].append(-(rows * logs).sum(axis=-1).mean())
        out["saturated"].append((rows.max(axis=-1) > SATURATED).mean())
    return {k: np.array(v) for k, v in out.items()}


def _layer_means(stats: list[dict]) -> dict:
    """Per-layer figures over the batches: the largest logit over every batch, the other figures' means."""
    stacked = {k: np.stack([s[k] for s in stats]) for k in stats[0]}  # each (n, n_layers)
    out = {k: [float(x) for x in v.mean(axis=0)] for k, v in stacked.items()}
    return out | {"max_logit": [float(x) for x in stacked["max_logit"].max(axis=0)]}


def attention_figures(params, run: RunConfig, batches: list[np.ndarray] | None = None) -> dict:
    """The forward-only figures per layer over the fixed batches: {"residual_norm", "max_logit", "entropy",
    "saturated"}, each a list from the input."""
    check_supported(run.model)
    batches = fixed_batches(run) if batches is None else batches
    with one_blas_thread():
        return _layer_means([_forward_stats(params, run, b) for b in batches])


def measure(params, run: RunConfig, batches: list[np.ndarray] | None = None) -> dict:
    """The figures of one set of weights, averaged over the fixed batches (grad norms also with their spread,
    the standard deviation over the batches). JSON-able: {"blocks": [{block, grad_norm: {attn_in, attn_out,
    ffn_in, ffn_out}, grad_norm_spread: {…}, residual_norm}, …], "max_logit": [...], "entropy": [...],
    "saturated": [...]} with blocks and layers in order from the input."""
    batches = fixed_batches(run) if batches is None else batches
    layers = attention_figures(params, run, batches)
    with one_blas_thread():
        grads = np.stack([_grad_norms(params, run, b) for b in batches])  # (n, n_layers, 4)
    mean, spread = grads.mean(axis=0), grads.std(axis=0)
    blocks = [
        {
            "block": i,
            "grad_norm": {m: float(mean[i, j]) for j, m in enumerate(MATRICES)},
            "grad_norm_spread": {m: float(spread[i, j]) for j, m in enumerate(MATRICES)},
            "residual_norm": layers["residual_norm"][i],
        }
        for i in range(run.model.n_layers)
    ]
    return {"blocks": blocks} | {k: layers[k] for k in ("max_logit", "entropy", "saturated")}


def at_init(run: RunConfig) -> dict:
    """`measure` on the run's initial weights."""
    return measure(initial_params(run), run)


def over_training(run: RunConfig, progress: Callable[[int], object] | None = None) -> tuple[dict, dict]:
    """({"init": …, "snapshots": [{"step": s, …}, …]}, final weights): trains `run` as attncore.train does
    (the same steps, bit for bit) and measures the weights after each step of `snapshot_steps(steps)`."""
    batches = fixed_batches(run)
    trainer = Trainer(run)
    init = measure(trainer.params, run, batches)
    at = set(snapshot_steps(run.train.steps))
    snaps = []
    with one_blas_thread():
        for step in range(run.train.steps):
            trainer.step()
            if step + 1 in at:
                snaps.append({"step": step + 1} | measure(trainer.params, run, batches))
            if progress is not None:
                progress(step)
    return {"init": init, "snapshots": snaps}, {k: v.copy() for k, v in trainer.params.items()}
