"""Shared AppTest helpers: open a page script on its own, and read what it shows."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

PAGES_DIR = Path(__file__).resolve().parents[1] / "app_pages"
TIMEOUT = 120


def free_slots(n: int) -> int:
    """How many of the server's n slots can be taken right now (all given back again)."""
    from lab.jobs.slots import shared

    slots, taken = shared(n), 0
    while slots.acquire(blocking=False):
        taken += 1
    for _ in range(taken):
        slots.release()
    return taken


@contextmanager
def temporary_store(tmp_path_factory, runs: Iterable) -> Iterator[None]:
    """A fresh run store (ATTNCORE_CACHE_DIR) holding `runs`, trained once, for one test module's AppTests."""
    from lab.store import get_run

    mp = pytest.MonkeyPatch()
    mp.setenv("ATTNCORE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    try:
        for run in runs:
            get_run(run)
        yield
    finally:
        mp.undo()


def dashboard_at(url_path: str, query: dict, timeout: float = 240) -> AppTest:
    """The whole dashboard (dashboard.py's navigation) run once as a first request for /<url_path> with these query
    parameters, as test_urls opens a page; the caller reads its exceptions."""
    from streamlit.util import calc_hash

    at = AppTest.from_file("../dashboard.py", default_timeout=timeout)
    at.query_params.update(query)
    at._page_hash = calc_hash(url_path)
    at.run()
    return at


def page(name: str, **query) -> AppTest:
    """The page script app_pages/<name>.py run on its own, opened with these query parameters."""
    at = AppTest.from_file(str(PAGES_DIR / f"{name}.py"), default_timeout=TIMEOUT)
    at.query_params.update(query)
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def shown(markdown: str) -> str:
    """What a markdown body reads as on screen where it escapes punctuation (ui.plain): the backslashes dropped."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


def texts(elements) -> str:
    return "\n".join(shown(str(e.value)) for e in elements)


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def charts(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]


def axis_labels(axis: dict) -> dict[float, str]:
    """{tick value: the label Vega writes} of a ui.charts.base.labelled_axis, its labelExpr read as Vega would."""
    found = re.findall(r"abs\(datum\.value - ([^)]+)\) <= ([^ ]+) \? '([^']*)'", axis["labelExpr"])
    rules = [(float(v), float(tol), text) for v, tol, text in found]

    def label(x: float) -> str:
        return next((text for v, tol, text in rules if abs(x - v) <= tol), "")

    return {x: label(x) for x in axis["values"]}
