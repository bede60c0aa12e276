"""Hostile links in a real browser: what Chromium renders from markdown, the oracle AppTest can only model.

Opens pages by links carrying markdown, HTML, directive and autolink payloads (a server on 127.0.0.1, see
browser_helpers.free_port) and asserts: no exception box, one notice per bad parameter, and no
link, image or formula anywhere in the page that the payload made.
"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from browser_helpers import chromium, streamlit_server  # skips locally, fails in CI

pytestmark = pytest.mark.browser  # headless Chromium against a streamlit server

LINK = "[Session expired - log in again](https://evil.example/login)"
IMAGE = "![p](http://127.0.0.1:9/x.png)"
HTML = "<img src=x onerror=alert(1)>"
DIRECTIVES = ":red[pwned] :material/skull: $x^2$ www.evil.example admin@evil.example"
LINKS = {  # page -> hostile query; every value is invalid for its widget, so each gets one notice
    "cost": {"cost_T": LINK, "cost_dk": IMAGE, "cost_seed": HTML, "task": DIRECTIVES, "steps": "inf"},
    "masks": {"mask_lengths": IMAGE, "mask_T": LINK, "mask_pad_T": DIRECTIVES, "pos": HTML, "L": "1e309"},
    "heads-and-position": {"hp_enc": LINK, "hp_T": DIRECTIVES, "hp_seed": HTML, "lr": IMAGE},
}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    cache, log = tmp_path_factory.mktemp("cache"), tmp_path_factory.mktemp("server") / "streamlit.log"
    with streamlit_server({"ATTNCORE_CACHE_DIR": str(cache)}, log) as (url, _):
        yield url


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.mark.parametrize("path", list(LINKS))
def test_a_hostile_link_renders_no_link_image_or_formula(base, browser, path):
    page = browser.new_page()
    page.goto(f"{base}/{path}?{urlencode(LINKS[path])}")
    page.wait_for_selector("h1", timeout=60_000)
    notices = page.locator("[data-testid='stAlert']").filter(has_text="URL parameter")
    notices.nth(len(LINKS[path]) - 1).wait_for(timeout=30_000)
    assert page.locator("[data-testid='stException']").count() == 0
    texts = notices.all_inner_texts()
    assert sorted(t.split("URL parameter ")[1].split("=")[0] for t in texts) == sorted(LINKS[path])
    hrefs = [a.get_attribute("href") or "" for a in page.locator("[data-testid='stMain'] a").all()]
    assert not [h for h in hrefs if "evil" in h or "127.0.0.1:9" in h], hrefs
    assert page.locator("img[src='x'], img[src*='127.0.0.1:9']").count() == 0
    assert page.locator("[data-testid='stMain'] .katex").count() == 0
    assert ":red[pwned] :material/skull: $x^2$" in " ".join(texts)  # literally: not coloured, an icon, typeset
    page.close()
