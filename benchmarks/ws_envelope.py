"""A class on one server without browsers: N visitors speaking Streamlit's websocket protocol, for a bounded time.

Usage: python benchmarks/ws_envelope.py [--visitors 30] [--seconds 120] [--think 1] [--port 8621] [--store DIR]
                                        [--memo-off]  (the server as it was before its view memos)
       python benchmarks/ws_envelope.py --tiny   (3 visitors, each page once each, a 9-run store: a smoke run)

Fills a run store in a temporary folder through the command line's sweep (hosted_envelope.fill), starts a hosted
server over it (ATTNLAB_HOSTED=1, 127.0.0.1:--port), and drives N visitors at once, each one websocket session
(st_client: no browser, so the CPU measured is the server's alone): a visitor walks the pages in the navigation's
order from a page of its own, pausing --think seconds on average between views, and every fourth view changes the
sidebar's seed on a page that reads the run (a setting change: the page reruns). Every view waits until its script
run has finished (--view-timeout bounds it). The resident memory of the server and its children is read every
0.5 s; the server's process tree's CPU seconds at the start and end of the round.
Prints the views rendered and failed (timed out, or a script run that did not finish), the tracebacks (exception
elements the pages drew), the wall time of a view (p50, p95), the server's CPU per view (all its CPU over the round
divided by the views: visitors overlap, so one view's own CPU is not separable here; benchmarks/page_cpu.py measures
that one view at a time), the peak RSS, and `python -m attncore cache check` on the store after the round.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tests")]

from hosted_envelope import Round, Sampler, fill, load, machine, percentile, role, store_check  # noqa: E402
from page_cpu import OFF, hosted_server  # noqa: E402
from st_client import Session, tree_cpu_seconds  # noqa: E402

from ui.nav import PAGES  # noqa: E402

SEED_EVERY = 4  # every fourth view of a visitor changes the sidebar's seed


@dataclass
class Result:
    """What the class did."""

    n: int
    views: list = field(default_factory=list)  # (visitor, page, kind, wall s or None if it failed, detail)
    tracebacks: list = field(default_factory=list)  # "page: Type: message"
    cpu: float = 0.0
    seconds: float = 0.0
    memory: Round = None
    check: str = ""


async def visitor(base: str, i: int, result: Result, until: float, args, max_views: int | None) -> None:
    rng = random.Random(i)
    order = [p.url_path for p in PAGES]
    start = i % len(order)
    order = order[start:] + order[:start]
    uses_run = {p.url_path for p in PAGES if p.uses_run}
    async with Session(base, order[0], f"steps={args.steps}") as s:
        n = 0
        while time.monotonic() < until and (max_views is None or n < max_views):
            page = order[n % len(order)]
            kind = "page"
            t = time.perf_counter()
            view = await s.run(args.view_timeout, page)
            n += 1
            if view.finished and n % SEED_EVERY == 0 and page in uses_run and "Seed" in view.widgets:
                result.views.append((i, page, kind, time.perf_counter() - t, ""))
                kind = "seed"
                s.set_widget(view.widgets["Seed"][1], int_value=rng.randrange(args.seeds))
                t = time.perf_counter()
                view = await s.run(args.view_timeout)
            wall = time.perf_counter() - t if view.finished else None
            detail = "" if view.finished else f"no end of the script run within {args.view_timeout:g} s"
            result.views.append((i, page, kind, wall, detail))
            result.tracebacks += [f"/{page}: {e}" for e in view.exceptions]
            await asyncio.sleep(rng.uniform(0, 2 * args.think))


async def drive(base: str, result: Result, args, max_views: int | None) -> None:
    until = time.monotonic() + args.seconds
    visitors = [visitor(base, i, result, until, args, max_views) for i in range(args.visitors)]
    done = await asyncio.gather(*visitors, return_exceptions=True)
    for i, outcome in enumerate(done):
        if isinstance(outcome, BaseException):  # the connection itself failed
            result.views.append((i, "?", "session", None, f"{type(outcome).__name__}: {outcome}"[:200]))


def one_round(location: Path, args, log: Path, max_views: int | None) -> Result:
    result = Result(args.visitors, memory=Round(args.visitors))
    with hosted_server(location, args.port, log, OFF if args.memo_off else None) as (base, pid):
        sampler = Sampler(pid, result.memory)
        sampler.start()
        cpu, start = tree_cpu_seconds(pid), time.perf_counter()
        try:
            asyncio.run(drive(base, result, args, max_views))
        finally:
            result.cpu, result.seconds = tree_cpu_seconds(pid) - cpu, time.perf_counter() - start
            sampler.stop.set()
            sampler.join()
    result.check = store_check(location)
    return result


def report(r: Result) -> None:
    rendered = [w for *_, w, _ in r.views if w is not None]
    failed = [v for v in r.views if v[3] is None]
    pages = {p.url_path for p in PAGES}
    seen = {page for _, page, _, w, _ in r.views if w is not None}
    print(f"visitors: {r.n}; {len(r.views)} views in {r.seconds:.0f} s; rendered {len(rendered)}, failed {len(failed)}")
    print(f"pages rendered at least once: {len(seen & pages)} of {len(pages)}")
    print(f"wall s per view: p50 {percentile(rendered, 50):.2f}, p95 {percentile(rendered, 95):.2f}")
    per_view = r.cpu / max(len(rendered), 1)
    print(f"server CPU: {r.cpu:.1f} s over the round, {per_view:.3f} s per view rendered (the mean)")
    print(f"tracebacks: {len(r.tracebacks)}")
    m = r.memory
    print(f"peak RSS: server {m.peak_server_mb:.0f} MiB, server + workers {m.peak_total_mb:.0f} MiB")
    top = sorted(m.peak_detail.items(), key=lambda kv: -kv[1])
    print("  at the peak (MiB): " + ", ".join(f"{role(name)} {mb:.0f}" for name, mb in top))
    print(f"store check: {r.check}")
    for _, page, kind, _, detail in failed[:10]:
        print(f"  failed {kind} /{page}: {detail}")
    for text in dict.fromkeys(r.tracebacks):
        print(f"  traceback {text[:300]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--visitors", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=120, help="how long the visitors act")
    parser.add_argument("--think", type=float, default=1.0, help="a visitor's mean pause between views (s)")
    parser.add_argument("--port", type=int, default=8621)
    parser.add_argument("--seeds", type=int, default=4, help="seeds of the filled store's task-by-length grid")
    parser.add_argument("--steps", type=int, default=30, help="steps of the filled runs (the views' ?steps=)")
    parser.add_argument("--view-timeout", type=float, default=240, help="a view's hang guard (s)")
    parser.add_argument("--store", type=Path, help="a store filled before (by an earlier run's fill) to reuse")
    parser.add_argument("--memo-off", action="store_true", help="the server as before its view memos (page_cpu.OFF)")
    parser.add_argument("--tiny", action="store_true", help="3 visitors, each page once each, a 9-run store")
    args = parser.parse_args()
    max_views = None
    if args.tiny:
        args.visitors, args.seconds, args.seeds, args.think, max_views = 3, 600.0, 1, 0.05, len(PAGES)
    print(f"machine: {machine()}")
    print(f"load average at start: {load()}")
    with tempfile.TemporaryDirectory() as tmp:
        location = args.store or Path(tmp) / "cache"
        if not args.store:
            held = fill(location, args.seeds, args.steps, page_runs=not args.tiny)
            print(f"store: {held} runs trained by the command line's sweep")
        result = one_round(location, args, Path(tmp) / "streamlit.log", max_views)
    memos = "view memos off (ATTNLAB_VIEW_MEMO=0, runner.postScriptGC on)" if args.memo_off else "view memos on"
    print(f"\nhosted server (ATTNLAB_HOSTED=1), {memos}, think {args.think:g} s, websocket visitors (no browser)")
    report(result)
    print(f"load average at end: {load()}")
    failed = any(w is None for *_, w, _ in result.views) or result.tracebacks
    sys.exit(1 if failed or not result.check.startswith("ok") else 0)


if __name__ == "__main__":
    main()
