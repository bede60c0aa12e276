"""Hostile links in a real browser: what Chromium renders from markdown, the oracle AppTest can only model.

Opens pages by links carrying markdown, HTML, directive and autolink payloads (a server on 127.0.0.1, port
$ATTNLAB_BROWSER_PORT or a free one) and asserts: no exception box, one notice per bad parameter, and no
link, image or formula anywhere in the page that the payload made.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest

CHROMIUM = "/usr/bin/chromium"
sync_api = pytest.importorskip("playwright.sync_api")
if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM}", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[1]
LINK = "[Session expired - log in again](https://evil.example/login)"
IMAGE = "![p](http://127.0.0.1:9/x.png)"
HTML = "<img src=x onerror=alert(1)>"
DIRECTIVES = ":red[pwned] :material/skull: $x^2$ www.evil.example admin@evil.example"
LINKS = {  # page -> hostile query; every value is invalid for its widget, so each gets one notice
    "cost": {"cost_T": LINK, "cost_dk": IMAGE, "cost_seed": HTML, "task": DIRECTIVES, "steps": "inf"},
    "masks": {"mask_lengths": IMAGE, "mask_T": LINK, "mask_pad_T": DIRECTIVES, "pos": HTML, "L": "1e309"},
    "heads-and-position": {"hp_enc": LINK, "hp_T": DIRECTIVES, "hp_seed": HTML, "lr": IMAGE},
}


def _port() -> int:
    if os.environ.get("ATTNLAB_BROWSER_PORT"):
        return int(os.environ["ATTNLAB_BROWSER_PORT"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    port = _port()
    env = os.environ | {"ATTNCORE_CACHE_DIR": str(tmp_path_factory.mktemp("cache"))}
    cmd = [sys.executable, "-m", "streamlit", "run", "dashboard.py", "--server.headless", "true"]
    cmd += ["--server.address", "127.0.0.1", "--server.port", str(port), "--server.fileWatcherType", "none"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 60
    try:
        while True:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.3)
            assert proc.poll() is None and time.monotonic() < deadline, "the server did not start"
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


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
