"""Hosted mode: training slots released on every path, a dead worker pool replaced, a worker without
Streamlit, Cancel on Train, metered page work and the caps' parser."""

from __future__ import annotations

import threading

import hosted_probe
import pytest
from streamlit.testing.v1 import AppTest

from ui import limits as limits_module

TIMEOUT = 60


@pytest.fixture(autouse=True)
def fresh_slots():
    """Every test starts with the server's slots all free (a leak in one test must not fail the next)."""
    limits_module._slots.clear()
    yield
    limits_module._slots.clear()


def _slot_script() -> None:
    import hosted_probe
    import streamlit as st

    from ui.limits import training_slot

    hosted_probe.inject_faults()
    st.write("before")
    with training_slot():
        st.write("inside")
    st.write("after")


def _free_slots(n: int) -> int:
    """How many of the server's n slots can be taken right now (all given back again)."""
    slots, taken = limits_module._slots(n), 0
    while slots.acquire(blocking=False):
        taken += 1
    for _ in range(taken):
        slots.release()
    return taken


def _run_slot_script(fault_at: int, kind: str, contended: bool) -> int:
    """Run the script with Streamlit's stop/rerun raised at its fault_at-th message; returns messages seen."""
    hosted_probe.arm(fault_at, kind)
    holder = None
    if contended:  # another session trains: the script must wait, then get the slot
        slots = limits_module._slots(1)
        assert slots.acquire(blocking=False)
        holder = threading.Timer(0.8, slots.release)
        holder.start()
    at = AppTest.from_function(_slot_script, default_timeout=TIMEOUT).run()
    if holder is not None:
        holder.join()
    assert not at.exception, [e.message for e in at.exception]
    return hosted_probe.FAULT["seen"]


@pytest.mark.parametrize("contended", [False, True], ids=["free", "waiting"])
@pytest.mark.parametrize("kind", ["stop", "rerun"])
def test_training_slot_is_released_when_streamlit_stops_or_reruns_at_any_point(monkeypatch, kind, contended):
    monkeypatch.setenv("ATTNLAB_MAX_CONCURRENT", "1")
    monkeypatch.setenv("ATTNLAB_SLOT_WAIT_SECONDS", "30")
    messages = _run_slot_script(0, kind, contended)  # no fault: count the messages of a clean run
    assert messages >= 3 and _free_slots(1) == 1
    for fault_at in range(1, messages + 1):
        _run_slot_script(fault_at, kind, contended)
        assert _free_slots(1) == 1, f"slot leaked when Streamlit raised {kind} at message {fault_at}"
