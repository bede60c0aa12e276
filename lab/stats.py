"""Paired comparisons over seeds (docs/experiments.md): the exact sign-flip test, the interval that inverts
it, a t interval, Holm's correction and the four verdicts. Pure NumPy and the standard library: arrays of paired
deltas in, numbers out.

- p-value: the exact two-sided paired sign-flip (permutation) test: the share of the sign assignments of the
  deltas whose |mean| is at least the observed |mean|. A delta of exactly 0 has no sign, so only the m nonzero
  deltas are flipped (all 2^m assignments up to EXACT_MAX_N of them; above, MC_DRAWS random assignments from a
  fixed seed, p = (1 + hits) / (1 + draws)). Its floor is 2 / 2^m.
- interval: every shift δ for which the same test of the deltas minus δ does not reject (p >= the level's α). The
  test counts the sign assignment that flips the set F exactly when δ lies between the mean of F and the mean of
  the rest (a split's interval, which always holds the mean delta), so p(δ) is a step function and the interval's
  ends are order statistics of those subset means (Hartigan 1969): exact, no search.
- correction: Holm (step-down) across the comparisons that share one baseline, per metric. Each interval is
  inverted at the α of the Holm step that decided its comparison, so it holds 0 exactly when the verdict is not
  "difference shown" (at 95 % for a single comparison).
- t interval: the 95 % Student t interval of the mean delta, mean +- t(0.975, n - 1) * sd / sqrt(n), a second
  line for readers who expect it; it is not what the verdict rests on.
- verdict: IDENTICAL when every delta is exactly 0; else SHOWN when the corrected p is below ALPHA; else TOO_FEW
  when even this comparison's floor 2 / 2^m, corrected with the others' p, would not be below ALPHA; else
  NOT_SHOWN.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from lab import formats

ALPHA = 0.05
CONFIDENCE = 0.95
EXACT_MAX_N = 16  # up to 2^16 = 65,536 sign assignments enumerated exactly
MC_DRAWS = 100_000  # random sign assignments above EXACT_MAX_N deltas
MC_SEED = 0
MC_CHUNK = 10_000
TIE_TOLERANCE = 1e-9  # relative: |mean| within this of the observed counts as "at least" (float sums differ in order)

IDENTICAL = "identical on every seed"
TOO_FEW = "too few seeds"
SHOWN = "difference shown"
NOT_SHOWN = "no difference shown"
MISSING = "not measured on every seed"  # a delta is NaN (e.g. a test loss that could not be computed)
VERDICTS = (IDENTICAL, TOO_FEW, SHOWN, NOT_SHOWN, MISSING)

METHOD = (
    "Δ is the paired difference (level minus baseline, same seed). p: exact two-sided paired sign-flip test over "
    f"all 2ᵐ sign assignments of the m nonzero deltas (a Δ of exactly 0 has no sign; above {EXACT_MAX_N}, "
    f"{MC_DRAWS:,} random assignments); it cannot go below its floor 2/2ᵐ. Interval: every shift δ for which the "
    "same test of Δ − δ does not reject, so it holds 0 exactly when no difference is shown; at 95 % for one "
    "comparison, at the level of its Holm step for several (e.g. 97.5 %); (−∞, +∞) when no shift can be rejected "
    "at that level (at 95 %: fewer than 6 seeds); at exactly 6 seeds and 95 % it is [min Δ, max Δ], the smallest "
    "and the largest difference, which can be checked by eye. Holm's correction across the levels compared with "
    "one baseline, per metric. The t interval (95 %, uncorrected) is a second, labelled column (t_low, t_high in "
    "the CSV and JSON). Verdicts at α = 0.05: identical on every seed (every Δ exactly 0), difference shown "
    "(corrected p < 0.05), too few seeds (even the smallest p its m nonzero deltas allow, corrected, is not below"
    " 0.05), no difference shown."
)


def n_nonzero(deltas: Sequence[float]) -> int:
    """How many deltas are not exactly 0: the seeds on which the two settings differed."""
    return int(np.count_nonzero(np.asarray(deltas, dtype=float)))


def p_floor(n: int) -> float:
    """The smallest two-sided p the sign-flip test can give with n nonzero deltas: 2 / 2^n (1 for n = 0)."""
    return min(1.0, 2.0 / 2.0**n) if n > 0 else 1.0


def seeds_needed(comparisons: int = 1, alpha: float = ALPHA) -> int:
    """The fewest nonzero deltas (seeds that differ) with which Holm over `comparisons` tests can show a
    difference: m * 2 / 2^n < alpha."""
    m = max(1, int(comparisons))
    n = 1
    while m * p_floor(n) >= alpha:
        n += 1
    return n


def _all_signs(n: int) -> np.ndarray:
    """(2^n, n) every sign vector: bit j of row k says whether delta j is flipped."""
    k = np.arange(2**n, dtype=np.int64)[:, None]
    return 1.0 - 2.0 * ((k >> np.arange(n)) & 1)


def _random_signs(n: int, draws: int, seed: int):
    """The Monte Carlo sign vectors in chunks of (<= MC_CHUNK, n), the same for the p and the interval."""
    rng = np.random.default_rng(seed)
    for start in range(0, draws, MC_CHUNK):
        yield rng.choice((-1.0, 1.0), size=(min(MC_CHUNK, draws - start), n))


def sign_flip_p(deltas: Sequence[float], draws: int = MC_DRAWS, seed: int = MC_SEED) -> float:
    """The two-sided paired sign-flip p-value of the deltas (exact up to EXACT_MAX_N nonzero ones); NaN if any is
    not finite or there are none. Zeros are left out: flipping them changes nothing."""
    d = np.asarray(deltas, dtype=float)
    if d.size == 0 or not np.all(np.isfinite(d)):
        return math.nan
    d = d[d != 0]
    observed = abs(d.sum())
    threshold = observed - TIE_TOLERANCE * max(observed, np.abs(d).sum())
    if d.size <= EXACT_MAX_N:
        return float(np.mean(np.abs(_all_signs(d.size) @ d) >= threshold))
    hits = sum(int(np.sum(np.abs(signs @ d) >= threshold)) for signs in _random_signs(d.size, draws, seed))
    return (1 + hits) / (1 + draws)


def _split_ends(d: np.ndarray, flipped: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row of `flipped` (bool, (S, n): the set F), the smaller and larger of mean(d[F]) and mean(d[not F]);
    (-inf, +inf) when F is empty or everything (that assignment counts at every shift)."""
    size = flipped.sum(axis=1)
    inner = (size > 0) & (size < d.size)
    f = flipped[inner].astype(float)
    mean_f = (f @ d) / size[inner]
    mean_rest = ((1.0 - f) @ d) / (d.size - size[inner])
    low, high = np.full(len(flipped), -np.inf), np.full(len(flipped), np.inf)
    low[inner], high[inner] = np.minimum(mean_f, mean_rest), np.maximum(mean_f, mean_rest)
    return low, high


def sign_flip_interval(
    deltas: Sequence[float], alpha: float = ALPHA, draws: int = MC_DRAWS, seed: int = MC_SEED
) -> tuple[float, float]:
    """[low, high]: every shift δ at which the sign-flip test of deltas − δ gives p >= alpha; (NaN, NaN) without
    deltas or with a non-finite one; (-inf, +inf) when no p can fall below alpha (2 / 2^n >= alpha).

    The assignment flipping the set F is at least as extreme as the observed one at shift δ exactly when
    sum(d[F] − δ) · sum(d[not F] − δ) <= 0, i.e. δ lies between the two subset means; so p(δ) = (count of those
    intervals holding δ) / (assignments), each interval holds mean(d), and the ends of the set where p >= alpha
    are the c-th largest upper and c-th smallest lower subset mean, c the fewest intervals p >= alpha needs.
    Up to EXACT_MAX_N deltas every split is listed, above the same random assignments as sign_flip_p. Shifted
    deltas are nonzero, so every seed takes part (a zero delta at δ = 0 is what sign_flip_p leaves out).
    """
    d = np.asarray(deltas, dtype=float)
    if d.size == 0 or not np.all(np.isfinite(d)):
        return math.nan, math.nan
    level = Fraction(alpha)
    if d.size <= EXACT_MAX_N:
        # p(δ) = 2 (1 + c(δ)) / 2^n over the 2^(n-1) − 1 splits {F, not F} (F without the last delta, nonempty)
        k = np.arange(1, 2 ** (d.size - 1), dtype=np.int64)[:, None]
        flipped = np.concatenate([(k >> np.arange(d.size - 1)) & 1, np.zeros_like(k)], axis=1).astype(bool)
        low, high = _split_ends(d, flipped)
        need = max(0, math.ceil(level * 2 ** (d.size - 1)) - 1)  # the fewest c with 2 (1 + c) / 2^n >= alpha
    else:
        # p(δ) = (1 + c(δ)) / (1 + draws) over the drawn assignments
        ends = [_split_ends(d, signs < 0) for signs in _random_signs(d.size, draws, seed)]
        low, high = np.concatenate([e[0] for e in ends]), np.concatenate([e[1] for e in ends])
        need = max(0, math.ceil(level * (1 + draws)) - 1)
    if need == 0:
        return -math.inf, math.inf
    return float(np.sort(low)[need - 1]), float(np.sort(high)[::-1][need - 1])


def _t_cdf_from_zero(x: float, df: int) -> float:
    """P(0 <= T <= x) for Student's t with df degrees of freedom (Simpson's rule on the density; x >= 0)."""
    grid = np.linspace(0.0, x, 4001)
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    f = np.exp(log_c - (df + 1) / 2 * np.log1p(grid**2 / df))
    h = grid[1] - grid[0]
    return float(h / 3 * (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum()))


@functools.lru_cache(maxsize=256)  # a page asks for the same few (q, df) for every pair it compares
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


def holm_levels(p_values: Sequence[float], alpha: float = ALPHA) -> list[float]:
    """The α at which each comparison's interval is inverted so that it agrees with Holm, in the input order.

    Holm tests the comparison of rank r (0-based, by p) at alpha / (m − r) while every smaller p was rejected,
    and stops at the first rank k it does not reject. A rejected comparison gets alpha / (m − r) (its p is below
    it: the interval leaves out 0); every later one alpha / (m − k) (its p is at least p_k >= that: the interval
    holds 0). One comparison: alpha. NaN p: NaN."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    m, stopped = valid.size, None
    for rank, i in enumerate(valid[np.argsort(p[valid], kind="stable")]):
        if stopped is None and min(1.0, (m - rank) * p[i]) >= alpha:
            stopped = rank
        out[i] = alpha / (m - (rank if stopped is None else stopped))
    return out.tolist()


def verdict(
    deltas: Sequence[float],
    p_corrected: float,
    comparisons: int = 1,
    alpha: float = ALPHA,
    floor_corrected: float | None = None,
) -> str:
    """One of VERDICTS for the deltas of one comparison and its Holm-corrected p. `floor_corrected`: Holm's p of
    this comparison were its p at its floor 2 / 2^m (the others' unchanged); by default comparisons × floor,
    Holm's first step (the case where every comparison has as many nonzero deltas)."""
    d = np.asarray(deltas, dtype=float)
    if not d.size or not np.all(np.isfinite(d)):
        return MISSING
    if np.all(d == 0):
        return IDENTICAL
    if p_corrected < alpha:
        return SHOWN
    if floor_corrected is None:
        floor_corrected = max(1, comparisons) * p_floor(n_nonzero(d))
    return TOO_FEW if floor_corrected >= alpha else NOT_SHOWN


def _agreeing(low: float, high: float, shown: bool) -> tuple[float, float]:
    """The interval with 0 inside exactly when nothing is shown. The subset means and the test's sums round
    differently, so a 0 within rounding of an end may fall on the other side: move that end to 0 (or just
    past it)."""
    if low != low or shown == (not low <= 0.0 <= high):
        return low, high
    if not shown:
        return min(low, 0.0), max(high, 0.0)
    tiny = math.ulp(0.0)
    return (tiny, high) if abs(low) <= abs(high) else (low, -tiny)


def compare_paired(deltas_by_level: dict[str, Sequence[float]], alpha: float = ALPHA) -> dict[str, dict]:
    """{level: n, n_nonzero, delta_mean/min/max, ci_low, ci_high, ci_level, t_low, t_high, p_value, p_floor,
    p_corrected, verdict} for the deltas of each level against one baseline on one metric; Holm across the
    levels given. ci_* is the sign-flip interval (agreeing with the verdict), t_* the 95 % t interval."""
    arrays = {level: np.asarray(d, dtype=float) for level, d in deltas_by_level.items()}
    levels = list(arrays)
    p = [sign_flip_p(arrays[level]) for level in levels]
    corrected = holm(p)
    alphas = holm_levels(p, alpha)
    out = {}
    for i, level in enumerate(levels):
        d = arrays[level]
        m = n_nonzero(d)
        at_floor = holm([p_floor(m) if j == i else q for j, q in enumerate(p)])[i]
        low, high = (math.nan, math.nan) if p[i] != p[i] else sign_flip_interval(d, alphas[i])
        low, high = _agreeing(low, high, corrected[i] < alpha)
        t_low, t_high = t_interval(d)
        empty = not d.size
        out[level] = {
            "n": int(d.size),
            "n_nonzero": m,
            "delta_mean": math.nan if empty else float(d.mean()),
            "delta_min": math.nan if empty else float(d.min()),
            "delta_max": math.nan if empty else float(d.max()),
            "ci_low": low,
            "ci_high": high,
            "ci_level": math.nan if alphas[i] != alphas[i] else 1.0 - alphas[i],
            "t_low": t_low,
            "t_high": t_high,
            "p_value": p[i],
            "p_floor": p_floor(m),
            "p_corrected": corrected[i],
            "verdict": verdict(d, corrected[i], len(arrays), alpha, floor_corrected=at_floor),
        }
    return out


def format_delta(x: float) -> str:
    """A signed difference as lab.formats writes a loss difference: 3 significant digits kept (scientific below
    1e-3: '+5.64e-06', '+0.200', '−0.307'), '0' for exactly 0, '–' for NaN, '−∞' and '+∞'."""
    if x != x:
        return "–"
    if x == 0:
        return "0"
    if math.isinf(x):
        return "+∞" if x > 0 else "−∞"
    return formats.signed_loss(x)


def format_interval(low: float, high: float) -> str:
    """'[low, high]' with format_delta's digits; '(−∞, +∞)' when no shift is rejected; '–' when there is none."""
    if low != low or high != high:
        return "–"
    if math.isinf(low) and math.isinf(high):
        return "(−∞, +∞)"
    return f"[{format_delta(low)}, {format_delta(high)}]"


def format_level(confidence: float) -> str:
    """A confidence level as a percentage: 0.95 -> '95 %', 0.975 -> '97.5 %', 0.98333 -> '98.3 %'."""
    return "–" if confidence != confidence else f"{100 * confidence:.3g} %"


def format_p(p: float) -> str:
    """A p-value with 4 significant digits (0.03125, the floor of 6 seeds, exactly; scientific below 1e-3)."""
    if p != p:
        return "–"
    return f"{p:.3e}" if 0 < p < 1e-3 else f"{p:.4g}"
