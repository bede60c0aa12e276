"""The command line's text layout: tables and paragraphs that fit WIDTH columns (a table too wide is split into
blocks of columns, its key columns repeated at the left of each; a paragraph is wrapped), and text from the user
(a config.json's keys, a file's name) shown escaped, never as a terminal's control sequences."""

from __future__ import annotations

import re
import sys
import textwrap
from contextlib import contextmanager

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


# What a terminal would act on rather than show: C0 controls but the tab, line feed and the progress line's carriage
# return, DEL and the C1 controls (ESC [ starts a colour, a cursor move, a screen clear; ESC ] a window title), and
# the bidirectional controls that reorder a line.
TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(c: str) -> str:
    return repr(c)[1:-1]  # '\x1b', '\n', '\u202e'


def escaped(text: str) -> str:
    """The user's text (a key, a file name) as one printable line: every character that is not printable written as
    its Python escape (\\x1b, \\n, \\u202e), the rest as it is."""
    return "".join(c if c.isprintable() else _escape(c) for c in str(text))


class TerminalSafe:
    """A text stream that writes TERMINAL_CONTROLS as escapes, whatever printed them (the bytes of .buffer pass)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(TERMINAL_CONTROLS.sub(lambda m: _escape(m.group()), text))

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextmanager
def terminal_safe():
    """sys.stdout and sys.stderr as TerminalSafe streams for the duration (a command's run)."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TerminalSafe(out), TerminalSafe(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
