"""The hosted caps as a page reads them (st.secrets, the server's headless option; a rejected value shown once per
visitor), and a page's wait for one of the server's slots, with its notice. The caps are lab.jobs.caps, the slots
lab.jobs.slots.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from contextlib import contextmanager

import streamlit as st

from lab.jobs import slots
from lab.jobs.caps import Limits, parse_limits

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


@contextmanager
def background_slot(what: str, wait_seconds: float | None = None):
    """One of the server's slots for work outside a page's script run (a deferred download), no message shown.

    Waits up to slot_wait_seconds (or wait_seconds), then raises BusyError naming `what`.
    """
    lim = limits()
    with slots.held(lim.max_concurrent, what, lim.slot_wait_seconds if wait_seconds is None else wait_seconds):
        yield


@contextmanager
def training_slot(what: str = "this training", clock: Callable[[], float] = time.monotonic):
    """Hold one of the server's `max_concurrent` slots for the `with` body (yields the lab.jobs.slots.Slot).

    A message shows only while really waiting; it is redrawn every SLOT_POLL_SECONDS, which is where
    Streamlit stops or reruns a page whose visitor left or changed a widget. Whatever is raised where,
    a slot that was taken is given back (or, after Slot.hand_to, when the job it was handed to ends).
    """
    lim = limits()
    slot, notice = None, None

    def waiting(waited: float) -> None:
        nonlocal notice
        if notice is None:
            notice = st.empty()
        text = slots.wait_text(lim.max_concurrent, lim.slot_wait_seconds, what, waited)
        notice.info(text, icon=":material/hourglass_top:")

    try:
        slot = slots.take(lim.max_concurrent, what, lim.slot_wait_seconds, waiting, clock)
        if notice is not None:
            notice.empty()
        yield slot
    finally:
        if slot is not None and not slot.handed:
            slot.release()
        if notice is not None:
            notice.empty()
