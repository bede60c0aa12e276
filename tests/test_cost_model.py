"""The cost model (lab.cost_model) and what the heavy buttons do with it: an estimate before the click with
nothing stored (issue 29.5), and the per-view budget max_view_cpu_s that refuses a view naming cost and cap
(issue 30.2). How close the estimates come to measured times is printed by benchmarks/view_estimates.py (speed is
never asserted here)."""

from __future__ import annotations

import re

import numpy as np
from apptest_helpers import texts
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

from attncore import make_run
from lab import cost_model
from lab.cost_model import EVAL_STEPS, CostModel, fit, step_features
from lab.formats import duration
from lab.store import list_cached


def test_a_steps_features_grow_linearly_with_depth():
    """Every block past the first adds the same work (the cost is linear in depth); the fixed term stays 1."""
    two, four, eight = (step_features(make_run(n_layers=n)) for n in (2, 4, 8))
    assert two[0] == four[0] == eight[0] == 1.0
    assert np.allclose(eight - four, 2 * (four - two)) and ((four - two)[1:] > 0).all()


def test_the_last_block_counts_its_answer_rows_only():
    """Past Q, K and V the last block computes the L answer rows, not all 2L positions (attncore.model)."""
    run, deeper = make_run(n_layers=1), make_run(n_layers=2)
    B, T, L, d, f = 32, 12, 6, 32, 128
    added = step_features(deeper) - step_features(run)  # one more full block
    assert added[2] == B * T * (3 * d * d + d * d + 2 * d * f) and added[3] == B * T * T * d
    last = step_features(run)[2] - B * L * d * 21  # the one block, the unembedding taken out
    assert last == B * (T * 3 * d * d + L * (d * d + 2 * d * f))


def test_a_range_trained_run_costs_its_lengths_on_average():
    ranged = step_features(make_run(length=8, train_min=1))
    each = [step_features(make_run(length=n)) for n in range(1, 9)]
    assert np.allclose(ranged, np.mean(each, axis=0))


def test_the_fit_recovers_known_coefficients_and_drops_a_negative_one():
    rng = np.random.default_rng(0)
    features = np.column_stack([np.ones(8), rng.uniform(1, 10, 8), rng.uniform(1e5, 1e7, 8)])
    truth = np.array([1e-3, 2e-4, 3e-9])
    assert np.allclose(fit(features, features @ truth), truth, rtol=1e-9)
    # seconds that need a negative weight on the last feature: it is dropped, the others stay non-negative
    seconds = features[:, :2] @ truth[:2] - 1e-10 * features[:, 2] + 1e-4
    c = fit(features, seconds)
    assert c[2] == 0 and (c >= 0).all()


def test_a_sweeps_wall_time_is_its_runs_dealt_to_the_first_free_worker():
    model = CostModel(np.array([1.0, 0, 0, 0, 0]), (), 0.0)  # one second a step
    runs = [make_run(steps=s) for s in (100, 60, 60, 40)]  # each steps + EVAL_STEPS seconds
    seconds = [s + EVAL_STEPS for s in (100, 60, 60, 40)]
    assert model.work_seconds(runs) == sum(seconds)
    # two workers: 140 | 100, then the third (100) goes to the one free at 100, the fourth to the one at 140
    assert model.wall_seconds(runs, 2) == max(seconds[0] + seconds[3], seconds[1] + seconds[2])
    assert model.wall_seconds(runs, 1) == sum(seconds) and model.wall_seconds([], 2) == 0


def test_the_calibrated_model_is_positive_and_grows_with_steps_depth_width_and_batch():
    model = cost_model.model()
    assert (model.coefficients >= 0).all() and model.coefficients.any()
    assert len(model.probe_seconds) == len(cost_model.PROBES) and min(model.probe_seconds) > 0
    base = model.run_seconds(make_run())
    assert base > 0
    for bigger in (dict(steps=3000), dict(n_layers=8), dict(d_model=256), dict(batch_size=128), dict(length=12)):
        assert model.run_seconds(make_run(**bigger)) > base, bigger


def page(url_path: str) -> AppTest:
    """The dashboard opened at one page, as a browser's first request (as tests/test_urls.py does)."""
    at = AppTest.from_file("../dashboard.py", default_timeout=120)
    at._page_hash = calc_hash(url_path) if url_path else ""
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_home_estimates_the_article_sweep_with_nothing_stored(cache):
    """Issue 29.5: the reproduce button names a duration before any run exists (it used to say 'no measured
    estimate yet'), from the cost model at the sweep's two workers."""
    at = page("")
    assert not list_cached()
    (label,) = [b.label for b in at.button if b.label.startswith("Reproduce the article")]
    assert re.fullmatch(r"Reproduce the article: train 23 runs, about .+ here", label), label
    from lab.presets import preset

    assert duration(cost_model.model(2).wall_seconds(preset("article"), 2)) in label  # sweeps.workers() is 2


def test_a_view_over_the_budget_is_refused_naming_its_cost_and_the_cap(cache, monkeypatch):
    monkeypatch.setenv("ATTNLAB_MAX_VIEW_CPU_S", "60")
    at = page("")
    (button,) = [b for b in at.button if b.label.startswith("Reproduce the article")]
    assert re.search(r"23 runs, about .+ of computing: over this server's 60 s per view", button.label)
    button.click().run()
    message = texts(at.error)
    assert "Training 23 runs here would take about" in message
    assert "more than this server allows for one view (60 s, max_view_cpu_s)" in message
    assert not list_cached()  # nothing was trained


def test_a_single_run_over_the_budget_is_refused_before_its_train_button(cache, monkeypatch):
    monkeypatch.setenv("ATTNLAB_MAX_VIEW_CPU_S", "1")
    at = page("train")
    assert "Training 1 run here would take about" in texts(at.error) and "max_view_cpu_s" in texts(at.error)
    assert not [b for b in at.button if b.label == "Train this configuration"]
    monkeypatch.delenv("ATTNLAB_MAX_VIEW_CPU_S")
    at = page("train")
    assert "Expect about" in texts(at.info) and "Train this configuration" in [b.label for b in at.button]
