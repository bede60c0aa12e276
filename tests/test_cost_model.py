"""The cost model (lab.cost_model) and what the heavy buttons do with it: an estimate before the click with
nothing stored, and the per-view budget max_view_cpu_s that refuses a view naming cost and cap.
How close the estimates come to measured times is printed by benchmarks/view_estimates.py (speed is
never asserted here)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from apptest_helpers import texts
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

from attncore import make_run
from lab import cost_model
from lab.cost_model import CostModel, eval_steps, fit, step_features
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


def test_a_sweeps_wall_time_is_its_computing_shared_out_or_its_longest_run_times_the_slowdown():
    model = CostModel(np.array([1.0, 0, 0, 0, 0]), (), 0.0)  # one CPU second a step
    runs = [make_run(steps=s) for s in (100, 60, 60, 40)]  # each steps + eval_steps (80) seconds
    seconds = [s + eval_steps(run) for s, run in zip((100, 60, 60, 40), runs, strict=True)]
    assert seconds == [s + 80 for s in (100, 60, 60, 40)]
    assert model.work_seconds(runs) == sum(seconds)
    assert model.wall_seconds(runs, 2) == sum(seconds) / 2  # 340 of computing over two workers
    assert model.wall_seconds(runs, 1) == sum(seconds) and model.wall_seconds([], 2) == 0
    assert model.wall_seconds(runs[:1], 2) == seconds[0]  # one run: its own length, a worker idle
    assert model.wall_seconds(runs, 2, slowdown=1.5) == 1.5 * sum(seconds) / 2
    assert model.wall_seconds(runs, 8) == max(seconds[0], sum(seconds) / 4)  # no more workers than runs


def test_a_part_of_a_sweep_is_never_estimated_above_the_whole():
    """200 random subsets of a random grid, each below its superset (the wall time and the computing)."""
    rng = np.random.default_rng(0)
    model = CostModel(np.array([1e-3, 2e-4, 1e-9, 1e-9, 1e-8]), (), 0.0)
    grid = [
        make_run(steps=int(s), n_layers=int(n), d_model=int(d))
        for s, n, d in zip(
            rng.integers(10, 3000, 40), rng.integers(1, 9, 40), rng.choice([16, 32, 64], 40), strict=True
        )
    ]
    for _ in range(200):
        whole = [grid[i] for i in rng.choice(40, int(rng.integers(2, 40)), replace=False)]
        part = [whole[i] for i in rng.choice(len(whole), int(rng.integers(1, len(whole))), replace=False)]
        for workers in (1, 2, 3):
            assert model.wall_seconds(part, workers) <= model.wall_seconds(whole, workers)
        assert model.work_seconds(part) <= model.work_seconds(whole)


def test_longest_first_deals_the_most_computing_first():
    model = CostModel(np.array([1.0, 0, 0, 0, 0]), (), 0.0)
    runs = [make_run(steps=s) for s in (60, 300, 10, 100)]
    assert [r.train.steps for r in cost_model.longest_first(runs, model)] == [300, 100, 60, 10]


def test_the_slowdown_is_what_the_other_load_leaves_the_workers():
    """Two cores: idle, one worker or two run at their pace; a probe that got half a core (pace 2) means three
    other busy processes, so two workers share the cores with them (5/2); a free core with a load of one
    leaves the second worker half a core."""
    slow = cost_model.slowdown
    assert slow(1, pace=1.0, load=0.0, n_cores=2) == 1.0 and slow(2, pace=1.0, load=0.0, n_cores=2) == 1.0
    assert slow(2, pace=2.0, load=9.0, n_cores=2) == (2 * 2 - 1 + 2) / 2
    assert slow(2, pace=1.0, load=1.0, n_cores=2) == 1.5 and slow(1, pace=1.0, load=1.0, n_cores=2) == 1.0
    assert slow(2, pace=1.0, load=7.0, n_cores=2) == 1.5  # a core was free: at most cores - 1 others
    assert slow(4, pace=1.0, load=0.0, n_cores=2) == 2.0  # more workers than cores share them
    assert 1.0 <= slow(2) < 100  # measured here


@pytest.mark.slow
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


@pytest.mark.slow
def test_home_estimates_the_article_sweep_with_nothing_stored(cache):
    """The reproduce button names a duration before any run exists (it used to say 'no measured
    estimate yet'), from the cost model at the sweep's two workers."""
    at = page("")
    assert not list_cached()
    (label,) = [b.label for b in at.button if b.label.startswith("Reproduce the article")]
    assert re.fullmatch(r"Reproduce the article: train 23 runs, about .+ here, .+ of computing", label), label
    from lab.presets import preset

    computing = duration(cost_model.model(2).work_seconds(preset("article")))  # sweeps.workers() is 2
    assert label.endswith(f", {computing} of computing")


@pytest.mark.slow
def test_a_hosted_view_over_the_budget_is_refused_before_the_click_naming_the_setting_and_the_command(
    cache, monkeypatch
):
    monkeypatch.setenv("ATTNLAB_MAX_VIEW_CPU_S", "5")
    at = page("")
    (button,) = [b for b in at.button if b.label.startswith("Reproduce the article")]
    assert re.search(r"23 runs, about .+ of computing: over this server's 5 s per view", button.label)
    assert button.disabled  # said before the click: no button that looks enabled and then refuses
    message = texts(at.info)
    assert "Training 23 runs here would take about" in message
    assert "more than this server allows for one view (5 s, max_view_cpu_s)" in message
    assert "ATTNLAB_MAX_VIEW_CPU_S or max_view_cpu_s under [limits]" in message
    assert "`python -m attncore sweep --preset article`" in message
    assert not list_cached()  # nothing was trained


def slow_machine(monkeypatch, seconds_per_step: float) -> None:
    """The cost model of a machine that takes this many CPU seconds a step, for every worker count."""
    model = CostModel(np.array([seconds_per_step, 0, 0, 0, 0]), (), 0.0)
    for workers in (1, 2):
        monkeypatch.setitem(cost_model._models, workers, model)


@pytest.mark.slow
def test_a_local_server_trains_what_its_user_asks_for_after_one_confirmation_when_long(cache, monkeypatch):
    """Local means unlimited. The article's 23 runs at 10 s a step (about 50 h of computing here) are
    offered on a local server; above 30 min the button waits for one confirmation."""
    monkeypatch.setenv("ATTNLAB_HOSTED", "0")
    slow_machine(monkeypatch, 10.0)
    at = page("")
    (button,) = [b for b in at.button if b.key == "reproduce"]
    assert "over this server" not in button.label and re.search(r"about .+ here, .+ of computing", button.label)
    assert button.disabled  # until confirmed
    (confirm,) = [c for c in at.checkbox if c.key == "reproduce_confirm"]
    assert confirm.label.startswith("Yes, train for about")
    confirm.check().run()
    (button,) = [b for b in at.button if b.key == "reproduce"]
    assert not button.disabled
    slow_machine(monkeypatch, 1e-3)  # a short sweep: no confirmation
    at = page("")
    assert not [c for c in at.checkbox if c.key == "reproduce_confirm"]
    assert not [b for b in at.button if b.key == "reproduce"][0].disabled


@pytest.mark.slow
def test_a_cap_the_operator_sets_applies_on_a_local_server_too(cache, monkeypatch):
    monkeypatch.setenv("ATTNLAB_HOSTED", "0")
    monkeypatch.setenv("ATTNLAB_MAX_VIEW_CPU_S", "5")
    at = page("")
    (button,) = [b for b in at.button if b.key == "reproduce"]
    assert button.disabled and "over this server's 5 s per view" in button.label
    assert "hosted = 0" not in texts(at.info)  # set on purpose: only the setting itself lifts it


@pytest.mark.slow
def test_a_single_run_over_the_hosted_budget_is_refused_before_its_train_button(cache, monkeypatch):
    monkeypatch.setenv("ATTNLAB_MAX_VIEW_CPU_S", "1")
    at = page("train")
    assert "Training 1 run here would take about" in texts(at.error) and "max_view_cpu_s" in texts(at.error)
    assert not [b for b in at.button if b.label == "Train this configuration"]
    monkeypatch.delenv("ATTNLAB_MAX_VIEW_CPU_S")
    at = page("train")
    assert "Expect about" in texts(at.info) and "Train this configuration" in [b.label for b in at.button]
