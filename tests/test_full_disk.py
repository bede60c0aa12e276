"""A run trained from a page on a full disk: the page says the store could not keep it, and why.

The disk is made full where the store writes a run's entry (lab.store.backend.write_entry raising ENOSPC), and the
live training's worker runs in this process (a thread) so that the fault reaches it.
"""

from __future__ import annotations

import errno
import os
from concurrent.futures import ThreadPoolExecutor

import pytest
from streamlit.testing.v1 import AppTest

from attncore import make_run
from lab.jobs import pool as pools
from lab.jobs import progress
from lab.store import NotStoredWarning, backend, is_cached

TIMEOUT = 60


def _full_disk(path, meta, data) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class _InProcessPool:
    """The worker pool's interface over one thread of this process (so monkeypatches reach the training)."""

    def __init__(self):
        self.executor = ThreadPoolExecutor(1)

    def started(self) -> bool:
        return True

    def submit(self, fn, *args):
        return self.executor.submit(fn, *args)


def test_the_worker_says_why_the_store_did_not_keep_a_run(cache, tmp_path, monkeypatch):
    monkeypatch.setattr(backend, "write_entry", _full_disk)
    run = make_run(steps=3)
    path = tmp_path / "progress.f64"
    progress.open_progress(path, 3, create=True)
    with pytest.warns(NotStoredWarning, match="No space left on device"):  # the server's log still has it
        trained = progress.train_and_store(run, str(cache), str(path))
    assert trained.not_stored == os.strerror(errno.ENOSPC)
    assert trained.record.config == run and not is_cached(run)


def test_a_stored_run_reports_nothing(cache, tmp_path):
    run = make_run(steps=3)
    path = tmp_path / "progress.f64"
    progress.open_progress(path, 3, create=True)
    trained = progress.train_and_store(run, str(cache), str(path))
    assert trained.not_stored is None and is_cached(run)


def _train_script() -> None:
    import streamlit as st

    from attncore import make_run
    from ui import live

    if live.train_live(make_run(steps=3)) is not None:
        st.success("trained")


@pytest.mark.slow  # an AppTest
def test_training_from_the_page_on_a_full_disk_says_it_was_not_stored_and_why(cache, monkeypatch):
    monkeypatch.setattr(backend, "write_entry", _full_disk)
    fake = _InProcessPool()
    monkeypatch.setattr(pools, "shared", lambda n: fake)
    at = AppTest.from_function(_train_script, default_timeout=TIMEOUT).run()
    fake.executor.shutdown()
    assert not at.exception, [e.message for e in at.exception]
    errors = " ".join(e.value for e in at.error)
    assert "could not keep this run" in errors and "No space left on device" in errors, errors
    assert str(cache) not in errors  # the reason, not the server's paths
    assert [s.value for s in at.success] == ["trained"]  # the figures are still shown, this once
    assert not is_cached(make_run(steps=3))
