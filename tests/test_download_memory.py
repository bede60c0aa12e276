"""Home's "Download all runs" is one file on disk per store state: built once, whoever clicks and
however often, under a slot; served by Streamlit from disk, so it costs the server no memory per click.

Before, the bundle went into Streamlit's in-memory media storage at each click: a real server's memory grew by
most of a bundle per click (194 to 918 MB over seven clicks of a 126 MB store) and later clicks got nothing.
The real server's side is tests/test_browser_download.py.
"""

from __future__ import annotations

import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from attncore.config import make_run
from lab import bundle, store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from store_listing import fill_store  # noqa: E402

VISITORS, CLICKS = 3, 4


@pytest.fixture
def static(cache, tmp_path, monkeypatch):
    """A store of 12 runs (the default shapes, made-up numbers) and a static folder of the test's own."""
    from ui import bundles

    fill_store(cache, 12, make_run())
    monkeypatch.setattr(bundles, "STATIC_DIR", tmp_path / "static")
    return tmp_path / "static"


def counted_builds(monkeypatch) -> list:
    builds, real = [], bundle.write_bundle

    def write(*args, **kwargs):
        builds.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(bundle, "write_bundle", write)
    return builds


def bundles_in(static: Path) -> list[Path]:
    return sorted(static.rglob("*.zip"))


def test_visitors_clicking_together_get_one_bundle_built_once(cache, static, monkeypatch):
    from ui import bundles

    builds = counted_builds(monkeypatch)
    digest = store.listing_digest()
    with ThreadPoolExecutor(VISITORS) as pool:  # three visitors, each clicking four times, all at once
        paths = list(pool.map(lambda _: bundles.prepare_bundle(digest, 2**30), range(VISITORS * CLICKS)))
    assert len(builds) == 1 and len(set(paths)) == 1  # one build; every click has its file
    assert bundles_in(static) == paths[:1] and paths[0].parent.parent == static / "downloads"
    assert not [p for p in paths[0].parent.iterdir() if p.name.endswith(".tmp")]
    served = paths[0].read_bytes()
    store.clear_cache(cache)
    assert bundle.import_bundle(served, 2**30) == (12, 0)


def test_a_changed_store_gets_a_new_bundle_and_the_old_one_goes(cache, static):
    from ui import bundles

    first = bundles.prepare_bundle(store.listing_digest(), 2**30)
    same = bundles.prepare_bundle(store.listing_digest(), 2**30)
    assert same == first
    store.get_run(make_run(steps=5))
    second = bundles.prepare_bundle(store.listing_digest(), 2**30)
    assert second != first and bundles_in(static) == [second]
    assert bundle.read_bundle(second.read_bytes(), 2**30)  # whole, and it holds the new run
    assert len(bundle.read_bundle(second.read_bytes(), 2**30)) == 13


def test_each_store_has_a_folder_of_its_own(cache, static, tmp_path):
    from ui import bundles

    assert bundles.downloads_dir(cache) != bundles.downloads_dir(tmp_path / "another")
    assert bundles.downloads_dir() == bundles.downloads_dir(cache)


def test_the_download_is_capped_and_a_busy_server_says_so(cache, static, monkeypatch):
    from lab.jobs import slots as server_slots
    from ui import bundles, limits

    size = store.stored_bytes()
    with pytest.raises(bundle.BundleError, match="the runs are more than the limit of"):
        bundles.prepare_bundle(store.listing_digest(), size // 2)
    assert bundles_in(static) == [] and not list(static.rglob("*.tmp"))
    monkeypatch.setenv("ATTNLAB_SLOT_WAIT_SECONDS", "1")
    n = limits.limits().max_concurrent
    slots = server_slots.shared(n)
    assert all(slots.acquire(blocking=False) for _ in range(n))
    try:
        with pytest.raises(server_slots.BusyError, match="Preparing Download all runs"):
            bundles.prepare_bundle(store.listing_digest(), 2**30)
    finally:
        for _ in range(n):
            slots.release()
    assert bundles.prepare_bundle(store.listing_digest(), 2**30).is_file()  # a slot free: built


@pytest.mark.slow
def test_home_offers_the_file_once_prepared(cache, static):
    from test_app import app

    at = app()
    assert [b.label for b in at.button if b.key == "bundle_prepare"] == ["Prepare Download all runs"]
    assert not at.get("link_button")
    at.button(key="bundle_prepare").click().run()
    assert not at.exception and len(bundles_in(static)) == 1
    links = at.get("link_button")
    assert [link.proto.label for link in links] == ["Download all runs"]
    (path,) = bundles_in(static)
    assert links[0].proto.url == f"app/static/downloads/{path.parent.name}/{path.name}"
    again = app()  # the next visitor: the file is there, the link is shown at once, nothing built
    assert [link.proto.label for link in again.get("link_button")] == ["Download all runs"]
    assert not [b for b in again.button if b.key == "bundle_prepare"]


def test_a_download_folder_on_another_file_system_gets_its_bundle_copied(cache, static, monkeypatch):
    """Where static/downloads cannot take a rename from the build folder (EXDEV, "Invalid cross-device link"), the
    bundle is copied into a temporary file there and renamed: whole, no temporary file left, the staged one gone."""
    import errno
    import os

    from ui import bundles

    real = os.replace
    moves = []

    def replace(src, dst):  # a rename between two folders fails as it does across file systems
        moves.append((Path(src).parent, Path(dst).parent))
        if Path(src).parent != Path(dst).parent:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real(src, dst)

    monkeypatch.setattr(bundles.os, "replace", replace)
    path = bundles.prepare_bundle(store.listing_digest(), 2**30)
    assert any(a != b for a, b in moves)  # the rename across folders was tried and refused
    assert bundles_in(static) == [path] and list(path.parent.iterdir()) == [path]
    assert not [p for p in bundles.build_dir().iterdir() if p.name != bundles.BUILD_LOCK]
    assert len(bundle.read_bundle(path.read_bytes(), 2**30)) == 12


def test_a_download_folder_really_on_another_file_system(cache, static, tmp_path):
    """The same with static/downloads a link to a folder on another file system (tmpfs), where there is one."""
    import os
    import tempfile

    from ui import bundles

    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second file system here")
    with tempfile.TemporaryDirectory(dir=shm) as elsewhere:
        static.mkdir(parents=True)
        (static / "downloads").symlink_to(elsewhere, target_is_directory=True)
        path = bundles.prepare_bundle(store.listing_digest(), 2**30)
        assert path.is_file() and list(path.parent.iterdir()) == [path]
        assert len(bundle.read_bundle(path.read_bytes(), 2**30)) == 12
