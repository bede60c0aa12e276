"""What the training snapshots cost (goal: at most ~15% of a default run's time).

The default run (copy, L = 6, 1500 steps) is trained with and without snapshots, alternately, on one
BLAS thread as the store trains; prints each pair's wall and CPU seconds, the medians, their ratio and
the median of the pairs' ratios, and the snapshots' share inside a run (snapshot_seconds / train_seconds).

    python benchmarks/snapshot_cost.py [--repeats 3] [--steps 1500]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attncore.config import make_run  # noqa: E402
from attncore.snapshots import SNAPSHOT_N_TEST, snapshot_steps  # noqa: E402
from attncore.train import train  # noqa: E402


def timed(run, snapshots: bool):
    wall, cpu = time.perf_counter(), time.process_time()
    result = train(run, snapshots=snapshots)
    return time.perf_counter() - wall, time.process_time() - cpu, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1500)
    a = parser.parse_args()
    run = make_run(steps=a.steps)
    n_snap = len(snapshot_steps(a.steps))
    print(f"default run, {a.steps} steps; {n_snap} snapshots on {SNAPSHOT_N_TEST} test sequences; {a.repeats} pairs")
    rows = {"off": [], "on": [], "share": []}
    with threadpool_limits(limits=1, user_api="blas"):
        for i in range(a.repeats):
            order = (False, True) if i % 2 == 0 else (True, False)  # alternate who goes first
            for snapshots in order:
                wall, cpu, result = timed(run, snapshots)
                rows["on" if snapshots else "off"].append((wall, cpu))
                if snapshots:
                    rows["share"].append(result.snapshot_seconds / result.train_seconds)
                print(f"  pair {i + 1} snapshots {'on ' if snapshots else 'off'}: wall {wall:6.2f} s  cpu {cpu:6.2f} s")
    for k, name in ((0, "wall"), (1, "cpu")):
        off = statistics.median(r[k] for r in rows["off"])
        on = statistics.median(r[k] for r in rows["on"])
        pairs = statistics.median(b[k] / a[k] for a, b in zip(rows["off"], rows["on"], strict=True))
        print(
            f"median {name}: off {off:.2f} s, on {on:.2f} s, ratio on/off {on / off:.3f}; median pair ratio {pairs:.3f}"
        )
    share = statistics.median(rows["share"])
    print(f"median snapshot_seconds / train_seconds inside a run: {100 * share:.1f}%")


if __name__ == "__main__":
    main()
