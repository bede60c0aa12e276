"""The cost model's probe costs kept per machine in the store's folder (lab.cost_model.saved_model): a later
process reads them instead of timing the probes again (what made each `--estimate` take 15-18 s on a busy machine),
a calibration taken busy is timed again once the machine is quiet (each probe keeping its least cost), and a bad
file is read as none. Speed itself is printed by benchmarks/estimate_time.py, never asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab import cost_model

REPO = Path(__file__).resolve().parents[1]
N = len(cost_model.PROBES)


@pytest.fixture
def timed(monkeypatch):
    """calibrate() replaced by a count of its calls, answering costs given by the test (1 ms a probe by default)."""
    calls, costs = [], [1e-3] * N

    def calibrate(workers=1):
        calls.append(workers)
        return cost_model.from_probe_seconds(list(costs), 0.1)

    monkeypatch.setattr(cost_model, "calibrate", calibrate)
    monkeypatch.setattr(cost_model, "_models", {})
    return calls, costs


def kept(folder: Path) -> dict:
    return json.loads((folder / cost_model.CALIBRATION_FILE).read_text())


def test_a_calibration_is_kept_and_read_by_the_next_process(tmp_path, timed):
    calls, _ = timed
    first = cost_model.saved_model(2, tmp_path, busy=0.0)
    assert calls == [2] and list(kept(tmp_path).values())[0]["probe_seconds"] == [1e-3] * N
    again = cost_model.saved_model(2, tmp_path, busy=3.0)  # a later process, a busy moment: read, not timed
    assert calls == [2] and again.probe_seconds == first.probe_seconds
    assert (again.coefficients == first.coefficients).all()
    cost_model.saved_model(1, tmp_path, busy=0.0)  # another number of workers is another calibration
    assert calls == [2, 1] and len(kept(tmp_path)) == 2


def test_a_busy_calibration_is_timed_again_when_quiet_keeping_each_probes_least(tmp_path, timed):
    calls, costs = timed
    costs[:] = [2e-3] * N
    cost_model.saved_model(1, tmp_path, busy=3.0)  # taken while three cores were busy with other work
    cost_model.saved_model(1, tmp_path, busy=2.0)  # still busy: the kept costs stand
    assert calls == [1]
    costs[:] = [1e-3] * (N - 1) + [5e-3]  # quiet: cheaper, but for the last probe
    quiet = cost_model.saved_model(1, tmp_path, busy=0.0)
    assert calls == [1, 1] and quiet.probe_seconds == (1e-3,) * (N - 1) + (2e-3,)
    cost_model.saved_model(1, tmp_path, busy=0.0)  # a quiet calibration is read from now on
    assert calls == [1, 1]


@pytest.mark.parametrize(
    "content",
    [b"not json", b"[1, 2]", b'{"k": {"probe_seconds": [1], "busy": 0}}', b"{" + b" " * (70 * 1024) + b"}",
     b'{"k": {"probe_seconds": [NaN, 1, 1, 1, 1, 1, 1, 1], "busy": 0}}'],
    ids=["garbage", "a list", "too few probes", "oversized", "nan"],
)  # fmt: skip
def test_a_bad_file_in_a_shared_store_reads_as_none(tmp_path, timed, content):
    calls, _ = timed
    (tmp_path / cost_model.CALIBRATION_FILE).write_bytes(content)
    model = cost_model.saved_model(1, tmp_path, busy=0.0)
    assert calls == [1] and model.probe_seconds == (1e-3,) * N


def test_model_reads_the_stores_calibration_once_per_process(tmp_path, timed):
    calls, _ = timed
    cost_model.saved_model(1, tmp_path, busy=0.0)
    cost_model._models.clear()
    assert cost_model.model(1, tmp_path).probe_seconds == (1e-3,) * N and calls == [1]
    assert cost_model.calibrated(1)


@pytest.mark.slow
def test_the_command_lines_estimate_uses_the_kept_calibration(tmp_path):
    """`regimes depth --estimate --json` in a process of its own, on a store holding made-up probe costs for this
    machine: its computing is the one those costs give (a calibration here would have timed other costs)."""
    from lab.experiments import regimes

    made_up = [0.5e-3, 2e-3, 7e-3, 4e-3, 8e-3, 6e-3, 3e-3, 11e-3]
    entries = {cost_model.machine_key(w): {"probe_seconds": made_up, "busy": 0.0} for w in range(1, 9)}
    (tmp_path / cost_model.CALIBRATION_FILE).write_text(json.dumps(entries))
    env = dict(os.environ, ATTNCORE_CACHE_DIR=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-m", "attncore", "regimes", "depth", "--seeds", "2", "--estimate", "--json"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=True,
    )  # fmt: skip
    said = json.loads(out.stdout)
    runs = regimes.all_runs(regimes.cells_of("depth", range(2)))
    assert said["runs"] == len(runs) == said["missing"]
    assert said["cpu_seconds"] == round(cost_model.from_probe_seconds(made_up).work_seconds(runs), 1)
    assert json.loads((tmp_path / cost_model.CALIBRATION_FILE).read_text()) == entries  # read, not timed again
