"""A real browser over every page: `streamlit run dashboard.py` on 127.0.0.1, driven by headless Chromium.

Fails on any exception box or browser console error; reports each page's render time (printed, never asserted:
the waits are hang guards) and saves a screenshot per page into a temporary folder, and into $SAVE_SCREENSHOTS too.
For the README's screenshots with real runs (trained into the test's own store, as every run of the suite):
    SAVE_SCREENSHOTS=docs/screenshots ATTNLAB_BROWSER_STEPS=1500 python -m pytest tests/test_browser.py -q -s
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from browser_helpers import (
    ROOT,
    chromium,
    console_error,
    streamlit_server,
    wait_for_app,
)

from ui.nav import PAGES as NAV_PAGES

pytestmark = pytest.mark.browser  # headless Chromium against a streamlit server

STEPS = int(os.environ.get("ATTNLAB_BROWSER_STEPS", "30"))  # short runs keep the test fast
QUERY = "" if STEPS == 1500 else f"steps={STEPS}"
# every page registered in ui/nav.py: name -> (URL path, title in the navigation, shows the run store's runs)
PAGES = {(p.url_path or "home"): (p.url_path, p.title, p.uses_run) for p in NAV_PAGES}


def _url(base: str, path: str, query: str = QUERY) -> str:
    return f"{base}/{path}" + (f"?{query}" if query else "")


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """A run store holding every run the pages show by default: the article's runs, the ablations over the
    seeds Ablations shows by default (ui.variants.DEFAULT_SEEDS) and learned vs no position over seeds 0-5
    (Compare's default view), at STEPS steps, and the Masks page's padded-batch model."""
    location = tmp_path_factory.mktemp("cache").resolve()
    from attncore import make_run
    from lab.presets import ablations, preset, with_settings
    from lab.sweep import run_sweep
    from ui.variants import DEFAULT_SEEDS

    compare = [make_run(seed=s, position=p) for s in (3, 4, 5) for p in ("learned", "none")]
    ablated = [run for seed in range(1, DEFAULT_SEEDS) for run in ablations(seed=seed)]  # seed 0: the article's
    runs = [with_settings(r, steps=STEPS) for r in preset("article") + ablated + compare]
    trap = make_run("copy", 6, train_min=1, mixed_lengths=True)  # the Masks page's trained model (its own steps)
    run_sweep([*runs, trap], n_jobs=2, location=location)
    return location


@pytest.fixture(scope="module")
def server(cache, tmp_path_factory):
    log = tmp_path_factory.mktemp("server") / "streamlit.log"
    with streamlit_server({"ATTNCORE_CACHE_DIR": str(cache)}, log) as (base, _):
        yield base


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def warm_server(server, browser):
    """The server's first visit, by a deep link: not timed against the budget (it imports pandas, altair, lab).

    It must get the full app: with a folder named pages/ beside dashboard.py, Streamlit's first run
    used its legacy file-list navigation and skipped dashboard.py's sidebar. Streamlit itself still
    lays a "Page not found" dialog over the right page on a server's very first deep link
    (streamlit/streamlit#8860, #9992); this tab is closed and later sessions never see it.
    """
    tab = browser.new_page()
    start = time.perf_counter()
    tab.goto(_url(server, "train"))
    wait_for_app(tab)
    print(f"\ncold start (first visit after launch, /train): {time.perf_counter() - start:.2f} s")
    assert "Run configuration" in tab.get_by_test_id("stSidebar").inner_text()
    assert tab.locator("h1").first.inner_text() == "Train"
    tab.close()
    return server


@pytest.fixture
def page(browser):
    """A fresh tab that records console errors and uncaught page errors."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.errors = []
    tab.on("console", lambda m: tab.errors.append(console_error(m)) if console_error(m) else None)
    tab.on("pageerror", lambda e: tab.errors.append(f"page error: {e}"))
    yield tab
    context.close()


def assert_clean(tab) -> None:
    exceptions = tab.locator("[data-testid=stException]")
    assert exceptions.count() == 0, exceptions.first.inner_text()
    assert not tab.errors, tab.errors


def assert_tables_fit(tab) -> None:
    """No table scrolls sideways in a 1,280 px window: every column is in view without a scroll bar."""
    sizes = tab.evaluate(
        "Array.from(document.querySelectorAll('[data-testid=stDataFrame] .dvn-scroller'))"
        ".map(s => [s.scrollWidth, s.clientWidth])"
    )
    wide = [size for size in sizes if size[0] > size[1] + 1]
    assert not wide, f"{len(wide)} of {len(sizes)} tables wider than their frame ([content, frame] px): {wide}"


def assert_charts_fit(tab) -> None:
    """Every chart (its canvas or svg) ends inside the main area's content box, and inside its column: nothing is
    cut off at the right of a 1,280 px window (the attention grid once ended at 1,421 px)."""
    wide = tab.evaluate(
        """() => {
            const main = document.querySelector('[data-testid=stMainBlockContainer]');
            const style = getComputedStyle(main);
            const right = main.getBoundingClientRect().right - parseFloat(style.paddingRight);
            return [...document.querySelectorAll('[data-testid=stVegaLiteChart]')].flatMap((chart, i) => {
                const drawn = chart.querySelector('canvas, svg');
                if (!drawn) return [];
                const column = chart.closest('[data-testid=stColumn]');
                const limit = Math.min(column ? column.getBoundingClientRect().right : right, right);
                const end = drawn.getBoundingClientRect().right;
                return end > limit + 1 ? [[i, Math.round(end), Math.round(limit)]] : [];
            });
        }"""
    )
    assert not wide, f"charts cut off at the right ([chart, its right edge, the area's right edge] px): {wide}"


def screenshot(tab, name: str, tmp_path: Path) -> None:
    """The whole page (the viewport grows to the content's height), into tmp_path and $SAVE_SCREENSHOTS."""
    height = tab.evaluate("document.querySelector('[data-testid=stMain]').scrollHeight")
    tab.set_viewport_size({"width": 1280, "height": min(max(height, 900), 4000)})
    tab.wait_for_timeout(400)  # charts re-layout to the new size
    path = tmp_path / f"{name}.png"
    tab.screenshot(path=str(path))
    target = os.environ.get("SAVE_SCREENSHOTS")
    if target:
        from PIL import Image

        out = ROOT / target / f"{name}.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        Image.open(path).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)


@pytest.mark.parametrize("name", list(PAGES))
def test_page_opened_by_its_url_renders_without_errors(warm_server, page, name, tmp_path):
    start = time.perf_counter()
    page.goto(_url(warm_server, PAGES[name][0]))
    wait_for_app(page)
    seconds = time.perf_counter() - start
    print(f"\n{name}: opened by URL in a fresh tab, rendered in {seconds:.2f} s (includes Streamlit's start-up)")
    assert_clean(page)
    assert page.locator("h1").first.inner_text().strip(), "the page has no title"
    assert_tables_fit(page)
    assert_charts_fit(page)
    screenshot(page, name, tmp_path)


def test_every_page_renders_from_the_navigation(warm_server, page):
    """The visitor's page switch: a click in the sidebar navigation until the page has run and drawn every chart,
    with no error. Two rounds over every page (the second one with every page's imports and memos warm); each
    switch's time is printed (benchmarks/page_work.py measures the pages' work), never asserted.
    """
    page.goto(_url(warm_server, ""))
    wait_for_app(page)
    order = [*list(PAGES)[1:], "home"]
    rounds = []
    for _ in range(2):
        times = {}
        for name in order:
            path, title, _ = PAGES[name]
            start = time.perf_counter()
            page.get_by_test_id("stSidebarNav").get_by_text(title, exact=True).click()
            page.wait_for_function(f"() => location.pathname === '/{path}'", polling=20)
            page.wait_for_timeout(30)  # let the rerun start before waiting for its end
            wait_for_app(page)
            times[name] = time.perf_counter() - start
            assert_clean(page)
        rounds.append(times)
    for i, times in enumerate(rounds):
        print(f"\npage switch, round {i + 1}: " + ", ".join(f"{k} {v:.2f} s" for k, v in times.items()))


def test_sidebar_change_goes_to_the_url_and_the_url_restores_it(warm_server, page):
    page.goto(_url(warm_server, "train"))
    wait_for_app(page)
    page.get_by_test_id("stSidebar").get_by_text("sort", exact=True).click()
    page.wait_for_function("() => location.search.includes('task=sort')")
    wait_for_app(page)
    link = page.url
    assert parse_qs(urlparse(link).query)["task"] == ["sort"]
    page.goto(link)  # a copied link, opened fresh
    wait_for_app(page)
    assert page.get_by_test_id("stSidebar").get_by_role("radio", name="sort").is_checked()
    assert "sort · L=6" in page.get_by_test_id("stMain").get_by_test_id("stCaptionContainer").first.inner_text()
    assert_clean(page)


def test_sidebar_settings_survive_a_page_switch(warm_server, page):
    page.goto(_url(warm_server, "train", f"{QUERY}&L=4".lstrip("&")))
    wait_for_app(page)
    page.get_by_test_id("stSidebarNav").get_by_text("Attention", exact=True).click()
    page.wait_for_url("**/attention**")
    wait_for_app(page)
    assert parse_qs(urlparse(page.url).query).get("L") == ["4"]
    assert "L=4" in page.get_by_test_id("stMain").get_by_test_id("stCaptionContainer").first.inner_text()
    assert_clean(page)


def test_uncached_run_trains_live_then_shows_its_metrics(warm_server, page):
    page.goto(_url(warm_server, "train", f"steps={max(STEPS, 60)}&seed=7"))
    wait_for_app(page)
    page.get_by_role("button", name="Train this configuration").click()
    page.wait_for_selector("[data-testid=stMetric]", timeout=120_000)
    wait_for_app(page, timeout=120)
    labels = page.get_by_test_id("stMetricLabel").all_inner_texts()
    assert "Per-sequence accuracy" in labels and "Parameters" in labels
    assert_clean(page)


def test_a_training_does_not_block_another_visitor(warm_server, browser, page):
    """While one tab trains a long run (in a worker process), a second visitor's cached page renders meanwhile."""
    trainer = browser.new_page()
    trainer.goto(_url(warm_server, "train", "task=sort&L=8&steps=3000&seed=21"))  # never cached here
    wait_for_app(trainer)
    trainer.get_by_role("button", name="Train this configuration").click()
    trainer.wait_for_selector("[data-testid=stProgress]", timeout=30_000)
    started = time.perf_counter()
    page.goto(_url(warm_server, "results"))
    wait_for_app(page)
    rendered = time.perf_counter() - started
    assert_clean(page)
    assert not trainer.get_by_test_id("stMetric").count(), "the other visitor waited for the training to finish"
    trainer.wait_for_selector("[data-testid=stMetric]", timeout=300_000)  # and the training goes on to its end
    trained = time.perf_counter() - started
    print(f"\nResults rendered in {rendered:.2f} s while another session trained ({trained:.1f} s to finish)")
    trainer.close()


def test_invalid_sequence_shows_a_message_not_a_traceback(warm_server, page):
    page.goto(_url(warm_server, "attention", f"{QUERY}&seq=1+2+99".lstrip("&")))
    wait_for_app(page)  # a link's invalid value: the probe instead, and a notice naming the parameter
    assert "URL parameter seq=1 2 99 ignored" in page.get_by_test_id("stAlertContentWarning").first.inner_text()
    field = page.get_by_test_id("stTextInputField")  # typed: the library's message
    field.fill("1 2 99")
    field.press("Enter")
    page.get_by_test_id("stAlertContentError").first.wait_for()
    assert "Not a valid input" in page.get_by_test_id("stAlertContentError").first.inner_text()
    assert_clean(page)


def test_every_chart_has_a_download_menu_whose_svg_is_named_after_its_page_with_its_labels_whole(
    warm_server, page, tmp_path
):
    """Every page at its defaults, tab by tab: as many Download menus as charts, and each chart's SVG, rendered on
    the click, is named <page>-<chart>.svg and has no text cut short with an ellipsis (ui/figure.py)."""
    import xml.etree.ElementTree as ET

    files = []
    for name, (path, _, _) in PAGES.items():
        page.goto(_url(warm_server, path))
        wait_for_app(page)
        menus = page.get_by_test_id("stPopover").locator("button").filter(has_text="Download")
        tabs, downloaded = page.get_by_role("tab"), 0
        for tab in range(max(1, tabs.count())):  # a chart in a tab not shown is downloaded from its tab
            if tabs.count():
                tabs.nth(tab).click()
            for i in range(menus.count()):
                if not menus.nth(i).is_visible():
                    continue
                menus.nth(i).click()
                with page.expect_download(timeout=60_000) as info:
                    page.get_by_test_id("stPopoverBody").locator("button").filter(has_text="SVG").last.click()
                target = tmp_path / info.value.suggested_filename
                info.value.save_as(target)
                texts = ["".join(t.itertext()) for t in ET.parse(target).iter("{http://www.w3.org/2000/svg}text")]
                assert texts and not [t for t in texts if "…" in t], f"{target.name}: {texts}"
                assert target.name.startswith(f"{name}-") and target.name not in files
                files.append(target.name)
                downloaded += 1
                page.keyboard.press("Escape")
        assert downloaded == page.get_by_test_id("stVegaLiteChart").count(), f"/{path}: a chart without a menu"
    assert_clean(page)
    print(f"\n{len(files)} charts downloaded as SVG, none cut: {files}")
    assert files
