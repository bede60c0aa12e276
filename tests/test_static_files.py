"""The static folder Streamlit serves at app/static/: Download all runs is written outside it and moved in whole, a
build killed midway leaves nothing served and its temporary file goes at the next build or start, a server serves
only its own store's bundle (no hidden file, a plain 404 for a name too long), and the downloads folder is bounded.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import urllib.error
import urllib.request
from contextlib import ExitStack
from pathlib import Path

import pytest

from attncore.config import make_run
from lab import bundle, store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from store_listing import fill_store  # noqa: E402

KILLED = ".attention-lab-runs-0123456789abcdef01234567.zip.0123456789ab.tmp"  # what a killed build leaves


@pytest.fixture
def static(cache, tmp_path, monkeypatch):
    from ui import bundles

    fill_store(cache, 3, make_run())
    monkeypatch.setattr(bundles, "STATIC_DIR", tmp_path / "static")
    return tmp_path / "static"


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_a_bundle_is_written_outside_the_static_folder_and_moved_in_whole(cache, static, monkeypatch):
    from ui import bundles

    written, real = [], bundle.write_bundle

    def write(path, *args, **kwargs):  # its temporary file goes beside `path`
        written.append(Path(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(bundle, "write_bundle", write)
    path = bundles.prepare_bundle(store.listing_digest(), 2**30)
    assert static not in written[0].parents  # never under a name the static route serves
    assert files(path.parent) == [path.name]  # no lock, no temporary file beside the bundle


def test_the_next_build_removes_what_a_killed_build_left(cache, static):
    from ui import bundles

    own = bundles.downloads_dir()
    for folder in (bundles.build_dir(), own):  # where a build writes now, and where it wrote before
        folder.mkdir(parents=True)
        (folder / KILLED).write_bytes(b"x" * 1000)
    (own / ".build.lock").touch()
    path = bundles.prepare_bundle(store.listing_digest(), 2**30)
    assert files(own) == [path.name]
    assert files(bundles.build_dir()) == [bundles.BUILD_LOCK]


def test_a_server_start_tidies_its_stores_folders(cache, static):
    from ui import bundles

    old = bundles.prepare_bundle(store.listing_digest(), 2**30)
    (bundles.build_dir() / KILLED).write_bytes(b"x")
    store.get_run(make_run(steps=3))  # the store changed since: the old bundle is stale
    bundles.tidy_downloads()
    assert files(old.parent) == [] and files(bundles.build_dir()) == [bundles.BUILD_LOCK]
    current = bundles.prepare_bundle(store.listing_digest(), 2**30)
    bundles.tidy_downloads()
    assert files(current.parent) == [current.name]  # the current bundle stays


def test_other_stores_bundles_go_oldest_first_past_the_folders_bound(cache, static, monkeypatch):
    from ui import bundles

    first = bundles.prepare_bundle(store.listing_digest(), 2**30)
    size = first.stat().st_size
    first.unlink()
    monkeypatch.setattr(bundles, "MAX_DOWNLOADS_BYTES", size + 7_000)  # room for two of the others below
    others = []
    for i in range(4):  # four other stores' bundles of 3,000 bytes, oldest first
        folder = static / "downloads" / f"{i:016x}"
        folder.mkdir(parents=True)
        f = folder / f"{bundles.BUNDLE_PREFIX}{i:024x}.zip"
        f.write_bytes(b"x" * 3_000)
        os.utime(f, (time.time() - 1000 + i, time.time() - 1000 + i))
        others.append(f)
    path = bundles.prepare_bundle(store.listing_digest(), 2**30)
    assert path.stat().st_size == size
    assert [f.exists() for f in others] == [False, False, True, True]  # the oldest went first, until it fitted
    assert not others[0].parent.exists()  # an emptied folder goes too


def test_the_static_route_serves_this_stores_bundle_only(cache, static):
    from ui import bundles, static_files

    own = bundles.bundle_file(store.listing_digest())
    assert static_files.allowed(f"downloads/{own.parent.name}/{own.name}")
    assert static_files.allowed("README.md")
    assert not static_files.allowed(f"downloads/{'0' * 16}/{own.name}")  # another store's folder
    assert not static_files.allowed(f"downloads/{own.parent.name}/.build.lock")
    assert not static_files.allowed(f"downloads/{own.parent.name}/.{own.name}.0123456789ab.tmp")
    assert not static_files.allowed(f"downloads/{own.parent.name}/{own.name}.tmp")
    assert not static_files.allowed(".hidden")


def get(url: str) -> int:
    try:
        return urllib.request.urlopen(url, timeout=60).status
    except urllib.error.HTTPError as e:
        return e.code


@pytest.mark.slow  # a real server
def test_a_server_serves_neither_another_stores_bundle_nor_its_lock_and_a_long_path_is_a_404(tmp_path):
    pytest.importorskip("websockets")
    from browser_helpers import streamlit_server
    from test_uploads import open_session

    from ui import bundles

    mine, theirs = tmp_path / "cache", tmp_path / "other"
    fill_store(mine, 2, make_run())
    fill_store(theirs, 2, make_run())
    own = bundles.bundle_file(store.listing_digest(location=mine), mine)
    other = bundles.bundle_file(store.listing_digest(location=theirs), theirs)
    try:
        for f in (own, other, own.parent / ".build.lock"):
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(b"PK")
        env = {"ATTNCORE_CACHE_DIR": str(mine), "STREAMLIT_SERVER_ENABLE_XSRF_PROTECTION": "0"}
        with streamlit_server(env, tmp_path / "server.log") as (base, _), ExitStack() as stack:
            open_session(stack, base)  # the page ran once in this server
            static = f"{base}/app/static"
            assert get(f"{static}/downloads/{own.parent.name}/{own.name}") == 200
            assert get(f"{static}/downloads/{other.parent.name}/{other.name}") == 404  # another store's
            assert get(f"{static}/downloads/{own.parent.name}/.build.lock") == 404
            assert get(f"{static}/{'a' * 6000}") == 404  # the file system refuses the name: not a 500
            assert get(f"{static}/README.md") == 200
        assert "Traceback" not in (tmp_path / "server.log").read_text()
    finally:
        for location in (mine, theirs):
            shutil.rmtree(bundles.downloads_dir(location), ignore_errors=True)
            shutil.rmtree(bundles.build_dir(location), ignore_errors=True)
