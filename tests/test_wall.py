"""Estimates one can plan on (lab.wall): the slowdown of the next minutes from readings of the load kept over
minutes, a range while the load varies, the confirmation of a long sweep decided by its computing, and the time
left of a sweep from its own progress. Simulated load traces and clocks: no wall time is asserted."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from attncore import make_run
from lab import cost_model, wall
from lab.cost_model import CostModel
from lab.formats import duration, duration_span
from lab.jobs import loop

CORES = 2
BURST = 6.0  # six busy processes on two cores: a probe gets 2/7 of a core (pace 3.5), 3.5 * 2 - 1 = 6 cores' worth


def asks(trace, at_seconds, workers=2, every=10.0):
    """The likely slowdown a fresh record gives at each of `at_seconds`, readings taken every `every` seconds
    from `trace(t)` (the busy cores then), as page reloads and sweeps' buttons take them."""
    record, out, t = wall.LoadRecord(), [], 0.0
    for ask in sorted(at_seconds):
        while t <= ask:
            record.add(trace(t), t)
            t += every
        out.append(record.slowdown(workers, CORES, ask))
    return out


def test_two_asks_a_minute_apart_agree_within_30_percent_while_a_noisy_load_holds():
    """Readings of a busy machine swing from one to seven busy cores from one second to the next (each alone
    a slowdown from 1.5 to 4.5); smoothed over minutes, two asks a minute apart agree within 30 %."""
    rng = np.random.default_rng(0)
    readings = rng.choice([1.0, 2.0, 3.0, 5.0, 7.0], size=400)
    trace = lambda t: readings[int(t // 10)]  # noqa: E731
    raw = [cost_model.slowdown_of(trace(t), 2, CORES) for t in (600.0, 660.0, 1200.0, 1260.0, 1800.0, 1860.0)]
    assert max(raw) / min(raw) > 1.3  # this second's reading alone (the old estimate) would not agree
    for start in (600.0, 1200.0, 1800.0, 2400.0):
        first, second = asks(trace, [start, start + 60.0])
        assert second.likely / first.likely < 1.3 and first.likely / second.likely < 1.3, (start, first, second)
        assert first.low <= first.likely <= first.high and first.varies  # the range says the load varies


def test_when_a_burst_of_load_ends_between_two_asks_they_agree_within_1_6_times_and_give_the_range():
    """Ten quiet minutes, ten with six busy processes, then quiet again: asks 30 s before and after the burst
    ends (4 times the computing, then 1 time, read alone) agree within 1.6 times; the second says 1 to 4."""
    trace = lambda t: BURST if 600 <= t < 1200 else 0.0  # noqa: E731
    assert cost_model.slowdown_of(BURST, 2, CORES) / cost_model.slowdown_of(0.0, 2, CORES) == 4.0
    before, after = asks(trace, [1170.0, 1230.0])
    assert before.likely / after.likely < 1.6 and after.likely / before.likely < 1.6, (before, after)
    assert after.varies and after.low == 1.0 and after.high == 4.0
    # while the burst holds, two asks a minute apart agree within 30 %
    first, second = asks(trace, [900.0, 960.0])
    assert 1 / 1.3 < second.likely / first.likely < 1.3
    # asks with nothing read between them (a command run twice): the same
    record = wall.LoadRecord()
    record.add(BURST, 0.0)
    one = record.slowdown(2, CORES, 0.0).likely
    record.add(0.0, 60.0)
    assert one / record.slowdown(2, CORES, 60.0).likely < 1.6


def test_the_record_is_kept_in_the_stores_folder_for_the_next_process(tmp_path, monkeypatch):
    monkeypatch.setattr(wall, "_records", {})
    monkeypatch.setattr(cost_model, "cores", lambda: CORES)
    first = wall.slowdown(2, tmp_path, others=BURST, now=1000.0)
    assert (tmp_path / wall.LOAD_FILE).is_file() and first.likely == 4.0
    monkeypatch.setattr(wall, "_records", {})  # a new process: it reads the file
    second = wall.slowdown(2, tmp_path, others=0.0, now=1060.0)
    assert second.likely > 3.0 and second.low == 1.0 and second.high == 4.0
    (tmp_path / wall.LOAD_FILE).write_text('{"smoothed": "x", "readings": [[1, -5]]}')  # damaged: a fresh record
    monkeypatch.setattr(wall, "_records", {})
    assert wall.slowdown(2, tmp_path, others=0.0, now=1100.0).likely == 1.0
    assert wall.LoadRecord.from_json("not json").smoothed is None


@pytest.mark.parametrize(
    "forged",
    [
        b'{"smoothed": 1e308, "at": 1000.0, "readings": [[1000.0, 1.0]]}',  # more busy cores than any machine has
        b'{"smoothed": 1.0, "at": 1e18, "readings": [[1000.0, 1.0]]}',  # from the far future: it would win forever
        b'{"smoothed": NaN, "at": 1000.0, "readings": []}',
        b'{"smoothed": 1.0, "at": 1000.0, "readings": [[1000.0, Infinity]]}',
        b"\xff\xfe not text",
        b'{"smoothed": 1.0, "at": 1000.0, "readings": [' + b"[1000.0, 1.0]," * 20_000 + b"[1000.0, 1.0]]}",  # too long
    ],
)
def test_a_forged_record_in_a_shared_store_is_not_read(tmp_path, monkeypatch, forged):
    """The record's file is in the store's folder, which other users may write: what it holds is checked before use."""
    monkeypatch.setattr(wall, "_records", {})
    monkeypatch.setattr(cost_model, "cores", lambda: CORES)
    (tmp_path / wall.LOAD_FILE).write_bytes(forged)
    assert wall.record_at(tmp_path).smoothed is None
    assert wall.slowdown(2, tmp_path, others=0.0, now=1100.0).likely == 1.0


def test_a_wall_estimate_gives_a_range_only_while_the_load_varies():
    model = CostModel(np.array([1.0, 0, 0, 0, 0]), (), 0.0)  # one CPU second a step
    runs = [make_run(steps=100, seed=s) for s in range(4)]
    record = wall.LoadRecord()
    record.add(0.0, 0.0)
    steady = record.slowdown(2, CORES, 0.0)
    assert not steady.varies
    record.add(BURST, 60.0)
    busy = record.slowdown(2, CORES, 60.0)
    assert busy.varies and busy.low == 1.0 and busy.high == 4.0
    here = [model.wall_seconds(runs, 2, x) for x in (busy.likely, busy.low, busy.high)]
    w = wall.WallEstimate(*here)
    assert w.varies and re.fullmatch(r"about \d+–\d+ min", wall.about(w)), wall.about(w)
    assert wall.about(wall.WallEstimate(400.0, 400.0, 400.0)) == f"about {duration(400.0)}"


def test_a_range_whose_ends_round_alike_reads_as_one_figure():
    """Home said 'about 2–2 min here': a range of 100 to 140 s rounds to 2 min at both ends."""
    w = wall.WallEstimate(120.0, 100.0, 140.0)
    assert w.varies and wall.about(w) == "about 2 min"
    assert duration_span(40.2, 40.4) == "40 s" and duration_span(3 * 3600 - 60, 3 * 3600 + 60) == "3.0 h"
    assert wall.about(wall.WallEstimate(120.0, 100.0, 200.0)) == "about 2–3 min"  # a real range stays one


def test_the_time_left_comes_from_the_estimate_then_from_the_sweeps_own_pace():
    # before a few runs have finished: the estimate less the time elapsed, or the pace once it has run out
    assert wall.time_left(600.0, 100.0, 1, 10.0, 100.0) == 500.0
    assert wall.time_left(600.0, 700.0, 2, 50.0, 100.0) == 700.0
    assert wall.time_left(None, 0.0, 0, 0.0, 100.0) is None
    # after: the rest of the work at the pace so far (40 of 100 units in 400 s: 60 more take 600 s)
    assert wall.time_left(60.0, 400.0, 3, 40.0, 100.0) == 600.0


def test_a_sweeps_time_left_weighs_its_runs_by_their_computing_not_their_steps(monkeypatch):
    """Four 8-block runs dealt first and finished in 400 s, eight 1-block runs of the same steps to go: the time
    left is the 1-block runs' computing at the pace the sweep kept, not their steps at the deep runs' pace (which
    overshot several times over)."""
    model = CostModel(np.array([0.0, 1.0, 0, 0, 0]), (), 0.0)  # a second per block per step
    deep = [make_run(n_layers=8, steps=100, seed=s) for s in range(4)]
    shallow = [make_run(n_layers=1, steps=100, seed=s) for s in range(8)]
    runs = deep + shallow
    s = loop.Sweep(cached=0, runs=runs, costs={r: model.run_seconds(r) for r in runs})
    s.done = {r: None for r in deep}
    s.started, s.first_step_at = 1000.0, 1001.0
    monkeypatch.setattr(loop.time, "monotonic", lambda: 1400.0)
    fraction, text = loop.progress_text("Depth", s, estimate_s=5000.0)
    done, rest = sum(map(model.run_seconds, deep)), sum(map(model.run_seconds, shallow))
    assert f"about {duration(rest * 400.0 / done)} left" in text, text
    assert duration(rest * 400.0 / done) != duration(8 * 100 / (4 * 100 / 400.0))  # what the steps' pace says
    assert fraction == pytest.approx(done / (done + rest))


def test_the_command_lines_progress_bar_weighs_the_runs_by_their_computing():
    from cli.sweep import ProgressBar

    bar = ProgressBar(stream=io.StringIO(), estimate=100.0, costs=[8.0, 8.0, 8.0, 1.0, 1.0, 1.0])
    assert bar.left(1, 6, 30.0) == 70.0  # one run finished: the estimate less the time elapsed
    assert bar.left(3, 6, 240.0) == pytest.approx(3.0 * 240.0 / 24.0)  # the rest of the computing at the pace kept
    assert ProgressBar(stream=io.StringIO()).left(3, 6, 300.0) == 300.0  # without costs, runs counted alike


@pytest.mark.slow
def test_the_confirmation_of_a_long_sweep_does_not_move_with_the_load(cache, monkeypatch):
    """The checkbox before a long sweep is decided by the computing: an idle and a very busy machine (its wall
    estimate 20 times longer) ask for it alike, above the threshold and not below."""
    from test_cost_model import page, slow_machine

    from lab.presets import preset
    from ui import sweeps

    monkeypatch.setenv("ATTNLAB_HOSTED", "0")
    article = 23  # runs of Home's Reproduce the article
    for busy in (0.0, 40.0):
        monkeypatch.setattr(wall, "_records", {})
        monkeypatch.setattr(cost_model, "busy_cores", lambda busy=busy: busy)
        for over, expected in ((3.0, True), (0.2, False)):
            # a machine on which the article's runs take `over` times the threshold in computing
            steps = sum(r.train.steps + cost_model.eval_steps(r) for r in preset("article"))
            slow_machine(monkeypatch, over * sweeps.CONFIRM_COMPUTING_SECONDS / steps)
            at = page("")
            asked = [c for c in at.checkbox if c.key == "reproduce_confirm"]
            assert bool(asked) == expected, (busy, over)
            (button,) = [b for b in at.button if b.key == "reproduce"]
            assert button.disabled == expected and f"train {article} runs" in button.label


@pytest.mark.slow
def test_the_command_lines_estimate_says_the_same_as_the_buttons(tmp_path, monkeypatch, capsys):
    """`regimes ... --estimate` reads the record in the store's folder and gives the range while the load varies,
    the words a button would use (lab.wall.about)."""
    import time

    from cli.main import main
    from lab.experiments import regimes

    monkeypatch.setenv("ATTNCORE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(wall, "_records", {})
    monkeypatch.setattr(cost_model, "busy_cores", lambda: 0.0)
    wall.slowdown(2, tmp_path, others=BURST, now=time.time() - 60)  # a burst read a minute ago, by another process
    monkeypatch.setattr(wall, "_records", {})
    assert main(["regimes", "lr", "--lrs", "1e-3", "1e-2", "--seeds", "2", "--jobs", "2", "--estimate"]) == 0
    line = capsys.readouterr().out.strip()
    runs = regimes.all_runs(regimes.cells_of("lr", range(2), lrs=(1e-3, 1e-2)))
    here = wall.estimate(cost_model.model(2), runs, 2, tmp_path)  # the range is the same a moment later
    assert here.varies and f": {wall.about(here)} here, " in line, line
