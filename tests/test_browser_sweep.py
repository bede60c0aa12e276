"""A page's sweep in a real browser: the click shows the sweep's progress, which moves, and Cancel stops it storing
nothing half-trained (an empty store, Home's "Reproduce the article"). The waits are hang guards, not budgets."""

from __future__ import annotations

import re
import time

import pytest
from browser_helpers import CHROMIUM, CHROMIUM_ARGS, streamlit_server, sync_api, wait_for_app

pytestmark = pytest.mark.browser  # headless Chromium against a streamlit server

PROGRESS = "document.querySelector('[data-testid=stProgress]')?.innerText || ''"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    log = tmp_path_factory.mktemp("server") / "streamlit.log"
    with streamlit_server({"ATTNCORE_CACHE_DIR": str(cache)}, log) as (base, _):
        yield base, cache


@pytest.fixture(scope="module")
def tab(server):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser.new_page(viewport={"width": 1400, "height": 1600})
        browser.close()


def test_sweep_shows_progress_that_moves_and_cancel_stores_nothing_half_trained(server, tab):
    base, cache = server
    tab.goto(base)
    wait_for_app(tab)
    button = tab.get_by_role("button", name=re.compile("Reproduce the article"))
    assert re.search(r"23 runs, about .* here, .* of computing", button.inner_text())
    button.click()
    bar = tab.get_by_test_id("stProgress")
    bar.wait_for(timeout=60_000)
    assert "Article sweep" in bar.inner_text()
    # then a worker reports its step (runs counted, elapsed time and time left beside it)
    tab.wait_for_function(f"() => /step [0-9,]+ of 1,500.*about .* left/.test({PROGRESS})", timeout=60_000, polling=100)
    text = bar.inner_text()
    assert re.search(r"0 of 23 runs trained", text) and "elapsed" in text, text
    # and it moves: a later report replaces the text
    moved = f"first => {{ const now = {PROGRESS}; return now !== first && /step [0-9,]+ of 1,500/.test(now); }}"
    tab.wait_for_function(moved, arg=text, timeout=60_000, polling=100)
    tab.get_by_role("button", name="Cancel").click()
    report = tab.get_by_text(re.compile("cancelled after [0-9]+ of 23 runs"))
    report.wait_for(timeout=60_000)
    trained = int(re.search("cancelled after ([0-9]+) of", report.inner_text()).group(1))
    # a toast: not a box above the page's title, and the page below it is the page
    assert tab.get_by_test_id("stToast").filter(has_text="cancelled after").count() == 1
    assert not tab.get_by_test_id("stMain").get_by_text(re.compile("cancelled after")).count()
    time.sleep(3)  # the stopped workers store nothing afterwards either: only the runs that had finished
    assert len(list(cache.rglob("record.npz"))) == trained
