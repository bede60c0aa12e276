"""Paired comparisons over seeds (SPEC §10, issue 19): the exact sign-flip test, a t interval, Holm's correction
and the four verdicts. Pure NumPy and the standard library: arrays of paired deltas in, numbers out.

- p-value: the exact two-sided paired sign-flip (permutation) test: the share of the 2^n sign assignments of
  the deltas whose |mean| is at least the observed |mean| (all 2^n up to EXACT_MAX_N seeds; above, MC_DRAWS
  random assignments from a fixed seed, p = (1 + hits) / (1 + draws)). Its floor is 2 / 2^n.
- interval: the 95 % Student t interval of the mean delta, mean +- t(0.975, n - 1) * sd / sqrt(n).
- correction: Holm (step-down) across the comparisons that share one baseline, per metric.
- verdict: IDENTICAL when every delta is exactly 0; else TOO_FEW when the floor after correction is not below
  ALPHA (m comparisons: m * 2 / 2^n >= ALPHA, where Holm can reject nothing); else SHOWN when the corrected p
  is below ALPHA; else NOT_SHOWN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from lab import formats

ALPHA = 0.05
CONFIDENCE = 0.95
EXACT_MAX_N = 16  # up to 2^16 = 65,536 sign assignments enumerated exactly
MC_DRAWS = 100_000  # random sign assignments above EXACT_MAX_N seeds
MC_SEED = 0
TIE_TOLERANCE = 1e-9  # relative: |mean| within this of the observed counts as "at least" (float sums differ in order)

IDENTICAL = "identical on every seed"
TOO_FEW = "too few seeds"
SHOWN = "difference shown"
NOT_SHOWN = "no difference shown"
VERDICTS = (IDENTICAL, TOO_FEW, SHOWN, NOT_SHOWN)

METHOD = (
    "Δ is the paired difference (level minus baseline, same seed). Interval: 95 % Student t interval of the mean "
    f"Δ. p: exact two-sided paired sign-flip test over all 2ⁿ sign assignments of the n deltas (above "
    f"{EXACT_MAX_N} seeds, {MC_DRAWS:,} random assignments); it cannot go below its floor 2/2ⁿ. Holm's correction "
    "across the levels compared with one baseline, per metric. Verdicts at α = 0.05: identical on every seed "
    "(every Δ exactly 0), too few seeds (even the smallest possible p, corrected, is not below 0.05), "
    "difference shown (corrected p < 0.05), no difference shown."
)


def p_floor(n: int) -> float:
    """The smallest two-sided p the sign-flip test can give with n nonzero deltas: 2 / 2^n (1 for n = 0)."""
    return min(1.0, 2.0 / 2.0**n) if n > 0 else 1.0


def seeds_needed(comparisons: int = 1, alpha: float = ALPHA) -> int:
    """The fewest seeds with which Holm over `comparisons` tests can show a difference: m * 2 / 2^n < alpha."""
    m = max(1, int(comparisons))
    n = 1
    while m * p_floor(n) >= alpha:
        n += 1
    return n


def sign_flip_p(deltas: Sequence[float], draws: int = MC_DRAWS, seed: int = MC_SEED) -> float:
    """The two-sided paired sign-flip p-value of the deltas (exact up to EXACT_MAX_N of them); NaN if any is not
    finite or there are none."""
    d = np.asarray(deltas, dtype=float)
    if d.size == 0 or not np.all(np.isfinite(d)):
        return math.nan
    observed = abs(d.sum())
    threshold = observed - TIE_TOLERANCE * max(observed, np.abs(d).sum())
    if d.size <= EXACT_MAX_N:
        # every sign vector: bit j of k says whether delta j is flipped
        k = np.arange(2**d.size, dtype=np.int64)[:, None]
        signs = 1.0 - 2.0 * ((k >> np.arange(d.size)) & 1)
        return float(np.mean(np.abs(signs @ d) >= threshold))
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, draws, 10_000):
        signs = rng.choice((-1.0, 1.0), size=(min(10_000, draws - start), d.size))
        hits += int(np.sum(np.abs(signs @ d) >= threshold))
    return (1 + hits) / (1 + draws)


def _t_cdf_from_zero(x: float, df: int) -> float:
    """P(0 <= T <= x) for Student's t with df degrees of freedom (Simpson's rule on the density; x >= 0)."""
    grid = np.linspace(0.0, x, 4001)
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    f = np.exp(log_c - (df + 1) / 2 * np.log1p(grid**2 / df))
    h = grid[1] - grid[0]
    return float(h / 3 * (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum()))


def t_quantile(q: float, df: int) -> float:
    """The q quantile (0.5 < q < 1) of Student's t with df >= 1 degrees of freedom, by bisection (|error| < 1e-9)."""
    target, low, high = q - 0.5, 0.0, 1.0
    while _t_cdf_from_zero(high, df) < target:
        high *= 2
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if _t_cdf_from_zero(mid, df) < target else (low, mid)
    return (low + high) / 2


def t_interval(deltas: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Student t interval of the mean delta; (NaN, NaN) with fewer than 2 deltas or a non-finite one."""
    d = np.asarray(deltas, dtype=float)
    if d.size < 2 or not np.all(np.isfinite(d)):
        return math.nan, math.nan
    half = t_quantile(0.5 + confidence / 2, d.size - 1) * d.std(ddof=1) / math.sqrt(d.size)
    return float(d.mean() - half), float(d.mean() + half)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order; NaN entries stay NaN and do not count."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    m, running = valid.size, 0.0
    for rank, i in enumerate(valid[np.argsort(p[valid], kind="stable")]):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out.tolist()


def verdict(deltas: Sequence[float], p_corrected: float, comparisons: int = 1, alpha: float = ALPHA) -> str:
    """One of VERDICTS for the deltas of one comparison, its Holm-corrected p and how many share its baseline."""
    d = np.asarray(deltas, dtype=float)
    if d.size and np.all(d == 0):
        return IDENTICAL
    if max(1, comparisons) * p_floor(d.size) >= alpha:
        return TOO_FEW
    return SHOWN if p_corrected < alpha else NOT_SHOWN


def compare_paired(deltas_by_level: dict[str, Sequence[float]], alpha: float = ALPHA) -> dict[str, dict]:
    """{level: n, delta_mean/min/max, ci_low, ci_high, p_value, p_floor, p_corrected, verdict} for the deltas of
    each level against one baseline on one metric; Holm across the levels given."""
    arrays = {level: np.asarray(d, dtype=float) for level, d in deltas_by_level.items()}
    p = {level: sign_flip_p(d) for level, d in arrays.items()}
    corrected = dict(zip(p, holm(list(p.values())), strict=True))
    m = len(arrays)
    out = {}
    for level, d in arrays.items():
        low, high = t_interval(d)
        empty = not d.size
        out[level] = {
            "n": int(d.size),
            "delta_mean": math.nan if empty else float(d.mean()),
            "delta_min": math.nan if empty else float(d.min()),
            "delta_max": math.nan if empty else float(d.max()),
            "ci_low": low,
            "ci_high": high,
            "p_value": p[level],
            "p_floor": p_floor(d.size),
            "p_corrected": corrected[level],
            "verdict": verdict(d, corrected[level], m, alpha),
        }
    return out


def format_delta(x: float) -> str:
    """A signed difference as lab.formats writes a loss difference: 3 significant digits kept (scientific below
    1e-3: '+5.64e-06', '+0.200', '−0.307'), '0' for exactly 0, '–' for NaN."""
    if x != x:
        return "–"
    if x == 0:
        return "0"
    return formats.signed_loss(x)


def format_interval(low: float, high: float) -> str:
    """'[low, high]' with format_delta's digits; '–' when there is no interval (one seed)."""
    return "–" if low != low or high != high else f"[{format_delta(low)}, {format_delta(high)}]"


def format_p(p: float) -> str:
    """A p-value with 4 significant digits (0.03125, the floor of 6 seeds, exactly; scientific below 1e-3)."""
    if p != p:
        return "–"
    return f"{p:.3e}" if 0 < p < 1e-3 else f"{p:.4g}"
