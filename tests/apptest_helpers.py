"""Shared AppTest helpers: open a page script on its own, and read what it shows."""

from __future__ import annotations

import json
import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

PAGES_DIR = Path(__file__).resolve().parents[1] / "app_pages"
TIMEOUT = 120


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
