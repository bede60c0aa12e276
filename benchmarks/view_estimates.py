"""The cost model's estimate (lab.cost_model) against the measured time of the dashboard's default heavy views,
trained cold the way a page's sweep trains them.

Views: Home's "Reproduce the article" (23 runs), Ablations' default (the base and five ablations over the seeds
Holm's correction needs to show a difference across five, lab.stats.seeds_needed: 8, 48 runs), Compare's default
(learned vs no position over seeds 0-5, 12 runs), the Length page's first tab (five encodings trained on lengths
1-8 for 3,000 steps over seeds 0-2, 15 runs; as ui.length_view.lit_runs builds them),
and on request the Regimes page's three experiments at their defaults (lab.experiments.regimes: 144, 60 and 84 runs).
Each is trained in an empty temporary store by lab.jobs.progress.train_with_progress on a loky pool of `--workers`
processes (the dashboard's sweep: 2), longest first, each next to the first free worker; the pool is started
before the clock (the dashboard's pool persists). The model is calibrated once, first, as the server does (its
probes' CPU time in `--workers` processes at once), and once more while `--busy` processes spin on the cores.
Printed per view: the estimated computing against the CPU seconds the runs took, the estimated wall time (at the
slowdown measured then) against the measured one, the busy calibration's computing over the quiet one's, and the
load average, so a figure from a shared machine can be read for what it is.

    python benchmarks/view_estimates.py [--views home ablations compare length] [--workers 2]
    python benchmarks/view_estimates.py --views regimes-heads regimes-lr   (regimes-depth: about an hour here)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from joblib.externals.loky import ProcessPoolExecutor  # noqa: E402

from attncore import make_run  # noqa: E402
from lab import cost_model  # noqa: E402
from lab.experiments import regimes, sinks  # noqa: E402
from lab.jobs import progress as worker  # noqa: E402
from lab.presets import ablations, preset  # noqa: E402
from lab.provenance import current, describe  # noqa: E402
from lab.stats import seeds_needed  # noqa: E402

VIEWS = {
    "home": ("Home: reproduce the article", lambda: preset("article")),
    "ablations": (
        f"Ablations: base + 5 variants, {seeds_needed(5)} seeds",
        lambda: [r for s in range(seeds_needed(5)) for r in ablations(seed=s)],
    ),
    "compare": (
        "Compare: learned vs none, 6 seeds",
        lambda: [make_run(seed=s, position=p) for p in ("learned", "none") for s in range(6)],
    ),
    "length": (
        "Length: 5 encodings on L 1-8, 3,000 steps, 3 seeds",
        lambda: [
            make_run("copy", 8, s, train_min=1, position=p, steps=3000)
            for p in ("none", "learned", "sinusoidal", "rope", "alibi")
            for s in range(3)
        ],
    ),
}
for _name in regimes.EXPERIMENTS:  # the Regimes page's experiments at their defaults (6 seeds), as the page sweeps them
    VIEWS[f"regimes-{_name}"] = (
        f"Regimes: {_name}, its default grid over {regimes.DEFAULT_SEEDS} seeds",
        lambda e=_name: regimes.all_runs(regimes.cells_of(e, range(regimes.DEFAULT_SEEDS))),
    )
VIEWS["sinks"] = (
    f"Attention sinks: its default view over {sinks.DEFAULT_SEEDS} seeds",
    lambda: sinks.runs_of(range(sinks.DEFAULT_SEEDS)),
)
VIEWS["regimes-lr-qk-norm"] = (
    f"Regimes: lr, qk-norm off against on, its default grid over {regimes.DEFAULT_SEEDS} seeds",
    lambda: regimes.all_runs(regimes.lr_cells(range(regimes.DEFAULT_SEEDS), qk_norm="both")),
)
DEFAULT_VIEWS = ["home", "ablations", "compare", "length"]  # the Regimes views are long: ask for them by name


def _ready() -> int:
    return os.getpid()  # imports lab.jobs.progress's modules in the worker


def _train_timed(run, location: str, progress: str) -> float:
    """Train one run as the page's worker does; the CPU seconds this worker process spent on it."""
    start = time.process_time()
    worker.train_with_progress(run, location, progress)
    return time.process_time() - start


def train_view(pool: ProcessPoolExecutor, runs: list) -> tuple[float, float]:
    """(wall seconds, CPU seconds summed over the runs) to train the runs on the pool into a fresh store, dealt
    longest first as the page's sweep deals them."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        jobs = []
        for i, run in enumerate(runs):
            path = Path(tmp) / f"progress-{i}.f64"
            worker.open_progress(path, run.train.steps, create=True)
            jobs.append(pool.submit(_train_timed, run, str(Path(tmp) / "cache"), str(path)))
        cpu = sum(job.result() for job in jobs)
        return time.perf_counter() - start, cpu


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def calibrate_busy(workers: int, busy: int) -> cost_model.CostModel:
    """The cost model calibrated while `busy` processes spin on the cores: what a server started on a loaded
    machine gets."""
    with ProcessPoolExecutor(max_workers=busy) as spinners:
        jobs = [spinners.submit(_spin, 60.0) for _ in range(busy)]
        time.sleep(1.0)
        try:
            return cost_model.calibrate(workers)
        finally:
            spinners.shutdown(wait=False, kill_workers=True)
            del jobs
            time.sleep(2.0)  # the spinners gone before anything else is timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--views", nargs="+", choices=list(VIEWS), default=DEFAULT_VIEWS)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--busy", type=int, default=4, help="processes spinning during the busy calibration")
    a = parser.parse_args()
    print(f"platform: {describe(current())}; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    quiet = cost_model.model(a.workers)
    busy = calibrate_busy(a.workers, a.busy) if a.busy else None
    probes = ", ".join(f"{s * 1e3:.2f}" for s in quiet.probe_seconds)
    print(f"calibration: {quiet.calibration_seconds:.1f} s; probe steps (ms of CPU): {probes}")
    pool = ProcessPoolExecutor(max_workers=a.workers)
    for f in [pool.submit(_ready) for _ in range(a.workers)]:
        f.result()
    head = f"{'view':<52} {'runs':>4} {'CPU est':>8} {'CPU':>8} {'ratio':>5} {'wall est':>8} {'wall':>8} {'ratio':>5}"
    print(head + (f" {'busy/quiet':>10}" if busy else "") + "  load")
    try:
        for name in a.views:
            label, build = VIEWS[name]
            runs = cost_model.longest_first(build(), quiet)
            work = quiet.work_seconds(runs)
            estimate = quiet.wall_seconds(runs, a.workers, cost_model.slowdown(a.workers))
            wall, cpu = train_view(pool, runs)
            line = (
                f"{label:<52} {len(runs):>4} {work:>7.0f}s {cpu:>7.0f}s {work / cpu:>5.2f} {estimate:>7.0f}s "
                f"{wall:>7.0f}s {estimate / wall:>5.2f}"
            )
            if busy:
                line += f" {busy.work_seconds(runs) / work:>10.2f}"
            print(f"{line}  {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        pool.shutdown(wait=True)
    print(
        "ratio: estimate / measured (the goal: the computing within 0.7-1.3 of the CPU the runs took); "
        "busy/quiet: the computing estimated by a model calibrated while --busy processes spun, over the quiet "
        "one's (asked: within 1/1.3 to 1.3)"
    )


if __name__ == "__main__":
    main()
