"""The command line's text layout: tables and paragraphs that fit WIDTH columns (a table too wide is split into
blocks of columns, its key columns repeated at the left of each; a paragraph is wrapped)."""

from __future__ import annotations

import textwrap

WIDTH = 120


def _width(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def table(frame, keys=(), width: int = WIDTH, **to_string) -> str:
    """frame.to_string(index=False, **to_string) in blocks of at most `width` columns: the key columns, then as
    many of the others as fit, block after block (the formatters may name columns of any block)."""
    keys = [k for k in keys if k in frame.columns]
    text = frame.to_string(index=False, **to_string)
    if _width(text) <= width:
        return text
    blocks, current = [], []
    for column in (c for c in frame.columns if c not in keys):
        trial = frame[[*keys, *current, column]].to_string(index=False, **to_string)
        if current and _width(trial) > width:
            blocks.append(current)
            current = []
        current.append(column)
    blocks.append(current)
    return "\n\n".join(frame[[*keys, *block]].to_string(index=False, **to_string) for block in blocks)


def paragraph(text: str, width: int = WIDTH) -> str:
    """The text wrapped to `width` columns (words kept whole)."""
    return textwrap.fill(text, width=width, break_long_words=False, break_on_hyphens=False)
