"""What depth costs: one training step of 8 blocks against one of 2 at the same width (the goal: at most
4.5x, linear in depth), and what each further block adds from 2 to 4 and from 4 to 8 blocks (equal if linear).
The last block computes only the answer rows, so it is cheaper than the others and the 8/2 ratio sits above 4
where the blocks dominate a step (wide models); the embedding, loss and Adam's fixed costs pull it below 4.

Each width's models (the article's run otherwise: 4 heads, d_ff = 4d, batch 32, copy L = 6) are stepped in
alternating chunks on one BLAS thread, as attncore.train trains; the fastest chunk of each is kept (other load
on a shared machine only ever adds time, so the fastest is the closest to the step's own cost). Printed: the step
times, their ratio, and the cost model's ratio (lab.cost_model, calibrated first).

    python benchmarks/depth_cost.py [--widths 32 128 256] [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attncore import make_run  # noqa: E402
from attncore._blas import one_blas_thread  # noqa: E402
from attncore.train import Trainer  # noqa: E402
from lab import cost_model  # noqa: E402

DEPTHS = (2, 4, 8)


def step_seconds(width: int, rounds: int) -> dict[int, float]:
    """{depth: seconds of one step (the fastest chunk)} at this width."""
    trainers = {n: Trainer(make_run(d_model=width, n_layers=n)) for n in DEPTHS}
    steps = max(1, round(2000 / width**1.5))  # chunks of a few hundred ms at most
    chunks = {n: [] for n in DEPTHS}
    with one_blas_thread():
        for t in trainers.values():
            t.step()
        for _ in range(rounds):
            for n, t in trainers.items():
                start = time.perf_counter()
                for _ in range(steps):
                    t.step()
                chunks[n].append((time.perf_counter() - start) / steps)
    return {n: min(c) for n, c in chunks.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--widths", type=int, nargs="+", default=[32, 128, 256])
    parser.add_argument("--rounds", type=int, default=7)
    a = parser.parse_args()
    model = cost_model.model()
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    head = f"{'d':>4} {'2 blocks':>10} {'4 blocks':>10} {'8 blocks':>10} {'8/2':>5} {'model':>6}"
    print(f"{head} {'per block 2-4, 4-8':>19}")
    for width in a.widths:
        t = step_seconds(width, a.rounds)
        predicted = model.step_seconds(make_run(d_model=width, n_layers=8)) / model.step_seconds(
            make_run(d_model=width, n_layers=2)
        )
        low, high = (t[4] - t[2]) / 2, (t[8] - t[4]) / 4  # ms a block adds, from 2 to 4 blocks and from 4 to 8
        print(
            f"{width:>4} {t[2] * 1e3:>8.2f}ms {t[4] * 1e3:>8.2f}ms {t[8] * 1e3:>8.2f}ms {t[8] / t[2]:>5.2f} "
            f"{predicted:>6.2f} {low * 1e3:>8.2f}, {high * 1e3:>6.2f}ms",
            flush=True,
        )
    print("8/2: an 8-block step over a 2-block step (at most 4.5 asked; 4.0 is exactly linear with nothing shared).")
    print("per block: what one more block adds to a step; equal in both columns when the cost is linear in depth.")


if __name__ == "__main__":
    main()
