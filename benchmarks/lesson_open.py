"""Server CPU seconds of each lesson's first view from a warmed store (no browser): is a lesson under 2 s?

Usage: python benchmarks/lesson_open.py --store DIR [--repeats 3] [--port 8635] [--lessons NAME ...] [--compare]

DIR is a run store warmed by `python -m attncore lessons warm` (ATTNCORE_CACHE_DIR=DIR). Each repeat starts a fresh
hosted server over it (ATTNLAB_HOSTED=1, `streamlit run dashboard.py` on 127.0.0.1:--port; page_cpu.hosted_server),
opens Home once (the imports every page shares, not counted), then each lesson's link once, one after another, in a
websocket session of Streamlit's own protocol (st_client): the first view of that lesson's page on that server, its
view memos empty. A view's CPU is the server's process tree's utime + stime over its script run. Prints, per lesson,
the median over the repeats (and the range), whether every view finished without an exception, and whether the view
still offered training (a run missing from the store: the figure is then not a warm one), with the machine and load.
--compare views every lesson on as many servers again without the evaluations kept beside the store
(ATTNLAB_LENGTH_STORE=0, lab.length_store) and prints off / on ratios of the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tests")]

from hosted_envelope import load, machine  # noqa: E402
from page_cpu import VIEW_TIMEOUT, hosted_server  # noqa: E402
from st_client import one_view, tree_cpu_seconds  # noqa: E402

from lab.length_store import OFF_VAR  # noqa: E402
from lab.lessons import LESSONS  # noqa: E402

BUDGET_S = 2.0  # server CPU seconds a lesson's first view may take
NOT_WARM = ("Not trained yet", "still to train", "lessons warm")  # what a view says when a run is missing


def first_views(base: str, pid: int, lessons) -> dict:
    """{lesson name: (CPU s, wall s, finished, exceptions, warm)} of one view of each lesson, one after another."""
    asyncio.run(one_view(base, "", "", VIEW_TIMEOUT))  # Home: the shared imports and the sidebar's first run
    out = {}
    for lesson in lessons:
        before, start = tree_cpu_seconds(pid), time.perf_counter()
        view = asyncio.run(one_view(base, lesson.page, urlencode(lesson.query()), VIEW_TIMEOUT))
        cpu, wall = tree_cpu_seconds(pid) - before, time.perf_counter() - start
        warm = not any(word in text for text in view.texts for word in NOT_WARM)
        out[lesson.name] = (cpu, wall, view.finished, view.exceptions, warm)
        print(f"  {lesson.name}: {cpu:.2f} s CPU, {wall:.2f} s wall", flush=True)
    return out


def report(repeats: list[dict], lessons, off: list[dict] | None = None) -> None:
    head = ["lesson", "page", "views", "finished", "exceptions", "warm", "median CPU s", "min-max", "median wall s"]
    head += ["kept off: median CPU s", "off / on"] if off else []
    rows, over = [head], []
    for lesson in lessons:
        views = [r[lesson.name] for r in repeats]
        cpu = [v[0] for v in views]
        median = statistics.median(cpu)
        if median > BUDGET_S:
            over.append(lesson.name)
        rows.append([
            lesson.name, lesson.page, len(views), sum(v[2] for v in views), sum(len(v[3]) for v in views),
            "yes" if all(v[4] for v in views) else "NO", f"{median:.2f}", f"{min(cpu):.2f}-{max(cpu):.2f}",
            f"{statistics.median(v[1] for v in views):.2f}",
        ])  # fmt: skip
        if off:
            without = statistics.median(r[lesson.name][0] for r in off)
            rows[-1] += [f"{without:.2f}", f"{without / max(median, 1e-3):.1f}"]
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(head))]
    for r in rows:
        print("  ".join(str(x).rjust(w) for x, w in zip(r, widths, strict=True)))
    print(f"over {BUDGET_S:g} s of server CPU: {', '.join(over) or 'none'}")
    for lesson in lessons:
        for e in dict.fromkeys(e for r in repeats for e in r[lesson.name][3]):
            print(f"  exception in {lesson.name}: {e}")


def servers(args, lessons, tmp: str, env: dict | None = None, what: str = "") -> list[dict]:
    """Each lesson's first view on --repeats fresh servers."""
    out = []
    for i in range(args.repeats):
        print(f"server {i + 1} of {args.repeats}{what}:")
        with hosted_server(args.store, args.port, Path(tmp) / f"server{what}{i}.log", env) as (base, pid):
            out.append(first_views(base, pid, lessons))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True, help="a store warmed by `lessons warm`")
    parser.add_argument("--repeats", type=int, default=3, help="fresh servers, each viewing every lesson once")
    parser.add_argument("--port", type=int, default=8635)
    parser.add_argument("--lessons", nargs="*", help="names of the lessons to open (default: every lesson)")
    parser.add_argument("--compare", action="store_true", help="also without the evaluations kept beside the store")
    args = parser.parse_args()
    lessons = [x for x in LESSONS if args.lessons is None or x.name in args.lessons]
    print(f"machine: {machine()}")
    print(f"load average at start: {load()}")
    with tempfile.TemporaryDirectory() as tmp:
        off = servers(args, lessons, tmp, {OFF_VAR: "0"}, " (kept evaluations off)") if args.compare else None
        repeats = servers(args, lessons, tmp)
    print(f"\nhosted server (ATTNLAB_HOSTED=1): each lesson's first view on a fresh server, {args.repeats} servers")
    report(repeats, lessons, off)
    print(f"load average at end: {load()}")


if __name__ == "__main__":
    main()
