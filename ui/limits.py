"""The hosted caps as a page reads them: lab.jobs.limits from the environment and st.secrets, in force as the server
runs (headless or not), a rejected value shown once per visitor. A page's wait for a slot is ui.slots.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

import streamlit as st

from lab.jobs.limits import Limits, parse_limits

_LOG = logging.getLogger(__name__)


def _secrets_section() -> dict:
    try:
        section = st.secrets.get("limits", {})
        return dict(section) if isinstance(section, Mapping) else {}
    except Exception:  # no secrets.toml at all: Streamlit raises rather than returning empty
        return {}


_reported: set[str] = set()


def headless() -> bool:
    """Whether this server runs headless (no display: containers, Community Cloud), Streamlit's own option."""
    return bool(st.get_option("server.headless"))


def limits() -> Limits:
    """The caps in force (environment > secrets > defaults; the work caps in hosted mode only), read on every
    script run."""
    lim, problems = parse_limits(os.environ, _secrets_section())
    for message in problems:  # an operator's typo: once in the server log, once per visitor session
        if message not in _reported:
            _reported.add(message)
            _LOG.warning(message)
        try:
            shown = st.session_state.setdefault("_limits_reported", set())
            if message not in shown:
                shown.add(message)
                st.warning(message.replace("`", "'"), icon=":material/settings:")
        except Exception:  # no script run (a thread or a test): the log line is enough
            pass
    return lim.in_force(headless())
