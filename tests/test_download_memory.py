"""Home's "Download all runs" holds one bundle in the server's memory, however many visitors click how often
(issue 27.2).

The clicks go through Streamlit's own MediaFileManager (what st.download_button's deferred data and the
server's deferred-file handler call), with no script run between them (the button's on_click="ignore"):
before, every click stored another ~bundle-sized file there until two later script runs, so five clicks of a
124 MB store held 620 MB. The zip timestamps of those clicks are spread over minutes, as real clicks are.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import time
import zipfile
from pathlib import Path

import pytest
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

from attncore.config import make_run
from lab import bundle, store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from store_listing import fill_store  # noqa: E402

VISITORS, CLICKS = 4, 6
# Streamlit warns once per cached call made outside a script run (ui.limits' slots): not what is tested here
logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(logging.ERROR)
FILE_NAME = "attention-lab-runs.zip"


def rss_bytes() -> int:
    """This process's resident memory now (not its peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class MinutesApart:
    """zipfile's clock, two minutes on at each reading: each click is built at its own time."""

    def __init__(self):
        self.now = time.time()

    def time(self):
        self.now += 120
        return self.now

    def __getattr__(self, name):
        return getattr(time, name)


@pytest.fixture
def full_store(cache, monkeypatch):
    if not Path("/proc/self/status").exists():
        pytest.skip("reads resident memory from /proc")
    fill_store(cache, 60, make_run())  # 60 runs of the default shapes (made-up numbers): ~14 MB
    monkeypatch.setattr(zipfile, "time", MinutesApart())
    return cache


def click(mgr: MediaFileManager, storage: MemoryMediaFileStorage, visitor: int) -> bytes:
    """One visitor's click: the button registered by a script run, then the deferred request, then the fetch."""
    from ui import bundles

    file_id = mgr.add_deferred(bundles._download_all, "application/zip", f"visitor-{visitor}", file_name=FILE_NAME)
    url = mgr.execute_deferred(file_id)
    return storage.get_file(url.rsplit("/", 1)[1]).content


def held(storage: MemoryMediaFileStorage) -> int:
    """Bytes of the files Streamlit's media storage holds (its own memory statistics)."""
    return sum(stat.byte_length for stats in storage.get_stats().values() for stat in stats)


def test_many_clicks_by_many_visitors_hold_one_bundle(full_store):
    mgr = MediaFileManager(storage := MemoryMediaFileStorage("/media"))
    first = click(mgr, storage, 0)
    size = len(first)
    assert size > 10 * 2**20
    before = rss_bytes()
    downloads = [hashlib.sha256(click(mgr, storage, v)).digest() for v in range(VISITORS) for _ in range(CLICKS)]
    grown = rss_bytes() - before
    assert held(storage) == size, held(storage) / size  # one copy for all 24 clicks (before: 25 of them, ~340 MB)
    assert grown < 3 * size, (grown / 2**20, size / 2**20)  # the bundle and a build in flight, not one per click
    assert set(downloads) == {hashlib.sha256(first).digest()}  # every click downloaded, the same bytes
    store.clear_cache()
    assert bundle.import_bundle(first, 2 * size) == (60, 0)


def test_the_bundle_is_released_by_streamlits_clean_up_once_the_visitors_leave(full_store):
    mgr = MediaFileManager(storage := MemoryMediaFileStorage("/media"))
    for visitor in range(2):
        click(mgr, storage, visitor)
    assert held(storage) > 0
    for _ in range(2):  # a script run ending (or a session closing) is one pass: the first marks, the second frees
        mgr.clear_session_refs("dontcare")
        mgr.remove_orphaned_files()
    assert held(storage) == 0


def test_a_click_on_a_busy_server_fails_with_its_reason_on_the_log(full_store, monkeypatch, capsys):
    from streamlit.runtime.media_file_storage import MediaFileStorageError

    from ui import limits

    monkeypatch.setenv("ATTNLAB_SLOT_WAIT_SECONDS", "1")
    mgr = MediaFileManager(storage := MemoryMediaFileStorage("/media"))
    n = limits.limits().max_concurrent
    slots = limits._slots(n)
    assert all(slots.acquire(blocking=False) for _ in range(n))
    try:
        with pytest.raises(MediaFileStorageError):  # the browser shows "Failed to generate file for download"
            click(mgr, storage, 0)
    finally:
        for _ in range(n):
            slots.release()
    assert "Download all runs failed: The server is busy" in capsys.readouterr().err
    assert held(storage) == 0
    assert len(click(mgr, storage, 0)) > 0  # the next click, with a slot free, downloads
