"""The Parameters and KV-cache pages in headless Chromium at a desktop (1,280 px) and a phone (390 px) width:
no text cut off with an ellipsis (metric notes, a select's shown choice), no chart wider than its frame, no
exception. The calculator pages need no stored runs, so the server gets an empty store."""

from __future__ import annotations

import pytest
from browser_helpers import chromium, streamlit_server, wait_for_app

pytestmark = pytest.mark.browser  # headless Chromium against a streamlit server

WIDTHS = (1280, 390)
VIEWS = (
    "parameters",
    "parameters?par_preset=deepseek-v2-lite",
    "kv-cache",
    "kv-cache?kv_mode=vllm",
    "kv-cache?kv_mode=vllm&kv_preset=mistral-7b-v0.1&kv_e_version=v0",
    "kv-cache?kv_context=100000000&kv_batch=100000",
    "kv-cache?kv_context=100000000&kv_batch=1000000&kv_mode=vllm&kv_e_len=2147483648",
    "parameters?par_preset=gpt-oss-20b",  # MXFP4 weights as stored
    "kv-cache?kv_preset=gemma-3-1b&kv_mode=vllm",  # a hybrid model's groups
    "kv-cache?kv_preset=config.json&kv_wquant=awq&kv_mode=vllm",  # a model read from a file, its fields opened
)

# Text that does not fit its box: an element that hides its overflow (Streamlit's metric notes end in '…'), and a
# select's shown choice measured against its input's room.
CLIPPED = """() => {
    const main = document.querySelector('[data-testid=stMain]');
    const out = [];
    for (const el of main.querySelectorAll('*')) {
        const st = getComputedStyle(el);
        const hides = st.textOverflow === 'ellipsis' || st.overflowX === 'hidden';
        const shown = el.getBoundingClientRect().width > 0 && !el.closest('[data-testid=stVegaLiteChart]');
        if (!hides || !shown || !el.textContent.trim()) continue;
        // scrollWidth is rounded: a metric's '8.16e+07×' overflowed its ellipsis box by a fraction of a pixel and
        // was cut ('8.16e+0…') with scrollWidth 152 of 151, so an ellipsis box is measured by its text's extent
        const range = document.createRange();
        range.selectNodeContents(el);
        const extent = range.getBoundingClientRect().width;
        const cut = st.textOverflow === 'ellipsis' && extent > el.getBoundingClientRect().width + 0.05;
        if (el.scrollWidth > el.clientWidth + 1 || cut) out.push(el.textContent.trim().slice(0, 60));
    }
    const ctx = document.createElement('canvas').getContext('2d');
    for (const input of main.querySelectorAll('[data-testid=stSelectbox] input')) {
        const st = getComputedStyle(input);
        ctx.font = `${st.fontWeight} ${st.fontSize} ${st.fontFamily}`;
        const room = input.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight);
        const text = input.value || input.placeholder;
        if (ctx.measureText(text).width > room + 1) out.push(`select: ${text}`);
    }
    return out;
}"""
WIDE_CHARTS = """() => [...document.querySelectorAll('[data-testid=stVegaLiteChart]')].flatMap(c => {
    const drawn = c.querySelector('canvas, svg');
    const frame = c.getBoundingClientRect().width, width = drawn ? drawn.getBoundingClientRect().width : 0;
    return width > frame + 1 || c.scrollWidth > c.clientWidth + 1 ? [[Math.round(width), Math.round(frame)]] : [];
})"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    store, log = tmp_path_factory.mktemp("cache"), tmp_path_factory.mktemp("server") / "streamlit.log"
    with streamlit_server({"ATTNCORE_CACHE_DIR": str(store)}, log) as (base, _):
        yield base


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.mark.parametrize("width", WIDTHS)
def test_calculator_pages_fit_their_width(server, browser, width):
    tab = browser.new_page(viewport={"width": width, "height": 900})
    try:
        problems = {}
        for view in VIEWS:
            tab.goto(f"{server}/{view}")
            wait_for_app(tab, 120)
            found = {
                "exception": tab.locator("[data-testid=stException]").all_inner_texts(),
                "clipped text": tab.evaluate(CLIPPED),
                "charts wider than their frame [drawn, frame px]": tab.evaluate(WIDE_CHARTS),
            }
            if any(found.values()):
                problems[view] = {k: v for k, v in found.items() if v}
        assert not problems, "\n".join(f"{view}: {found}" for view, found in problems.items())
    finally:
        tab.close()
