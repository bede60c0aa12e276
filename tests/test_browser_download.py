"""Home's "Download all runs" in a real browser against a real server: three visitors who click at
once get one bundle built once; every one of their downloads is that file, served from disk, and the server's
resident memory grows by less than one bundle over all of them.

Before, each click put the bundle into Streamlit's in-memory media storage: a 126 MB store took a server from
194 to 918 MB over seven clicks, and clicks 6-8 got no file and no message. The store here is moderate (60
runs of the default shapes with made-up numbers, ~13 MB); the bound is relative to the bundle's size.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import time
from pathlib import Path

import pytest
from browser_helpers import CHROMIUM, CHROMIUM_ARGS, process_tree_rss_mb, streamlit_server, sync_api, wait_for_app

from attncore.config import make_run

pytestmark = pytest.mark.browser  # headless Chromium against a streamlit server

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from store_listing import fill_store  # noqa: E402

VISITORS, DOWNLOADS_EACH = 3, 3  # nine downloads, each the request a click on the link makes


def server_rss_mb(pid: int) -> float:
    """The server process's own resident MB (its training workers left out)."""
    return next(mb for name, mb in process_tree_rss_mb(pid).items() if name.startswith(f"{pid} "))


def test_visitors_get_one_bundle_from_disk_and_the_server_holds_no_copy(tmp_path):
    from ui import bundles

    location = tmp_path / "cache"
    fill_store(location, 60, make_run())
    folder = bundles.downloads_dir(location)  # this test's store's folder under static/downloads/
    env = {"ATTNCORE_CACHE_DIR": str(location), "ATTNLAB_BUNDLE_UPLOAD": "0"}
    digests: list[str] = []
    try:
        with streamlit_server(env, tmp_path / "streamlit.log") as (base, proc), sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            try:
                tabs = []
                for _ in range(VISITORS):
                    tab = browser.new_context(accept_downloads=True).new_page()
                    tab.goto(base)
                    wait_for_app(tab)
                    tabs.append(tab)
                time.sleep(1)
                before = server_rss_mb(proc.pid)
                for tab in tabs:  # all three click before any build is done
                    tab.get_by_role("button", name="Prepare Download all runs").click()
                hrefs = []
                for tab in tabs:
                    link = tab.get_by_role("link", name="Download all runs")
                    link.wait_for(timeout=120_000)
                    hrefs.append(link.get_attribute("href"))
                assert len(set(hrefs)) == 1, hrefs
                link = tabs[0].get_by_role("link", name="Download all runs")
                assert link.get_attribute("target") == "_blank"  # a click opens the file in a tab, which saves it
                for tab in tabs:
                    for _ in range(DOWNLOADS_EACH):
                        response = tab.request.get(f"{base}/{hrefs[0]}")
                        assert response.status == 200 and response.headers["content-type"] == "application/zip"
                        digests.append(hashlib.sha256(response.body()).hexdigest())
                time.sleep(1)
                after = server_rss_mb(proc.pid)
            finally:
                browser.close()
        files = sorted(folder.glob("*.zip"))
        assert len(files) == 1  # one build for the three visitors
        bundle_mb = files[0].stat().st_size / 2**20
        assert bundle_mb > 10
        assert digests == [hashlib.sha256(files[0].read_bytes()).hexdigest()] * (VISITORS * DOWNLOADS_EACH)
        # the build streams run by run and the downloads come from disk: less than one bundle over nine downloads
        # (before: about one bundle more per click)
        assert after - before < bundle_mb, (before, after, bundle_mb)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(bundles.build_dir(location), ignore_errors=True)
