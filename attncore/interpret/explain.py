"""Attention is not explanation, measured (Jain & Wallace 2019, arXiv:1902.10186; Wiegreffe & Pinter 2019,
arXiv:1908.04626): for one head and one answer query, how much the output moves when that row of attention
weights is shuffled, how far another row can be while the output stays put, and how far the same head's row
lies in models trained from other seeds. Computed in float64 from the trained weights.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .. import layers as L
from ..config import ConfigError, RunConfig, check_int
from ..inspect import attention_maps
from .hooked import backward_to_pattern_row, run_with_hooks

LN2 = math.log(2)  # the ceiling of the Jensen-Shannon divergence in nats
TVD_MAX, PENALTY = 0.01, 500.0  # J&W: output within TVD 0.01, enforced by 500 * ReLU(TVD - 0.01)


def tvd(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Total variation distance over the last axis: half the L1 distance."""
    return 0.5 * np.abs(p - q).sum(axis=-1)


def jsd(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen-Shannon divergence (nats) over the last axis; 0 log 0 = 0; at most ln 2."""
    m = 0.5 * (p + q)

    def kl(a):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(a > 0, a * np.log(a / np.where(m > 0, m, 1.0)), 0.0).sum(axis=-1)

    return np.maximum(0.5 * kl(p) + 0.5 * kl(q), 0.0)


@dataclass(frozen=True)
class Target:
    """One head's attention row at one answer query of one input, in float64."""

    params: dict
    run: RunConfig  # with dtype float64
    tokens: np.ndarray  # (T,)
    layer: int
    head: int
    query: int
    row: np.ndarray  # (query + 1,) the original weights on the keys the query may see
    output: np.ndarray  # (V,) the model's output distribution at the query


def target(params, run: RunConfig, tokens, layer: int, head: int, query: int) -> Target:
    """The row and output to explain; ConfigError names a head or query out of range."""
    cfg, L_ = run.model, run.task.length
    check_int("layer", layer, 0, cfg.n_layers - 1)
    check_int("head", head, 0, cfg.n_heads - 1)
    check_int("query", query, L_, 2 * L_ - 1)
    run64 = dataclasses.replace(run, model=dataclasses.replace(cfg, dtype="float64"))
    p64 = {k: np.asarray(v, dtype=np.float64) for k, v in params.items()}
    tokens = np.asarray(tokens, dtype=np.int64)
    logits, acts = run_with_hooks(p64, tokens[None], run64.model)
    row = acts[f"blocks.{layer}.attn.pattern"][0, head, query, : query + 1]
    return Target(p64, run64, tokens, layer, head, query, row, _softmax(logits[0, query]))


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def outputs_with_rows(t: Target, rows: np.ndarray, *, keep_caches=False):
    """The output distributions (B, V) at the query with the head's row replaced by each of rows (B, query + 1)."""
    B, name = len(rows), f"blocks.{t.layer}.attn.pattern"

    def hook(pattern):
        out = pattern.copy()
        out[:, t.head, t.query, :] = 0.0
        out[:, t.head, t.query, : t.query + 1] = rows
        return out

    result = run_with_hooks(t.params, np.tile(t.tokens, (B, 1)), t.run.model, {name: hook}, keep_caches=keep_caches)
    probs = _softmax(result[0][:, t.query])
    return (probs, result[0], result[2]) if keep_caches else probs


def permutation_tvd(t: Target, n: int = 100, seed: int = 0) -> np.ndarray:
    """(n,) TVD of the output when the row's weights are shuffled among the keys it may see (n permutations)."""
    check_int("permutations", n, 1, 100_000)
    rng = np.random.default_rng(seed)
    rows = np.stack([t.row[rng.permutation(len(t.row))] for _ in range(n)])
    return tvd(outputs_with_rows(t, rows), t.output)


def row_gradient(t: Target, rows: np.ndarray, dprobs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(output probs (B, V), d(sum dprobs * probs)/d rows (B, query + 1)) by the hand-written backward."""
    probs, logits, caches = outputs_with_rows(t, rows, keep_caches=True)
    dlogits = np.zeros_like(logits)
    dlogits[:, t.query] = L.softmax_backward(dprobs, probs)
    drow = backward_to_pattern_row(dlogits, caches, t.params, t.run.model, t.layer, t.head, t.query)
    return probs, drow[:, : t.query + 1]


def adversarial(t: Target, restarts: int = 5, steps: int = 500, lr: float = 0.01, seed: int = 0) -> list[dict]:
    """Jain & Wallace's search: maximise JSD(row', row) subject to TVD(output', output) <= 0.01.

    Rows are softmax(theta) over the visible keys, theta from uniform plus N(0, 0.1) noise, one per restart
    (run as one batch); Adam on -(JSD - 500 * ReLU(TVD - 0.01)). Per restart: the largest JSD among the
    iterates within the TVD bound ({jsd, tvd, feasible: True, row}), else the last iterate (feasible False).
    """
    check_int("restarts", restarts, 1, 1000)
    check_int("steps", steps, 1, 100_000)
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 0.1, (restarts, len(t.row)))
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    best = [{"jsd": -1.0, "tvd": math.inf, "feasible": False} for _ in range(restarts)]
    for step in range(1, steps + 2):  # the last pass only scores the final rows
        rows = _softmax(theta)
        probs = outputs_with_rows(t, rows)
        d_out, d_row = tvd(probs, t.output), jsd(rows, t.row[None])
        for k in range(restarts):
            if d_out[k] <= TVD_MAX and d_row[k] > best[k]["jsd"]:
                best[k] = {"jsd": float(d_row[k]), "tvd": float(d_out[k]), "feasible": True, "row": rows[k].tolist()}
        if step > steps:
            for k in range(restarts):
                if not best[k]["feasible"]:
                    best[k] = {
                        "jsd": float(d_row[k]),
                        "tvd": float(d_out[k]),
                        "feasible": False,
                        "row": rows[k].tolist(),
                    }
            break
        over = (d_out > TVD_MAX).astype(np.float64)[:, None]  # the penalty's ReLU is active
        _, dtvd_drow = row_gradient(t, rows, 0.5 * np.sign(probs - t.output) * over)
        mix = 0.5 * (rows + t.row[None])
        with np.errstate(divide="ignore"):
            djsd = 0.5 * np.log(rows / mix)  # dJSD/d row'
        grad_rows = -(djsd - PENALTY * dtvd_drow)  # of the loss to minimise
        grad = L.softmax_backward(grad_rows, rows)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        theta -= lr * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
    return best


def seed_jsd(t: Target, others: dict[int, tuple[dict, RunConfig]]) -> list[dict]:
    """Per other seed: JSD between this row and the same head's row in that seed's model on the same input,
    and the smallest JSD to any head of the same layer there (heads are not aligned across seeds)."""
    out = []
    for seed, (params, run) in sorted(others.items()):
        maps = attention_maps(params, run, t.tokens)[t.layer, :, t.query, : t.query + 1].astype(np.float64)
        d = jsd(maps, t.row[None])  # (H,)
        closest = int(np.argmin(d))
        out.append(
            {
                "seed": seed,
                "jsd": float(d[t.head]),
                "closest_head": closest,
                "closest_head_jsd": float(d[closest]),
                "row": maps[t.head].tolist(),
                "closest_row": maps[closest].tolist(),
            }
        )
    return out


def explain(params, run, tokens, layer, head, query, *, others=None, permutations=100, restarts=5, steps=500,
            seed=0) -> dict:  # fmt: skip
    """The three measurements as one JSON-able dict: permutation_tvd, adversarial, seed_jsd, and the row."""
    t = target(params, run, tokens, layer, head, query)
    return {
        "layer": layer,
        "head": head,
        "query": query,
        "row": t.row.tolist(),
        "permutation_tvd": permutation_tvd(t, permutations, seed).tolist(),
        "adversarial": adversarial(t, restarts, steps, seed=seed),
        "seed_jsd": seed_jsd(t, others or {}),
        "tvd_max": TVD_MAX,
        "jsd_ceiling": LN2,
    }


def finding(result: dict) -> str:
    """One sentence stating what the numbers show, decided from the numbers (no outcome presumed)."""
    perm = np.asarray(result["permutation_tvd"])
    feasible = [a["jsd"] for a in result["adversarial"] if a["feasible"]]
    seeds = [s["closest_head_jsd"] for s in result["seed_jsd"]]
    same = [s["jsd"] for s in result["seed_jsd"]]
    head = f"L{result['layer']}H{result['head']}"
    moved = float(np.median(perm))
    part1 = f"shuffling {head}'s row moves the output by a median TVD of {moved:.3f} " + (
        "(it depends on where the weight sits)" if moved > TVD_MAX else "(the order of the weights hardly matters)"
    )
    if not feasible:
        part2 = f"no alternative row kept the output within TVD {TVD_MAX} (the head resists the search)"
    else:
        best = max(feasible)
        part2 = f"an alternative row at JSD {best:.3f} (at most ln 2 = {LN2:.3f}) keeps the output within TVD {TVD_MAX}"
    if seeds:
        part2 += (
            f"; in other seeds the closest head of this layer reads within JSD {min(seeds):.3f} to {max(seeds):.3f} "
            f"of this row (the same-numbered head: {min(same):.3f} to {max(same):.3f})"
        )
        if feasible:
            further = "farther" if best > max(seeds) else "no farther"
            part2 += f", so the search went {further} than a retrained model"
    return f"At these settings {part1}; {part2}."


def check_query(run: RunConfig, query: int) -> None:
    L_ = run.task.length
    if not L_ <= query <= 2 * L_ - 1:
        raise ConfigError("query", f"must be an answer position from {L_} to {2 * L_ - 1}, got {query}")
