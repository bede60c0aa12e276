"""Which settings make an attention sink on the Bigram-Backcopy task in minutes, and which do not (docs/sinks.md).

    python benchmarks/sinks_settings.py [--seeds 0 1 2 3 4 5] [--variants default "embed 0.1" ...]

Each variant (the sinks experiment's defaults with one to three settings changed) trained over the seeds as one
sweep (from the run store where it can: ATTNCORE_CACHE_DIR), then, as `python -m attncore sinks` measures them: the
range over the seeds of the sink head's share of the bigram queries' attention on position 0 and of its Gu et al.
importance, the seeds with a sink head (above ε = 0.3), the seeds whose sink head also copies, the sink head's
value norm at position 0 over the others' (mean ratio), the mean held-out loss over the queries whose window of W + 1
keys drops position 0 under full attention, that window, W keys and key 0, W keys and key 1, and three paired
differences over the seeds with their verdicts. Printed with the platform (CPU, BLAS and its kernel, via
threadpoolctl) and the wall time. With --why, per seed, at initialisation and at the end: the first head's weight on
key 0 and on the query's own key at the bigram queries, and its block's attention output over the residual stream
(norms), which is what the embeddings' initial scale changes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from attncore.interpret.hooks import run_with_hooks  # noqa: E402
from attncore.model import init_params  # noqa: E402
from attncore.tasks import bigram_backcopy as bb  # noqa: E402
from lab import formats, stats  # noqa: E402
from lab.experiments import sinks  # noqa: E402
from lab.provenance import current, describe  # noqa: E402
from lab.sweep import run_sweep  # noqa: E402

VARIANTS = {
    "default": {},
    "embed 0.1": {"embed_std": 0.1},
    "lr 3e-3": {"lr": 3e-3},
    "2 heads": {"n_heads": 2},
    "2h lr3e-3": {"n_heads": 2, "lr": 3e-3},
    "old": {"embed_std": 0.1, "n_heads": 2, "lr": 3e-3},  # the defaults before: no head sinks
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(sinks.DEFAULT_SEEDS)))
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--window", type=int, default=sinks.DEFAULT_WINDOW)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--why", action="store_true", help="per seed, what the first head does at the bigram queries")
    a = parser.parse_args()
    print(f"platform: {describe(current())}; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    print(f"{'variant':<12} {'share':>11} {'Gu':>9} {'sinks':>5} {'both':>4} {'|v0|/|v|':>8} {'full':>6} "
          f"{'w+1':>6} {'+key 0':>6} {'+key 1':>6}  Δ window − full, Δ key 0, Δ key 1 (verdicts)   wall")  # fmt: skip
    for name in a.variants:
        start = time.perf_counter()
        records = run_sweep(sinks.runs_of(a.seeds, **VARIANTS[name]), n_jobs=a.jobs)
        per_seed = [sinks.seed_figures(r, sinks.final_test(r, a.window)) for r in records]
        by = {r["facet"]: r for _, r in sinks.comparisons(per_seed).iterrows()}
        share, gu = [r["first_token_attention"] for r in per_seed], [r["gu_importance"] for r in per_seed]
        mean = {
            k: float(np.mean([r[k] for r in per_seed]))
            for k in ("full_loss", "window_wide_loss", "window_sink_loss", "window_key1_loss")
        }
        drain = np.mean([r["value_norm_first"] / r["value_norm_rest"] for r in per_seed])
        cells = ", ".join(f"{stats.format_delta(by[c]['delta_mean'])} ({by[c]['verdict']})"
                          for c in (sinks.WINDOW, sinks.SINK, sinks.KEY1))  # fmt: skip
        print(
            f"{name:<12} {min(share):.3f}–{max(share):.3f} {min(gu):.2f}–{max(gu):.2f} "
            f"{sum(r['sink_heads'] > 0 for r in per_seed):>5} {sum(r['roles'] == sinks.BOTH for r in per_seed):>4} "
            f"{drain:>8.2f} {mean['full_loss']:>6.3f} {mean['window_wide_loss']:>6.3f} "
            f"{mean['window_sink_loss']:>6.3f} {mean['window_key1_loss']:>6.3f}  {cells}  "
            f"{formats.duration(time.perf_counter() - start)}",
            flush=True,
        )
        if a.why:
            for r in records:
                start, end = (
                    bigram_reading(init_params(r.config.model, r.config.train.seed), r.config),
                    bigram_reading(r.params, r.config),
                )
                print(f"  seed {r.config.train.seed}: key 0 {start[0]:.3f} → {end[0]:.3f}, own key {start[1]:.3f} → "
                      f"{end[1]:.3f}, |head out| / |residual| {start[2]:.2f} → {end[2]:.2f}")  # fmt: skip


def bigram_reading(params, run, n: int = 100) -> tuple[float, float, float]:
    """At the bigram queries of the first n held-out sequences, the first block's first head: its mean weight on key
    0, on the query's own key, and the mean norm of the block's attention output over the residual stream's."""
    seqs = bb.test_sequences(run.task)[:n]
    bigram, _ = bb.query_kinds(run.task, seqs)
    _, acts = run_with_hooks(params, seqs[:, :-1], run.model)
    a = acts["blocks.0.attn.pattern"].astype(np.float64)[:, 0]  # (B, T, T)
    t = np.arange(a.shape[1])
    norm = lambda k: np.linalg.norm(acts[k].astype(np.float64), axis=-1)  # noqa: E731
    ratio = norm("blocks.0.attn_out") / norm("blocks.0.resid_pre")  # (B, T)
    return float(a[:, :, 0][bigram].mean()), float(a[:, t, t][bigram].mean()), float(ratio[bigram].mean())


if __name__ == "__main__":
    main()
