"""The KV-cache page's engine fit with pipeline stages, the TP x PP grid and the decode bound (ui/plan_grid.py):
AppTests of the page and the grid's pure frame functions."""

from __future__ import annotations

import pytest
from apptest_helpers import page, texts

from serving import engine, plan
from serving.presets import CARDS, get_preset
from ui import plan_grid

L70 = dict(kv_mode="vllm", kv_preset="llama-3-70b", kv_e_gpu="l4", kv_e_len="4096", kv_context="4096")


def test_the_grid_frame_has_a_verdict_per_cell_and_the_chosen_cell_is_highlighted():
    a = get_preset("llama-3-70b").arch
    cells = plan.plan_grid(a, CARDS["l4"].total_gib, engine.EngineSettings(max_model_len=4096), gpu="l4")
    frame = plan_grid.grid_frame(cells)
    assert frame.loc["TP 1", "PP 1"] == "no: weights" and frame.loc["TP 8", "PP 1"].startswith("fits")
    assert frame.loc["TP 8", "PP 8"] == ""  # 64 GPUs: outside an 8-GPU grid
    html = plan_grid.highlight(frame, 2, 4).to_html()
    assert html.count("border: 2px solid #333") == 1


@pytest.mark.slow
def test_the_page_shows_stages_the_grid_and_the_bound_at_its_link():
    at = page("kv_cache", **L70, kv_e_pp="8", kv_batch="8")
    assert not at.exception  # the fit above it, one GPU holding all 80 layers, does not start: its error box
    stages = at.dataframe[0].value
    assert list(stages["layers"]) == [f"{10 * i}-{10 * i + 9}" for i in range(8)]
    said = texts(at.caption)
    fewest = min(stages["blocks"])
    assert "every worker keeps the fewest blocks" in said and f"{fewest:,} blocks" in said
    assert "the chosen cell: TP 1 × PP 8: fits" in said
    assert "Decode bound at batch 8, context 4,096: at most" in said and "a bound" in said


@pytest.mark.slow
def test_at_its_defaults_the_engine_fit_shows_the_grid_with_one_gpu_chosen_and_the_bound():
    at = page("kv_cache", kv_mode="vllm")  # Llama 3 8B on an H100, max_model_len 8,192, batch 1
    assert not at.exception and not at.error
    said = texts(at.caption)
    assert "Highlighted, the chosen cell: TP 1 × PP 1: fits" in said
    assert "Decode bound at batch 1, context 8,192: at most" in said and "3,350 GB/s datasheet bandwidth" in said
