"""The run store: keys, hits, content, listing, corruption and two processes racing for one run."""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from attncore.config import make_run
from attncore.model import count_params, param_shapes
from attncore.snapshots import snapshot_steps
from lab import store
from lab.store import backend as entries

REPO = Path(__file__).resolve().parents[1]
STEPS = 50


def counting():
    steps = []
    return steps, lambda step, loss: steps.append(step)


def assert_same_record(a: store.RunRecord, b: store.RunRecord) -> None:
    assert a.config == b.config
    assert np.array_equal(a.loss_history, b.loss_history)
    assert a.params.keys() == b.params.keys()
    assert all(np.array_equal(a.params[k], b.params[k]) for k in a.params)
    assert np.array_equal(a.probe_attention, b.probe_attention)
    assert (a.eval.token_accuracy, a.eval.sequence_accuracy) == (b.eval.token_accuracy, b.eval.sequence_accuracy)
    assert [s.summary() for s in a.snapshots] == [s.summary() for s in b.snapshots]
    assert all(
        np.array_equal(s.probe_attention, t.probe_attention) for s, t in zip(a.snapshots, b.snapshots, strict=True)
    )
    assert a.norms == b.norms  # the snapshots' norms, None in both for a record stored before them


def subprocess_env(cache: Path) -> dict:
    return os.environ | {"PYTHONPATH": str(REPO), store.ENV_VAR: str(cache)}


def test_cache_dir_reads_the_environment_at_call_time(monkeypatch, tmp_path):
    monkeypatch.delenv(store.ENV_VAR, raising=False)
    assert store.cache_dir() == REPO / "cache"
    monkeypatch.setenv(store.ENV_VAR, str(tmp_path))
    assert store.cache_dir() == tmp_path


def test_second_call_is_served_from_the_cache_without_training(cache):
    run = make_run(steps=STEPS)
    assert not store.is_cached(run)
    steps, callback = counting()
    first = store.get_run(run, callback)
    assert steps == list(range(STEPS))
    assert store.is_cached(run)
    steps.clear()
    second = store.get_run(run, callback)
    assert steps == []
    assert_same_record(first, second)
    assert (cache / "joblib").is_dir()


def test_record_holds_what_the_pages_need(cache):
    run = make_run("sort", 4, 1, steps=STEPS)
    record = store.get_run(run)
    assert record.loss_history.shape == (STEPS,)
    assert record.final_loss == record.loss_history[-1]
    assert record.params.keys() == param_shapes(run.model).keys()
    assert record.n_params == count_params(run.model)
    assert record.probe_tokens.shape == (2 * 4,)
    assert record.probe_attention.shape == (2, 4, 8, 8)
    np.testing.assert_allclose(record.probe_attention.sum(axis=-1), 1.0, rtol=1e-5)
    assert [s.step for s in record.snapshots] == snapshot_steps(STEPS)  # stored, read back from the .npz
    assert record.snapshots[-1].probe_attention.shape == (2, 4, 8, 8)
    assert np.array_equal(record.snapshots[-1].probe_attention, record.probe_attention)  # the last is the final
    assert record.eval.n_distinct + record.eval.n_repeated == 500
    # the store adds nothing to the numbers: the same as computing without it
    assert_same_record(record, store.compute_run(run))
    summary = record.summary()
    assert "loss_history" not in summary
    assert json.loads(json.dumps(summary)) == summary
    assert summary["config"] == run.to_dict()
    assert summary["sequence_accuracy"] == record.eval.sequence_accuracy
    assert len(pickle.dumps(record)) < 300_000  # the weights dominate: 27k float32


def test_key_changes_with_the_config_and_the_numerics_version(cache, monkeypatch):
    run = make_run(steps=STEPS)
    store.get_run(run)
    assert store.is_cached(run)
    for other in (make_run(steps=STEPS, seed=1), make_run(steps=STEPS, lr=1e-2), make_run(steps=STEPS, norm="post")):
        assert not store.is_cached(other)
    monkeypatch.setattr(store, "NUMERICS_VERSION", store.NUMERICS_VERSION + 1)
    assert not store.is_cached(run)
    steps, callback = counting()
    store.get_run(run, callback)
    assert len(steps) == STEPS
    assert store.is_cached(run)


@pytest.mark.slow
def test_list_cached_reads_summaries_and_clear_empties_the_store(cache, monkeypatch):
    runs = [make_run(steps=STEPS), make_run("sort", 4, steps=STEPS)]
    records = [store.get_run(run) for run in runs]
    listed = store.list_cached()
    assert [s["config"] for s in listed] == [r.to_dict() for r in runs]
    assert listed == [r.summary() for r in records]
    # a damaged sidecar: the run no longer counts as stored, breaks nothing, and `check --repair` drops it
    sidecar = next((cache / "joblib").rglob(entries.SIDECAR_FILE))
    sidecar.write_text("{not json")
    assert sum(store.is_cached(run) for run in runs) == 1
    report = store.check_store(repair=True)
    assert report["ok"] == 1 and len(report["damaged"]) == 1
    assert len(store.list_cached()) == 1
    for run in runs:  # the next request recomputes and stores it again
        store.get_run(run)
    listed = store.list_cached()
    assert sorted(json.dumps(s["config"], sort_keys=True) for s in listed) == sorted(
        json.dumps(r.to_dict(), sort_keys=True) for r in runs
    )
    (cache / "index.json").write_text("garbage")  # a damaged index is rebuilt from the sidecars
    assert store.list_cached() == listed
    (cache / "index.json").unlink()
    assert store.list_cached() == listed
    sidecar.write_text("{not json")
    store.check_store(repair=True)
    # entries of another numerics version are not listed
    version = store.NUMERICS_VERSION
    monkeypatch.setattr(store, "NUMERICS_VERSION", version + 1)
    assert store.list_cached() == []
    monkeypatch.setattr(store, "NUMERICS_VERSION", version)
    assert len(store.list_cached()) == 1
    assert store.clear_cache(cache) == 1
    assert store.list_cached() == []
    assert not any(store.is_cached(run) for run in runs)


@pytest.mark.slow
def test_truncated_entry_is_recomputed_with_a_warning(cache):
    run = make_run(steps=STEPS)
    original = store.get_run(run)
    (pkl,) = (cache / "joblib").rglob(entries.RECORD_FILE)
    data = pkl.read_bytes()
    pkl.write_bytes(data[: len(data) // 2])
    steps, callback = counting()
    with pytest.warns(store.CacheWarning, match="failed its checks"):
        again = store.get_run(run, callback)
    assert len(steps) == STEPS
    assert_same_record(original, again)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # repaired: a clean hit
        assert_same_record(original, store.get_run(run))
    pkl.write_bytes(b"not a pickle at all")
    with pytest.warns(store.CacheWarning):
        assert_same_record(original, store.get_run(run))


def test_a_cache_hit_only_reads(cache, monkeypatch):
    """A hit reads the stored record: it trains nothing, takes no lock and enforces no cap (what makes it fast;
    benchmarks/cache_hit.py times it)."""
    run = make_run(steps=STEPS)
    first = store.get_run(run)

    def past_the_read(*args, **kwargs):
        raise AssertionError("a cache hit went past reading the record")

    monkeypatch.setattr(store, "compute_run", past_the_read)
    monkeypatch.setattr(store._Entry, "compute", past_the_read)
    monkeypatch.setattr(store.backend, "locked", past_the_read)
    monkeypatch.setattr(store, "enforce_cap", past_the_read)
    for _ in range(3):
        assert_same_record(first, store.get_run(run))


RACER = """
import pickle, sys, time
from pathlib import Path
from attncore.config import make_run
from lab.store import get_run

tmp, name = Path(sys.argv[1]), sys.argv[2]
(tmp / f"ready-{name}").touch()
while not (tmp / "go").exists():  # both processes start get_run within a millisecond
    time.sleep(0.001)
steps = []
record = get_run(make_run(steps=int(sys.argv[3])), lambda step, loss: steps.append(step))
(tmp / f"out-{name}.pkl").write_bytes(pickle.dumps({"trained": len(steps), "record": record}))
"""


@pytest.mark.slow
def test_two_processes_asking_for_one_run_compute_it_once(cache, tmp_path):
    script = tmp_path / "racer.py"
    script.write_text(RACER)
    procs = [
        subprocess.Popen([sys.executable, str(script), str(tmp_path), name, str(STEPS)], env=subprocess_env(cache))
        for name in ("a", "b")
    ]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready-{n}").exists() for n in "ab"):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.01)
    (tmp_path / "go").touch()
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    outs = [pickle.loads((tmp_path / f"out-{n}.pkl").read_bytes()) for n in "ab"]
    assert sorted(o["trained"] for o in outs) == [0, STEPS]  # one trained, the other waited and read
    assert_same_record(outs[0]["record"], outs[1]["record"])
    steps, callback = counting()
    assert_same_record(outs[0]["record"], store.get_run(make_run(steps=STEPS), callback))
    assert steps == []
    assert len(list((cache / "joblib").rglob(entries.RECORD_FILE))) == 1
    assert not list((cache / "locks").glob("*.lock")) or [p.name for p in (cache / "locks").iterdir()] == ["index.lock"]


@pytest.mark.slow
def test_two_sweeps_over_one_store_train_each_run_once(cache, tmp_path):
    """Two `python -m attncore sweep` processes over the same three runs at once: each run is trained by one of them
    (the other waits on its lock and reads it), so between them they train three runs, not six."""
    argv = [sys.executable, "-m", "attncore", "sweep", "--seed", "0", "1", "2", "--steps", str(STEPS), "--jobs", "1"]
    procs = [
        subprocess.Popen(argv, env=subprocess_env(cache), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    said = [p.communicate(timeout=600)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], said
    read = [int(re.search(r"3 runs \((\d+) from the cache\)", s).group(1)) for s in said]
    assert sum(3 - n for n in read) == 3, said  # trained here, summed over both processes
    assert len(list((cache / "joblib").rglob(entries.RECORD_FILE))) == 3
