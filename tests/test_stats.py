"""The paired comparison's statistics: sign-flip p, its floor, the t interval, Holm, verdicts."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from lab import stats
from lab.stats import IDENTICAL, NOT_SHOWN, SHOWN, TOO_FEW


def brute_force_p(deltas) -> float:
    """The sign-flip p by listing every sign assignment with itertools, in exact rational arithmetic."""
    from fractions import Fraction

    d = [Fraction(x) for x in deltas]
    observed = abs(sum(d))
    hits = sum(abs(sum(s * x for s, x in zip(signs, d, strict=True))) >= observed
               for signs in itertools.product((1, -1), repeat=len(d)))  # fmt: skip
    return hits / 2 ** len(d)


@pytest.mark.parametrize("seed", range(12))
def test_the_p_value_is_the_share_of_sign_assignments_found_by_enumeration(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 11))
    deltas = np.round(rng.normal(0.3 * (seed % 3), 1.0, n), 3)  # rounded: ties between assignments occur
    assert stats.sign_flip_p(deltas) == pytest.approx(brute_force_p(deltas), abs=1e-12)


def test_ties_count_as_at_least_as_extreme():
    assert stats.sign_flip_p([1.0, -1.0]) == 1.0  # observed |sum| 0: every assignment is at least as far
    assert stats.sign_flip_p([1.0, 1.0, 2.0]) == pytest.approx(brute_force_p([1, 1, 2]))  # 1 + 1 - 2 ties 0
    assert brute_force_p([0.1, 0.2, 0.3]) == stats.sign_flip_p([0.1, 0.2, 0.3])  # float sums in any order


def test_six_same_signed_nonzero_deltas_give_the_floor_0_03125():
    assert stats.sign_flip_p([-0.2, -0.1, -0.5, -0.3, -0.01, -0.7]) == 0.03125
    assert stats.p_floor(6) == 0.03125
    assert [stats.p_floor(n) for n in (3, 4, 5)] == [0.25, 0.125, 0.0625]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_no_sign_assignment_goes_below_the_floor(n):
    for signs in itertools.product((1, -1), repeat=n):
        deltas = np.array(signs) * np.arange(1, n + 1)
        assert stats.sign_flip_p(deltas) >= stats.p_floor(n)


@pytest.mark.slow
def test_three_seeds_never_give_difference_shown():
    rng = np.random.default_rng(0)
    for _ in range(200):
        deltas = rng.normal(rng.normal(0, 5), rng.uniform(0.001, 1), 3)
        (result,) = stats.compare_paired({"b": deltas}).values()
        assert result["verdict"] == TOO_FEW and result["p_value"] >= 0.25
    huge = stats.compare_paired({"b": [-0.9, -0.91, -0.92]})["b"]  # as large and consistent as it gets
    assert huge["verdict"] == TOO_FEW and huge["p_value"] == 0.25 and huge["p_floor"] == 0.25


def test_every_delta_exactly_zero_is_identical_whatever_the_seeds():
    for n in (1, 3, 6, 20):
        r = stats.compare_paired({"b": np.zeros(n)})["b"]
        assert r["verdict"] == IDENTICAL and r["p_value"] == 1.0 and r["delta_mean"] == 0.0
        assert n == 1 or (r["t_low"], r["t_high"]) == (0.0, 0.0)
        # the sign-flip interval: only the shift 0 survives once a shift can be rejected at all (n >= 6)
        assert (r["ci_low"], r["ci_high"]) == ((0.0, 0.0) if n >= 6 else (-math.inf, math.inf))
    assert stats.compare_paired({"b": [0.0, 0.0, 1e-12, 0.0, 0.0, 0.0]})["b"]["verdict"] != IDENTICAL


def test_six_seeds_show_a_consistent_difference_and_not_a_mixed_one():
    shown = stats.compare_paired({"b": [-0.2, -0.1, -0.5, -0.3, -0.01, -0.7]})["b"]
    assert shown["verdict"] == SHOWN and shown["p_corrected"] == 0.03125 and shown["ci_high"] < 0
    mixed = stats.compare_paired({"b": [-0.2, 0.1, -0.5, 0.3, -0.01, 0.7]})["b"]
    assert mixed["verdict"] == NOT_SHOWN and mixed["ci_low"] < 0 < mixed["ci_high"]


def test_the_t_interval_matches_the_textbook_formula():
    deltas = np.array([0.1, 0.4, -0.2, 0.3, 0.25])
    t_975_4 = 2.7764451051977987  # t(0.975, 4 df), from statistical tables
    half = t_975_4 * deltas.std(ddof=1) / math.sqrt(5)
    assert stats.t_interval(deltas) == pytest.approx((deltas.mean() - half, deltas.mean() + half), abs=1e-8)
    assert [round(stats.t_quantile(0.975, df), 3) for df in (1, 2, 5, 30)] == [12.706, 4.303, 2.571, 2.042]
    assert all(math.isnan(x) for x in stats.t_interval([0.3]))


def test_holm_multiplies_the_smallest_by_m_and_keeps_the_order():
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])  # 3*0.01, max(2*0.03, .), 1*0.04
    assert stats.holm([0.2, 0.01]) == pytest.approx([0.2, 0.02])
    assert stats.holm([0.6, 0.5]) == pytest.approx([1.0, 1.0])  # capped at 1, and monotone
    assert stats.holm([0.5]) == [0.5]


def test_holm_turns_a_shown_difference_into_too_few_seeds_when_levels_share_the_baseline():
    strong = [-0.2, -0.1, -0.5, -0.3, -0.01, -0.7]  # p = 1/32 alone: shown
    alone = stats.compare_paired({"b": strong})["b"]
    assert alone["verdict"] == SHOWN
    two = stats.compare_paired({"b": strong, "c": strong})  # 2 * 1/32 >= 0.05: no Holm step can reject
    assert {r["verdict"] for r in two.values()} == {TOO_FEW}
    assert two["b"]["p_corrected"] == pytest.approx(0.0625)
    seven = list(strong) + [-0.4]  # 7 seeds: floor 1/64, 2 * 1/64 < 0.05
    both = stats.compare_paired({"b": seven, "c": [0.3, -0.1, 0.2, -0.4, 0.1, 0.0, 0.2]})
    assert both["b"]["verdict"] == SHOWN and both["b"]["p_corrected"] == pytest.approx(2 / 64)
    assert both["c"]["verdict"] == NOT_SHOWN


def test_seeds_needed_is_where_m_times_the_floor_drops_below_alpha():
    assert [stats.seeds_needed(m) for m in (1, 2, 3, 5, 10)] == [6, 7, 7, 8, 9]
    for m in range(1, 30):
        n = stats.seeds_needed(m)
        assert m * stats.p_floor(n) < 0.05 <= m * stats.p_floor(n - 1)


def test_above_sixteen_seeds_a_seeded_monte_carlo_estimate_close_to_the_exact_share():
    rng = np.random.default_rng(3)
    deltas = rng.normal(0.15, 1.0, 16)
    exact = stats.sign_flip_p(deltas)
    with_one_more = np.append(deltas, 0.0)  # a zero delta does not change the exact p
    estimate = stats.sign_flip_p(with_one_more)
    assert estimate == stats.sign_flip_p(with_one_more)  # fixed seed: the same estimate every time
    assert abs(estimate - exact) < 4 * math.sqrt(exact * (1 - exact) / stats.MC_DRAWS) + 1e-5


def test_non_finite_deltas_give_no_p():
    assert math.isnan(stats.sign_flip_p([np.nan, 1.0])) and math.isnan(stats.sign_flip_p([]))


def test_differences_keep_three_digits_in_one_rule_with_the_losses():
    from lab import formats
    from lab.stats import format_delta, format_interval

    assert [format_delta(x) for x in (0.2, -0.307, 5.64e-6, 0.0)] == ["+0.200", "−0.307", "+5.64e-06", "0"]
    assert format_delta(-1.5e-4) == formats.signed_loss(-1.5e-4) and format_delta(float("nan")) == "–"
    assert format_interval(-0.00261, 0.0139) == "[−0.00261, +0.0139]"


# --- ties carry no sign; the interval inverts the same test --------------------------------------------------


def test_a_zero_delta_has_no_sign_floor_verdict_and_count_follow_the_nonzero_ones():
    deltas = [0.0, -0.264, -0.15, 0.0, 0.0, 0.0]  # the review's case: 2 of 6 seeds differ
    r = stats.compare_paired({"b": deltas})["b"]
    assert r["n"] == 6 and r["n_nonzero"] == 2
    assert r["p_floor"] == 0.5 and r["p_value"] == 0.5  # 2 / 2^2, not 2 / 2^6 = 0.03125
    assert r["verdict"] == TOO_FEW
    assert stats.p_floor(stats.n_nonzero(deltas)) == 0.5
    assert stats.sign_flip_p(deltas) == brute_force_p(deltas)


def test_too_few_seeds_means_the_nonzero_ones_cannot_reach_the_level_even_with_many_seeds():
    five_differ = [-0.3, -0.2, -0.4, -0.1, -0.5] + [0.0] * 7  # 12 seeds, 5 differ: floor 1/16 >= 0.05
    r = stats.compare_paired({"b": five_differ})["b"]
    assert r["verdict"] == TOO_FEW and r["p_floor"] == 0.0625 and r["n_nonzero"] == 5
    six_differ = [-0.3, -0.2, -0.4, -0.1, -0.5, -0.6] + [0.0] * 2
    assert stats.compare_paired({"b": six_differ})["b"]["verdict"] == SHOWN


def test_holm_can_show_a_comparison_whose_own_floor_times_m_is_not_below_alpha():
    # b: 7 differing seeds (p 1/64), c: 6 of 7 differ (p 1/32). Holm: 2/64 < 0.05, then 1 * 1/32 < 0.05: both
    # rejected, although 2 * floor(6) = 0.0625: "too few seeds" would contradict Holm's own decision.
    r = stats.compare_paired({"b": [-1, -2, -3, -4, -5, -6, -7], "c": [-1, -2, -3, -4, -5, -6, 0]})
    assert r["b"]["verdict"] == SHOWN and r["c"]["verdict"] == SHOWN
    assert r["c"]["p_corrected"] == pytest.approx(1 / 32)


def brute_force_interval(deltas, alpha=0.05):
    """The accepted shifts by exact rational arithmetic: p(d − δ) at every subset mean (where p can step) and
    between neighbours; the smallest and largest accepted one, or None for unbounded."""
    from fractions import Fraction

    d = [Fraction(x) for x in deltas]
    n = len(d)
    means = sorted({sum(c, Fraction(0)) / len(c) for k in range(1, n + 1) for c in itertools.combinations(d, k)})
    if 2 / Fraction(2**n) >= Fraction(alpha):
        return None
    points = means + [(a + b) / 2 for a, b in zip(means, means[1:], strict=False)]

    def accepted(delta):
        x = [v - delta for v in d]
        observed = abs(sum(x))
        hits = sum(abs(sum(s * v for s, v in zip(signs, x, strict=True))) >= observed
                   for signs in itertools.product((1, -1), repeat=n))  # fmt: skip
        return Fraction(hits, 2**n) >= Fraction(alpha)

    inside = [c for c in points if accepted(c)]
    assert not accepted(means[0] - 1) and not accepted(means[-1] + 1)
    return min(inside), max(inside)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10))
def test_the_interval_is_exactly_the_set_of_shifts_the_test_does_not_reject(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(6, 10))
    deltas = np.round(rng.normal(rng.normal(0, 0.5), 1.0, n), 2)  # rounded: ties and zeros occur
    deltas[rng.random(n) < 0.2] = 0.0
    expected = brute_force_interval(deltas)
    low, high = stats.sign_flip_interval(deltas)
    assert (low, high) == pytest.approx((float(expected[0]), float(expected[1])), abs=1e-12)
    # and the ends themselves are accepted, just past them rejected (a closed interval)
    assert stats.sign_flip_p(deltas - low) >= 0.05 and stats.sign_flip_p(deltas - high) >= 0.05
    assert stats.sign_flip_p(deltas - (low - 1e-6)) < 0.05 and stats.sign_flip_p(deltas - (high + 1e-6)) < 0.05


def test_the_interval_of_small_cases_by_hand_and_unbounded_below_six_seeds():
    # 6 same-signed deltas: only the assignment flipping nothing (and everything) counts past the extremes
    assert stats.sign_flip_interval([1, 2, 3, 4, 5, 6]) == (1.0, 6.0)
    assert stats.sign_flip_interval([0.0, -0.264, -0.15, 0.0, 0.0, 0.0]) == (-0.264, 0.0)
    for n in range(1, 6):
        assert stats.sign_flip_interval(np.arange(1.0, n + 1)) == (-math.inf, math.inf)
    assert stats.format_interval(-math.inf, math.inf) == "(−∞, +∞)"
    assert all(math.isnan(x) for x in stats.sign_flip_interval([]))


def test_at_six_seeds_and_95_percent_the_interval_is_the_smallest_and_largest_delta_as_the_method_says():
    rng = np.random.default_rng(37)
    for _ in range(300):
        d = rng.normal(rng.normal(), rng.uniform(0.1, 3), 6)
        assert stats.sign_flip_interval(d) == (d.min(), d.max())
    assert stats.sign_flip_interval(np.arange(1.0, 8.0)) != (1.0, 7.0)  # from 7 seeds on, inside the extremes
    assert "at exactly 6 seeds and 95 % it is [min Δ, max Δ]" in stats.METHOD


def test_the_review_case_where_the_t_interval_held_zero_beside_difference_shown():
    # 6 negative deltas with one large one: p = 1/32 "shown", while the t interval reaches past 0
    deltas = [-1.2, -0.05, -0.1, -0.2, -0.08, -0.3]
    r = stats.compare_paired({"b": deltas})["b"]
    assert r["verdict"] == SHOWN and r["t_low"] < 0 < r["t_high"]
    assert r["ci_high"] < 0 and r["ci_level"] == 0.95


def test_holm_levels_follow_the_step_that_decided_each_comparison():
    assert stats.holm_levels([0.01]) == [0.05]
    assert stats.holm_levels([0.01, 0.02, 0.5]) == pytest.approx([0.05 / 3, 0.05 / 2, 0.05])
    assert stats.holm_levels([0.03, 0.04]) == pytest.approx([0.025, 0.025])  # the first step fails: both at 0.025


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(40))
def test_difference_shown_exactly_when_the_interval_leaves_out_zero(seed):
    """The property over many random comparisons, ties and zeros included, one to four levels sharing a baseline."""
    rng = np.random.default_rng(seed)
    for _ in range(15):
        n, levels = int(rng.integers(1, 12)), int(rng.integers(1, 5))
        groups = {}
        for j in range(levels):
            d = np.round(rng.normal(rng.normal(0, 1), rng.uniform(0.05, 1), n), int(rng.integers(1, 4)))
            d[rng.random(n) < rng.uniform(0, 0.6)] = 0.0
            groups[f"l{j}"] = d
        for r in stats.compare_paired(groups).values():
            holds_zero = r["ci_low"] <= 0.0 <= r["ci_high"]
            assert (r["verdict"] == SHOWN) == (not holds_zero), r
            assert r["ci_low"] <= r["delta_mean"] <= r["ci_high"]
            assert (r["verdict"] == TOO_FEW) <= (r["p_floor"] * 1 >= 0.05 or levels > 1)


def test_seeds_needed_counts_seeds_that_differ():
    assert stats.n_nonzero([0.0, 1.0, -0.0, 2.0]) == 2
    assert stats.seeds_needed(1) == 6  # nonzero deltas: a tie adds none


def test_above_sixteen_seeds_the_interval_inverts_the_same_monte_carlo_draws():
    rng = np.random.default_rng(7)
    deltas = rng.normal(0.4, 1.0, 18)
    low, high = stats.sign_flip_interval(deltas)
    assert low < deltas.mean() < high and (low, high) == stats.sign_flip_interval(deltas)  # fixed draws
    eps = 1e-6 * (high - low)
    assert stats.sign_flip_p(deltas - low) >= 0.05 and stats.sign_flip_p(deltas - high) >= 0.05
    assert stats.sign_flip_p(deltas - (low - eps)) < 0.05 and stats.sign_flip_p(deltas - (high + eps)) < 0.05
