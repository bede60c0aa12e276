"""How long the store takes to answer for a default run once it is cached (goal: under 100 ms).

Usage: python benchmarks/cache_hit.py [--repeats N]   (uses cache_dir(): cache/ or $ATTNCORE_CACHE_DIR;
trains the default run first if it is not stored yet).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attncore.config import make_run  # noqa: E402
from lab.store import cache_dir, get_run, is_cached, list_cached  # noqa: E402


def timed(fn, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    a = parser.parse_args()
    run = make_run()  # the default experiment: copy, L = 6, seed 0, 1500 steps
    print(f"store: {cache_dir()}")
    if not is_cached(run):
        start = time.perf_counter()
        get_run(run)
        print(f"cold (train + evaluate + store): {time.perf_counter() - start:.2f} s")
    rows = [
        ("get_run (hit)", timed(lambda: get_run(run), a.repeats)),
        ("is_cached", timed(lambda: is_cached(run), a.repeats)),
        (f"list_cached ({len(list_cached())} runs)", timed(list_cached, a.repeats)),
    ]
    print(f"{'operation':<24} {'median ms':>10} {'min ms':>8} {'max ms':>8}   ({a.repeats} repeats)")
    for name, times in rows:
        print(f"{name:<24} {1e3 * statistics.median(times):>10.2f} {1e3 * min(times):>8.2f} {1e3 * max(times):>8.2f}")
    hit = statistics.median(rows[0][1])
    verdict = "under" if hit < 0.1 else "OVER"
    print(f"cache hit median {1e3 * hit:.1f} ms: {verdict} the 100 ms goal ({0.1 / hit:.0f}x margin)")


if __name__ == "__main__":
    main()
