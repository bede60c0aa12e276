"""A page's URL path matches whatever its case: /Train (as the sidebar spells the page) opens Train, not Home;
a path no page has still runs Home (Streamlit says the page was not found)."""

from __future__ import annotations

import dataclasses

import pytest
from streamlit.runtime.scriptrunner_utils import script_requests
from streamlit.testing.v1 import local_script_runner

from ui.nav import PAGES, page_for


def test_page_for_matches_any_case_and_knows_no_other_page():
    assert page_for("Train").url_path == "train" and page_for("/KV-Cache/").url_path == "kv-cache"
    assert page_for("train") == page_for("TRAIN") == page_for("tRaIn")
    assert page_for("Trains") is None and page_for("") is None and page_for("/") is None
    assert all(page_for(p.url_path.upper()) is p for p in PAGES if p.url_path)


ASKED = [("Train", "Train"), ("KV-CACHE", "KV cache"), ("nowhere", "Attention Lab")]  # nowhere: Home


@pytest.mark.slow
@pytest.mark.parametrize(("asked", "title"), ASKED)
def test_a_first_request_by_path_opens_the_page_whatever_its_case(cache, monkeypatch, asked, title):
    """The dashboard's first run as a browser opening /<asked> starts it: by page name, with no page hash."""
    from test_app import app

    real = script_requests.RerunData

    def by_name(**kwargs):
        return dataclasses.replace(real(**kwargs), page_name=asked)

    monkeypatch.setattr(local_script_runner, "RerunData", by_name)
    at = app()
    assert [t.value for t in at.title][:1] == [title]  # Home's title is the lab's name
