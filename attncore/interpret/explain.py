"""Attention is not explanation, measured (Jain & Wallace 2019, arXiv:1902.10186; Wiegreffe & Pinter 2019,
arXiv:1908.04626): for one head and one answer query, how much the output moves when that row of attention
weights is shuffled, how far another row can be while the output stays put, and how far the same head's row
lies in models trained from other seeds. Computed in float64 from the trained weights.

The shuffles and the search's restarts run in chunks of rows sized to CHUNK_BYTES, so their memory does not
grow with their number; check_fits refuses, before anything runs, a model whose chunk would not fit.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .. import layers as L
from .. import memory
from ..config import ConfigError, RunConfig, check_int
from ..inspect import attention_maps
from ..task import task_of
from .hooks import backward_to_pattern_row, run_with_hooks

LN2 = math.log(2)  # the ceiling of the Jensen-Shannon divergence in nats
TVD_MAX, PENALTY = 0.01, 500.0  # J&W: output within TVD 0.01, enforced by 500 * ReLU(TVD - 0.01)
# the library's own bounds (the command line's and the pages' caps are tighter)
MAX_PERMUTATIONS, MAX_RESTARTS, MAX_STEPS = 100_000, 1000, 100_000
CHUNK_BYTES = 32 * 2**20  # one hooked pass's arrays: the rows of a shuffle or a search step run in chunks this size


def row_bytes(run: RunConfig) -> int:
    """Estimated bytes one input row costs in a hooked float64 pass with its backward: every activation of every
    block is kept (residuals, LN caches, q/k/v, z, each head's result, the FFN hidden layer and its caches, scores
    and weights); tests/test_interpret.py checks it is within a factor of 2 of the tracemalloc peak."""
    m, T = run.model, run.task.n_inputs
    per_block = T * (12 * m.d_model + 6 * m.d_ff + m.n_heads * m.d_model + 4 * m.n_heads * T)
    return 8 * (m.n_layers * per_block + T * (4 * m.d_model + 2 * m.vocab_size))


def chunk_rows(run: RunConfig) -> int:
    """Rows per hooked pass so that one chunk's arrays stay under CHUNK_BYTES (at least one row)."""
    return max(1, CHUNK_BYTES // row_bytes(run))


def explain_bytes(run: RunConfig, rows: int) -> int:
    """Estimated peak bytes of explaining one row of `run` with `rows` rows (permutations or restarts): the
    float64 copy of the weights and the backward's weight gradients, one chunk's pass, and the zeros the FFN's
    ReLU keeps per shape (a full chunk and the last one)."""
    m, chunk = run.model, min(rows, chunk_rows(run))
    relu_zeros = 2 * chunk * run.task.n_inputs * m.d_ff
    return 8 * (2 * memory._param_count(run) + relu_zeros) + chunk * row_bytes(run)


def check_fits(run: RunConfig, rows: int, cap: int | None = None) -> None:
    """Raise ConfigError (field max_memory) if explaining is estimated to need more than `cap` bytes or than the
    memory available now, as training is checked (attncore.memory.check_fits)."""
    need = explain_bytes(run, rows)
    limits = [(n, why) for n, why in ((cap, "--max-memory cap"), (memory.available_bytes(), "available")) if n]
    if limits and need > min(limits)[0]:
        limit, why = min(limits)
        raise ConfigError(
            "max_memory",
            f"explaining needs about {memory.human(need)} (estimated from the shapes, {memory.human(row_bytes(run))} "
            f"a row), more than the {memory.human(limit)} {why}; lower --d, --d-ff, --layers or --length",
        )


def row_multiply_adds(run: RunConfig) -> int:
    """Multiply-adds of one input row (T = 2L tokens) through the forward pass: per block and token the Q, K, V and
    output projections (4 d²), the FFN (2 d d_ff) and the scores with the weighted sum (2 T d); the unembedding
    (d V per token). Elementwise work and Python's per-pass overhead are left out (small rows run below this pace)."""
    m, T = run.model, 2 * run.task.length
    per_block = T * (4 * m.d_model**2 + 2 * m.d_model * m.d_ff + 2 * T * m.d_model)
    return m.n_layers * per_block + T * m.d_model * m.vocab_size


def work(run: RunConfig, permutations: int, restarts: int, steps: int) -> int:
    """Estimated multiply-adds of explaining one row: a forward pass per shuffle, and per restart steps + 1 passes
    with a backward each (a backward costs about two forwards)."""
    return row_multiply_adds(run) * (permutations + 3 * restarts * (steps + 1))


def _chunks(n: int, size: int):
    """Slices covering range(n) in order, `size` at a time."""
    return [slice(i, min(i + size, n)) for i in range(0, n, size)]


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
    cfg = run.model
    check_int("layer", layer, 0, cfg.n_layers - 1)
    check_int("head", head, 0, cfg.n_heads - 1)
    check_query(run, query)
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
    """(n,) TVD of the output when the row's weights are shuffled among the keys it may see (n permutations),
    run chunk_rows rows at a time."""
    check_int("permutations", n, 1, MAX_PERMUTATIONS)
    rng = np.random.default_rng(seed)
    rows = np.stack([t.row[rng.permutation(len(t.row))] for _ in range(n)])  # (n, query + 1)
    return np.concatenate([tvd(outputs_with_rows(t, rows[c]), t.output) for c in _chunks(n, chunk_rows(t.run))])


def _row_backward(t: Target, probs, logits, cache, dprobs) -> np.ndarray:
    """d(sum dprobs * probs)/d rows (B, query + 1) of a pass run with keep_caches."""
    dlogits = np.zeros_like(logits)
    dlogits[:, t.query] = L.softmax_backward(dprobs, probs)
    drow = backward_to_pattern_row(dlogits, cache, t.params, t.run.model, t.layer, t.head, t.query)
    return drow[:, : t.query + 1]


def row_gradient(t: Target, rows: np.ndarray, dprobs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(output probs (B, V), d(sum dprobs * probs)/d rows (B, query + 1)) by the hand-written backward."""
    probs, logits, cache = outputs_with_rows(t, rows, keep_caches=True)
    return probs, _row_backward(t, probs, logits, cache, dprobs)


def _tvd_and_gradient(t: Target, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(TVD of each row's output (B,), d TVD / d row (B, query + 1) where the TVD is above the bound, else 0):
    one pass with its backward per chunk of rows."""
    d_out, d_row = np.empty(len(rows)), np.zeros_like(rows)
    for c in _chunks(len(rows), chunk_rows(t.run)):
        probs, logits, cache = outputs_with_rows(t, rows[c], keep_caches=True)
        d_out[c] = tvd(probs, t.output)
        over = (d_out[c] > TVD_MAX).astype(np.float64)[:, None]  # the penalty's ReLU is active
        if over.any():
            d_row[c] = _row_backward(t, probs, logits, cache, 0.5 * np.sign(probs - t.output) * over)
    return d_out, d_row


def adversarial(t: Target, restarts: int = 5, steps: int = 500, lr: float = 0.01, seed: int = 0) -> list[dict]:
    """Jain & Wallace's search: maximise JSD(row', row) subject to TVD(output', output) <= 0.01.

    Rows are softmax(theta) over the visible keys, theta from uniform plus N(0, 0.1) noise, one per restart
    (run as one batch, chunk_rows at a time); Adam on -(JSD - 500 * ReLU(TVD - 0.01)). Per restart: the largest
    JSD among the iterates within the TVD bound ({jsd, tvd, feasible: True, row}), else the last iterate
    (feasible False)."""
    check_int("restarts", restarts, 1, MAX_RESTARTS)
    check_int("steps", steps, 1, MAX_STEPS)
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 0.1, (restarts, len(t.row)))
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    best = [{"jsd": -1.0, "tvd": math.inf, "feasible": False} for _ in range(restarts)]
    for step in range(1, steps + 2):  # the last pass only scores the final rows
        rows = _softmax(theta)
        d_out, dtvd_drow = _tvd_and_gradient(t, rows)
        d_row = jsd(rows, t.row[None])
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


def _three_digits(x: float) -> str:
    return f"{x:#.3g}"  # trailing zeros kept: 0.700


def finding(result: dict, number=_three_digits) -> str:
    """One sentence stating what the numbers show, decided from the numbers (no outcome presumed) and from the
    search's own bound TVD_MAX. `number` writes a divergence (the pages and the command line pass lab.formats.loss:
    three significant digits, scientific below 1e-3, so 0.0004 is not '0.000')."""
    perm = np.asarray(result["permutation_tvd"])
    feasible = [a["jsd"] for a in result["adversarial"] if a["feasible"]]
    seeds = [s["closest_head_jsd"] for s in result["seed_jsd"]]
    same = [s["jsd"] for s in result["seed_jsd"]]
    head = f"L{result['layer']}H{result['head']}"
    moved, beyond = float(np.median(perm)), int((perm > TVD_MAX).sum())
    bound = f"{beyond} of {len(perm)} shuffles move it more than the search's bound of TVD {TVD_MAX}"
    part1 = f"shuffling {head}'s row moves the output by a median TVD of {number(moved)} ({bound}: " + (
        "it depends on where the weight sits)" if moved > TVD_MAX else "the order of the weights hardly matters)"
    )
    if not feasible:
        part2 = f"no alternative row kept the output within TVD {TVD_MAX} (the head resists the search)"
    else:
        best = max(feasible)
        part2 = (
            f"an alternative row at JSD {number(best)} (at most ln 2 = {number(LN2)}) keeps the output within "
            f"TVD {TVD_MAX}"
        )
    if seeds:

        def span(values):  # '0.004' when the range prints as one number, else '4.00e-04 to 0.250'
            low, high = number(min(values)), number(max(values))
            return low if low == high else f"{low} to {high}"

        part2 += (
            f"; in other seeds the closest head of this layer reads within JSD {span(seeds)} of this row "
            f"(the same-numbered head: {span(same)})"
        )
        if feasible:
            further = "farther" if best > max(seeds) else "no farther"
            part2 += f", so the search went {further} than a retrained model"
    return f"At these settings {part1}; {part2}."


def check_query(run: RunConfig, query: int) -> None:
    """ConfigError unless `query` is one of the task's answer queries (Task.answer_queries)."""
    queries = task_of(run.task).answer_queries(run.task)
    low, high = int(queries[0]), int(queries[-1])
    if isinstance(query, bool) or not isinstance(query, (int, np.integer)) or not low <= query <= high:
        raise ConfigError("query", f"must be an answer position from {low} to {high}, got {query}")
