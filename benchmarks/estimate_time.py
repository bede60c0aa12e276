"""How long `python -m attncore regimes depth --estimate` takes: this checkout against another (--before), side by
side, each in a store of its own that has been used once before (as a user's store has), with
`python -c "import numpy"` as the floor.

Usage: python benchmarks/estimate_time.py [--before DIR] [--rounds R]
(DIR: another checkout of the repository, e.g. `git worktree add /tmp/before <commit>`. Each checkout's store
answers one --estimate first, untimed: a checkout that keeps its cost model's calibration in the store
(lab.cost_model.saved_model) reads it from then on, one that does not times its probes again each time. The
commands alternate round by round, so a busy machine slows both alike; prints medians and the ratio.)
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
ENV_VAR = "ATTNCORE_CACHE_DIR"  # lab.store's variable: not imported, so this script reads no store itself
ESTIMATE = ["-m", "attncore", "regimes", "depth", "--estimate"]


def seconds(cmd: list[str], cwd: Path, store: Path) -> float:
    env = os.environ | {ENV_VAR: str(store), "PYTHONPATH": str(cwd), "PYTHONDONTWRITEBYTECODE": "1"}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *cmd], cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} in {cwd} failed: {done.stderr or done.stdout}")
    return elapsed


def load() -> str:
    try:
        return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "load unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="another checkout to time beside this one")
    parser.add_argument("--rounds", type=int, default=5)
    a = parser.parse_args()
    trees = {"this checkout": ROOT} | ({"before": a.before.resolve()} if a.before else {})
    print(f"{load()} at the start")
    with tempfile.TemporaryDirectory() as tmp:
        stores = {name: Path(tmp) / f"store-{i}" for i, name in enumerate(trees)}
        first = {name: seconds(ESTIMATE, tree, stores[name]) for name, tree in trees.items()}  # a store used once
        times: dict[str, list[float]] = {}
        for _ in range(a.rounds):
            times.setdefault("import numpy", []).append(
                seconds(["-c", "import numpy"], ROOT, stores[next(iter(trees))])
            )
            for name, tree in trees.items():
                times.setdefault(name, []).append(seconds(ESTIMATE, tree, stores[name]))
    print(f"{load()} at the end")
    print(f"{'command':<40} {'first s':>8} {'median s':>9}   ({a.rounds} rounds)")
    for name, t in times.items():
        head = f"--estimate, {name}" if name != "import numpy" else name
        each = ", ".join(f"{x:.1f}" for x in t)
        print(f"{head:<40} {first.get(name, float('nan')):>8.2f} {statistics.median(t):>9.2f}   ({each})")
    if a.before:
        ratio = statistics.median(times["before"]) / statistics.median(times["this checkout"])
        print(f"before / this checkout (medians): {ratio:.2f}x")


if __name__ == "__main__":
    main()
