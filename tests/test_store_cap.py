"""The store's index and size cap: thousands of entries listed without a walk, LRU eviction that spares the article."""

from __future__ import annotations

import os
import sys
import time
import warnings

import pytest
from conftest import ROOT
from test_store import STEPS, counting

from attncore.config import make_run
from lab import limits, store
from lab.presets import preset
from lab.store import index as store_index

sys.path.insert(0, str(ROOT / "benchmarks"))
import store_listing  # noqa: E402


@pytest.mark.slow
def test_thousands_of_entries_are_listed_from_the_index_without_walking(cache, monkeypatch):
    runs = store_listing.fill_store(cache, 2000)
    assert len(store.list_cached()) == 2000
    store_index._memo.clear()  # a new process: reads index.json once, never the 2,000 folders

    def no_walk(*args):
        raise AssertionError("list_cached walked the entries")

    with monkeypatch.context() as walks:
        walks.setattr(store_index, "rebuild", no_walk)
        listed = store.list_cached()
        assert [s["config"] for s in listed[:3]] == [r.to_dict() for r in runs[:3]]  # oldest first
        extra = make_run("sort", 4, 0, **store_listing.SMALL)
        store_listing.write_fake(cache, extra)  # written without the index: a hit adds it (no walk either)
        assert store.get_run(extra).config == extra
        assert len(store.list_cached()) == 2001
    (cache / store_index.INDEX_FILE).write_bytes(b"damaged")
    assert len(store.list_cached()) == 2001  # rebuilt from the sidecars


def fill_article_and_others(location, n_others: int) -> list:
    """Fake entries for the article's 23 runs and n_others small runs, last used one second apart (oldest first)."""
    for run in preset("article"):
        store_listing.write_fake(location, run)
    others = [make_run("copy", 4, seed, **store_listing.SMALL) for seed in range(n_others)]
    now = time.time()
    for i, run in enumerate(others):
        path = store_listing.write_fake(location, run)
        os.utime(path / "record.json", (now - 1000 + i, now - 1000 + i))
    func_dir = store._Entry(others[0], location).func_dir
    store_index.rebuild_saved(location, func_dir)
    return others


def stored_bytes(location) -> int:
    func_dir = store._Entry(make_run(), location).func_dir
    return sum(e["bytes"] for e in store_index.read(location, func_dir).values())


def test_a_stored_runs_read_checks_its_own_index_line_not_all_of_them(cache, monkeypatch):
    """Regression: a cached `train` in a store of thousands of runs validated every index line (0.3 s of CPU at
    3,000), where it asks only whether its own run is listed."""
    runs = store_listing.fill_store(cache, 300)
    checked = []
    real = store_index._valid_line
    monkeypatch.setattr(store_index, "_valid_line", lambda line: checked.append(line) or real(line))
    store_index._memo.clear()  # a new process, as each command is
    assert store.get_run(runs[7]).config == runs[7]
    assert len(checked) == 1
    extra = make_run("sort", 4, 0, **store_listing.SMALL)
    store_listing.write_fake(cache, extra)  # not in the index: the read adds it (a whole read, then an update)
    store_index._memo.clear()
    assert store.get_run(extra).config == extra and store_index.lists(cache, store._Entry(extra).path.name)
    (cache / store_index.INDEX_FILE).write_bytes(b"damaged")  # an index that cannot be read lists nothing
    store_index._memo.clear()
    assert not store_index.lists(cache, store._Entry(extra).path.name)
    assert store.get_run(extra).config == extra and len(store.list_cached()) == 301  # rebuilt on the way


def test_eviction_removes_the_least_recently_used_and_never_the_article(cache):
    others = fill_article_and_others(cache, 20)
    assert store.get_run(others[0]).config == others[0]  # a hit makes the oldest the most recently used
    found = store_index.read(cache, store._Entry(others[0], cache).func_dir).values()
    small = {
        e["summary"]["config"]["train"]["seed"]: e["bytes"]
        for e in found
        if e["summary"]["config"]["model"]["d_model"] == 8
    }
    assert store.enforce_cap(stored_bytes(cache) - sum(small[seed] for seed in range(1, 6))) == 5
    kept = [run for run in others if store.is_cached(run)]
    assert kept == [others[0]] + others[6:]  # seeds 1-5 were the least recently used
    assert all(store.is_cached(run) for run in preset("article"))
    # a cap below the article's own size: everything else goes, the article stays
    assert store.enforce_cap(1) == len(kept)
    assert [s["config"] for s in store.list_cached()] == [r.to_dict() for r in preset("article")]


@pytest.mark.slow
def test_get_run_enforces_the_cap_from_the_environment_and_keeps_what_it_stored(cache, monkeypatch):
    others = fill_article_and_others(cache, 10)
    monkeypatch.setenv(store.MAX_STORE_VAR, "0.001")  # 1 kB: nothing but the article and the new run fits
    run = make_run(steps=STEPS, seed=7)
    steps, callback = counting()
    store.get_run(run, callback)
    assert len(steps) == STEPS
    assert store.is_cached(run) and not any(store.is_cached(r) for r in others)
    assert len(store.list_cached()) == 24
    monkeypatch.setenv(store.MAX_STORE_VAR, "lots")
    with pytest.warns(store.CacheWarning, match="ATTNLAB_MAX_STORE_MB"):
        assert store.max_store_bytes() == store.DEFAULT_MAX_STORE_MB * 2**20
    monkeypatch.delenv(store.MAX_STORE_VAR)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert store.max_store_bytes() == store.DEFAULT_MAX_STORE_MB * 2**20


# --- one settings reader for every process --------------------------------------------------------------------


def secrets_cap(folder, mb) -> None:
    """A .streamlit/secrets.toml in `folder` (the working folder) with [limits] max_store_mb = mb."""
    (folder / ".streamlit").mkdir(exist_ok=True)
    (folder / ".streamlit" / "secrets.toml").write_text(f"[limits]\nmax_store_mb = {mb}\n")


def default_secrets_files_of_the_tests_own(tmp_path, monkeypatch) -> None:
    """Streamlit's default secrets files (home's, the working folder's) made the test's own: no
    STREAMLIT_SECRETS_FILES (the suite points it at a file of its own), HOME and the working folder in tmp_path."""
    monkeypatch.delenv(limits.SECRETS_FILES_VAR, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


def test_the_store_reads_max_store_mb_from_secrets_toml_as_the_pages_do(cache, tmp_path, monkeypatch):
    default_secrets_files_of_the_tests_own(tmp_path, monkeypatch)
    secrets_cap(tmp_path, 2000)
    assert store.max_store_bytes() == 2000 * 2**20  # the CLI and the workers, without Streamlit
    monkeypatch.setenv(store.MAX_STORE_VAR, "3")
    assert store.max_store_bytes() == 3 * 2**20  # the environment first, as ui.limits
    monkeypatch.delenv(store.MAX_STORE_VAR)
    secrets_cap(tmp_path, '"lots"')
    with pytest.warns(store.CacheWarning, match=r"ignoring max_store_mb in .streamlit/secrets.toml='lots'"):
        assert store.max_store_bytes() == store.DEFAULT_MAX_STORE_MB * 2**20


@pytest.mark.slow
def test_a_secrets_cap_larger_than_the_default_is_honoured_by_a_workers_cap_pass(cache, tmp_path, monkeypatch):
    """How 314 runs were once lost, in small: a worker's cap pass fell back to the default under a larger cap."""
    from lab.jobs import progress as worker

    others = fill_article_and_others(cache, 10)
    monkeypatch.setattr(store, "DEFAULT_MAX_STORE_MB", 0.001)  # a default that keeps nothing but the article
    default_secrets_files_of_the_tests_own(tmp_path, monkeypatch)
    secrets_cap(tmp_path, 1000)
    run = make_run(steps=STEPS, seed=7)
    progress = tmp_path / "progress.f64"
    worker.open_progress(progress, run.train.steps, create=True)
    worker.train_with_progress(run, str(cache), str(progress))  # a worker given no cap: reads the same settings
    assert all(store.is_cached(r) for r in others) and store.is_cached(run)
    progress_2 = tmp_path / "progress-2.f64"
    worker.open_progress(progress_2, STEPS, create=True)
    other = make_run(steps=STEPS, seed=8)
    worker.train_with_progress(other, str(cache), str(progress_2), (), 2**30)  # the page's cap, passed in
    assert all(store.is_cached(r) for r in others)


def test_streamlit_secrets_files_names_the_secrets_files_for_every_process(cache, tmp_path, monkeypatch):
    first, second = tmp_path / "a.toml", tmp_path / "b.toml"
    first.write_text("[limits]\nmax_store_mb = 100\n")
    second.write_text("[limits]\nmax_store_mb = 300\n")
    monkeypatch.setenv(limits.SECRETS_FILES_VAR, f"{first} {second}")
    assert limits.secrets_files() == [first, second]
    assert store.max_store_bytes() == 300 * 2**20  # the later file wins, as Streamlit merges them
    monkeypatch.setenv(limits.SECRETS_FILES_VAR, str(tmp_path / "absent.toml"))
    assert store.max_store_bytes() == store.DEFAULT_MAX_STORE_MB * 2**20


def _train_page():
    from attncore.config import make_run
    from ui import runs

    runs.require(make_run(steps=30, seed=3), "a test run")


@pytest.mark.slow
def test_the_page_hands_its_secrets_cap_to_the_training_worker(cache, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from lab.jobs import pool

    captured = []

    class Pool:  # the worker pool, replaced: what the page submits is recorded, nothing trains
        def started(self):
            return True

        def submit(self, fn, *args):
            captured.append(args)
            raise RuntimeError("captured")  # the page reports a failed training in one line

    monkeypatch.setattr(pool, "shared", lambda n: Pool())
    at = AppTest.from_function(_train_page, default_timeout=60)
    at.secrets["limits"] = {"max_store_mb": 2000}
    at.run()
    at.button(key="train").click().run()
    assert captured and captured[0][-1] == 2000 * 2**20


# --- a view's own runs never evict each other -----------------------------------------------------------------


def _sweep_view(runs):
    from ui import runs as ui_runs

    _, missing = ui_runs.cached_summaries(runs)  # as the pages do: the view first, then only its missing runs
    ui_runs.sweep(missing, "Test sweep")


@pytest.mark.slow
def test_a_view_keeps_all_its_runs_while_another_visitors_pin_holds_the_rest(cache, monkeypatch):
    """Regression: each worker's cap pass kept only its own run, and the view's pin lapses once the view weighs
    more than the pins' budget (half the cap): the view's first runs were evicted by its last ones."""
    from streamlit.testing.v1 import AppTest

    view = [make_run(steps=STEPS, seed=s) for s in range(4)]
    store.get_run(view[0]), store.get_run(view[1])  # half the view is stored already, and used least recently
    others = [make_run(steps=STEPS, seed=s) for s in (10, 11)]
    for run in others:
        store.get_run(run)
    store.pin_view("cd" * 16, others)  # another visitor's view, shown now
    cap_mb = 1.2 * store.view_bytes(view) / 2**20  # the view fits; the view and the other pin do not
    monkeypatch.setenv(store.MAX_STORE_VAR, f"{cap_mb:.6f}")
    at = AppTest.from_function(_sweep_view, args=(view,), default_timeout=120).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert all(store.is_cached(run) for run in view)
    assert all(store.is_cached(run) for run in others)  # pinned, within the pins' budget


@pytest.mark.slow
def test_a_view_that_cannot_fit_under_the_cap_is_refused_before_training(cache, monkeypatch):
    from apptest_helpers import texts
    from streamlit.testing.v1 import AppTest

    view = [make_run(steps=STEPS, seed=s) for s in range(6)]
    monkeypatch.setenv(store.MAX_STORE_VAR, "1")
    at = AppTest.from_function(_sweep_view, args=(view,), default_timeout=120).run()
    said = texts(at.error)
    assert "This view's 6 runs would take about" in said and "more than this server's run store may hold (1 MB" in said
    assert not any(store.is_cached(run) for run in view)  # nothing trained
