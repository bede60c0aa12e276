"""A page reads like a paragraph: what it shows, what to try, one link to docs/. The literature stays in docs/ (the
share of the pages' source that is shown prose, benchmarks/prose_share.py), and what a page says of a run or of the
registered tasks is read from them."""

from __future__ import annotations

import sys

import pytest
from apptest_helpers import page, texts
from conftest import ROOT

from attncore import make_run
from attncore import task as tasks
from lab import phrases

sys.path.insert(0, str(ROOT / "benchmarks"))
import prose_share  # noqa: E402

EDITED = ("ablations", "home", "kv_cache", "masks", "results", "attention")  # the pages whose prose moved to docs/


def test_the_measure_counts_shown_literals_and_nothing_else():
    source = """
st.caption("four")
col.markdown(f"ab{x}cd")
st.number_input("Label", help="helps")
st.caption("outer" + st.markdown("in"))
title = "not shown by a call"
st.title("a title")
"""
    assert prose_share.prose_chars(source) == len("four") + len("abcd") + len("helps") + len("outer") + len("in")


def test_the_pages_shown_prose_stays_well_under_the_quarter_it_was():
    """It was 24.6 % before the literature moved to docs/ (python benchmarks/prose_share.py --rev da1f474); a page
    that grows its captions back into paragraphs pushes it over."""
    per_page, share = prose_share.shares(prose_share.page_sources())
    assert share < 0.23, f"{share:.1%} of app_pages/ is shown prose"
    for name in EDITED:
        prose, size = per_page[f"{name}.py"]
        assert prose / size < 0.25, (name, prose, size)


@pytest.mark.parametrize("name", ["kv_cache", "masks"])
def test_an_edited_page_renders_and_links_its_doc(name, cache):
    """The two edited pages that need no trained run (the others are AppTests of tests/test_app.py)."""
    from ui import docs

    at = page(name)
    links = {a for a in docs.all_anchors() if f"]({docs.href(a)})" in texts(at.markdown)}
    assert links, "no link to a docs section"


def test_a_full_batch_run_says_the_batch_it_trains_on_not_the_settings_cap():
    """The modular task trains on its whole training split: its description said 'batch 65536'."""
    task = tasks.get("modular")
    run = make_run("modular", task.defaults["length"], 0, **{k: v for k, v in task.defaults.items() if k != "length"})
    rows = task.batch_rows(run.task, run.train.batch_size)
    said = phrases.describe(run)
    assert rows < run.train.batch_size and f"batch {rows} (the whole training set)" in said
    assert f"batch {run.train.batch_size}" not in said
    smaller = make_run("modular", task.defaults["length"], 0, batch_size=rows // 2)
    assert f"batch {rows // 2}" in phrases.describe(smaller) and "whole" not in phrases.describe(smaller)
    assert phrases.describe(make_run()).endswith("batch 32")  # a task that samples: its batch as set


def test_home_names_every_registered_task_from_the_registry(cache, monkeypatch):
    """The intro counts the tasks and lists each with its summary: a task registered later is named too."""
    from test_app import app
    from test_task_pages import RotateTask

    import lab.presets

    monkeypatch.setattr(lab.presets, "preset", lambda name: [])  # no article sweep to estimate: the intro alone
    tasks.register(RotateTask())
    try:
        said = texts(app().markdown)
        assert f"learns {len(tasks.names())} tasks" in said
        for name in tasks.names():
            assert f"**{tasks.get(name).shown_name()}**: {tasks.get(name).summary}." in said, name
    finally:
        tasks.unregister("rotate")


@pytest.mark.slow  # trains the default run at 30 steps into a store of the test's own
@pytest.mark.parametrize("name", ["home", "ablations", "results", "attention"])
def test_an_edited_lab_page_renders_and_links_its_doc(name, tmp_path_factory, monkeypatch):
    """Inside the dashboard, at its defaults (30 steps): no exception, and the page's one link to docs/ is there."""
    from apptest_helpers import temporary_store
    from test_app import STEPS, app

    import lab.presets
    from ui import docs

    monkeypatch.setattr(lab.presets, "preset", lambda name: [])  # Home: no article sweep to estimate
    with temporary_store(tmp_path_factory, [make_run(steps=STEPS)]):
        at = app(name) if name != "home" else app()
    shown = texts(at.markdown) + texts(at.caption)
    assert [a for a in docs.all_anchors() if f"]({docs.href(a)})" in shown], "no link to a docs section"
