"""What Home's "Download all runs" costs the server: CPU seconds and peak memory to build the bundle of a full store,
and what the server holds after many clicks.

Usage: python benchmarks/download_all.py [--runs N] [--repeats R] [--clicks C]   (fills a temporary store with N
fake runs of the default configuration's shapes, ~230 kB each, then builds the download as the button does:
under a slot, streamed into a temporary file, read back once). Prints the median wall and CPU seconds, MB per
second, and the peak resident memory added by one build (ru_maxrss, measured in a fresh subprocess); then, in
another fresh subprocess, C clicks through Streamlit's MediaFileManager with no script run between them (the
button's on_click="ignore", zip clocks two minutes apart), and what its media storage and the process's
resident memory hold afterwards, as multiples of the bundle.
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
data = bundles.all_runs_bundle(10**12)
print(time.perf_counter() - start, time.process_time() - cpu, len(data),
      (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
"""

CLICKS = """
import sys, zipfile
sys.path[:0] = ["tests"]
import test_download_memory as t
zipfile.time = t.MinutesApart()
mgr = t.MediaFileManager(storage := t.MemoryMediaFileStorage("/media"))
size = len(t.click(mgr, storage, 0))
before = t.rss_bytes()
for i in range(int(sys.argv[1])):
    t.click(mgr, storage, i % 4)
print(size, t.held(storage), t.rss_bytes() - before)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--clicks", type=int, default=20)
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
        done = subprocess.run(
            [sys.executable, "-c", CLICKS, str(a.clicks)],
            cwd=Path(__file__).resolve().parents[1],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        nbytes, held, grown = (int(x) for x in done.stdout.split())
        print(
            f"after {a.clicks} more clicks: Streamlit's media storage holds {held / nbytes:.2f} bundles, "
            f"resident memory grew by {grown / nbytes:.2f} bundles ({grown / 2**20:.0f} MB)"
        )


if __name__ == "__main__":
    main()
