"""Groups over seeds: mean/min/max per group, loss bands, and the paired-difference verdict (issue 13)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from attncore.config import make_run
from attncore.snapshots import Snapshot
from lab import store
from lab.compare import BEYOND, WITHIN, curve_bands, group_summary, paired_differences, snapshot_bands, verdict


def record(seed: int, sequence: float, token: float = 0.9, loss: float = 0.1, **overrides) -> dict:
    """A hand-made summary() dict: only what the comparison reads."""
    return {
        "config": make_run("copy", 6, seed, **overrides).to_dict(),
        "final_loss": loss,
        "token_accuracy": token,
        "sequence_accuracy": sequence,
    }


def group(sequences, **overrides) -> list[dict]:
    return [record(seed, s, **overrides) for seed, s in enumerate(sequences)]


def row(table, level, metric):
    found = table[(table["level"] == level) & (table["metric"] == metric)]
    assert len(found) == 1
    return found.iloc[0]


# --- the verdict rule on constructed cases ---------------------------------------


def test_same_sign_and_larger_than_the_baseline_spread_is_beyond_seed_noise():
    base = group([0.50, 0.52, 0.51])  # spread 0.02
    variant = group([0.30, 0.28, 0.35], position="none")  # deltas -0.20, -0.24, -0.16
    r = row(paired_differences({"full": base, "no position": variant}), "no position", "sequence_accuracy")
    assert r["verdict"] == BEYOND
    assert r["baseline"] == "full" and r["seeds"] == 3
    assert r["delta_mean"] == pytest.approx(-0.20)
    assert r["delta_min"] == pytest.approx(-0.24) and r["delta_max"] == pytest.approx(-0.16)
    assert r["mean_abs_delta"] == pytest.approx(0.20) and r["baseline_spread"] == pytest.approx(0.02)


def test_mixed_signs_are_within_seed_noise_however_large():
    base = group([0.50, 0.50, 0.50])  # no spread at all
    variant = group([0.90, 0.20, 0.95], position="none")  # deltas +0.4, -0.3, +0.45: mean |d| 0.38
    assert row(paired_differences({"a": base, "b": variant}), "b", "sequence_accuracy")["verdict"] == WITHIN


def test_same_sign_but_smaller_than_the_baseline_spread_is_within_seed_noise():
    base = group([0.50, 0.60, 0.55])  # spread 0.10
    variant = group([0.55, 0.62, 0.63], position="none")  # deltas all positive, mean 0.05
    r = row(paired_differences({"a": base, "b": variant}), "b", "sequence_accuracy")
    assert r["verdict"] == WITHIN and r["delta_min"] > 0


def test_a_mean_equal_to_the_spread_does_not_exceed_it():
    assert verdict(np.array([0.25, 0.25]), np.array([0.5, 0.75])) == WITHIN
    assert verdict(np.array([0.25, 0.375]), np.array([0.5, 0.75])) == BEYOND


def test_zero_deltas_are_within_seed_noise():
    """Copy at 1.000 for base and variant on every seed: no difference, even with no spread."""
    base, variant = group([1.0, 1.0, 1.0]), group([1.0, 1.0, 1.0], scaling=False)
    assert row(paired_differences({"a": base, "b": variant}), "b", "sequence_accuracy")["verdict"] == WITHIN
    assert verdict(np.array([0.0, -0.2, -0.3]), np.array([0.5, 0.5, 0.5])) == WITHIN  # one zero breaks the sign


def test_one_seed_is_never_beyond_seed_noise():
    assert verdict(np.array([-0.7]), np.array([1.0])) == WITHIN
    assert verdict(np.array([-0.7, -0.7]), np.array([1.0, 1.0])) == BEYOND


def test_non_finite_deltas_are_never_beyond():
    assert verdict(np.array([np.nan, 1.0, 1.0]), np.array([0.1, 0.1, 0.1])) == WITHIN


def test_every_metric_gets_its_own_verdict():
    base = [record(s, 0.5 + 0.01 * s, token=0.9, loss=0.10 + 0.001 * s) for s in range(3)]
    variant = [record(s, 0.5 - 0.01 * s, token=0.9, loss=0.50 + 0.002 * s, norm="post") for s in range(3)]
    table = paired_differences({"pre": base, "post": variant})
    assert list(table["metric"]) == ["final_loss", "token_accuracy", "sequence_accuracy"]
    verdicts = dict(zip(table["metric"], table["verdict"], strict=True))
    assert verdicts == {"final_loss": BEYOND, "token_accuracy": WITHIN, "sequence_accuracy": WITHIN}


def test_pairs_are_matched_by_seed_not_by_order():
    base = group([0.10, 0.50, 0.90])
    variant = [record(2, 0.95, position="none"), record(0, 0.15, position="none"), record(1, 0.55, position="none")]
    r = row(paired_differences({"a": base, "b": variant}), "b", "sequence_accuracy")
    assert r["delta_min"] == pytest.approx(0.05) and r["delta_max"] == pytest.approx(0.05)


def test_every_variant_is_compared_with_the_chosen_baseline():
    groups = {"lr 1e-3": group([0.2, 0.3]), "lr 3e-3": group([0.6, 0.61]), "lr 1e-2": group([0.9, 0.95])}
    first = paired_differences(groups)
    assert list(dict.fromkeys(first["level"])) == ["lr 3e-3", "lr 1e-2"] and set(first["baseline"]) == {"lr 1e-3"}
    chosen = paired_differences(groups, baseline="lr 3e-3")
    assert list(dict.fromkeys(chosen["level"])) == ["lr 1e-3", "lr 1e-2"]
    assert row(chosen, "lr 1e-2", "sequence_accuracy")["delta_mean"] == pytest.approx(0.32)


def test_groups_over_other_seeds_or_a_repeated_seed_are_refused():
    base = group([0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match=r"'b' is not over the baseline's seeds: missing \[2\], extra \[\]"):
        paired_differences({"a": base, "b": group([0.1, 0.1])})
    with pytest.raises(ValueError, match="'b': seed 0 appears twice"):
        paired_differences({"a": base, "b": base + [record(0, 0.3)]})
    with pytest.raises(ValueError, match="baseline 'c' is not one of the groups"):
        paired_differences({"a": base}, baseline="c")
    assert paired_differences({}).empty


def test_group_summary_is_mean_min_max_over_seeds():
    table = group_summary({"a": group([0.2, 0.4, 0.9]), "b": group([1.0])})
    a = table.iloc[0]
    assert (a["level"], a["n"]) == ("a", 3)
    assert (a["sequence_accuracy_mean"], a["sequence_accuracy_min"], a["sequence_accuracy_max"]) == pytest.approx(
        (0.5, 0.2, 0.9)
    )
    assert table.iloc[1]["n"] == 1 and table.iloc[1]["sequence_accuracy_max"] == 1.0


# --- curves over seeds ---------------------------------------------------------


def history(*losses):
    return SimpleNamespace(loss_history=np.array(losses, dtype=float))


def test_curve_bands_are_mean_min_max_per_step():
    bands = curve_bands({"a": [history(3, 2, 1), history(1, 2, 5)], "b": [history(4, 4)]})
    a = bands[bands["level"] == "a"]
    assert list(a["step"]) == [1, 2, 3] and set(a["seeds"]) == {2}
    assert list(a["mean"]) == [2, 2, 3] and list(a["min"]) == [1, 2, 1] and list(a["max"]) == [3, 2, 5]
    assert list(bands[bands["level"] == "b"]["mean"]) == [4, 4]


def test_curve_bands_smooth_each_run_before_the_band():
    bands = curve_bands({"a": [history(4, 0, 4, 0), history(0, 4, 0, 4)]}, smooth=2)
    assert list(bands["min"]) == [0, 2, 2, 2] and list(bands["max"]) == [4, 2, 2, 2]


def test_curve_bands_refuse_runs_of_different_lengths_and_bad_smoothing():
    with pytest.raises(ValueError, match=r"'a': runs of different lengths \[2, 3\]"):
        curve_bands({"a": [history(1, 2), history(1, 2, 3)]})
    with pytest.raises(ValueError, match="smooth must be an integer >= 1"):
        curve_bands({"a": [history(1, 2)]}, smooth=0)


# --- the verdict on real runs (trains 9 runs) ----------------------------------------


def test_copy_6_over_three_seeds_no_position_is_beyond_seed_noise_and_no_scaling_within():
    variants = {"full": {}, "no position": {"position": "none"}, "no scaling": {"scaling": False}}
    groups = {
        label: [store.compute_run(make_run("copy", 6, seed, **overrides)) for seed in (0, 1, 2)]
        for label, overrides in variants.items()
    }
    table = paired_differences(groups)
    assert row(table, "no position", "sequence_accuracy")["verdict"] == BEYOND
    assert row(table, "no position", "sequence_accuracy")["delta_mean"] < -0.5
    assert row(table, "no scaling", "sequence_accuracy")["verdict"] == WITHIN


def snapshotted(accuracies, steps=(10, 100, 1000)) -> SimpleNamespace:
    """A hand-made record with only snapshots: (token, sequence) accuracy per step."""
    empty = np.zeros((1, 1, 2, 2))
    return SimpleNamespace(snapshots=[Snapshot(s, t, q, empty) for s, (t, q) in zip(steps, accuracies, strict=True)])


def test_snapshot_bands_are_mean_min_max_over_seeds_at_each_snapshot_step():
    groups = {
        "a": [snapshotted([(0.5, 0.1), (0.9, 0.6), (1.0, 1.0)]), snapshotted([(0.3, 0.0), (0.8, 0.4), (1.0, 0.9)])],
        "b": [snapshotted([(0.2, 0.0), (0.4, 0.1), (0.6, 0.2)])],
    }
    bands = snapshot_bands(groups)
    a = bands[bands["level"] == "a"]
    assert a["step"].tolist() == [10, 100, 1000] and a["seeds"].tolist() == [2, 2, 2]
    assert np.allclose(a["mean"], [0.05, 0.5, 0.95]) and np.allclose(a["min"], [0.0, 0.4, 0.9])
    assert np.allclose(a["max"], [0.1, 0.6, 1.0])
    tokens = snapshot_bands(groups, "token_accuracy")
    assert np.allclose(tokens[tokens["level"] == "b"]["mean"], [0.2, 0.4, 0.6])
    with pytest.raises(ValueError, match="different snapshot steps"):
        snapshot_bands({"c": [snapshotted([(1, 1)] * 3), snapshotted([(1, 1)] * 3, steps=(5, 50, 500))]})
    with pytest.raises(ValueError, match="metric"):
        snapshot_bands(groups, "final_loss")
