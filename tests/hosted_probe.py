"""Helpers that run where a test cannot reach directly: in a training worker (imports only the stdlib)
and in an AppTest script thread (a one-shot fault: Streamlit's stop or rerun at the Nth message)."""

from __future__ import annotations

import os
import sys

FAULT = {"at": 0, "seen": 0, "kind": "stop", "text": None}  # set by the test; read in the script thread


def worker_state() -> tuple[bool, int]:
    """(whether streamlit is imported, pid) of the process this runs in."""
    return "streamlit" in sys.modules, os.getpid()


def arm(at: int, kind: str, text: str | None = None) -> None:
    """Fault at the at-th message, or (text given) at the first message that contains `text`."""
    FAULT.update(at=at, seen=0, kind=kind, text=text)


def inject_faults() -> None:
    """Make this script run's Nth outgoing message raise what the ScriptRunner raises when the visitor
    leaves (StopException) or changes a widget (RerunException): the runner checks for those requests
    exactly there, at every message it enqueues. One-shot, so a rerun does not fail again."""
    from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException
    from streamlit.runtime.scriptrunner_utils.script_requests import RerunData
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    ctx = get_script_run_ctx()
    real = ctx._enqueue

    def enqueue(msg) -> None:
        FAULT["seen"] += 1
        hit = FAULT["text"] in str(msg) if FAULT["text"] else FAULT["seen"] == FAULT["at"]
        if hit:
            FAULT.update(at=0, text=None)
            raise StopException() if FAULT["kind"] == "stop" else RerunException(RerunData())
        real(msg)

    ctx._enqueue = enqueue
