"""Which settings show an attention sink on the Bigram-Backcopy task in minutes, and which do not (docs/sinks.md).

    python benchmarks/sinks_settings.py [--seeds 0 1 2 3 4 5] [--variants default lr1e-2 ...]

Each variant (the sinks experiment's defaults with one or two settings changed) trained over the seeds as one sweep
(from the run store where it can: ATTNCORE_CACHE_DIR), then, as `python -m attncore sinks` prints them: the mean
over heads of the bigram queries' share of attention on position 0 at the end beside a uniform causal head's, the
sink head's value norm at position 0 against the other positions', the held-out loss over the queries whose window
of 8 keys drops position 0 under full attention, the window, and the window + sink, and the three verdicts over the
seeds. Printed with the platform (CPU, BLAS and its kernel, via threadpoolctl) and the wall time.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attncore.tasks import bigram_backcopy as bb  # noqa: E402
from lab import formats, sinks  # noqa: E402
from lab.provenance import current, describe  # noqa: E402
from lab.sweep import run_sweep  # noqa: E402

VARIANTS = {
    "default": {},
    "lr1e-3": {"lr": 1e-3},
    "lr1e-2": {"lr": 1e-2},
    "lr3e-2": {"lr": 3e-2},
    "cosine": {"decay": "cosine", "warmup": 100},
    "500 steps": {"steps": 500},
    "1 head": {"n_heads": 1},
    "2 layers": {"n_layers": 2},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(sinks.DEFAULT_SEEDS)))
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--window", type=int, default=sinks.DEFAULT_WINDOW)
    parser.add_argument("--jobs", type=int, default=2)
    a = parser.parse_args()
    print(f"platform: {describe(current())}; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    print(f"{'variant':<10} {'share':>6} {'unif':>6} {'|v0|':>5} {'|v|':>5} {'full':>6} {'window':>6} {'w+sink':>6} "
          f"{'bayes':>6}  verdicts: share > uniform / window > full / w+sink < window   wall")  # fmt: skip
    for name in a.variants:
        start = time.perf_counter()
        runs = sinks.runs_of(a.seeds, **VARIANTS[name])
        records = run_sweep(runs, n_jobs=a.jobs)
        per_seed = [sinks.seed_figures(r, bb.window_losses(r.params, r.config, a.window)) for r in records]
        rows = sinks.comparisons(per_seed)
        mean = {
            k: sum(r[k] for r in per_seed) / len(per_seed) for k in per_seed[0] if isinstance(per_seed[0][k], float)
        }
        verdicts = " / ".join(f"{stats_delta(r)} {r['verdict']}" for _, r in rows.iterrows())
        print(
            f"{name:<10} {mean['first_token_attention']:>6.3f} {mean['uniform_share']:>6.3f} "
            f"{mean['value_norm_first']:>5.2f} {mean['value_norm_rest']:>5.2f} {mean['full_loss']:>6.3f} "
            f"{mean['window_loss']:>6.3f} {mean['window_sink_loss']:>6.3f} {mean['bayes_loss']:>6.3f}  {verdicts}  "
            f"{formats.duration(time.perf_counter() - start)}",
            flush=True,
        )


def stats_delta(row) -> str:
    from lab import stats

    return f"Δ {stats.format_delta(row['delta_mean'])}"


if __name__ == "__main__":
    main()
