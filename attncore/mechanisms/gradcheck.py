"""The gradient check: centred finite differences against model.loss_and_grads, per tensor.

float64 small model; the same seeded coordinates are checked at every epsilon so
the columns compare like with like.
"""

from __future__ import annotations

import numpy as np

from attncore.config import ConfigError, ModelConfig, TaskConfig
from attncore.layers import cross_entropy_forward
from attncore.model import forward, init_params, loss_and_grads
from attncore.task import task_of


def small_model(norm: str = "pre", d_model: int = 16, n_layers: int = 2, n_heads: int = 4) -> ModelConfig:
    """The gradient check's model: d = 16, 2 blocks, d_ff = 4d, float64, learned position."""
    return ModelConfig(
        d_model=d_model, n_heads=n_heads, n_layers=n_layers, d_ff=4 * d_model, max_len=13, norm=norm, dtype="float64"
    )


def check_loss(params, seqs, cfg: ModelConfig, answer_len: int) -> float:
    """The loss of model.loss_and_grads without its backward pass: half the cost per evaluation."""
    logits, _ = forward(params, seqs[:, :-1], cfg, out_from=seqs.shape[1] - 1 - answer_len)  # (B, A, V)
    return cross_entropy_forward(logits.reshape(-1, logits.shape[-1]), seqs[:, -answer_len:].ravel())[0]


def gradient_check(
    norm: str = "pre",
    eps_values=(1e-6, 1e-4),
    seed: int = 0,
    max_per_tensor: int = 24,
    n_seqs: int = 3,
    min_grad: float = 1e-6,
    cfg: ModelConfig | None = None,
) -> list[dict]:
    """Max relative deviation |numeric - analytic| / max(|numeric|, |analytic|) per tensor and epsilon.

    Coordinates with |analytic| > min_grad, at most max_per_tensor of them per
    tensor drawn with the seed. One row per (tensor, eps): norm, tensor, eps,
    n_checked, n_eligible, max_rel_dev (NaN when no coordinate qualifies).
    cfg, if given, replaces small_model(norm).
    """
    cfg = small_model(norm) if cfg is None else cfg
    if cfg.dtype != "float64":
        raise ConfigError("dtype", "finite differences need float64")
    if max_per_tensor < 1:
        raise ConfigError("max_per_tensor", f"must be >= 1, got {max_per_tensor}")
    rng = np.random.default_rng(seed)
    params = init_params(cfg, rng)
    task = TaskConfig("copy", (cfg.max_len - 1) // 2)
    seqs = task_of(task).sample_batch(task, n_seqs, rng)  # (B, 2L+1)
    _, grads = loss_and_grads(params, seqs, cfg, task.length)

    rows = []
    for name in params:
        g = grads[name].ravel()
        eligible = np.flatnonzero(np.abs(g) > min_grad)
        chosen = rng.choice(eligible, min(max_per_tensor, eligible.size), replace=False)
        for eps in eps_values:
            dev = np.nan
            if chosen.size:
                numeric = np.array([_centred_difference(params, name, i, eps, seqs, cfg, task.length) for i in chosen])
                analytic = g[chosen]
                dev = float(np.max(np.abs(numeric - analytic) / np.maximum(np.abs(numeric), np.abs(analytic))))
            rows.append(
                {
                    "norm": cfg.norm,
                    "tensor": name,
                    "eps": float(eps),
                    "n_checked": int(chosen.size),
                    "n_eligible": int(eligible.size),
                    "max_rel_dev": dev,
                }
            )
    return rows


def _centred_difference(params, name, i, eps, seqs, cfg, answer_len) -> float:
    """(loss(w + eps) - loss(w - eps)) / 2 eps for coordinate i of params[name], restored afterwards."""
    flat = params[name].reshape(-1)  # a view: writing it perturbs the model
    old = flat[i]
    flat[i] = old + eps
    up = check_loss(params, seqs, cfg, answer_len)
    flat[i] = old - eps
    down = check_loss(params, seqs, cfg, answer_len)
    flat[i] = old
    return (up - down) / (2 * eps)


def gradient_check_summary(rows: list[dict]) -> list[dict]:
    """The worst tensor per (norm, eps): norm, eps, max_rel_dev, worst_tensor, n_checked."""
    out = {}
    for r in rows:
        key = (r["norm"], r["eps"])
        best = out.get(key)
        if best is None:
            out[key] = best = {
                "norm": r["norm"],
                "eps": r["eps"],
                "max_rel_dev": -1.0,
                "worst_tensor": None,
                "n_checked": 0,
            }
        best["n_checked"] += r["n_checked"]
        if r["max_rel_dev"] > best["max_rel_dev"]:  # NaN compares False: skipped
            best["max_rel_dev"], best["worst_tensor"] = r["max_rel_dev"], r["tensor"]
    return list(out.values())
