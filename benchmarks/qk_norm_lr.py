"""The Regimes page's qk-norm comparison at its defaults (regimes.lr_cells(qk_norm="both"), stability):
trains what the store lacks as one sweep, then prints, with the machine and its BLAS kernels, per variant and
learning rate the mean over the seeds of the test loss, the largest attention logit and the lowest attention
entropy over training, each variant's LR sensitivity with its interval, and the finding the page writes. The runs
train on the sources' schedule: a linear warm-up (default 5 % of the steps) then a cosine decay to 0.

    python benchmarks/qk_norm_lr.py [--seeds 6] [--z-loss 1e-4] [--steps 1500] [--warmup 75] [--jobs 2]

The same runs as `python -m attncore regimes lr --qk-norm both` (its store: ATTNCORE_CACHE_DIR, or cache/).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lab import cost_model, formats  # noqa: E402
from lab.experiments import regimes, stability  # noqa: E402
from lab.provenance import current, describe  # noqa: E402
from lab.store import is_cached  # noqa: E402
from lab.sweep import loky_workers, run_sweep  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=regimes.DEFAULT_SEEDS)
    parser.add_argument("--z-loss", type=float, default=None)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--warmup", type=int, default=None, help="steps of warm-up (default 5 %% of the steps)")
    parser.add_argument("--jobs", type=int, default=2)
    a = parser.parse_args()
    cells = regimes.lr_cells(range(a.seeds), qk_norm="both", z_loss=a.z_loss, steps=a.steps, warmup=a.warmup)
    runs = regimes.all_runs(cells)
    missing = [r for r in runs if not is_cached(r)]
    print(f"platform: {describe(current())}; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    train = runs[0].train
    ratio = f"{train.min_lr_ratio:g}"
    print(f"schedule: warm-up {train.warmup} of {train.steps} steps, then {train.decay} decay to {ratio} x lr")
    workers = loky_workers(a.jobs, max(1, len(missing)))
    model = cost_model.model(workers)
    estimate = model.wall_seconds(missing, workers, cost_model.slowdown(workers))
    print(
        f"{len(runs)} runs, {len(missing)} to train: estimated {formats.duration(estimate)} wall and "
        f"{formats.duration(model.work_seconds(missing))} of computing on {workers} workers"
    )
    start = time.perf_counter()
    records = run_sweep(runs, n_jobs=a.jobs, cost=model)
    if missing:
        print(f"trained in {formats.duration(time.perf_counter() - start)} wall")
    summaries = stability.summaries_of(dict(zip(runs, records, strict=True)))
    by_seed = stability.per_seed(cells, summaries)
    means = by_seed.groupby(["variant", "lr"], sort=False).mean(numeric_only=True)
    print(f"{'variant':<14} {'lr':>6} {'test loss':>10} {'max logit':>10} {'min entropy':>12}  (means over the seeds)")
    for (variant, lr), r in means.iterrows():
        print(
            f"{variant:<14} {formats.learning_rate(lr):>6} {formats.loss(r['test_loss']):>10} "
            f"{stability.figure(r['max_attn_logit']):>10} {stability.figure(r['min_attn_entropy']):>12}"
        )
    initial = regimes.initial_loss(cells)
    for _, v in stability.sensitivity_table(cells, summaries, initial).iterrows():
        low, high = stability.figure(v["seeds_low"]), stability.figure(v["seeds_high"])
        own = f"{stability.figure(v['seeds_mean'])} [{low}, {high}]"
        paired = f"; minus the baseline's: {stability.paired_text(v)}" if isinstance(v["verdict"], str) else ""
        print(f"{v['variant']}: LR sensitivity {stability.figure(v['sensitivity'])}, each seed's own {own}{paired}")
    rows = regimes.table(cells, summaries, stability.METRICS)
    print(stability.finding(cells, summaries, initial, rows))


if __name__ == "__main__":
    main()
