"""Comparisons over a factor (lab.factors) and their charts (ui.charts.compare): pure, no browser."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

from attncore import ConfigError, make_run
from lab import compare
from lab.factors import FACTORS, comparison_runs, faceted, group_by, tables, to_json, varied_besides, with_seed
from ui.charts import compare as compare_charts


def summary(seed: int, seq: float, task: str = "copy", **overrides) -> dict:
    return {
        "config": make_run(task, 6, seed, **overrides).to_dict(),
        "test_loss": 1 - seq,
        "token_accuracy": 0.9,
        "sequence_accuracy": seq,
    }


def test_comparison_runs_cover_every_facet_level_and_seed_in_order():
    runs = comparison_runs(make_run, "position", ["none", "learned"], [3, 4], facet="norm", facet_levels=["post"])
    assert [(r.model.position, r.model.norm, r.train.seed) for r in runs] == [
        ("none", "post", 3),
        ("none", "post", 4),
        ("learned", "post", 3),
        ("learned", "post", 4),
    ]


def test_an_invalid_level_names_the_field_the_allowed_values_and_the_level():
    with pytest.raises(ConfigError) as e:
        comparison_runs(lambda **kw: make_run(d_model=12, **kw), "heads", [4, 8], [0])
    assert e.value.field == "n_heads"
    assert e.value.message == "must divide d_model=12; allowed: 1, 2, 3, 4, 6, 12 (asked for by heads 8)"


def test_group_by_keeps_the_levels_order_with_the_baseline_first():
    records = [summary(s, 0.5, lr=lr) for lr in (3e-3, 1e-2) for s in (0, 1)]
    groups = group_by(records, "lr", [1e-2, 3e-3])
    assert list(groups) == ["1e-2", "3e-3"] and [len(g) for g in groups.values()] == [2, 2]  # the sidebar's notation
    assert set(compare.paired_differences(groups)["baseline"]) == {"1e-2"}
    csv = compare.group_summary(groups).to_csv(index=False)
    assert pd.read_csv(io.StringIO(csv))["level"].tolist() == [1e-2, 3e-3]  # a CSV reader still gets numbers


def test_scaling_levels_are_on_and_off_and_facets_split_the_records():
    records = [summary(s, 0.5, scaling=sc, norm=n) for sc in (True, False) for n in ("pre", "post") for s in (0, 1)]
    parts = faceted(records, "scaling", [True, False], "norm", ["post", "pre"])
    assert [(facet, list(groups)) for facet, groups in parts] == [("post", ["on", "off"]), ("pre", ["on", "off"])]
    summary_table, comparisons, _ = tables(parts, curves=False)
    assert list(summary_table["facet"]) == ["post", "post", "pre", "pre"]
    assert list(comparisons["facet"]) == ["post"] * 3 + ["pre"] * 3


def test_varied_besides_names_what_else_differs():
    records = [summary(0, 0.5), summary(1, 0.5, position="none"), summary(0, 0.5, task="sort")]
    assert sorted(varied_besides(records, "position")) == ["task"]
    assert varied_besides(records[:2], "position") == []


def test_to_json_has_one_group_per_level_and_one_comparison_per_level_and_metric():
    groups = {"learned": [summary(0, 0.5), summary(1, 0.6)], "none": [summary(s, 0.1, position="none") for s in (0, 1)]}
    table, comparisons, _ = tables([(None, groups)], curves=False)
    out = to_json("position", groups, table, comparisons)
    assert out["groups"][1] == {
        "factor": "position",
        "level": "none",
        "value": "none",
        "n": 2,
        "test_loss": {"mean": 0.9, "min": 0.9, "max": 0.9},
        "token_accuracy": {"mean": 0.9, "min": 0.9, "max": 0.9},
        "sequence_accuracy": {"mean": 0.1, "min": 0.1, "max": 0.1},
    }
    seq = out["comparisons"][2]
    assert seq["metric"] == "sequence_accuracy" and seq["verdict"] == "too few seeds"  # 2 seeds: floor 0.5
    assert (seq["delta_min"], seq["delta_max"]) == pytest.approx((-0.5, -0.4))
    assert (seq["n"], seq["p_value"], seq["p_floor"], seq["p_corrected"]) == (2, 0.5, 0.5, 0.5)
    assert seq["t_low"] < -0.45 < seq["t_high"]
    assert (seq["ci_low"], seq["ci_high"], seq["ci_level"]) == ("-inf", "inf", 0.95)  # 2 seeds bound no shift
    assert seq["n_nonzero"] == 2
    assert set(seq) == {
        "level", "baseline", "metric", "n", "n_nonzero", "delta_mean", "delta_min", "delta_max",
        "ci_low", "ci_high", "ci_level", "t_low", "t_high", "p_value", "p_floor", "p_corrected", "verdict",
    }  # fmt: skip
    assert [c["metric"] for c in out["comparisons"]] == ["test_loss", "token_accuracy", "sequence_accuracy"]
    assert out["seeds"] == compare.seeds_text(comparisons) and "once 6 seeds differ" in out["seeds"]
    assert out["method"] == compare.RULE
    json.dumps(out, allow_nan=False)  # strict JSON: no NaN, no Infinity


def test_with_seed_changes_only_the_seed():
    run = make_run(position="rope", steps=40)
    assert with_seed(run, 7) == make_run(position="rope", steps=40, seed=7)


def bands(levels=("a", "b"), steps=1000) -> pd.DataFrame:
    parts = [
        pd.DataFrame({"level": lv, "step": np.arange(1, steps + 1), "seeds": 3, "mean": 1.0, "min": 0.5, "max": 2.0})
        for lv in levels
    ]
    return pd.concat(parts, ignore_index=True)


@pytest.mark.slow
def test_band_curves_draw_the_mean_in_a_min_max_band_base_black_and_thinned():
    spec = compare_charts.band_curves(bands()).to_dict()
    marks = [layer["mark"]["type"] for layer in spec["layer"]]
    assert marks == ["area", "line"]
    area = spec["layer"][0]["encoding"]
    assert area["fill"]["legend"] is None and "color" not in area  # the lines alone carry the legend
    assert area["y"]["field"] == "min" and area["y2"]["field"] == "max"
    assert spec["layer"][1]["encoding"]["y"]["field"] == "mean"
    assert spec["layer"][1]["encoding"]["color"]["scale"]["range"][0] == "#222222"
    data = next(iter(spec["datasets"].values()))
    assert len(data) == 2 * compare_charts.BAND_POINTS
    assert {1, 1000} <= {row["step"] for row in data}


@pytest.mark.slow
def test_band_curves_and_accuracy_facet_when_there_is_a_facet_column():
    assert "facet" in compare_charts.band_curves(bands().assign(facet="x")).to_dict()
    groups = compare.group_summary({"a": [summary(0, 0.4), summary(1, 0.6)]}).assign(facet="p")
    assert "facet" in compare_charts.accuracy_by_level(groups, "position").to_dict()


def test_accuracy_by_level_is_mean_dot_and_min_max_rule_per_metric():
    groups = compare.group_summary({"a": [summary(0, 0.4), summary(1, 0.6)], "b": [summary(0, 0.2), summary(1, 0.3)]})
    long = compare_charts.accuracy_long(groups)
    seq = long[long["metric"] == "per-sequence"].set_index("level")
    assert seq.loc["a", ["mean", "min", "max"]].tolist() == pytest.approx([0.5, 0.4, 0.6])
    spec = compare_charts.accuracy_by_level(groups, "position").to_dict()
    # levels are categories: a dot per mean and an error bar with end ticks, no line joining them
    assert [layer["mark"]["type"] for layer in spec["layer"]] == ["errorbar", "point"]
    assert spec["layer"][0]["mark"]["ticks"] and spec["layer"][0]["encoding"]["y2"]["field"] == "max"
    assert spec["layer"][1]["encoding"]["x"]["sort"] == ["a", "b"]
    assert all(layer["encoding"]["xOffset"]["field"] == "metric" for layer in spec["layer"])  # side by side
    assert set(FACTORS) >= {"task", "length", "position", "norm", "scaling", "lr", "d", "heads", "layers", "steps"}
