"""Groups over seeds: mean/min/max per group, loss bands, and the paired-difference verdict."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from attncore.config import make_run
from attncore.snapshots import Snapshot
from lab import stats, store
from lab.compare import (
    curve_bands,
    differences_text,
    display,
    group_summary,
    paired_differences,
    seeds_needed,
    seeds_text,
    seeds_to_ask,
    snapshot_bands,
)
from lab.stats import IDENTICAL, MISSING, NOT_SHOWN, SHOWN, TOO_FEW, format_delta


def record(seed: int, sequence: float, token: float = 0.9, loss: float = 0.1, **overrides) -> dict:
    """A hand-made summary() dict: only what the comparison reads."""
    return {
        "config": make_run("copy", 6, seed, **overrides).to_dict(),
        "test_loss": loss,
        "token_accuracy": token,
        "sequence_accuracy": sequence,
    }


def group(sequences, **overrides) -> list[dict]:
    return [record(seed, s, **overrides) for seed, s in enumerate(sequences)]


def row(table, level, metric):
    found = table[(table["level"] == level) & (table["metric"] == metric)]
    assert len(found) == 1
    return found.iloc[0]


# --- the comparison's statistics on constructed groups (lab.stats) ---------------------


def test_three_seeds_with_a_large_consistent_difference_are_too_few_seeds():
    base = group([0.50, 0.52, 0.51])
    variant = group([0.30, 0.28, 0.35], position="none")  # deltas -0.20, -0.24, -0.16
    r = row(paired_differences({"full": base, "no position": variant}), "no position", "sequence_accuracy")
    assert r["verdict"] == TOO_FEW and r["p_value"] == 0.25 and r["p_floor"] == 0.25
    assert r["baseline"] == "full" and r["n"] == 3
    assert r["delta_mean"] == pytest.approx(-0.20)
    assert r["delta_min"] == pytest.approx(-0.24) and r["delta_max"] == pytest.approx(-0.16)
    assert r["t_low"] < -0.20 < r["t_high"] < 0  # the t interval is around the mean, below 0 here
    assert (r["ci_low"], r["ci_high"]) == (-np.inf, np.inf)  # the sign-flip test rejects no shift with 3 seeds


def test_six_seeds_with_a_consistent_difference_show_it_and_mixed_signs_do_not():
    base = group([0.50, 0.52, 0.51, 0.49, 0.50, 0.53])
    lower = group([0.30, 0.28, 0.35, 0.31, 0.40, 0.29], position="none")
    mixed = group([0.90, 0.20, 0.95, 0.10, 0.60, 0.40], position="none")
    r = row(paired_differences({"a": base, "b": lower}), "b", "sequence_accuracy")
    assert r["verdict"] == SHOWN and r["p_value"] == 0.03125 and r["ci_high"] < 0
    assert row(paired_differences({"a": base, "b": mixed}), "b", "sequence_accuracy")["verdict"] == NOT_SHOWN


def test_two_levels_against_one_baseline_are_holm_corrected_per_metric():
    base = group([0.50, 0.52, 0.51, 0.49, 0.50, 0.53])
    lower = group([0.30, 0.28, 0.35, 0.31, 0.40, 0.29], position="none")
    table = paired_differences({"a": base, "b": lower, "c": lower})
    r = row(table, "b", "sequence_accuracy")
    assert r["p_value"] == 0.03125 and r["p_corrected"] == pytest.approx(0.0625) and r["verdict"] == TOO_FEW
    assert seeds_needed(table) == 7 and seeds_needed(paired_differences({"a": base, "b": lower})) == 6


def test_every_delta_zero_is_identical_on_every_seed():
    """Copy at 1.000 for base and variant on every seed: identical, not 'no difference shown'."""
    base, variant = group([1.0, 1.0, 1.0]), group([1.0, 1.0, 1.0], scaling=False)
    r = row(paired_differences({"a": base, "b": variant}), "b", "sequence_accuracy")
    assert r["verdict"] == IDENTICAL and r["p_value"] == 1.0


def test_every_metric_gets_its_own_verdict():
    base = [record(s, 0.5, token=0.9, loss=0.10 + 0.001 * s) for s in range(6)]
    variant = [record(s, 0.5 - 0.01 * (s % 2), token=0.9, loss=0.50 + 0.002 * s, norm="post") for s in range(6)]
    table = paired_differences({"pre": base, "post": variant})
    assert list(table["metric"]) == ["test_loss", "token_accuracy", "sequence_accuracy"]
    verdicts = dict(zip(table["metric"], table["verdict"], strict=True))
    assert verdicts == {"test_loss": SHOWN, "token_accuracy": IDENTICAL, "sequence_accuracy": TOO_FEW}  # 3 of 6 differ


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


def test_seeds_that_tie_exactly_carry_no_sign_and_the_advice_says_how_many_differed():
    """The review's case: accuracy at 1.0 on four of six seeds for both settings; two seeds differ."""
    base = group([1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    variant = group([1.0, 0.736, 0.85, 1.0, 1.0, 1.0], norm="post")
    table = paired_differences({"pre": base, "post": variant})
    r = row(table, "post", "sequence_accuracy")
    assert (r["n"], r["n_nonzero"], r["p_floor"], r["verdict"]) == (6, 2, 0.5, TOO_FEW)
    assert r["ci_low"] <= 0 <= r["ci_high"]
    text = seeds_text(table)
    assert "once 6 seeds differ" in text and "These runs have 6 seeds" in text
    assert "as few as 2 of 6 differed (post, sequence_accuracy)" in text
    assert seeds_to_ask(table) == 18 and "about 18 seeds" in text  # 6 differing seeds at 2 in 6
    shown = display(table).set_index("metric")
    assert shown.loc["sequence_accuracy", "differ"] == "2 of 6"
    assert shown.loc["sequence_accuracy", "interval"] == "[−0.264, 0]"


def test_the_interval_agrees_with_the_verdict_in_every_row_and_names_a_holm_level():
    base = group([0.50, 0.52, 0.51, 0.49, 0.50, 0.53, 0.5])
    lower = group([0.30, 0.28, 0.35, 0.31, 0.40, 0.29, 0.3], position="none")
    mixed = group([0.90, 0.20, 0.95, 0.10, 0.60, 0.40, 0.5], position="none")
    table = paired_differences({"a": base, "b": lower, "c": mixed})
    for r in table.itertuples():
        assert (r.verdict == SHOWN) == (not r.ci_low <= 0 <= r.ci_high)
    b = row(table, "b", "sequence_accuracy")
    assert b["verdict"] == SHOWN and b["ci_level"] == pytest.approx(1 - 0.05 / 2)  # Holm's first step of two
    assert (
        display(table).set_index(["level", "metric"]).loc[("b", "sequence_accuracy"), "interval"].endswith("(97.5 %)")
    )


def test_display_each_writes_every_number_as_the_command_line_prints_it():
    """Regression: the Regimes tables wrote p 0.0312 and one column spec; the CLI and docs give 0.03125 and 3
    significant digits per number."""
    base = group([0.5] * 6)
    far = group([0.5 - 0.3 - s / 100 for s in range(6)], norm="post")  # lower on every seed: p at the floor
    near = group([0.5 - 0.0006 - s / 10000 for s in range(6)], position="none")
    table = paired_differences({"pre": base, "post": far, "none": near}, metrics=("sequence_accuracy",))
    each = display(table, each=True).set_index("level")
    for level in ("post", "none"):
        r = row(table, level, "sequence_accuracy")
        assert each.loc[level, "p_value"] == stats.format_p(r["p_value"])
        assert each.loc[level, "delta_mean"] == stats.format_delta(r["delta_mean"])
        assert each.loc[level, "interval"].startswith(stats.format_interval(r["ci_low"], r["ci_high"]))
    assert each.loc["post", "p_floor"] == "0.03125" and each.loc["post", "delta_mean"] == "−0.325"
    assert each.loc["none", "delta_mean"] == "−8.50e-04"  # its own 3 digits, not the column's
    column = display(table).set_index("level")  # the default: one format per column
    assert column.loc["post", "delta_mean"] == "−3.25e-01"


def test_a_test_loss_missing_on_a_seed_is_said_not_judged():
    base = group([0.5, 0.5, 0.5])
    base[1]["test_loss"] = None  # stored before the test loss was kept, and its weights were not at hand
    r = row(paired_differences({"a": base, "b": group([0.4, 0.4, 0.4], norm="post")}), "b", "test_loss")
    assert r["verdict"] == MISSING and r["p_value"] != r["p_value"]
    assert np.isnan(group_summary({"a": base}).iloc[0]["test_loss_mean"])  # no mean over other seeds: '–'
    assert group_summary({"a": base}).iloc[0]["token_accuracy_mean"] == pytest.approx(0.9)


def test_the_sentence_says_what_differs_and_by_how_much_from_the_table():
    """Post-LN against pre-LN: a tiny, consistent test-loss difference on 6 seeds, accuracy identical: the page's
    sentence names the difference with its interval and the identical metrics, instead of 'shows nothing'."""
    base = [record(s, 1.0, token=1.0, loss=2.0e-4 + 1e-6 * s) for s in range(6)]
    post = [record(s, 1.0, token=1.0, loss=2.1e-4 + 1e-6 * s + 1e-7 * (s % 2), norm="post") for s in range(6)]
    table = paired_differences({"pre": base, "post": post})
    text = differences_text(table)
    r = row(table, "post", "test_loss")
    interval = f"[{format_delta(r['ci_low'])}, {format_delta(r['ci_high'])}]"
    assert text == (
        f"post: difference shown: test loss by {format_delta(r['delta_mean'])} {interval}; "
        "identical on every seed: per-token, per-sequence."
    )
    assert r["ci_low"] > 0 and r["verdict"] == SHOWN
    assert differences_text(table.iloc[0:0]) == ""
    summary = group_summary({"pre": base, "post": post})
    share = 100 * r["delta_mean"] / summary.iloc[0]["test_loss_mean"]  # of pre-LN's mean test loss
    assert f"{interval}, {share:+.2g} % of pre's mean" in differences_text(table, summary=summary)


def test_a_lower_loss_is_a_share_written_with_the_labs_minus_sign():
    """Regression: '+6.3 %' beside '-79 %' (an ASCII hyphen) in the same sentence of the Ablations page."""
    base = [record(s, 1.0, token=1.0, loss=2.0e-4 + 1e-6 * s) for s in range(6)]
    lower = [record(s, 1.0, token=1.0, loss=0.5e-4 + 1e-6 * s, norm="post") for s in range(6)]
    table = paired_differences({"pre": base, "post": lower})
    text = differences_text(table, summary=group_summary({"pre": base, "post": lower}))
    share = text.split("], ")[1].split(" % of pre's mean")[0]  # about −74: the loss fell by three quarters
    assert share.startswith("−7") and "-" not in share


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


# --- the verdict on real runs (trains 12 runs) ----------------------------------------


@pytest.fixture(scope="module")
def copy_over_six_seeds(tmp_path_factory):
    """copy L = 6 at the default 1,500 steps, full and no position, seeds 0-5, through a store of its own."""
    location = tmp_path_factory.mktemp("six-seeds")
    variants = {"full": {}, "no position": {"position": "none"}}
    return {
        label: [store.get_run(make_run("copy", 6, seed, **overrides), location=location) for seed in range(6)]
        for label, overrides in variants.items()
    }


@pytest.mark.slow
def test_copy_6_over_six_seeds_shows_that_no_position_is_worse_with_the_interval_below_zero(copy_over_six_seeds):
    table = paired_differences(copy_over_six_seeds)
    r = row(table, "no position", "sequence_accuracy")
    assert r["n"] == 6 and r["verdict"] == SHOWN
    assert r["ci_low"] < r["delta_mean"] < r["ci_high"] < 0
    assert r["p_value"] == pytest.approx(0.03125)  # every seed worse: the floor of 6 seeds


def test_three_of_the_same_seeds_are_too_few_for_any_verdict(copy_over_six_seeds):
    three = {label: records[:3] for label, records in copy_over_six_seeds.items()}
    assert set(paired_differences(three)["verdict"]) <= {TOO_FEW, IDENTICAL}


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


def test_cells_sharing_a_baseline_are_said_to_be_uncorrected_across_cells():
    """The Induction heads page's cells: two heads zeroed, each against the one intact baseline, one cell each; the
    sentence must not say 'one comparison per baseline' when one baseline is compared twice."""
    base = group([1.0, 0.9, 0.8, 0.7, 0.6, 0.5])
    a = paired_differences({"intact": base, "head A zeroed": group([0.5, 0.4, 0.3, 0.2, 0.1, 0.0])})
    b = paired_differences({"intact": base, "head B zeroed": group([0.4, 0.3, 0.2, 0.1, 0.0, 0.0])})
    import pandas as pd

    cells = pd.concat([a.assign(facet="A"), b.assign(facet="B")], ignore_index=True)
    assert "one comparison per baseline" not in seeds_text(cells)
    assert "cells sharing a baseline are not corrected across" in seeds_text(cells)
    assert "one comparison per baseline" in seeds_text(a.assign(facet="A"))  # one cell: true as said
