"""The science pages of docs/ inside the app: the Science page renders them, other pages link their sections.

Headings get GitHub's anchors (so a section has the same address on GitHub and in the app), and links
between the docs files become links within the Science page, which shows every file in order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

import streamlit as st

DOCS_DIR = Path(__file__).resolve().parents[1] / "docs"
SCIENCE = (
    "README.md",
    "model.md",
    "training.md",
    "experiments.md",
    "interventions.md",
    "regimes.md",
    "induction.md",
    "sinks.md",
    "grokking.md",
)
REFERENCE = (
    "architecture.md", "cli.md", "lessons.md", "store.md", "hosting.md", "serving.md", "reproducibility.md",
    "benchmarks.md",
)  # fmt: skip
FILES = SCIENCE + REFERENCE  # the Science page's order: the science, then how the lab is built and run
PAGE = "science"  # the Science page's URL path (ui/nav.py)
_HEADING = re.compile(r"^(#{1,3}) (.+)$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_DOC_LINK = re.compile(r"\]\(([\w-]+\.md)(#[\w-]+)?\)")


def slug(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens ('Why divide by √d_k'
    -> 'why-divide-by-d_k')."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower(), flags=re.ASCII).replace(" ", "-")


def read(name: str) -> str:
    return (DOCS_DIR / name).read_text(encoding="utf-8")


def _headings(lines: list[str]) -> list[re.Match | None]:
    """Per line, its heading match, or None; a '# comment' inside a fenced code block is not a heading."""
    out, fenced = [], False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
        out.append(None if fenced else _HEADING.match(line))
    return out


def anchors(text: str) -> list[str]:
    """The anchors of a docs file's headings, in order."""
    return [slug(m.group(2)) for m in _headings(text.splitlines()) if m]


def all_anchors() -> set[str]:
    return {a for name in FILES for a in anchors(read(name))}


def in_page_links(text: str) -> str:
    """'(model.md#masks)' -> '(#masks)', '(model.md)' -> '(#the-model)': every docs file is on one page."""

    def target(m: re.Match) -> str:
        return f"]({m.group(2) or '#' + anchors(read(m.group(1)))[0]})"

    return _DOC_LINK.sub(target, text)


def sections(text: str) -> list[tuple[int, str, str]]:
    """A docs file as (level, heading, markdown body) triples; level 0 for text before the first heading."""
    out, level, title, body = [], 0, "", []
    lines = text.splitlines()
    for line, m in zip(lines, _headings(lines), strict=True):
        if m:
            if title or any(s.strip() for s in body):
                out.append((level, title, "\n".join(body).strip()))
            level, title, body = len(m.group(1)), m.group(2), []
        else:
            body.append(line)
    out.append((level, title, "\n".join(body).strip()))
    return out


def render(name: str, after: Mapping[str, Callable[[], None]] | None = None) -> None:
    """One docs file: headings with their GitHub anchors, bodies as markdown (its $...$ and $$...$$ as math,
    which GitHub renders too) with in-page links; after[anchor]() draws below the section of that anchor."""
    for level, title, body in sections(in_page_links(read(name))):
        if title:
            (st.header if level <= 2 else st.subheader)(title, anchor=slug(title), divider=level == 1)
        if body:
            st.markdown(body)
        if after and title and slug(title) in after:
            after[slug(title)]()


def href(anchor: str) -> str:
    """The address of a section of the Science page, for a markdown link inside a sentence."""
    return f"{PAGE}#{anchor}"


def link(anchor: str, label: str) -> None:
    """A line linking a section of the Science page (opens in a new tab, scrolled to the section)."""
    shown = label.replace("_", r"\_")  # 'd_k' as written: an underscore would start emphasis in markdown
    st.markdown(f":material/menu_book: [{shown}]({href(anchor)})")
