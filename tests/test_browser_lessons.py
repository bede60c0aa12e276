"""Two lesson links in a real browser (headless Chromium, 1,280 px, a `streamlit run dashboard.py` server on
127.0.0.1 over a fresh store): the teacher's note shows as text, the hidden controls are not on the page, the locked
ones are drawn disabled. The screenshots are saved in the test's temporary folder (its path is printed)."""

from __future__ import annotations

import pytest
from browser_helpers import chromium, console_error, streamlit_server, wait_for_app

from lab.lessons import by_name

pytestmark = pytest.mark.browser  # headless Chromium against a streamlit server

LESSONS = ("sqrt-dk", "causal-mask")  # a page without runs, and one that stops at its missing run


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    store = tmp_path_factory.mktemp("cache")
    log = tmp_path_factory.mktemp("server") / "streamlit.log"
    with streamlit_server({"ATTNCORE_CACHE_DIR": str(store)}, log) as (base, _):
        yield base


@pytest.mark.parametrize("name", LESSONS)
def test_a_lesson_link_in_the_browser(server, tmp_path, name):
    lesson = by_name(name)
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        tab = context.new_page()
        errors = []
        tab.on("console", lambda m: errors.append(console_error(m)) if console_error(m) else None)
        tab.goto(server + lesson.url())
        wait_for_app(tab, timeout=180)
        main = tab.get_by_test_id("stMain")
        alerts = main.get_by_test_id("stAlert").get_by_test_id("stMarkdownContainer").all()
        assert lesson.note in [a.inner_text().strip() for a in alerts]  # as text, every character as written
        assert f"Question: {lesson.question}" in main.inner_text()
        for key in lesson.hide:
            assert tab.locator(f".st-key-{key}").count() == 0, key
        for key in lesson.lock:
            control = tab.locator(f".st-key-{key}")
            assert control.count() == 1, key
            assert control.locator("input").first.is_disabled(), key
        assert tab.get_by_test_id("stException").count() == 0
        assert not [e for e in errors if e], errors
        shot = tmp_path / f"{name}.png"
        tab.screenshot(path=str(shot), full_page=True)
        print(f"\n{name}: {shot}")
        context.close()
