"""The dashboard's bridge to the run store: cached loads, live training, sweeps, head ablation.

lab.store is the persistent cache; the st.cache_* layers here only keep loaded records in memory
so a rerun does not unpickle them again. A training runs in a worker process (ui.worker) and
takes one of the server's slots (ui.limits), so other sessions never wait on it.
"""

from __future__ import annotations

import json
import multiprocessing
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import streamlit as st

from attncore import RunConfig
from attncore.evaluate import EvalResult
from attncore.inspect import evaluate_ablated
from lab.store import RunRecord, cache_dir, get_run, is_cached, list_cached
from lab.sweep import run_sweep
from ui import bundles, charts, frames, worker
from ui.limits import BusyError, limits, training_slot

LIVE_REFRESH_SECONDS = 0.25  # redraw the live loss curve at most this often


def run_key(run: RunConfig) -> str:
    return json.dumps(run.to_dict(), sort_keys=True)


@st.cache_resource(max_entries=256, show_spinner=False)
def _load(key: str) -> RunRecord:
    return get_run(RunConfig.from_dict(json.loads(key)))


def cached(run: RunConfig) -> RunRecord | None:
    """The stored record, or None when the run was never trained (nothing is computed)."""
    return _load(run_key(run)) if is_cached(run) else None


def cached_many(runs: Sequence[RunConfig]) -> tuple[list[RunRecord], list[RunConfig]]:
    """(records of the cached runs, the runs still missing), both in input order."""
    records, missing = [], []
    for run in runs:
        record = cached(run)
        if record is None:
            missing.append(run)
        else:
            records.append(record)
    return records, missing


@st.cache_resource
def _trainers(n: int) -> ProcessPoolExecutor:
    # spawn, not fork: the server is multi-threaded; the workers persist and are reused by every session
    return ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"))


def cached_summaries(runs: Sequence[RunConfig]) -> tuple[list[dict], list[RunConfig]]:
    """(summaries of the cached runs, the runs still missing), from lab.store's JSON sidecars: no unpickling."""
    stored = {json.dumps(s["config"], sort_keys=True): s for s in list_cached()}
    found = [(run, stored.get(run_key(run))) for run in runs]
    return [s for _, s in found if s is not None], [run for run, s in found if s is None]


def train_live(run: RunConfig) -> RunRecord | None:
    """Train (or fetch) one run in a worker process, with a progress bar and a loss curve that grows as it trains."""
    steps = run.train.steps
    bar = st.progress(0.0, text="Waiting for a training slot...")
    curve = st.empty()
    try:
        with training_slot(), tempfile.TemporaryDirectory() as tmp:
            progress_path = Path(tmp) / "losses.f64"
            losses = worker.open_progress(progress_path, steps, create=True)
            job = _trainers(limits().max_concurrent).submit(
                worker.train_with_progress, run, str(cache_dir()), str(progress_path)
            )
            while not job.done():
                time.sleep(LIVE_REFRESH_SECONDS)
                done = worker.losses_so_far(losses)
                if len(done):
                    text = f"Training: step {len(done):,} of {steps:,}, loss {done[-1]:.4f}"
                    bar.progress(len(done) / steps, text=text)
                    curve.altair_chart(charts.loss_curve(frames.history_frame(done), steps=steps), width="stretch")
            record = job.result()
        bundles.enforce_store_cap()
    except BusyError as e:
        bar.empty()
        st.error(str(e), icon=":material/hourglass_top:")
        return None
    except Exception as e:  # a failed worker: one line, never a traceback
        bar.empty()
        st.error(f"Training failed: {type(e).__name__}: {e}", icon=":material/error:")
        return None
    bar.empty()
    curve.empty()
    return record


def sweep(runs: Sequence[RunConfig], what: str) -> list[RunRecord] | None:
    """Train the given runs in parallel worker processes with a progress bar; None if refused."""
    lim = limits()
    if len(runs) > lim.max_sweep_runs:
        st.error(
            f"{len(runs)} runs is more than this server allows at once ({lim.max_sweep_runs}).", icon=":material/block:"
        )
        return None
    bar = st.progress(0.0, text=f"{what}: waiting for a training slot...")

    def on_done(done: int, total: int) -> None:
        bar.progress(done / total, text=f"{what}: {done} of {total} runs done")

    try:
        with training_slot():
            records = run_sweep(list(runs), n_jobs=lim.sweep_jobs, progress=on_done)
    except BusyError as e:
        bar.empty()
        st.error(str(e), icon=":material/hourglass_top:")
        return None
    bar.empty()
    return records


@st.cache_data(max_entries=512, show_spinner=False)
def _ablated(key: str, heads: tuple[tuple[int, int], ...]) -> EvalResult:
    run = RunConfig.from_dict(json.loads(key))
    return evaluate_ablated(_load(key).params, run, list(heads))


def head_ablation(record: RunRecord, heads: Sequence[tuple[int, int]]) -> EvalResult:
    """Evaluation of the trained run with the given (layer, head) outputs zeroed (memoised)."""
    if not heads:
        return record.eval
    return _ablated(run_key(record.config), tuple(sorted(heads)))


def require(run: RunConfig, describe: str) -> RunRecord:
    """The run's record; if it was never trained, offer a Train button (live progress) and stop the page."""
    record = cached(run)
    if record is not None:
        return record
    slot = st.empty()
    with slot.container():
        st.info(
            f"**Not trained yet:** {describe}. Training runs on this server (a few seconds for the default "
            "1,500 steps), then lands in the cache for every visitor.",
            icon=":material/science:",
        )
        clicked = st.button("Train this configuration", type="primary", key="train")
    if not clicked:
        st.stop()
    slot.empty()
    record = train_live(run)
    if record is None:
        st.stop()
    return record
