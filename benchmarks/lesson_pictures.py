"""The Lessons page's gallery: a picture of each lesson, its link opened at 1,280 px in headless Chromium on a
server over a warmed store: the page's first chart (else the main area's top), saved as static/lessons/<name>.png,
at most 640 px wide.

Usage: python benchmarks/lesson_pictures.py --store DIR [--port 8635] [--lessons sqrt-dk masks ...]

DIR is a run store warmed by `python -m attncore lessons warm` (ATTNCORE_CACHE_DIR=DIR); a lesson whose runs are
missing there is pictured as it opens then (offering to train), and the script says which ones those were.
Playwright drives Debian's Chromium (/usr/bin/chromium, tests/browser_helpers.py's flags); the server is
benchmarks/page_cpu.py's hosted one on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tests")]

from browser_helpers import chromium, wait_for_app  # noqa: E402
from page_cpu import hosted_server  # noqa: E402
from PIL import Image  # noqa: E402

from lab.lessons import LESSONS, picture  # noqa: E402

WIDTH, HEIGHT = 1280, 900  # the browser's window
PICTURED = 640  # px of the main area's top in the picture of a page without a chart
SAVED_WIDTH = 640
NOT_WARM = ("Not trained yet", "still to train", "lessons warm")


def shoot(tab, base: str, lesson) -> tuple[bytes, bool]:
    """(PNG of the lesson's page, whether it opened from the store)."""
    tab.goto(base + lesson.url())
    wait_for_app(tab, timeout=300)
    text = tab.inner_text("[data-testid=stMain]")
    warm = not any(w in text for w in NOT_WARM)
    charts = tab.get_by_test_id("stVegaLiteChart")
    if charts.count():  # the page's first chart: what the lesson is about, drawn from its runs
        return charts.first.screenshot(), warm
    box = tab.get_by_test_id("stMainBlockContainer").bounding_box()  # else the page's top, without the sidebar
    clip = {"x": box["x"], "y": box["y"], "width": box["width"], "height": min(PICTURED, HEIGHT - box["y"])}
    return tab.screenshot(clip=clip), warm


def save(png: bytes, path: Path) -> None:
    image = Image.open(io.BytesIO(png)).convert("RGB")
    if image.width > SAVED_WIDTH:
        image = image.resize((SAVED_WIDTH, round(image.height * SAVED_WIDTH / image.width)), Image.LANCZOS)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, optimize=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True, help="a store warmed by `lessons warm`")
    parser.add_argument("--port", type=int, default=8635)
    parser.add_argument("--lessons", nargs="*", help="names of the lessons to picture (default: every lesson)")
    args = parser.parse_args()
    lessons = [x for x in LESSONS if args.lessons is None or x.name in args.lessons]
    cold = []
    with tempfile.TemporaryDirectory() as tmp:
        server = hosted_server(args.store, args.port, Path(tmp) / "server.log")
        with server as (base, _), chromium() as browser:
            tab = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            for lesson in lessons:
                png, warm = shoot(tab, base, lesson)
                save(png, picture(lesson))
                cold += [] if warm else [lesson.name]
                print(f"{picture(lesson).relative_to(ROOT)}{'' if warm else ' (runs missing: offers to train)'}")
    if cold:
        print(f"not from a warmed store: {', '.join(cold)}")


if __name__ == "__main__":
    main()
