"""Home's "Download all runs" in a real browser against a real server (issue 27.2): every click of every visitor
downloads the bundle, and the server's resident memory grows by about one bundle, not one per click.

Before, each click kept its bundle in the server's memory (five clicks of a 124 MB store took it from 201 to
1,121 MB). The store here is moderate (60 runs of the default shapes with made-up numbers, ~13 MB), so the
test takes about a minute; the bound is relative to the bundle's size.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from browser_helpers import CHROMIUM, CHROMIUM_ARGS, streamlit_server, sync_api, wait_for_app
from test_soak import process_tree_rss_mb

from attncore.config import make_run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from store_listing import fill_store  # noqa: E402

VISITORS, CLICKS = 3, 6


def server_rss_mb(pid: int) -> float:
    """The server process's own resident MB (its training workers left out)."""
    return next(mb for name, mb in process_tree_rss_mb(pid).items() if name.startswith(f"{pid} "))


def test_every_click_downloads_and_the_server_holds_about_one_bundle(tmp_path):
    fill_store(tmp_path / "cache", 60, make_run())
    env = {"ATTNCORE_CACHE_DIR": str(tmp_path / "cache"), "ATTNLAB_BUNDLE_UPLOAD": "0"}
    sizes: list[int] = []
    with streamlit_server(env, tmp_path / "streamlit.log") as (base, proc), sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            tabs = []
            for _ in range(VISITORS):
                tab = browser.new_context(accept_downloads=True).new_page()
                tab.goto(base)
                wait_for_app(tab)
                tabs.append(tab)
            rss = []
            for _ in range(CLICKS):
                for tab in tabs:
                    with tab.expect_download(timeout=60_000) as info:
                        tab.get_by_role("button", name="Download all runs").click()
                    sizes.append(Path(info.value.path()).stat().st_size)
                    assert not tab.query_selector("[data-testid=stDownloadButtonError]")
                time.sleep(0.5)
                rss.append(server_rss_mb(proc.pid))  # after each round of clicks
        finally:
            browser.close()
    assert len(sizes) == VISITORS * CLICKS and len(set(sizes)) == 1, sizes  # every click downloaded
    bundle_mb = sizes[0] / 2**20
    assert bundle_mb > 10
    # After the first round (the first build's imports, threads and the one bundle Streamlit then keeps), five
    # more rounds add about nothing; before, each click's bundle stayed: ~110 MB more over those 15 clicks.
    assert rss[-1] - rss[0] < 2 * bundle_mb, (rss, bundle_mb)
