"""Cost per training step of a range-trained run against the fixed length of its longest length.

Contenders, interleaved round by round: the fixed run at L = MAX, the range MIN..MAX with one length per batch
(the default), the same with randomized positions, and mixed lengths in right-padded batches. Prints the median
ms per step of each and its ratio to the fixed run.

    python benchmarks/range_step.py [--min 1] [--max 8] [--steps 1500] [--chunk 100]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attncore.config import make_run  # noqa: E402
from attncore.train import Trainer  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min", type=int, default=1)
    ap.add_argument("--max", type=int, default=8)
    ap.add_argument("--steps", type=int, default=1500, help="steps per contender")
    ap.add_argument("--chunk", type=int, default=100, help="steps per contender per round")
    a = ap.parse_args()
    lengths = (a.min, a.max)
    runs = {
        f"fixed L = {a.max}": make_run("copy", a.max),
        f"range {a.min}-{a.max}, one length per batch": make_run("copy", a.max, train_lengths=lengths),
        f"range {a.min}-{a.max}, randomized positions < {8 * a.max}": make_run(
            "copy", a.max, train_lengths=lengths, randomized_positions=8 * a.max
        ),
        f"range {a.min}-{a.max}, mixed in a batch (padded)": make_run(
            "copy", a.max, train_lengths=lengths, mixed_lengths=True
        ),
    }
    trainers = {name: Trainer(run) for name, run in runs.items()}
    times: dict[str, list[float]] = {name: [] for name in runs}
    gc.disable()
    with threadpool_limits(limits=1, user_api="blas"):
        for _ in range(max(1, a.steps // a.chunk)):
            for name, trainer in trainers.items():
                start = time.perf_counter()
                for _ in range(a.chunk):
                    trainer.step()
                times[name].append((time.perf_counter() - start) / a.chunk * 1e3)
    gc.enable()
    base = statistics.median(times[next(iter(times))])
    print(f"{'contender':<48} {'ms/step':>8} {'ratio':>6}")
    for name, t in times.items():
        print(f"{name:<48} {statistics.median(t):8.2f} {statistics.median(t) / base:6.2f}")


if __name__ == "__main__":
    main()
