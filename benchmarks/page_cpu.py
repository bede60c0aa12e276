"""Server CPU seconds per page view of stored runs, for every page, read from /proc (no browser).

Usage: python benchmarks/page_cpu.py [--views 5] [--port 8616] [--compare] [--pages train attention ...]
       python benchmarks/page_cpu.py --tiny   (two views of three pages over a small store: a smoke run)

Fills a run store of its own in a temporary folder through the command line's sweep (hosted_envelope.fill: the
article's runs, the Ablations and Compare defaults, copy, sort and reverse at three lengths, --steps steps), starts a
hosted server over it (ATTNLAB_HOSTED=1, `streamlit run dashboard.py` on 127.0.0.1:--port) and, page by page, opens
--views websocket sessions one after another (st_client: Streamlit's own protocol, no browser), each until its
script run has finished. A view's CPU is the server's process tree's utime + stime over that run (its training
workers and reaped children too). Prints the median per page (the first view of a page after the server's start,
which fills the memos, apart as "first"), the exceptions any view drew, and the machine and load.

--compare runs the same views on a second server as it was before the view memos (ATTNLAB_VIEW_MEMO=0, lab.jobs.memo;
and Streamlit's full garbage collection after every script run, runner.postScriptGC, on again) and prints off / on
ratios of the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tests")]

from hosted_envelope import fill, load, machine  # noqa: E402
from st_client import one_view, tree_cpu_seconds  # noqa: E402

from lab import store  # noqa: E402
from ui.nav import PAGES  # noqa: E402

VIEW_TIMEOUT = 300  # s: a hang guard
OFF = {"ATTNLAB_VIEW_MEMO": "0", "STREAMLIT_RUNNER_POST_SCRIPT_GC": "true"}  # the server as it was before the memos


@contextmanager
def hosted_server(location: Path, port: int, log: Path, env: dict | None = None) -> Iterator[tuple[str, int]]:
    """(base URL, pid) of a hosted `streamlit run dashboard.py` on 127.0.0.1:port over the store at `location`."""
    env = os.environ | {"PYTHONUNBUFFERED": "1", store.ENV_VAR: str(location), "ATTNLAB_HOSTED": "1"} | (env or {})
    cmd = [sys.executable, "-m", "streamlit", "run", "dashboard.py", "--server.headless", "true"]
    cmd += ["--server.address", "127.0.0.1", "--server.port", str(port), "--server.fileWatcherType", "none"]
    cmd += ["--browser.gatherUsageStats", "false"]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if urllib.request.urlopen(f"{base}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"streamlit did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
        yield base, proc.pid
    finally:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """The server's process group (its workers too): SIGTERM, then SIGKILL."""
    import signal

    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=10)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def measure(base: str, pid: int, pages: list, views: int, query: str) -> dict:
    """{url_path: ([CPU s of each view], [wall s], [exceptions], finished count)} views one after another."""
    out = {}
    for spec in pages:
        cpu, wall, errors, finished = [], [], [], 0
        for _ in range(views):
            before, start = tree_cpu_seconds(pid), time.perf_counter()
            view = asyncio.run(one_view(base, spec.url_path, query, VIEW_TIMEOUT))
            cpu.append(tree_cpu_seconds(pid) - before)
            wall.append(time.perf_counter() - start)
            errors += view.exceptions
            finished += view.finished
        out[spec.url_path or "home"] = (cpu, wall, errors, finished)
        print(f"  /{spec.url_path or ''}: first {cpu[0]:.2f} s, then median {med(cpu[1:]):.3f} s CPU", flush=True)
    return out


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(on: dict, off: dict | None) -> None:
    head = ["page", "views", "rendered", "exceptions", "first CPU s", "median CPU s", "median wall s"]
    if off:
        head += ["memo off: first", "median", "off / on"]
    rows = [head]
    for page, (cpu, wall, errors, finished) in on.items():
        row = [page, len(cpu), finished, len(errors), f"{cpu[0]:.3f}", f"{med(cpu[1:]):.3f}", f"{med(wall[1:]):.3f}"]
        if off:
            c = off[page][0]
            row += [f"{c[0]:.3f}", f"{med(c[1:]):.3f}", f"{med(c[1:]) / max(med(cpu[1:]), 1e-3):.1f}"]
        rows.append(row)
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(head))]
    for r in rows:
        print("  ".join(str(x).rjust(w) for x, w in zip(r, widths, strict=True)))
    every = [c for cpu, *_ in on.values() for c in cpu[1:]]
    print(f"median page view over every page (after each page's first): {med(every):.3f} s of server CPU")
    if off:
        every_off = [c for cpu, *_ in off.values() for c in cpu[1:]]
        print(f"memo off: {med(every_off):.3f} s (ratio {med(every_off) / max(med(every), 1e-3):.1f})")
    for page, (_, _, errors, _) in on.items():
        for e in dict.fromkeys(errors):
            print(f"  exception on /{page}: {e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--views", type=int, default=5, help="views per page (the first one apart)")
    parser.add_argument("--port", type=int, default=8616)
    parser.add_argument("--seeds", type=int, default=4, help="seeds of the filled store's task-by-length grid")
    parser.add_argument("--steps", type=int, default=30, help="steps of the filled runs (the views' ?steps=)")
    parser.add_argument("--pages", nargs="*", help="url paths of the pages to view (default: every page)")
    parser.add_argument("--store", type=Path, help="a store filled before (by an earlier run's fill) to reuse")
    parser.add_argument("--compare", action="store_true", help="also measure with the view memos off")
    parser.add_argument("--tiny", action="store_true", help="2 views of 3 pages, a 9-run store: a smoke run")
    args = parser.parse_args()
    pages = [p for p in PAGES if args.pages is None or (p.url_path or "home") in args.pages]
    if args.tiny:
        args.views, args.seeds = 2, 1
        pages = [p for p in PAGES if p.url_path in ("", "train", "attention")]
    print(f"machine: {machine()}")
    print(f"load average at start: {load()}")
    query = f"steps={args.steps}"
    with tempfile.TemporaryDirectory() as tmp:
        location = args.store or Path(tmp) / "cache"
        if not args.store:
            held = fill(location, args.seeds, args.steps, page_runs=not args.tiny)
            print(f"store: {held} runs trained by the command line's sweep")
        off = None
        if args.compare:
            print("view memos off (ATTNLAB_VIEW_MEMO=0, Streamlit's runner.postScriptGC on):")
            with hosted_server(location, args.port, Path(tmp) / "off.log", OFF) as (base, pid):
                off = measure(base, pid, pages, args.views, query)
        print("view memos on:")
        with hosted_server(location, args.port, Path(tmp) / "on.log") as (base, pid):
            on = measure(base, pid, pages, args.views, query)
        print(f"\nhosted server (ATTNLAB_HOSTED=1), {args.views} views a page, one at a time, ?{query}")
        report(on, off)
    print(f"load average at end: {load()}")


if __name__ == "__main__":
    main()
