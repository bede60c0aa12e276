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
from lab import store
from lab.presets import preset
from lab.store import index as store_index

sys.path.insert(0, str(ROOT / "benchmarks"))
import store_listing  # noqa: E402


def test_thousands_of_entries_are_listed_from_the_index_without_walking(cache, monkeypatch):
    runs = store_listing.fill_store(cache, 2000)
    assert len(store.list_cached()) == 2000
    store_index._memo.clear()  # a new process: reads index.json once, never the 2,000 folders

    def no_walk(*args):
        raise AssertionError("list_cached walked the entries")

    monkeypatch.setattr(store_index, "rebuild", no_walk)
    listed = store.list_cached()
    assert [s["config"] for s in listed[:3]] == [r.to_dict() for r in runs[:3]]  # oldest first
    extra = make_run("sort", 4, 0, **store_listing.SMALL)
    store_listing.write_fake(cache, extra)  # written without the index: a hit adds it (no walk either)
    assert store.get_run(extra).config == extra
    assert len(store.list_cached()) == 2001
    monkeypatch.undo()
    monkeypatch.setenv(store.ENV_VAR, str(cache))
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
