"""How long training runs take here, estimated before any of them is trained.

Computing first: a model of one step's CPU time from the run's shape and batch (multiply-adds, elementwise work,
per-block overhead), calibrated on the CPU time (not the wall time) of a few small probe runs, so the load on the
machine at calibration does not move it; times the steps, plus the evaluation. The probes' costs are kept in the
store's folder per machine (CALIBRATION_FILE): a later process reads them instead of timing the probes again (a few
seconds quiet, 10-15 s on a busy machine), and a calibration taken while other work kept the cores busy is timed
again once the machine is quiet, each probe keeping its least cost. Then the wall
time: the computing shared out over the workers, slowed by what the machine's other work takes from them now
(`slowdown`, measured when asked; lab.wall smooths it over minutes). Imports attncore and NumPy (and joblib's
loky, for a calibration in parallel).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import platform
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attncore import RunConfig, make_run
from attncore._blas import one_blas_thread
from attncore.snapshots import run_snapshot_steps
from attncore.task import task_of
from attncore.train import Trainer

# The probes span what the coefficients tell apart: the fixed cost of a step, blocks, width, length, heads, batch.
PROBES = (
    dict(d_model=16, n_heads=2, n_layers=1, batch_size=8, length=4),
    dict(d_model=32, n_heads=4, n_layers=2, batch_size=32, length=6),  # the article's run
    dict(d_model=32, n_heads=4, n_layers=6, batch_size=32, length=6),
    dict(d_model=32, n_heads=4, n_layers=2, batch_size=32, length=12),
    dict(d_model=96, n_heads=2, n_layers=2, batch_size=32, length=6),
    dict(d_model=32, n_heads=16, n_layers=2, batch_size=64, length=6),
    dict(d_model=128, n_heads=1, n_layers=1, batch_size=16, length=6),
    dict(d_model=256, n_heads=4, n_layers=1, batch_size=16, length=6),  # products large enough for BLAS's pace
)
PROBE_STEPS = 3  # steps per timed chunk
PROBE_ROUNDS = 7  # chunks per probe: the one of least CPU time is the probe's cost (other load only adds to it)


def eval_steps(run: RunConfig) -> int:
    """Steps' worth of time a run spends outside its training steps: evaluation and snapshots, as its task says
    (Task.eval_cost_steps: the article's tasks' evaluation and 20 snapshots, with their norms, cost about 80 steps;
    an induction snapshot about 5, its final figures about 20)."""
    per_snapshot, once = task_of(run.task).eval_cost_steps
    return per_snapshot * len(run_snapshot_steps(run)) + once if per_snapshot else once


# work past this much computing (CPU seconds of this machine, which the load does not move) is started only when
# asked once more: the dashboard's checkbox beside a sweep's button, the command line's --yes
CONFIRM_COMPUTING_SECONDS = 60 * 60
PACE_CPU_SECONDS = 0.03  # `slowdown` trains a probe until it has had this much CPU (or for PACE_WALL_SECONDS)
PACE_WALL_SECONDS = 1.0
PACE_TTL_SECONDS = 10.0  # how long a measured pace holds


def step_features(run: RunConfig) -> np.ndarray:
    """What one training step's time is linear in: [1, blocks, matmul multiply-adds, attention multiply-adds,
    elementwise values], averaged over the lengths a range-trained run draws from. The last block computes its
    keys and values on every position but the rest on the answer rows only (attncore.model), as counted here."""
    m, t = run.model, run.train
    task = task_of(run.task)
    B, n, d, f, H, V = task.batch_rows(run.task, t.batch_size), m.n_layers, m.d_model, m.d_ff, m.n_heads, m.vocab_size
    rows = []
    for length in range(run.task.min_length, run.task.length + 1):
        at = dataclasses.replace(run.task, length=length, train_lengths=None, mixed_lengths=False)
        T, answers = at.n_inputs, task.answer_len(at)  # the tokens a step feeds the model, those with a loss
        queries = (n - 1) * T + answers  # rows past Q, K, V summed over the blocks: the last block's answers only
        matmul = B * (n * T * 3 * d * d + queries * (d * d + 2 * d * f) + answers * d * V)  # the unembedding
        attention = B * queries * T * d  # scores and the weighted sum
        elementwise = B * queries * (d + f) + B * H * queries * T  # norms, residuals, GELU; softmax
        rows.append([1.0, n, matmul, attention, elementwise])
    return np.mean(rows, axis=0)


def _probe_run(shape: dict) -> RunConfig:
    shape = dict(shape)
    return make_run("copy", shape.pop("length"), **shape)


def _time_probes() -> np.ndarray:
    """(PROBE_ROUNDS, probes) CPU seconds per step of each timed chunk (this thread's CPU time: what a run costs
    whatever else the machine runs), the probes interleaved so a burst of other load does not land on one only."""
    trainers = [Trainer(_probe_run(p)) for p in PROBES]
    chunks = np.empty((PROBE_ROUNDS, len(PROBES)))
    with one_blas_thread():  # as attncore.train trains
        for trainer in trainers:
            trainer.step()  # the first step allocates
        for r in range(PROBE_ROUNDS):
            for i, trainer in enumerate(trainers):
                start = time.thread_time()
                for _ in range(PROBE_STEPS):
                    trainer.step()
                chunks[r, i] = (time.thread_time() - start) / PROBE_STEPS
    return chunks


def fit(features: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """Non-negative coefficients c with features @ c close to seconds in relative terms (least squares on each
    row divided by its time); a feature whose coefficient comes out negative is dropped and the rest refitted."""
    keep = list(range(features.shape[1]))
    weighted = features / seconds[:, None]
    while True:
        c, *_ = np.linalg.lstsq(weighted[:, keep], np.ones(len(seconds)), rcond=None)
        if (c >= 0).all() or len(keep) == 1:
            out = np.zeros(features.shape[1])
            out[keep] = np.maximum(c, 0)
            return out
        keep.pop(int(np.argmin(c)))


@dataclass(frozen=True)
class CostModel:
    coefficients: np.ndarray  # CPU seconds per unit of each step feature
    probe_seconds: tuple[float, ...]  # what the calibration measured: each probe's CPU seconds per step
    calibration_seconds: float  # how long the calibration took (wall)

    def step_seconds(self, run: RunConfig) -> float:
        return float(step_features(run) @ self.coefficients)

    def run_seconds(self, run: RunConfig) -> float:
        """CPU seconds to train and evaluate `run` in one worker process: its computing."""
        return self.step_seconds(run) * (run.train.steps + eval_steps(run))

    def work_seconds(self, runs: Sequence[RunConfig]) -> float:
        """CPU seconds of training all the runs: their computing, what a view's budget counts."""
        return sum(self.run_seconds(r) for r in runs)

    def wall_seconds(self, runs: Sequence[RunConfig], workers: int, slowdown: float = 1.0) -> float:
        """Wall time of the runs on `workers` processes, each run taking `slowdown` times its computing: the
        longest run or the computing shared out evenly, whichever is more. A lower bound of any order of the runs
        (the sweeps deal them longest first, which lands within a run of it), and never more for a part of the
        runs than for all of them."""
        if not runs:
            return 0.0
        each = [self.run_seconds(r) for r in runs]
        return slowdown * max(max(each), sum(each) / max(1, min(workers, len(runs))))


def longest_first(runs: Sequence[RunConfig], cost: CostModel) -> list[RunConfig]:
    """The runs in the order a sweep deals them to its workers: the most computing first, so the last ones to
    finish are short (the wall time lands near `wall_seconds`)."""
    return sorted(runs, key=cost.run_seconds, reverse=True)


def calibrate(workers: int = 1) -> CostModel:
    """Time the probes' CPU here (a second or two) and fit the step model. With workers > 1 the probes run in that
    many fresh processes at once, as a sweep's runs do, so the model sees what they cost each other (shared caches
    and memory bandwidth); their chunks are pooled."""
    start = time.perf_counter()
    if workers <= 1:
        chunks = _time_probes()
    else:
        from joblib.externals.loky import ProcessPoolExecutor  # processes that do not re-run the caller's __main__

        with ProcessPoolExecutor(max_workers=workers) as pool:
            chunks = np.concatenate([job.result() for job in [pool.submit(_time_probes) for _ in range(workers)]])
    # CPU time is what a probe costs, whatever else runs (a busy machine makes it wait, which CPU time does not
    # count); other load can still add a little (caches shared), so each probe's least-cost chunk is its cost.
    cheapest = chunks.min(axis=0)
    features = np.array([step_features(_probe_run(p)) for p in PROBES])
    return CostModel(fit(features, cheapest), tuple(cheapest), time.perf_counter() - start)


_models: dict[int, CostModel] = {}
_calibrating = threading.Lock()  # one calibration at a time: two at once would time each other

CALIBRATION_FILE = "cost_model.json"  # in the store's folder: each machine's probe costs, per number of workers
MAX_CALIBRATION_BYTES = 64 * 1024  # a few machines' entries are a few KiB; a larger file is not one
QUIET_BUSY_CORES = 0.5  # a calibration with fewer cores busy with other work than this is a quiet one
BUSY_BUSY_CORES = 1.0  # one taken with this many or more busy is timed again once the machine is quiet


def calibrated(workers: int = 1) -> bool:
    """Whether model(workers) answers at once (else its first call times the probes: a few seconds)."""
    return workers in _models


def model(workers: int = 1, folder: Path | str | None = None) -> CostModel:
    """This process's cost model for runs trained `workers` at a time: from the probe costs kept in `folder` (the
    store's) for this machine when there are any, else calibrated here and kept there (saved_model)."""
    with _calibrating:
        if workers not in _models:
            _models[workers] = saved_model(workers, folder) if folder is not None else calibrate(workers)
        return _models[workers]


def machine_key(workers: int) -> str:
    """What a calibration holds for: this CPU (its model name and cores), NumPy and its BLAS kernels as this
    process loaded them, the probes, and the workers timed at once."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    except OSError:
        pass
    blas = os.environ.get("OPENBLAS_CORETYPE", "")
    what = repr((cpu, cores(), np.__version__, blas, PROBES, PROBE_STEPS, workers))
    return hashlib.sha256(what.encode()).hexdigest()[:24]


def _read_calibrations(path: Path) -> dict:
    """The file's entries {key: {"probe_seconds": [...], "busy": cores}}, each checked (a shared store's file is
    read as untrusted input: a bad entry is left out, a bad file reads as none)."""
    try:
        with open(path, "rb") as fh:
            text = fh.read(MAX_CALIBRATION_BYTES + 1)
        data = json.loads(text) if len(text) <= MAX_CALIBRATION_BYTES else {}
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    good = {}
    for key, entry in data.items():
        try:
            seconds = [float(x) for x in entry["probe_seconds"]]
            busy = float(entry["busy"])
        except (TypeError, KeyError, ValueError):
            continue
        if len(seconds) == len(PROBES) and all(0 < x < 60 for x in seconds) and 0 <= busy < 4096:
            good[str(key)] = {"probe_seconds": seconds, "busy": busy}
    return good


def _write_calibrations(path: Path, entries: dict) -> None:
    """The file written whole, by a rename; a store that cannot be written keeps the model in this process only."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_text(json.dumps(entries))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def from_probe_seconds(seconds: Sequence[float], took: float = 0.0) -> CostModel:
    """The model fitted to the probes' costs (CPU seconds per step, in PROBES' order)."""
    features = np.array([step_features(_probe_run(p)) for p in PROBES])
    cheapest = np.asarray(seconds, dtype=float)
    return CostModel(fit(features, cheapest), tuple(float(x) for x in cheapest), took)


def saved_model(workers: int, folder: Path | str, busy: float | None = None) -> CostModel:
    """The model from the probe costs kept in `folder` for this machine and `workers`; the probes are timed (and
    kept) when there are none, or when those kept were timed with BUSY_BUSY_CORES or more cores busy with other
    work and the machine is quiet now (`busy`: cores busy now, busy_cores() when not given): each probe keeps the
    least of its costs, so an estimate does not stay on a busy calibration."""
    path, key = Path(folder) / CALIBRATION_FILE, machine_key(workers)
    entry = _read_calibrations(path).get(key)
    if entry is not None and entry["busy"] < BUSY_BUSY_CORES:
        return from_probe_seconds(entry["probe_seconds"])
    now = busy_cores() if busy is None else busy
    if entry is not None and now >= QUIET_BUSY_CORES:  # still busy: the kept costs stand
        return from_probe_seconds(entry["probe_seconds"])
    fresh = calibrate(workers)
    seconds = list(fresh.probe_seconds)
    if entry is not None:
        seconds = [min(a, b) for a, b in zip(seconds, entry["probe_seconds"], strict=True)]
    entries = _read_calibrations(path)  # again: another process may have added its machine meanwhile
    entries[key] = {"probe_seconds": seconds, "busy": now}
    _write_calibrations(path, entries)
    return from_probe_seconds(seconds, fresh.calibration_seconds)


_pace: dict[str, tuple[float, tuple[float, float]]] = {}  # "pace" -> (when, (wall per CPU second, others running))
_pace_lock = threading.Lock()


def cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def measure_pace() -> float:
    """Wall seconds per CPU second of a probe trained now in this thread: 1 when it has a core to itself. Timed
    over PACE_CPU_SECONDS of its CPU, enough time slices that one lost slice does not decide it."""
    trainer = Trainer(_probe_run(PROBES[1]))
    with one_blas_thread():
        trainer.step()
        wall0, cpu0 = time.perf_counter(), time.thread_time()
        while time.thread_time() - cpu0 < PACE_CPU_SECONDS and time.perf_counter() - wall0 < PACE_WALL_SECONDS:
            trainer.step()
        wall, cpu = time.perf_counter() - wall0, time.thread_time() - cpu0
    return max(1.0, wall / max(cpu, 1e-3))


def runnable_now(samples: int = 5, gap: float = 0.01) -> float:
    """Processes ready to run on this machine now, this one among them: the mean of a few readings of the kernel's
    instantaneous count (/proc/loadavg's fourth field), not the load average, which lags by a minute (a sweep just
    finished would still count). The 1-minute load average where there is no /proc."""
    counts = []
    for _ in range(samples):
        try:
            with open("/proc/loadavg") as fh:
                counts.append(int(fh.read().split()[3].split("/")[0]))
        except (OSError, ValueError, IndexError):
            return (os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0) + 1.0
        time.sleep(gap)
    return sum(counts) / len(counts)


def busy_cores(pace: float | None = None, load: float | None = None, n_cores: int | None = None) -> float:
    """Cores the machine's other work keeps busy now: from the pace a probe keeps (wall over CPU seconds) and the
    processes ready to run besides this one (`load`; runnable_now), measured at most every PACE_TTL_SECONDS."""
    if pace is None or load is None:
        with _pace_lock:
            when, measured = _pace.get("pace", (-math.inf, (1.0, 0.0)))
            if time.monotonic() - when > PACE_TTL_SECONDS:
                measured = (measure_pace(), max(0.0, runnable_now() - 1.0))
                _pace["pace"] = (time.monotonic(), measured)
        pace = measured[0] if pace is None else pace
        load = measured[1] if load is None else load
    n_cores = cores() if n_cores is None else n_cores
    if pace > 1.05:  # the probe got 1/pace of a core: the others keep pace * cores - 1 of them busy
        return pace * n_cores - 1
    return min(n_cores - 1.0, max(0.0, load))  # a core was free: at most cores - 1, as many as are ready to run


def slowdown_of(others: float, workers: int, n_cores: int) -> float:
    """How many times its computing a run's wall time is with `others` cores busy with other work and `workers`
    runs trained at once: the workers share what the others leave. On an idle machine with a core per worker, 1."""
    return max(1.0, (others + workers) / n_cores)


def slowdown(workers: int, pace: float | None = None, load: float | None = None, n_cores: int | None = None) -> float:
    """How many times its computing a run's wall time is here now, with `workers` runs trained at once.

    From the pace a probe keeps now and the processes ready to run besides this one (busy_cores): what the
    machine's other work occupies of its cores, and the workers share the rest. A reading of this second:
    lab.wall smooths the readings over minutes for an estimate one can plan on."""
    n_cores = cores() if n_cores is None else n_cores
    return slowdown_of(busy_cores(pace, load, n_cores), workers, n_cores)
