"""Text shown literally: `plain()` escapes everything Streamlit's markdown would interpret in visitor text.

Streamlit renders the body of st.error/warning/info/markdown/caption as GitHub markdown plus its own
directives (`:red[...]`, `:material/icon:`), LaTeX between `$` and autolinked `www.`/`http://` text. CommonMark
lets every ASCII punctuation character be escaped with a backslash, and an escaped character starts nothing:
no link, image, HTML tag, entity, directive, formula or autolink. Line breaks become spaces (no block syntax).
"""

from __future__ import annotations

import re
import string

import streamlit as st

_PUNCTUATION = re.compile("([" + re.escape(string.punctuation) + "])")
_SPACES = re.compile(r"\s+")


def plain(text: object) -> str:
    """`text` escaped so that st.markdown and the alert boxes show it exactly as written, on one line."""
    return _PUNCTUATION.sub(r"\\\1", _SPACES.sub(" ", str(text)).strip())


def clip(text: str, n: int = 40) -> str:
    """At most n characters of a visitor's text, to quote it in a message."""
    return text if len(text) <= n else text[: n - 1] + "…"


def error(heading: str, text: object) -> None:
    """An error box: our own bold heading, then text (which may quote the visitor) shown literally."""
    st.error(f"**{heading}** {plain(text)}", icon=":material/error:")
