"""The suite never reaches a user's run store, whatever the environment holds.

A pytest run of its own, on a copy of the repository, with ATTNCORE_CACHE_DIR naming a canary store (as a
user's shell may export it): a test that undoes its monkeypatch and clears "the store" clears the session's
own; a test that opens the canary, or the copy's cache/ (the store with no variable set), fails, even when it
swallows the error; the canary and cache/ are byte-identical afterwards. Before the fence, the first of these
tests deleted the canary's runs, as `test_bundle_export.py` deleted a user's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from canary_store import differences, digest, make
from conftest import ROOT

from attncore.config import make_run
from lab import store
from lab.store import backend

INNER = """
import os
from pathlib import Path

import pytest

from attncore.config import make_run
from lab import store

RUN = make_run(steps=5)


def test_undoing_the_fixture_then_clearing_reaches_only_the_sessions_store(cache, monkeypatch):
    store.get_run(RUN)
    monkeypatch.undo()  # undoes the cache fixture's setenv too: the store is now the session's, not the user's
    assert os.environ["ATTNCORE_CACHE_DIR"] != os.environ["FENCE_CANARY"]
    store.clear_cache(store.cache_dir())
    store.get_run(RUN)


def test_opening_the_users_store_fails():
    open(Path(os.environ["FENCE_CANARY"]) / "index.json", "rb")


def test_the_repositorys_cache_is_a_users_store_too(monkeypatch):
    monkeypatch.delenv("ATTNCORE_CACHE_DIR")
    store.get_run(RUN)


def test_a_swallowed_refusal_still_fails_the_test():
    try:
        os.listdir(os.environ["FENCE_CANARY"])
    except Exception:
        pass


def test_the_users_key_and_caps_are_not_seen():
    assert "ATTNCORE_CACHE_KEY" not in os.environ and "ATTNLAB_MAX_STEPS" not in os.environ
"""


@pytest.fixture
def repository_copy(tmp_path) -> Path:
    """The code and tests of this checkout in a folder of the test's own, with an empty cache/."""
    copy = tmp_path / "repo"
    for package in ("attncore", "lab", "cli", "tests"):
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "cache").mkdir()
    (copy / "cache" / ".gitkeep").touch()
    (copy / "tests" / "test_inner.py").write_text(INNER)
    return copy


@pytest.mark.slow
def test_a_suite_run_beside_a_users_store_leaves_it_byte_identical(repository_copy, tmp_path):
    canary = tmp_path / "users-store"
    make(canary)
    before, cache_before = digest(canary), digest(repository_copy / "cache")
    env = os.environ | {
        "ATTNCORE_CACHE_DIR": str(canary),
        "FENCE_CANARY": str(canary),
        "ATTNCORE_CACHE_KEY": "the user's key",
        "ATTNLAB_MAX_STEPS": "7",
    }
    tests = repository_copy / "tests"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", str(tests / "test_inner.py")]
    r = subprocess.run(cmd, cwd=repository_copy, env=env, text=True, capture_output=True, timeout=300)
    outcomes = {line.split("::")[-1].split()[0]: line.split()[0] for line in r.stdout.splitlines() if "::" in line}
    assert outcomes == {
        "test_undoing_the_fixture_then_clearing_reaches_only_the_sessions_store": "PASSED",
        "test_opening_the_users_store_fails": "FAILED",
        "test_the_repositorys_cache_is_a_users_store_too": "FAILED",
        "test_a_swallowed_refusal_still_fails_the_test": "FAILED",
        "test_the_users_key_and_caps_are_not_seen": "PASSED",
    }, r.stdout + r.stderr
    assert r.stdout.count("reached a user's run store") >= 3 and r.returncode == 1
    assert differences(before, digest(canary)) == []
    assert differences(cache_before, digest(repository_copy / "cache")) == []


def test_joblib_cannot_clear_a_store_outside_clear_cache(cache):
    """Memory.clear, MemorizedFunc.clear (what a changed func_code.py triggers) and reduce_size all end in the
    backend's clear_location: refused, in one line; a single entry's clearing still works."""
    run = make_run(steps=5)
    store.get_run(run)
    func = store._memorized(str(cache))
    for clear in (lambda: func.clear(warn=False), func.store_backend.clear):
        with pytest.raises(backend.ClearRefused, match="only `python -m attncore cache clear`") as refused:
            clear()
        assert "\n" not in str(refused.value)
    assert store.is_cached(run)
    entry = store._Entry(run)
    func.store_backend.clear_item(list(entry.call_id))
    assert not store.is_cached(run)
    store.get_run(run)
    assert store.clear_cache(cache) == 1 and not store.is_cached(run)


def test_clear_cache_needs_the_store_named(cache):
    with pytest.raises(TypeError):
        store.clear_cache()


def test_the_refusal_reaches_the_command_line_as_one_line(cache, monkeypatch, capsys):
    from cli.main import main

    run = make_run(steps=5)
    store.get_run(run)

    def joblib_clears(*args, **kwargs):  # as joblib does when it finds func_code.py changed
        store._memorized(str(cache)).clear(warn=False)

    monkeypatch.setattr(store, "list_cached", joblib_clears)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["cache", "list"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refused to delete the runs" in err
    assert store.is_cached(run)
