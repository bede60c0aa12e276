"""Hosted-mode caps: the largest run a visitor may ask for, and how many trainings run at once.

Each cap is read from an environment variable (e.g. ATTNLAB_MAX_STEPS=2000), else from
`.streamlit/secrets.toml` under `[limits]` (e.g. `max_steps = 2000`), else the default below.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, fields

import streamlit as st


@dataclass(frozen=True)
class Limits:
    max_steps: int = 3000
    max_d_model: int = 128
    max_length: int = 12  # L: symbols per task sequence
    max_layers: int = 4
    max_heads: int = 16
    max_batch: int = 128
    max_concurrent: int = 2  # trainings (or sweeps) running at once on this server
    max_sweep_runs: int = 30  # runs one button press may train
    sweep_jobs: int = 2  # worker processes of a sweep
    slot_wait_seconds: int = 120  # how long a training waits for a free slot
    max_store_mb: int = 512  # the run store's size cap; least-recently-used runs beyond it are evicted
    max_bundle_mb: int = 50  # largest run bundle a visitor may upload on Home
    bundle_upload: bool | None = None  # Home's "Load a bundle": None = on with a display, off when headless

    def upload_allowed(self) -> bool:
        """Whether Home offers to load a bundle: the switch if set, else only for a desktop (non-headless) server."""
        if self.bundle_upload is not None:
            return self.bundle_upload
        return not st.get_option("server.headless")


def _secrets_section() -> dict:
    try:
        return dict(st.secrets.get("limits", {}))
    except Exception:  # no secrets.toml at all: Streamlit raises rather than returning empty
        return {}


def _from_environment() -> Limits:
    secrets = _secrets_section()
    values = {}
    for f in fields(Limits):
        raw = os.environ.get(f"ATTNLAB_{f.name.upper()}", secrets.get(f.name))
        if raw is None:
            continue
        if f.name == "bundle_upload":  # a switch, not a cap
            switch = {"1": True, "true": True, "on": True, "0": False, "false": False, "off": False}
            if str(raw).strip().lower() in switch:
                values[f.name] = switch[str(raw).strip().lower()]
            else:
                st.warning(f"Ignoring the limit {f.name}: it must be 1 or 0 (on or off).")
            continue
        try:
            values[f.name] = max(1, int(raw))
        except (TypeError, ValueError):
            st.warning(f"Ignoring the limit {f.name}={raw!r}: it must be a positive integer.")
    return Limits(**values)


def limits() -> Limits:
    """The caps in force (environment > secrets > defaults), read on every script run."""
    return _from_environment()


@st.cache_resource
def _slots(n: int) -> threading.BoundedSemaphore:
    return threading.BoundedSemaphore(n)  # one per server process, shared by every session


class BusyError(RuntimeError):
    """All training slots stayed taken for longer than the wait allowed."""


@contextmanager
def training_slot():
    """Hold one of the server's `max_concurrent` training slots; wait for one if all are taken."""
    lim = limits()
    slots = _slots(lim.max_concurrent)
    if not slots.acquire(blocking=False):
        with st.spinner(f"{lim.max_concurrent} trainings are already running on this server: waiting for a slot..."):
            if not slots.acquire(timeout=lim.slot_wait_seconds):
                raise BusyError(
                    f"The server is busy ({lim.max_concurrent} trainings at once is the cap). Try again in a minute."
                )
    try:
        yield
    finally:
        slots.release()
