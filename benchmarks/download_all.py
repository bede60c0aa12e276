"""What Home's "Download all runs" costs the server: building the bundle of a full store once, then serving it.

Usage: python benchmarks/download_all.py [--runs N] [--repeats R] [--visitors V] [--clicks C]
Fills a temporary store with N fake runs of the default configuration's shapes (~175 kB each), then:
1. builds the bundle as the button does (ui.bundles.prepare_bundle: under a slot, streamed into a file under
   static/downloads/), each time in a fresh subprocess: median wall and CPU seconds, MB/s, and the peak
   resident memory one build adds (ru_maxrss);
2. starts a real `streamlit run dashboard.py` on 127.0.0.1 over that store and downloads the file V x C times
   (V threads at once, as V visitors clicking C times each): the server's resident memory before and after,
   as multiples of the bundle, and the downloads' median seconds.
The bundle's folder is deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tests")]

from store_listing import fill_store  # noqa: E402

from attncore.config import make_run  # noqa: E402
from lab import store  # noqa: E402

ONE_BUILD = """
import resource, sys, time
from lab import store
from ui import bundles
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start, cpu = time.perf_counter(), time.process_time()
path = bundles.prepare_bundle(store.listing_digest(), 10**12)
print(time.perf_counter() - start, time.process_time() - cpu, path.stat().st_size,
      (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
path.unlink()
"""


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--visitors", type=int, default=3)
    parser.add_argument("--clicks", type=int, default=5)
    a = parser.parse_args()
    from browser_helpers import streamlit_server

    from ui import bundles

    with tempfile.TemporaryDirectory() as tmp:
        location = Path(tmp) / "cache"
        env = os.environ | {store.ENV_VAR: str(location)}
        os.environ[store.ENV_VAR] = str(location)
        fill_store(location, a.runs, make_run())  # the default configuration: 1,500 steps, d = 32
        print(f"{a.runs} runs, {store.stored_bytes() / 2**20:.1f} MB stored")
        rows = []
        for _ in range(a.repeats):
            done = subprocess.run(
                [sys.executable, "-c", ONE_BUILD], cwd=ROOT, env=env, capture_output=True, text=True, check=True
            )
            rows.append([float(x) for x in done.stdout.split()])
        wall, cpu, nbytes, rss = (statistics.median(col) for col in zip(*rows, strict=True))
        mb = nbytes / 2**20
        print(f"build, median of {a.repeats}: {wall:.2f} s wall, {cpu:.2f} s CPU, {mb / wall:.0f} MB/s")
        print(f"bundle {mb:.1f} MB; peak resident memory added by one build: {rss:.0f} MB ({rss / mb:.2f} bundles)")
        path = bundles.prepare_bundle(store.listing_digest(), 10**12)
        url_path = f"{bundles.STATIC_URL}/downloads/{path.parent.name}/{path.name}"
        try:
            with streamlit_server({store.ENV_VAR: str(location)}, Path(tmp) / "streamlit.log") as (base, proc):
                urllib.request.urlopen(base, timeout=30).read()
                time.sleep(2)
                before = rss_mb(proc.pid)

                def download(_):
                    start = time.perf_counter()
                    with urllib.request.urlopen(f"{base}/{url_path}", timeout=300) as response:
                        got = len(response.read())
                    assert got == nbytes, (got, nbytes)
                    return time.perf_counter() - start

                with ThreadPoolExecutor(a.visitors) as pool:
                    seconds = list(pool.map(download, range(a.visitors * a.clicks)))
                time.sleep(1)
                after = rss_mb(proc.pid)
        finally:
            shutil.rmtree(path.parent, ignore_errors=True)
        n = a.visitors * a.clicks
        print(
            f"{n} downloads by {a.visitors} visitors at once: median {statistics.median(seconds):.2f} s each; server "
            f"resident memory {before:.0f} -> {after:.0f} MB ({(after - before) / mb:+.2f} bundles)"
        )


if __name__ == "__main__":
    main()
