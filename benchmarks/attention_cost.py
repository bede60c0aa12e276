"""Time single-head causal attention (d_k 64, float64) against T and print the log-log slope.

The article's timings are printed beside (docs/experiments.md, "Cost of attention").

Run: python benchmarks/attention_cost.py [--trials 5] [--lengths 128 256 512 1024 2048]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# One BLAS thread unless the caller says otherwise: on a shared 2-core machine a
# multi-threaded matmul waits on busy cores and the minimum over trials stops meaning much.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attncore.mechanisms.attention_cost import loglog_slope, time_attention  # noqa: E402  (after the BLAS settings)

FIT_FROM = 256  # below it fixed per-call costs bend the line (the Cost page fits from 256 too)
REFERENCE_MS = {128: 1.3, 512: 25.0, 2048: 350.0}  # the article's timings, a shared CPU


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512, 1024, 2048])
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    rows = time_attention(args.lengths, d_k=64, trials=args.trials)
    print(f"BLAS threads: OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}, min over {args.trials} trials")
    print(f"{'T':>6} {'ms':>10} {'article ms':>11} {'ratio':>6} {'T x T MiB':>10} {'Q,K,V MiB':>10}")
    for r in rows:
        ms = r["seconds"] * 1e3
        ref = REFERENCE_MS.get(r["T"])
        ref_cols = f"{ref:11.1f} {ms / ref:6.2f}" if ref else f"{'':11} {'':6}"
        print(f"{r['T']:6d} {ms:10.3f} {ref_cols} {r['scores_mib']:10.3f} {r['qkv_mib']:10.3f}")
    for a, b in zip(rows, rows[1:], strict=False):
        print(f"T {a['T']} -> {b['T']}: time x{b['seconds'] / a['seconds']:.2f} for T x{b['T'] / a['T']:.2f}")
    fitted = [r for r in rows if r["T"] >= FIT_FROM] if len(rows) > 2 else rows
    slope = loglog_slope([r["T"] for r in fitted], [r["seconds"] for r in fitted])
    print(f"log-log slope {slope:.2f} over T >= {fitted[0]['T']} (the article: 1.99-2.04)")


if __name__ == "__main__":
    main()
