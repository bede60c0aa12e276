"""Live training from a page, drawn: the progress bar with elapsed time and time left, the live loss curve, Cancel,
the expected duration (lab.cost_model), and where a Cancel stopped it. lab.jobs.training runs it.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from concurrent.futures import BrokenExecutor
from pathlib import Path

import streamlit as st

from attncore import RunConfig
from lab import cost_model, wall
from lab.formats import duration
from lab.jobs import training
from lab.jobs.progress import Cancelled
from lab.jobs.slots import BusyError
from lab.store import RunRecord, cache_dir
from ui import frames, plain
from ui.charts import runs as charts
from ui.figure import show_chart
from ui.limits import limits
from ui.slots import training_slot

TOKEN_KEY = "_live_token"  # session_state: this visitor's key into lab.jobs' memos of running jobs


def expectation(run: RunConfig) -> str:
    """One sentence on how long training `run` should take here, from lab.cost_model (no earlier run needed)."""
    if cost_model.calibrated(1):
        cost = cost_model.model()
    else:
        with st.spinner("Timing this server's CPU for the estimates (once per server process, a few seconds)..."):
            cost = cost_model.model()
    here = wall.estimate(cost, [run], 1, cache_dir())
    return (
        f"Expect {wall.about(here)} here, {duration(cost.run_seconds(run))} of computing: estimated from its "
        "size, steps and batch by a cost model timed on this server's CPU, and the load on it over the last minutes "
        "(the bar shows the time left at the pace it measures)."
    )


def train_live(run: RunConfig) -> RunRecord | None:
    """Train (or fetch) one run in a worker, with progress, time left, a live loss curve and Cancel."""
    steps = run.train.steps
    token = st.session_state.setdefault(TOKEN_KEY, uuid.uuid4().hex)
    bar, curve, cancel = st.empty(), st.empty(), st.empty()
    bar.progress(0.0, text="Starting: a training slot, then a worker process")  # at once, whatever comes next

    def show(fraction: float, text: str, losses) -> None:
        bar.progress(fraction, text=text)
        if losses is not None:
            show_chart(
                charts.live_loss_curve(frames.history_frame(losses), steps),
                "live-loss",
                where=curve,
                width="stretch",
                downloads=False,
            )

    try:
        with training_slot() as slot, tempfile.TemporaryDirectory() as tmp:
            lim = limits()
            job = training.start(run, lim.max_concurrent, lim.store_bytes(), Path(tmp) / "progress.f64")
            slot.hand_to(job.future)  # the slot is free again when the worker is, not when this page leaves
            training.remember(token, job)
            try:
                cancel.button("Cancel", key="train_cancel", icon=":material/stop_circle:")  # a click reruns
                trained = training.follow(job, show)
            finally:
                if not job.future.done():
                    job.stop()
    except BusyError as e:
        _clear(bar, curve, cancel)
        st.error(str(e), icon=":material/hourglass_top:")
        return None
    except Cancelled as e:
        _clear(bar, curve, cancel)
        st.warning(f"Cancelled after {e.steps_done:,} of {steps:,} steps; nothing was stored.")
        return None
    except BrokenExecutor:
        _clear(bar, curve, cancel)
        st.error(
            "The training worker stopped unexpectedly (killed, or out of memory); nothing was stored. "
            "A new worker starts with the next training: press Train again.",
            icon=":material/error:",
        )
        return None
    except Exception as e:  # a failed worker: one line, never a traceback
        _clear(bar, curve, cancel)
        st.error(f"Training failed: {type(e).__name__}: {e}", icon=":material/error:")
        return None
    _clear(bar, curve, cancel)
    if trained.not_stored:
        st.error(
            f"Trained, but the run store could not keep this run ({plain.plain(trained.not_stored)}), so it is not "
            "stored: what follows is shown this once, and a reload will say it is not trained yet. The server's "
            "operator can free space in the store's folder (or lower its size cap) and train it again.",
            icon=":material/error:",
        )
    return trained.record


def _clear(*placeholders) -> None:
    for p in placeholders:
        p.empty()


def report_cancelled(run: RunConfig) -> None:
    """After a Cancel (which reruns the page), say where this visitor's training of `run` stopped, once."""
    stopped = training.stopped_at(st.session_state.get(TOKEN_KEY))
    if stopped is None:
        return
    key, steps_done = stopped
    if key == training.run_key(run):
        st.warning(
            f"Cancelled after {steps_done:,} of {run.train.steps:,} steps; nothing was stored.",
            icon=":material/stop_circle:",
        )
    else:  # the visitor changed a setting mid-training: the page now shows another run
        total = RunConfig.from_dict(json.loads(key)).train.steps
        st.warning(
            f"The settings changed during a training, so it stopped after {steps_done:,} of {total:,} "
            "steps; nothing was stored.",
            icon=":material/stop_circle:",
        )
