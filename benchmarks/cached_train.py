"""How long `python -m attncore train` takes when its run is stored: this checkout against another (--before), side
by side, in a small store and in one of thousands of runs, with `python -c "import numpy"` as the floor.

Usage: python benchmarks/cached_train.py [--before DIR] [--runs N] [--rounds R]
(DIR: another checkout of the repository, e.g. `git worktree add /tmp/before <commit>`; the stores are
temporary, filled with fake records of the right shapes (benchmarks/store_listing.py), the default run among
them; the commands alternate round by round, so a busy machine slows both alike; prints medians and ratios).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from store_listing import fill_store, write_fake  # noqa: E402

from attncore.config import make_run  # noqa: E402
from lab.store import ENV_VAR  # noqa: E402


def seconds(cmd: list[str], cwd: Path, store: Path) -> float:
    env = os.environ | {ENV_VAR: str(store), "PYTHONPATH": str(cwd)}
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0 or (cmd[-1] == "train" and "(cached)" not in done.stdout):
        raise SystemExit(f"{' '.join(cmd)} in {cwd} failed or trained: {done.stderr or done.stdout}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="another checkout to time beside this one")
    parser.add_argument("--runs", type=int, default=3000, help="fake runs in the large store")
    parser.add_argument("--rounds", type=int, default=9)
    a = parser.parse_args()
    trees = {"this checkout": ROOT} | ({"before": a.before.resolve()} if a.before else {})
    train = [sys.executable, "-m", "attncore", "train"]
    with tempfile.TemporaryDirectory() as tmp:
        stores = {"1 run": Path(tmp) / "small", f"{a.runs:,} runs": Path(tmp) / "large"}
        write_fake(stores["1 run"], make_run())
        fill_store(stores[f"{a.runs:,} runs"], a.runs - 1)
        write_fake(stores[f"{a.runs:,} runs"], make_run())  # the default run, not yet in the index: its first
        for store in stores.values():  # read adds it; time the reads after that
            for tree in trees.values():
                seconds(train, tree, store)
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(a.rounds):
            for store_name, store in stores.items():
                times.setdefault(("import numpy", store_name), []).append(
                    seconds([sys.executable, "-c", "import numpy"], ROOT, store)
                )
                for name, tree in trees.items():
                    times.setdefault((name, store_name), []).append(seconds(train, tree, store))
    medians = {k: statistics.median(v) for k, v in times.items()}
    print(f"{'command':<32} {'store':>12} {'median s':>9}   ({a.rounds} rounds)")
    for (name, store_name), m in medians.items():
        print(f"{('train, ' + name) if name != 'import numpy' else name:<32} {store_name:>12} {m:>9.3f}")
    if a.before:
        for store_name in stores:
            ratio = medians["before", store_name] / medians["this checkout", store_name]
            print(f"before / this checkout, {store_name}: {ratio:.2f}x")


if __name__ == "__main__":
    main()
