"""A page's wait for one of the server's slots (lab.jobs.slots), drawn: a notice while really waiting, none when a
slot is free; and a slot for work outside a script run (a deferred download).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager

import streamlit as st

from lab.jobs import slots
from ui.limits import limits


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
