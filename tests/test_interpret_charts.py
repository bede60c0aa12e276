"""ui.charts.interpret: the frames carry the library's numbers in order; the charts are valid specs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ui.charts import interpret as ci

TOKENS = np.array([17, 3, 0, 20, 17, 3])


def test_patch_charts_keep_every_value_and_a_fixed_scale():
    grid = np.array([[0.1, 1.5, -0.2], [0.0, 0.3, 0.9]])
    df = ci.head_grid_frame(grid)
    assert list(df["layer"]) == ["L0"] * 3 + ["L1"] * 3 and list(df["restored"]) == list(grid.ravel())
    spec = ci.patch_heads(grid).to_dict()
    assert spec["layer"][0]["encoding"]["color"]["scale"]["domain"] == [-1, 1]  # 1.5 is clamped, not rescaled
    resid = np.array([[1.0, 0.0, np.nan], [0.2, 0.8, np.nan]])
    comp = ci.components_frame(resid, resid * 0.5, TOKENS[:3])
    assert len(comp) == 8 and not comp["restored"].isna().any()  # positions beyond the cap are left out
    assert list(dict.fromkeys(comp["component"])) == [
        "residual into block 0", "residual into block 1", "MLP of block 0", "MLP of block 1"
    ]  # fmt: skip
    by_pos = np.zeros((2, 2, 3))
    by_pos[1, 0, 2] = 0.7
    frame = ci.head_positions_frame(by_pos, TOKENS[:3])
    assert frame.loc[(frame["head"] == "L1H0") & (frame["position"] == "2 · 0"), "restored"].item() == 0.7
    spec = ci.patch_head_positions(by_pos, TOKENS[:3]).to_dict()
    assert spec["layer"][0]["encoding"]["x"]["sort"] == ["0 · 17", "1 · 3", "2 · 0"]  # positions in order, not as text


def test_logit_lens_frame_and_panels():
    found = {"probe": np.array([[0.1, 0.2], [0.9, 1.0]]), "test": np.array([[0.3, 0.4], [0.5, 0.6]])}
    df = ci.lens_frame(found, 2)
    assert list(df.columns) == ["input", "read after", "answer query", "p"]
    assert df[df["input"] == "this input"]["p"].tolist() == [0.1, 0.2, 0.9, 1.0]
    assert list(dict.fromkeys(df["read after"])) == ["embedding", "block 0"]
    spec = ci.logit_lens(found, 2).to_dict()
    assert spec["facet"]["column"]["sort"] == ["this input", "mean over test sequences"]


@pytest.mark.parametrize("queries", [1, 2, 6])
def test_logit_lens_panels_are_as_wide_as_their_header(queries):
    """Regression: modular's one answer query drew 44 px panels whose headers and axis titles ran into each other."""
    found = {k: np.full((2, queries), 0.5) for k in ("probe", "test")}
    spec = ci.logit_lens(found, 2).to_dict()
    assert spec["spec"]["width"] >= ci.LENS_MIN_WIDTH


def test_scores_charts():
    scores = {"L back": np.array([[0.9, 0.1]]), "previous token": np.array([[0.0, 0.5]])}
    df = ci.scores_frame(scores)
    assert len(df) == 4 and df.loc[(df["pattern"] == "L back") & (df["head"] == "L0H0"), "score"].item() == 0.9
    over = {k: np.stack([v * 0.5, v]) for k, v in scores.items()}  # (S=2, 1, 2)
    spec = ci.scores_over_training(np.array([10, 100]), over).to_dict()
    assert spec["spec"]["encoding"]["x"]["scale"]["type"] == "log"
    data = next(iter(spec["datasets"].values()))
    assert len(data) == 2 * 2 * 2  # patterns x steps x heads


RESULT = {
    "row": [0.1, 0.9],
    "adversarial": [
        {"jsd": 0.2, "tvd": 0.005, "feasible": True, "row": [0.5, 0.5]},
        {"jsd": 0.4, "tvd": 0.008, "feasible": True, "row": [0.8, 0.2]},
        {"jsd": 0.6, "tvd": 0.3, "feasible": False, "row": [1.0, 0.0]},
    ],
    "seed_jsd": [{"seed": 1, "jsd": 0.3, "closest_head": 2, "closest_head_jsd": 0.01, "row": [0.3, 0.7],
                  "closest_row": [0.12, 0.88]}],
    "permutation_tvd": [0.0, 0.5, 1.0],
}  # fmt: skip


def test_explanation_charts():
    div = ci.divergence_frame(RESULT)
    assert list(div["what"]) == ["restart 1", "restart 2", "seed 1: same head", "seed 1: closest head (H2)"]
    assert list(div["jsd"]) == [0.2, 0.4, 0.3, 0.01]  # the infeasible restart is not drawn
    spec = ci.divergences(RESULT).to_dict()
    assert spec["layer"][0]["encoding"]["x"]["scale"]["domain"] == [0, math.log(2)]
    rows = ci.rows_frame(RESULT, TOKENS)
    assert list(dict.fromkeys(rows["row"])) == ["original", "farthest alternative", "seed 1 H2"]
    assert rows[rows["row"] == "farthest alternative"]["weight"].tolist() == [0.8, 0.2]  # the largest feasible JSD
    ci.rows_chart(RESULT, TOKENS).to_dict()
    assert ci.permutation_tvd(RESULT["permutation_tvd"]).to_dict()["layer"][1]["mark"]["type"] == "rule"
