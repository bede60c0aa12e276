"""What Home's "Download all runs" costs the server: CPU seconds and peak memory to build the bundle of a full store.

Usage: python benchmarks/download_all.py [--runs N] [--repeats R]   (fills a temporary store with N fake runs of
the default configuration's shapes, ~230 kB each, then builds the download as the button does: under a slot,
streamed into a temporary file, read back once as Streamlit does). Prints the median wall and CPU seconds,
MB per second, and the peak resident memory added by one build (ru_maxrss, measured in a fresh subprocess).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_listing import fill_store  # noqa: E402

from attncore.config import make_run  # noqa: E402
from lab import store  # noqa: E402

ONE_BUILD = """
import resource, sys, time
from ui import bundles
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start, cpu = time.perf_counter(), time.process_time()
reader = bundles.all_runs_file(10**12)
data = reader.read()
print(time.perf_counter() - start, time.process_time() - cpu, len(data),
      (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    a = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        location = Path(tmp) / "cache"
        env = os.environ | {store.ENV_VAR: str(location)}
        os.environ[store.ENV_VAR] = str(location)
        fill_store(location, a.runs, make_run())  # the default configuration: 1,500 steps, d = 32
        size = store.stored_bytes()
        print(f"{a.runs} runs, {size / 2**20:.1f} MB stored")
        rows = []
        for _ in range(a.repeats):
            done = subprocess.run(
                [sys.executable, "-c", ONE_BUILD],
                cwd=Path(__file__).resolve().parents[1],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            rows.append([float(x) for x in done.stdout.split()])
        wall, cpu, nbytes, rss = (statistics.median(col) for col in zip(*rows, strict=True))
        print(f"median of {a.repeats}: {wall:.2f} s wall, {cpu:.2f} s CPU, {nbytes / 2**20 / wall:.0f} MB/s")
        print(f"bundle {nbytes / 2**20:.1f} MB; peak resident memory added by one build: {rss:.0f} MB")
        print(f"per 100 MB stored: {cpu * 100 * 2**20 / size:.2f} s CPU")


if __name__ == "__main__":
    main()
