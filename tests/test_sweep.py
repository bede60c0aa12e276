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


def test_article_preset_is_the_articles_23_runs():
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


LEAKING_SWEEP = """
import lab.sweep  # the sweep's warning format, as in every process that runs a sweep
from joblib import Parallel, delayed, parallel_config


def every_worker_leaks():  # loky's guard at a byte instead of 300 MB: each worker is replaced after a task
    from joblib.externals.loky import process_executor

    process_executor._MAX_MEMORY_LEAK_SIZE = 1


def task(i):
    import sys, time

    sys.__dict__.setdefault("_kept", []).append(bytearray(2**22))  # 4 MB kept: the worker grew
    time.sleep(1.2)  # loky looks at a worker's memory at most once a second
    return i


with parallel_config(backend="loky", initializer=every_worker_leaks):
    print(sorted(Parallel(n_jobs=2)(delayed(task)(i) for i in range(6))))
"""


@pytest.mark.slow
def test_a_worker_loky_replaces_is_one_plain_warning_line():
    """Regression: during `regimes` loky's UserWarning reached stderr in Python's two-line format (a file path and
    the source line `warnings.warn(`) when it replaced a worker grown past its guard; now one 'warning: ...' line."""
    done = subprocess.run(
        [sys.executable, "-c", LEAKING_SWEEP], cwd=REPO, capture_output=True, text=True, timeout=120,
        env=os.environ | {"PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout == "[0, 1, 2, 3, 4, 5]\n", done.stderr
    lines = done.stderr.splitlines()
    assert lines and all(line.startswith("warning: a worker process was replaced") for line in lines), done.stderr
    assert "process_executor.py" not in done.stderr and "UserWarning" not in done.stderr


def test_other_warnings_keep_pythons_format():
    import warnings

    text = warnings.formatwarning("something else", UserWarning, "/x/y.py", 3)
    assert text.startswith("/x/y.py:3: UserWarning: something else")


@pytest.mark.slow
def test_a_sweep_worker_gives_the_freed_heap_back_after_a_run():
    """What made loky replace workers in `regimes heads --heads 4` (+359 MB after the d_k = 128 runs): the heap the
    training keeps for reuse (attncore._malloc) stayed with the worker after its run."""
    script = """
import numpy as np, psutil
from attncore._malloc import keep_freed_memory, release_freed_memory
if keep_freed_memory():
    process = psutil.Process()
    before = process.memory_info().rss
    arrays = [np.ones(2**17) for _ in range(100)]  # 100 MB from the heap, as a training's temporaries
    del arrays
    held = process.memory_info().rss
    release_freed_memory()
    print((held - before) >> 20, (held - process.memory_info().rss) >> 20)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env=os.environ | {"PYTHONPATH": str(REPO)})  # fmt: skip
    assert done.returncode == 0, done.stderr
    if not done.stdout:
        pytest.skip("not glibc: nothing to trim")
    held, released = map(int, done.stdout.split())
    assert held >= 90 and released >= 90, done.stdout  # kept after the free, given back by the trim


def test_a_sweep_worker_trims_the_heap_after_each_run(cache, monkeypatch):
    trims = []
    monkeypatch.setattr(sweep, "release_freed_memory", lambda: trims.append(1))
    _, record, trained = sweep._sweep_one(0, make_run(steps=5), str(cache))
    assert trained and record.config == make_run(steps=5) and trims == [1]


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
    assert tables.variant_name(make_run("copy", 6, 0, position="rope"), base) == "RoPE position"  # as the label
    assert tables.variant_name(make_run("copy", 6, 0, lr=1.5e-3), base) == "pre-LN, lr 1.5e-3"
    assert tables.variant_name(make_run("copy", 6, 0, d_model=64, steps=300), base) == "d 64, d_k 16, 300 steps"


# --- command line ----------------------------------------------------------------


@pytest.mark.slow
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


@pytest.mark.slow
def test_cli_does_not_load_joblib_or_pandas_until_needed():
    code = "import sys; from cli.main import build_parser; build_parser(); "
    code += "print(sorted({'joblib', 'pandas'} & set(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], env=os.environ | {"PYTHONPATH": str(REPO)}, capture_output=True, text=True
    )
    assert out.stdout.strip() == "[]", out.stderr
