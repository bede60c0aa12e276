"""The store against clumsy operators and races: a foreign index, failed writes, the cap, misses."""

from __future__ import annotations

import errno
import json
import os
import shutil
import time
import warnings

import pytest
from test_store import STEPS

from attncore.config import make_run
from cli.main import main
from lab import bundle, store
from lab.store import backend, index

RUNS = [make_run(steps=STEPS, seed=s) for s in range(3)]


@pytest.mark.slow
def test_a_foreign_index_copied_into_the_store_is_rebuilt(cache, tmp_path, monkeypatch, capsys):
    store.get_run(RUNS[0])
    other = tmp_path / "other"
    monkeypatch.setenv(store.ENV_VAR, str(other))
    store.get_run(RUNS[1])
    store.get_run(RUNS[2])
    monkeypatch.setenv(store.ENV_VAR, str(cache))
    shutil.copy(other / index.INDEX_FILE, cache / index.INDEX_FILE)  # another store's index, validly sealed
    index._memo.clear()  # a fresh process
    assert [s["config"] for s in store.list_cached()] == [RUNS[0].to_dict()]
    assert main(["cache", "list", "--json"]) == 0
    assert '"seed": 0' in capsys.readouterr().out
    out = tmp_path / "all.zip"
    assert bundle.export_bundle(out) == 1


@pytest.mark.slow
def test_an_index_that_disagrees_with_the_entries_is_rebuilt_on_first_read(cache):
    for run in RUNS[:2]:
        store.get_run(run)
    entry = store._Entry(RUNS[1])
    shutil.rmtree(entry.path)  # gone behind the index's back (a kill between the entry and the index write)
    index._memo.clear()
    assert [s["config"] for s in store.list_cached()] == [RUNS[0].to_dict()]


def failing_sidecar(monkeypatch, err=errno.ENOSPC):
    real = backend.write_atomic

    def write(path, data):
        if path.name == backend.SIDECAR_FILE:
            raise OSError(err, "simulated full disk")
        return real(path, data)

    monkeypatch.setattr(backend, "write_atomic", write)


def test_a_training_whose_sidecar_is_refused_leaves_no_arrays(cache, monkeypatch):
    failing_sidecar(monkeypatch)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        store.get_run(RUNS[0])
    entry = store._Entry(RUNS[0])
    assert not (entry.path / backend.RECORD_FILE).exists()


def test_cache_check_repair_removes_a_recent_orphan_nobody_is_writing(cache):
    store.get_run(RUNS[0])
    entry = store._Entry(RUNS[0])
    (entry.path / backend.SIDECAR_FILE).unlink()  # arrays without a sidecar, just now, no lock held
    report = store.check_store(repair=True)
    assert len(report["damaged"]) == 1 and not entry.path.exists()


@pytest.mark.slow
def test_an_import_the_disk_refuses_midway_stores_nothing(cache, tmp_path, monkeypatch, capsys):
    for run in RUNS:
        store.get_run(run)
    path = tmp_path / "runs.zip"
    assert bundle.export_bundle(path) == 3
    store.clear_cache(cache)
    real, calls = backend.write_atomic, []

    def write(p, data):
        calls.append(p)
        if len(calls) > 4:  # two runs whole, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(p, data)

    with monkeypatch.context() as disk:
        disk.setattr(backend, "write_atomic", write)
        assert main(["cache", "import", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no run was imported" in err
    index._memo.clear()
    assert store.list_cached() == [] and not any(cache.rglob(backend.RECORD_FILE))


def test_a_fractional_store_cap_is_applied_by_the_store_and_the_page_alike(cache, monkeypatch):
    from lab.jobs.limits import parse_limits

    lim, problems = parse_limits({"ATTNLAB_MAX_STORE_MB": "0.5"}, {})
    assert problems == [] and lim.max_store_mb == 0.5
    monkeypatch.setenv(store.MAX_STORE_VAR, "0.5")
    assert store.max_store_bytes() == 2**19
    lim, problems = parse_limits({"ATTNLAB_MAX_STORE_MB": "lots"}, {})
    assert len(problems) == 1 and "max_store_mb" in problems[0] and lim.max_store_mb == 512
    monkeypatch.setenv(store.MAX_STORE_VAR, "lots")
    with pytest.warns(store.CacheWarning):
        assert store.max_store_bytes() == 512 * 2**20


@pytest.mark.slow
def test_the_runs_a_sweep_just_trained_are_kept_by_the_cap_pass(cache, monkeypatch):
    import lab.presets
    from ui import bundles

    monkeypatch.setattr(lab.presets, "preset", lambda name: [])
    monkeypatch.setenv(store.MAX_STORE_VAR, "0.001")
    monkeypatch.setenv("ATTNLAB_MAX_STORE_MB", "0.001")
    records = [store.get_run(run, keep=RUNS) for run in RUNS]  # a sweep's workers keep the whole sweep
    assert all(store.is_cached(r.config) for r in records)
    bundles.enforce_store_cap(keep=RUNS)  # the dashboard's pass after the sweep
    assert all(store.is_cached(run) for run in RUNS)
    bundles.enforce_store_cap()
    assert not any(store.is_cached(run) for run in RUNS)


def test_a_miss_after_is_cached_said_yes_is_never_trained_in_the_server_thread(cache, monkeypatch):
    from ui import runs

    monkeypatch.setattr(runs, "is_cached", lambda run: True)  # evicted between the check and the read
    trained = []
    monkeypatch.setattr(store, "compute_run", lambda *a, **k: trained.append(a))
    runs._load.clear()
    assert runs.cached(RUNS[0]) is None and trained == []


def test_results_has_the_per_view_cap_of_ablations_and_compare(cache):
    from apptest_helpers import texts
    from test_app import app

    query = {"res_L": [str(L) for L in range(1, 13)], "res_seeds": [str(s) for s in range(10)]}
    at = app("results", res_tasks=["copy", "sort"], **query)  # 240 runs
    from lab.jobs.limits import Limits

    cap = Limits().max_compare_runs
    assert cap < 240
    assert f"This view has 240 runs; this server shows at most {cap} at once" in texts(at.warning)
    said = texts(at.warning)  # the setting that lifts the cap, and the command line that stores the same runs
    assert "(max_compare_runs)" in said and "ATTNLAB_MAX_COMPARE_RUNS" in said
    assert "python -m attncore sweep --task copy sort --length 1 2 3 4 5 6 7 8 9 10 11 12 --seed 0 1" in said
    assert not [b for b in at.button if b.key == "train_missing"]


def _stopped_by_a_changed_setting():
    from concurrent.futures import Future

    import streamlit as st

    from attncore.config import make_run
    from lab.jobs import training
    from lab.jobs.progress import Cancelled
    from ui import live

    st.session_state[live.TOKEN_KEY] = "visitor"
    job = Future()
    job.set_exception(Cancelled(137))  # the worker stopped at step 137 when the page reran
    training.latest().put("visitor", (training.run_key(make_run(steps=300)), job, None))
    live.report_cancelled(make_run(steps=300, lr=0.01))  # the sidebar now asks for another run


@pytest.mark.slow
def test_a_sidebar_change_mid_training_says_after_how_many_steps_it_stopped():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_stopped_by_a_changed_setting).run()
    assert not at.exception
    assert [w.value for w in at.warning] == [
        "The settings changed during a training, so it stopped after 137 of 300 steps; nothing was stored."
    ]


@pytest.mark.slow
def test_an_index_rebuilt_by_a_keyed_process_is_rebuilt_again_by_an_unkeyed_one(cache, monkeypatch):
    from lab.store import codec

    store.get_run(RUNS[0])  # unsigned
    monkeypatch.setenv(codec.KEY_VAR, "k")
    store.get_run(RUNS[1])  # signed
    (cache / index.INDEX_FILE).unlink()
    index._memo.clear()  # a keyed process rebuilds the index: only the run signed with its key is whole
    assert [s["config"] for s in store.list_cached()] == [RUNS[1].to_dict()]  # the keyed view: one whole run
    monkeypatch.delenv(codec.KEY_VAR)
    index._memo.clear()  # another process, without the key
    assert len(store.list_cached()) == 2
    assert store.check_store()["ok"] == 2


# --- a view's runs are pinned while it is shown -------------------------------------------------------------

HOLDER = "ab" * 16


def pin_files(cache) -> list:
    return sorted((cache / store.pins.PIN_DIR).glob("*.json"))


@pytest.mark.slow
def test_a_pinned_view_survives_another_processs_cap_pass_until_its_pin_lapses(cache, monkeypatch):
    import lab.presets

    monkeypatch.setattr(lab.presets, "preset", lambda name: [])  # nothing protected but the pin
    for run in RUNS:
        store.get_run(run)
    store.pin_view(HOLDER, RUNS[:1])
    sizes = sum(e["bytes"] for e in index.read(cache, store._Entry(RUNS[0], cache).func_dir).values())
    assert store.enforce_cap(sizes) == 0  # fits: nothing to do
    assert store.enforce_cap(int(0.9 * sizes)) == 1  # the oldest run goes, unless pinned: then the next oldest
    assert store.is_cached(RUNS[0]) and not store.is_cached(RUNS[1]) and store.is_cached(RUNS[2])
    store.get_run(RUNS[1])
    stale = store.pins.PIN_SECONDS + 1
    for path in pin_files(cache):
        old = path.stat().st_mtime - stale
        os.utime(path, (old, old))
    assert store.enforce_cap(1) == 3  # a lapsed pin protects nothing, and its file is removed
    assert pin_files(cache) == []


@pytest.mark.slow
def test_pins_protect_at_most_half_of_the_cap_and_a_hostile_pin_file_is_ignored(cache, monkeypatch):
    import lab.presets

    monkeypatch.setattr(lab.presets, "preset", lambda name: [])
    for run in RUNS:
        store.get_run(run)
    store.pin_view(HOLDER, RUNS)  # the whole store pinned: more than half of any cap below it
    assert store.enforce_cap(1) == 3
    folder = cache / store.pins.PIN_DIR
    (folder / ("cd" * 16 + ".json")).write_text('{"keys": ["../../etc", 7]}')
    (folder / ("ef" * 16 + ".json")).write_text("[" * 100_000)
    (folder / "not-a-holder.json").write_text('{"keys": []}')
    store.get_run(RUNS[0])
    assert store.enforce_cap(1) == 1  # nothing malformed protects anything, nothing raises
    assert sorted(p.name for p in folder.glob("*.json")) == [HOLDER + ".json", "not-a-holder.json"]  # malformed gone
    with pytest.raises(ValueError):
        store.pins.pin(cache, "../escape", ["00" * 16])


@pytest.mark.slow
def test_the_dashboard_pins_the_runs_its_page_shows_and_releases_them_on_a_page_without_runs(cache):
    from test_app import STEPS as APP_STEPS
    from test_app import app

    run = make_run(steps=APP_STEPS)
    store.get_run(run)
    at = app("train")
    [pin] = pin_files(cache)
    assert store._Entry(run, cache).path.name in pin.read_text()
    at.switch_page("app_pages/parameters.py").run()  # a page that shows no run
    assert not at.exception and pin_files(cache) == []


@pytest.mark.slow
def test_a_dangling_symlink_or_a_vanishing_pin_file_disables_only_itself(cache, monkeypatch):
    """One bad entry in pins/ used to make pinned() return nothing for the whole cap pass."""
    import lab.presets

    monkeypatch.setattr(lab.presets, "preset", lambda name: [])
    for run in RUNS:
        store.get_run(run)
    store.pin_view(HOLDER, RUNS[:1])
    folder = cache / store.pins.PIN_DIR
    (folder / ("cd" * 16 + ".json")).symlink_to(cache / "nowhere.json")  # dangling
    vanishing = folder / ("ef" * 16 + ".json")
    vanishing.write_text('{"keys": []}')
    read = store.pins._read

    def vanish_first(path):
        vanishing.unlink(missing_ok=True)  # removed between the listing and its reading
        return read(path)

    monkeypatch.setattr(store.pins, "_read", vanish_first)
    sizes = sum(e["bytes"] for e in index.read(cache, store._Entry(RUNS[0], cache).func_dir).values())
    assert store.enforce_cap(int(0.7 * sizes)) == 1  # the oldest run goes, unless pinned: then the next oldest
    assert store.is_cached(RUNS[0]) and not store.is_cached(RUNS[1])
    assert not (folder / ("cd" * 16 + ".json")).is_symlink()  # the bad entry is removed (the link, not a target)


def test_a_symlinked_pins_folder_is_never_read_written_or_tidied(cache, tmp_path, monkeypatch):
    """Regression: a cap pass deleted hex-named .json files in whatever folder pins/ pointed to."""
    import lab.presets

    monkeypatch.setattr(lab.presets, "preset", lambda name: [])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    theirs = elsewhere / ("ab" * 16 + ".json")
    theirs.write_text("someone else's file")
    os.utime(theirs, (0, 0))  # old and malformed: a pin file like it would be removed
    store.get_run(RUNS[0])
    cache.joinpath(store.pins.PIN_DIR).symlink_to(elsewhere)
    store.pin_view("cd" * 16, RUNS[:1])
    assert store.enforce_cap(1) == 1
    assert [p.name for p in elsewhere.iterdir()] == [theirs.name] and theirs.read_text() == "someone else's file"


def test_pin_files_are_bounded_in_size_and_count(cache, monkeypatch):
    """A cap pass reads at most MAX_PIN_FILES pins of at most MAX_PIN_BYTES each."""
    import lab.presets

    monkeypatch.setattr(lab.presets, "preset", lambda name: [])
    store.get_run(RUNS[0])
    folder = cache / store.pins.PIN_DIR
    folder.mkdir()
    now = time.time()
    for i in range(store.pins.MAX_PIN_FILES + 40):
        path = folder / f"{i:032x}.json"
        path.write_text('{"keys": []}')
        os.utime(path, (now - i, now - i))
    big = folder / ("f" * 32 + ".json")
    big.write_text(json.dumps({"keys": ["ab" * 16] * 2000}))  # > MAX_PIN_BYTES, and the newest
    assert big.stat().st_size > store.pins.MAX_PIN_BYTES
    opened = []
    read = store.pins._read
    monkeypatch.setattr(store.pins, "_read", lambda path: opened.append(path) or read(path))
    store.enforce_cap(1)
    assert len(opened) == store.pins.MAX_PIN_FILES and not big.exists()
    assert len(list(folder.iterdir())) == store.pins.MAX_PIN_FILES - 1  # the newest, less the oversized one
