"""Sweeps (presets, grids, parallel and Dask runs, resume after a kill), the results tables and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from attncore.config import ConfigError, make_run
from attncore.evaluate import EvalResult
from cli.main import main
from lab import presets, store, sweep, tables

REPO = Path(__file__).resolve().parents[1]


def assert_same_record(a: store.RunRecord, b: store.RunRecord) -> None:
    assert a.config == b.config
    assert np.array_equal(a.loss_history, b.loss_history)
    assert all(np.array_equal(a.params[k], b.params[k]) for k in a.params)
    assert np.array_equal(a.probe_attention, b.probe_attention)
    assert a.eval.token_accuracy == b.eval.token_accuracy
    assert a.eval.sequence_accuracy == b.eval.sequence_accuracy


# --- presets and grids ---------------------------------------------------------


def test_article_preset_is_the_23_runs_of_the_spec():
    runs = presets.preset("article")
    assert len(runs) == len(set(runs)) == 23
    baseline = ("learned", "pre", True, 3e-3)
    grid_runs = [r for r in runs if (r.model.position, r.model.norm, r.model.scaling, r.train.lr) == baseline]
    assert sorted((r.task.name, r.task.length, r.train.seed) for r in grid_runs) == sorted(
        (t, L, s) for t in ("copy", "sort") for L in (4, 6, 8) for s in (0, 1, 2)
    )
    assert all(
        r.train.steps == 1500 and r.model.d_model == 32 and r.model.max_len == 2 * r.task.length + 1 for r in runs
    )
    base = make_run("copy", 6, 0)
    names = [tables.variant_name(r, base) for r in runs if r not in grid_runs]
    assert names == ["no scaling", "no position", "post-LN", "pre-LN, lr 1e-2", "post-LN, lr 1e-2"]
    assert set(presets.PRESETS) >= {"article"}
    for name in presets.PRESETS:
        assert presets.preset(name)
    with pytest.raises(ConfigError) as e:
        presets.preset("articel")
    assert e.value.field == "preset"


def test_grid_is_the_product_with_seeds_fastest():
    runs = presets.grid(["copy", "sort"], [4, 6], [0, 1, 1], ["learned"], ["pre", "post"], [3e-3], steps=30)
    assert len(runs) == 2 * 2 * 2 * 2  # the repeated seed counts once
    assert [(r.task.name, r.task.length, r.model.norm, r.train.seed) for r in runs[:3]] == [
        ("copy", 4, "pre", 0),
        ("copy", 4, "pre", 1),
        ("copy", 4, "post", 0),
    ]
    assert all(r.train.steps == 30 for r in runs)
    with pytest.raises(ConfigError):
        presets.grid(["copy"], [6], [0], ["learned"], ["sideways"], [3e-3])


# --- running sweeps --------------------------------------------------------------


def test_parallel_sweep_returns_records_in_input_order_and_reports_progress(cache):
    runs = presets.grid(["copy", "sort"], [4], [0, 1], steps=30)[::-1]
    calls = []
    records = sweep.run_sweep(runs + runs[:1], n_jobs=2, progress=lambda done, total: calls.append((done, total)))
    assert [r.config for r in records] == runs + runs[:1]
    assert calls == [(k, 4) for k in range(1, 5)]
    assert all(store.is_cached(r) for r in runs)
    # workers computed exactly what one process computes
    assert_same_record(records[0], store.compute_run(runs[0]))
    assert records[-1] is records[0]


SWEEPER = """
import sys
from attncore.config import make_run
from lab.presets import grid
from lab.sweep import run_sweep

run_sweep(grid(["copy"], [4], range(6), steps=int(sys.argv[1])), n_jobs=1)
"""


def test_killed_sweep_resumes_without_recomputing_finished_runs(cache, tmp_path, monkeypatch):
    steps = 150
    runs = presets.grid(["copy"], [4], range(6), steps=steps)
    env = os.environ | {"PYTHONPATH": str(REPO), store.ENV_VAR: str(cache)}
    proc = subprocess.Popen([sys.executable, "-c", SWEEPER, str(steps)], env=env)
    deadline = time.monotonic() + 60
    while sum(store.is_cached(r) for r in runs) < 2:
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    proc.kill()
    proc.wait()
    finished = [r for r in runs if store.is_cached(r)]
    assert 2 <= len(finished) < len(runs)
    stamps = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (cache / "joblib").rglob("record.npz")}
    assert len(stamps) == len(finished)

    computed = []
    compute_run = store.compute_run
    monkeypatch.setattr(store, "compute_run", lambda run, cb=None: computed.append(run) or compute_run(run, cb))
    records = sweep.run_sweep(runs, n_jobs=1)
    assert computed == [r for r in runs if r not in finished]
    assert [r.config for r in records] == runs
    assert all(path.stat().st_ino == ino and path.stat().st_mtime_ns == mtime for path, (ino, mtime) in stamps.items())


def test_dask_sweep_is_bit_identical_to_the_local_one(tmp_path):
    distributed = pytest.importorskip("distributed")
    runs = presets.grid(["copy", "sort"], [4], [0], ["learned", "rope"], steps=30)
    local = sweep.run_sweep(runs, n_jobs=2, location=tmp_path / "local")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, host="127.0.0.1", processes=True, dashboard_address=None
    ) as cluster:
        remote = sweep.run_sweep(runs, backend="dask", scheduler=cluster.scheduler_address, location=tmp_path / "dask")
    for a, b in zip(local, remote, strict=True):
        assert_same_record(a, b)
    assert all(store.is_cached(r, location=tmp_path / "dask") for r in runs)  # the workers wrote to the store
    with pytest.raises(ConfigError) as e:
        sweep.run_sweep(runs, backend="dask")
    assert e.value.field == "scheduler"


# --- tables ----------------------------------------------------------------------


def fake_record(run, token, sequence, loss=0.1, test_loss=None) -> store.RunRecord:
    """A record with made-up numbers and no weights; the test loss `test_loss` (default: loss, plus 0.05)."""
    ev = EvalResult(token, sequence, sequence, 250, sequence, 250, 0.01)
    held_out = loss + 0.05 if test_loss is None else test_loss
    return store.RunRecord(
        run, np.array([1.0, loss]), loss, ev, 1.0, 27253, np.zeros(12), np.zeros((2, 4, 12, 12)), {}, test_loss=held_out
    )


def test_accuracy_table_is_mean_and_min_over_seeds_without_the_ablations():
    records = [
        fake_record(r, token=0.9 + 0.01 * r.train.seed + 0.001 * r.task.length, sequence=0.5 + 0.1 * r.train.seed)
        for r in presets.preset("article")
    ]
    table = tables.accuracy_table(records)
    assert list(table[["task", "length"]].itertuples(index=False, name=None)) == [
        (t, L) for t in ("copy", "sort") for L in (4, 6, 8)
    ]
    row = table[(table.task == "sort") & (table.length == 6)].iloc[0]
    assert row.seeds == 3
    assert row.token_accuracy_mean == pytest.approx(0.9 + 0.01 + 0.006)
    assert row.token_accuracy_min == pytest.approx(0.906)
    assert row.sequence_accuracy_mean == pytest.approx(0.6)
    assert row.sequence_accuracy_min == pytest.approx(0.5)
    # the ablations (all seed 0) would pull copy L=6 towards seed 0's values if they were counted
    copy6 = table[(table.task == "copy") & (table.length == 6)].iloc[0]
    assert copy6.sequence_accuracy_mean == pytest.approx(0.6)
    # summaries (what list_cached returns) give the same tables as records
    summaries = [r.summary() for r in records]
    assert tables.accuracy_table(summaries).equals(table)
    assert tables.runs_frame(summaries).equals(tables.runs_frame(records))


def test_ablation_table_names_variants_and_differences_to_full(tmp_path):
    runs = presets.preset("article")
    records = [fake_record(r, 1.0, 1.0, loss=0.001) for r in runs]
    no_position = runs.index(make_run("copy", 6, 0, position="none"))
    records[no_position] = fake_record(runs[no_position], 0.656, 0.204, loss=0.7342)
    table = tables.ablation_table(records)
    assert list(table.variant) == [
        "full",
        "no scaling",
        "no position",
        "post-LN",
        "pre-LN, lr 1e-2",
        "post-LN, lr 1e-2",
    ]
    row = table.set_index("variant").loc["no position"]
    assert row.sequence_accuracy == 0.204
    assert row.sequence_accuracy_diff == pytest.approx(0.204 - 1.0)
    assert row.test_loss_diff == pytest.approx(0.7342 - 0.001)  # the held-out loss, not the last batch's
    assert row.test_loss == pytest.approx(0.7342 + 0.05) and "final_loss" not in table
    assert (table.set_index("variant").drop("no position").sequence_accuracy_diff == 0).all()
    frame = tables.runs_frame(records)
    assert len(frame) == 23 and {"task", "length", "seed", "position", "norm", "lr", "token_accuracy"} <= set(frame)
    frame.to_csv(tmp_path / "runs.csv", index=False)
    assert len((tmp_path / "runs.csv").read_text().splitlines()) == 24


def test_variant_names():
    base = make_run("copy", 6, 0)
    assert tables.variant_name(base, base) == "full"
    assert (
        tables.variant_name(make_run("copy", 6, 0, scaling=False, position="none"), base) == "no scaling, no position"
    )
    assert tables.variant_name(make_run("copy", 6, 0, position="rope"), base) == "rope position"
    assert tables.variant_name(make_run("copy", 6, 0, lr=1.5e-3), base) == "pre-LN, lr 1.5e-3"
    assert tables.variant_name(make_run("copy", 6, 0, d_model=64, steps=300), base) == "d 64, d_k 16, 300 steps"


# --- command line ----------------------------------------------------------------


def test_sweep_command_prints_json_tables_and_manages_the_cache(cache, capsys):
    args = ["sweep", "--task", "copy", "--length", "4", "--seed", "0", "1", "--position", "learned", "none"]
    args += ["--steps", "30", "--jobs", "2"]
    assert main(args + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out) == 4
    record = store.get_run(make_run("copy", 4, 1, steps=30, position="none"))
    expected = record.summary() | {"cached": False, "loss_history": record.loss_history.tolist()}
    assert out[3] == expected  # same keys as train --json
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "Accuracy by task and L" in captured.out and "no position" in captured.out
    assert "4/4 runs" in captured.err
    assert main(["cache", "list"]) == 0
    assert "4 runs" in capsys.readouterr().out
    assert main(["cache", "clear"]) == 0
    assert "removed 4 runs" in capsys.readouterr().out
    assert store.list_cached() == []
    assert main(["sweep", "--preset", "nope"]) == 2
    assert main(["sweep", "--preset", "article", "--task", "sort"]) == 2
    assert "preset" in capsys.readouterr().err


def test_cli_does_not_load_joblib_or_pandas_until_needed():
    code = "import sys; from cli.main import build_parser; build_parser(); "
    code += "print(sorted({'joblib', 'pandas'} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], env=os.environ | {"PYTHONPATH": str(REPO)}, capture_output=True, text=True
    )
    assert out.stdout.strip() == "[]", out.stderr
