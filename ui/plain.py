"""Text shown literally: `plain()` neutralises everything Streamlit's markdown would interpret in visitor text.

Streamlit renders the body of st.error/warning/info/markdown/caption as GitHub markdown plus its own
directives (`:red[...]`, `:material/icon:`) and LaTeX between `$`. CommonMark lets every ASCII punctuation
character be escaped with a backslash, and an escaped character starts nothing: no link, image, HTML tag,
entity, directive or formula. GitHub's autolinks of bare `http://`, `www.` and `a@b.c` are found after
parsing, in the unescaped text, so a zero-width space breaks each of those patterns instead (the text looks
the same). Line breaks become spaces (no block syntax); control and format characters (bidi overrides,
zero-width joiners) are dropped, so the text cannot reorder or hide itself.
"""

from __future__ import annotations

import re
import string
import unicodedata

import streamlit as st

_PUNCTUATION = re.compile("([" + re.escape(string.punctuation) + "])")
_SPACES = re.compile(r"\s+")
_AUTOLINK = re.compile(r"(?i)(?<=:)(?=//)|(?<=www)(?=\.)|(?<=@)")  # where GitHub's autolinks would start
ZERO_WIDTH_SPACE = "\u200b"


def plain(text: object) -> str:
    """`text` escaped so that st.markdown and the alert boxes show it exactly as written, on one line."""
    text = "".join(c for c in _SPACES.sub(" ", str(text)) if unicodedata.category(c) not in ("Cc", "Cf"))
    text = _AUTOLINK.sub(ZERO_WIDTH_SPACE, text.strip())
    return _PUNCTUATION.sub(r"\\\1", text)


def clip(text: str, n: int = 40) -> str:
    """At most n characters of a visitor's text, to quote it in a message."""
    return text if len(text) <= n else text[: n - 1] + "…"


def error(heading: str, text: object) -> None:
    """An error box: our own bold heading, then text (which may quote the visitor) shown literally."""
    st.error(f"**{heading}** {plain(text)}", icon=":material/error:")
