"""docs/ and the Science page: every link a page or a docs file makes lands on a section that exists, and no
page or README sentence cites a file the repository does not ship."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from apptest_helpers import page

from attncore.mechanisms.demos import scaling_statistics
from ui import docs, science
from ui.charts.scaling import scaling_table

ROOT = Path(__file__).resolve().parents[1]
PAGE_LINK = re.compile(r'docs\.link\(\s*"([^"]+)"')
MD_LINK = re.compile(r"\]\(([^)#\s]+\.md)?(#[^)\s]+)?\)")


def test_slug_is_githubs_anchor():
    assert docs.slug("Why divide by √d_k") == "why-divide-by-d_k"
    assert docs.slug("Tasks, training and evaluation") == "tasks-training-and-evaluation"
    assert docs.slug("The key-value cache") == "the-key-value-cache"


def test_every_page_link_lands_on_a_docs_section():
    anchors = docs.all_anchors()
    linked = {a for p in (ROOT / "app_pages").glob("*.py") for a in PAGE_LINK.findall(p.read_text())}
    assert len(linked) >= 9  # the pages that rely on the science link it
    assert linked <= anchors, sorted(linked - anchors)


@pytest.mark.parametrize("name", docs.FILES)
def test_links_between_docs_files_resolve(name):
    for target, anchor in MD_LINK.findall(docs.read(name)):
        if target:
            assert (docs.DOCS_DIR / target).is_file(), target
        if anchor:
            assert anchor[1:] in docs.anchors(docs.read(target or name)), (name, target, anchor)


def test_headings_are_unique_across_the_science_page():
    every = [a for name in docs.FILES for a in docs.anchors(docs.read(name))]
    assert len(every) == len(set(every))


def test_no_page_readme_or_docs_file_cites_the_spec():
    """The design reference is not shipped: pages name "the article" and link docs/, never "SPEC §x"."""
    shown = [*(ROOT / "app_pages").glob("*.py"), ROOT / "README.md", *docs.DOCS_DIR.glob("*.md")]
    shown += [ROOT / "attncore" / "serving" / "presets.py", ROOT / "benchmarks" / "attention_cost.py"]
    shown += [ROOT / "benchmarks" / "kv_cache.py", ROOT / "attncore" / "serving" / "kvbench.py"]
    assert [p.name for p in shown if "SPEC" in p.read_text()] == []


def test_science_page_renders_every_file_with_anchors_and_in_page_links():
    at = page("science")
    assert not at.exception and at.title[0].value == "Science"
    headings = [h for h in at.get("heading")] + list(at.header) + list(at.subheader)
    anchors = {h.proto.anchor for h in headings}
    assert docs.all_anchors() <= anchors
    body = "\n".join(m.value for m in at.markdown)
    assert "Attention, Derived in Full" in body
    assert ".md)" not in body and "](#the-model)" in body  # links between files point within the page


def test_science_page_renders_formulas_as_math_and_redraws_the_sqrt_dk_table_from_the_lab():
    at = page("science")
    body = "\n".join(m.value for m in at.markdown)
    assert "$$Y = \\operatorname{softmax}" in body and "biases: Q = X W_Q" not in body  # math, not plain text
    table = at.dataframe[0].value  # the lab's own √d_k table, after the article's
    rows = scaling_statistics(*science.SCALING_KEY)
    assert table.equals(scaling_table(rows))
    assert "numerics version 3" not in "\n".join(docs.read(name) for name in docs.FILES)
