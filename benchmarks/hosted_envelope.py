"""The hosted envelope: N visitors in headless Chromium on a hosted server over a few hundred runs, for a bounded time.

Usage: python benchmarks/hosted_envelope.py [--visitors 5 10 20] [--seconds 120] [--seeds 16] [--steps 30] [--think 2]
       python benchmarks/hosted_envelope.py --tiny   (one visitor for a few seconds over a small store: a smoke run)

1. Fills a run store of its own in a temporary folder through the command line's sweep (`python -m attncore sweep`,
   --steps short runs): the article's runs, the Ablations and Compare pages' default grids (copy, L = 6: position,
   LayerNorm, scaling and learning rate over seeds 0-7), the Masks page's padded-batch model, and copy, sort and
   reverse at L = 4, 6, 8 over --seeds seeds (about 300 runs with the defaults).
2. For each N: starts `streamlit run dashboard.py` in hosted mode (ATTNLAB_HOSTED=1) on 127.0.0.1 over that store,
   and drives N visitors (one Chromium, one browser context each: N Streamlit sessions) for --seconds. Each visitor
   loops over what a class does, with a pause of --think seconds on average between actions: switches page from
   the sidebar's navigation (every page of ui.nav), opens a page by its link (a new session), changes a sidebar
   input (seed or task), picks a preset on Parameters, and trains a short run on Train (a seed no run has). Each
   action is timed until the page has rendered (the script has run and stopped, every chart drawn); a traceback
   box, "The server is busy" and actions that failed or timed out are counted. Every ~0.5 s the resident memory of
   the server and of all its child processes (the training workers) is read from /proc; the peaks are kept.
3. After each N: max_concurrent fresh visitors click Train at once (every slot is free if none of them is told to
   wait and each trains), every run a visitor saw trained is in the store, and `python -m attncore cache check`
   verifies every stored entry's digests.
Prints one table, and the machine (CPU, cores, the load average at start and end, the BLAS kernel).
The Chromium visitors run on the same machine as the server: their CPU is taken from the server's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from browser_helpers import APP_READY, CHROMIUM, CHROMIUM_ARGS, process_tree_rss_mb, streamlit_server  # noqa: E402
from playwright.async_api import Error as PlaywrightError  # noqa: E402
from playwright.async_api import async_playwright  # noqa: E402

from lab import provenance, store  # noqa: E402
from lab.jobs.limits import Limits  # noqa: E402
from ui.nav import PAGES  # noqa: E402

TRAIN_BUTTON = "Train this configuration"
BUSY = "The server is busy"
WAITING = "is waiting for a free slot"
TASKS = ["copy", "sort", "reverse"]  # the sidebar's tasks the filled store holds runs of
PRESETS = ["gpt2", "gpt2-xl", "llama-3-8b", "mistral-7b-v0.1", "mixtral-8x7b", "qwen3-8b", "gemma-2-9b"]
PRESETS += ["deepseek-v2-lite", "gpt-oss-20b", "attncore"]
ACTION_TIMEOUT = 240  # s: a hang guard (a slot wait is at most slot_wait_seconds, 120 by default)
FRESH_SEED = 5000  # trained seeds start here: the filled store holds seeds below 16 (or --seeds)
SAMPLE_SECONDS = 0.5

# Runs in every tab before the app's scripts: counts the script's state changes (each action waits for one more, or
# for its URL to change: React may batch a quick run's states into one render, so the DOM never shows 'running'),
# and records a traceback box, the busy message and the wait-for-a-slot notice the moment they appear.
WATCH = """
(() => {
  window.envelope = {runs: 0, tracebacks: [], busy: [], waited: 0};
  const seen = new WeakSet();
  let busy = false, waiting = false;
  const check = (records) => {
    // a run was asked for or ended: the state left 'notRunning' or 'running' (each record, however batched)
    for (const r of records) {
      if (r.attributeName === 'data-test-script-state' && /^(notRunning|running)$/.test(r.oldValue || '')) {
        window.envelope.runs += 1;
      }
    }
    for (const el of document.querySelectorAll('[data-testid="stException"]')) {
      if (!seen.has(el)) { seen.add(el); window.envelope.tracebacks.push(el.textContent.slice(0, 400)); }
    }
    // the page's own notices only (the Science page quotes these sentences from the docs)
    const alerts = [...document.querySelectorAll('[data-testid^=stAlert]')].map(a => a.textContent).join(' ');
    const isBusy = alerts.includes('BUSY'), isWaiting = alerts.includes('WAITING');
    if (isBusy && !busy) {
      const at = alerts.indexOf('BUSY');
      window.envelope.busy.push(location.pathname + ': ' + alerts.slice(at, at + 160));
    }
    if (isWaiting && !waiting) window.envelope.waited += 1;
    busy = isBusy; waiting = isWaiting;
  };
  new MutationObserver(check).observe(document, {
    subtree: true, childList: true, characterData: true, attributes: true, attributeOldValue: true,
    attributeFilter: ['data-test-script-state', 'data-testid'],
  });
})();
""".replace("BUSY", BUSY).replace("WAITING", WAITING)
RENDERED = f"b => window.envelope && (window.envelope.runs > b.runs || location.href !== b.href) && ({APP_READY})()"
# What a page that did not render in time was doing: the script's and the connection's state, what was left to draw.
STUCK = """() => {
    const app = document.querySelector('[data-testid=stApp]');
    const charts = [...document.querySelectorAll('[data-testid=stVegaLiteChart]')];
    const status = document.querySelector('[data-testid=stStatusWidget]');
    return `script ${app && app.getAttribute('data-test-script-state')}, `
        + `connection ${app && app.getAttribute('data-test-connection-state')}, `
        + `${document.querySelectorAll('[data-testid=stSkeleton]').length} skeletons, `
        + `${charts.filter(c => !c.querySelector('canvas, svg')).length} of ${charts.length} charts undrawn, `
        + `status "${status ? status.textContent.slice(0, 80) : ''}"`;
}"""
TRAINED = """() => [...document.querySelectorAll('[data-testid="stMetricLabel"]')]
    .some(e => e.textContent.includes('Test loss'))"""


@dataclass
class Round:
    """What N visitors did and what the server held meanwhile."""

    n: int
    actions: list = field(default_factory=list)  # (kind, seconds or None if it failed, page, detail)
    tracebacks: list = field(default_factory=list)
    busy: list = field(default_factory=list)  # "page: message" each time a page said the server is busy
    trained: list = field(default_factory=list)  # seeds of the runs the visitors saw trained
    peak_server_mb: float = 0.0
    peak_total_mb: float = 0.0
    peak_processes: int = 0
    peak_detail: dict = field(default_factory=dict)  # {process: MB} at the peak of the sum
    slots_free: str = ""
    stored: str = ""
    check: str = ""


class Sampler(threading.Thread):
    """The resident memory of a process and its descendants every SAMPLE_SECONDS; keeps the peaks in a Round."""

    def __init__(self, pid: int, record: Round):
        super().__init__(daemon=True)
        self.pid, self.record, self.stop = pid, record, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            rss = process_tree_rss_mb(self.pid)
            server = next((mb for name, mb in rss.items() if name.startswith(f"{self.pid} ")), 0.0)
            r = self.record
            r.peak_server_mb = max(r.peak_server_mb, server)
            r.peak_processes = max(r.peak_processes, len(rss))
            if sum(rss.values()) > r.peak_total_mb:
                r.peak_total_mb, r.peak_detail = sum(rss.values()), rss
            self.stop.wait(SAMPLE_SECONDS)


def sweep(location: Path, *args: str) -> None:
    env = os.environ | {store.ENV_VAR: str(location)}
    cmd = [sys.executable, "-m", "attncore", "sweep", *args, "--jobs", "2", "--yes"]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd[1:])} failed:\n{done.stderr[-2000:]}")


def fill(location: Path, seeds: int, steps: int, page_runs: bool) -> int:
    """The store the visitors find: real runs trained by the command line's sweep. Returns how many it holds."""
    short = ["--steps", str(steps)]
    if page_runs:
        sweep(location, "--preset", "article", *short)
        sweep(location, "--task", "copy", "--length", "6", "--position", "learned", "none", "--norm", "pre", "post",
              "--scaling", "on", "off", "--lr", "0.003", "0.01", "--seed", *map(str, range(8)), *short)  # fmt: skip
        sweep(location, "--task", "copy", "--length", "6", "--train-lengths", "1", "6", "--mixed-lengths")
    sweep(location, "--task", "copy", "sort", "reverse", "--length", "4", "6", "8",
          "--seed", *map(str, range(seeds)), *short)  # fmt: skip
    return len(store.list_cached(location=location))


class Visitor:
    """One browser context (one Streamlit session at a time) that loops over a class's actions."""

    def __init__(self, browser, base: str, name: int, record: Round, args, seeds: iter):
        self.browser, self.base, self.name, self.record, self.args = browser, base, name, record, args
        self.rng, self.seeds, self.page = random.Random(name), seeds, PAGES[0]
        self.query = f"steps={args.steps}"

    async def start(self) -> None:
        self.context = await self.browser.new_context(viewport={"width": 1280, "height": 900})
        await self.context.add_init_script(WATCH)
        self.tab = await self.context.new_page()
        await self.open(self.rng.choice(PAGES))

    async def close(self) -> None:
        state = await self.tab.evaluate("window.envelope")
        self.record.tracebacks += state["tracebacks"]
        self.record.busy += state["busy"]
        await self.context.close()

    async def runs(self) -> dict:
        """Where the page is now: its count of script state changes and its URL (an action changes either)."""
        return await self.tab.evaluate("({runs: window.envelope ? window.envelope.runs : 0, href: location.href})")

    async def rendered(self, before: dict) -> None:
        await self.tab.wait_for_function(RENDERED, arg=before, timeout=ACTION_TIMEOUT * 1000, polling=50)
        await self.tab.wait_for_timeout(100)  # still rendered a moment later: not between two runs of a rerun
        await self.tab.wait_for_function(APP_READY, timeout=ACTION_TIMEOUT * 1000, polling=50)

    async def open(self, spec) -> None:
        """A page opened by its link (a new session): the count of script runs starts again from 0."""
        state = await self.tab.evaluate("window.envelope || null")
        if state:  # what the old page saw, before the reload resets it
            self.record.tracebacks += state["tracebacks"]
            self.record.busy += state["busy"]
        self.page = spec  # where a failure is reported, and where recover() reopens
        await self.tab.goto(f"{self.base}/{spec.url_path}?{self.query}", timeout=ACTION_TIMEOUT * 1000)
        await self.rendered({"runs": 0, "href": ""})

    async def switch(self, spec) -> None:
        before = await self.runs()
        await self.tab.get_by_test_id("stSidebarNav").get_by_text(spec.title, exact=True).click()
        self.page = spec
        await self.rendered(before)

    async def sidebar(self) -> None:
        if not self.page.uses_run:  # the run's settings are folded away on the other pages
            await self.timed("switch page", self.switch(self.rng.choice([p for p in PAGES if p.uses_run])))
        side = self.tab.get_by_test_id("stSidebar")
        if self.rng.random() < 0.5:
            current = await side.get_by_label("Seed", exact=True).input_value()
            await self.set_seed(self.rng.choice([s for s in range(self.args.seeds + 1) if str(s) != current]))
            return
        tasks = [t for t in TASKS if not await side.get_by_role("radio", name=t, exact=True).is_checked()]
        before = await self.runs()
        await side.get_by_text(self.rng.choice(tasks), exact=True).click()  # another task: the page reruns
        await self.rendered(before)

    async def set_seed(self, seed: int) -> None:
        """Another seed in the sidebar (the same value would not rerun the page)."""
        before = await self.runs()
        box = self.tab.get_by_test_id("stSidebar").get_by_label("Seed", exact=True)
        await box.fill(str(seed))
        await box.press("Enter")
        await self.rendered(before)

    async def preset(self) -> None:
        if self.page.url_path != "parameters":
            await self.timed("switch page", self.switch(next(p for p in PAGES if p.url_path == "parameters")))
        before = await self.runs()
        box = self.tab.get_by_test_id("stMain").get_by_role("combobox", name=re.compile("Preset"))
        current = await box.input_value()  # the preset shown (another one reruns the page)
        await box.click()
        name = self.rng.choice([p for p in PRESETS if p != current])
        await self.tab.get_by_role("option", name=name, exact=True).click()
        await self.rendered(before)

    async def train(self) -> float:
        """A short run no one has trained, from Train: seconds from the click until its numbers are drawn."""
        if self.page.url_path != "train":
            await self.timed("switch page", self.switch(next(p for p in PAGES if p.url_path == "train")))
        seed = next(self.seeds)
        await self.set_seed(seed)  # if this fails, the training fails with it (recover() reopens the default seed)
        start = time.perf_counter()
        await self.tab.get_by_role("button", name=TRAIN_BUTTON).click(timeout=30_000)
        # the untrained page has no Test loss: its numbers drawn after the click are this run's
        numbers = f"() => ({APP_READY})() && ({TRAINED})()"
        await self.tab.wait_for_function(numbers, timeout=ACTION_TIMEOUT * 1000, polling=100)
        self.record.trained.append(seed)
        return time.perf_counter() - start

    async def timed(self, kind: str, action) -> None:
        start = time.perf_counter()
        try:
            result = await action
        except (TimeoutError, PlaywrightError) as e:
            try:
                stuck = await self.tab.evaluate(STUCK)
            except PlaywrightError:
                stuck = "the tab did not answer"
            error = str(e).splitlines()[0][:160]
            self.record.actions.append((kind, None, self.page.url_path, f"visitor {self.name}: {error}; {stuck}"))
            await self.recover()
            return
        seconds = result if isinstance(result, float) else time.perf_counter() - start
        self.record.actions.append((kind, seconds, self.page.url_path, ""))

    async def recover(self) -> None:
        """After a failed action: the same page again by its link, so the next action starts from a rendered page."""
        try:
            await self.open(self.page)
        except (TimeoutError, PlaywrightError):
            pass

    async def loop(self, until: float) -> None:
        others = list(PAGES)
        while time.monotonic() < until:
            roll = self.rng.random()
            if roll < 0.45:
                await self.timed("switch page", self.switch(self.rng.choice([p for p in others if p != self.page])))
            elif roll < 0.55:
                await self.timed("open link", self.open(self.rng.choice(others)))
            elif roll < 0.75:
                await self.timed("sidebar input", self.sidebar())
            elif roll < 0.87:
                await self.timed("preset", self.preset())
            else:
                await self.timed("train", self.train())
            await asyncio.sleep(self.rng.uniform(0, 2 * self.args.think))


async def drive(base: str, n: int, record: Round, args, seeds) -> None:
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            visitors = [Visitor(browser, base, i, record, args, seeds) for i in range(n)]
            await asyncio.gather(*(v.timed("open link", v.start()) for v in visitors))
            until = time.monotonic() + args.seconds
            await asyncio.gather(*(v.loop(until) for v in visitors))
            await asyncio.gather(*(v.close() for v in visitors), return_exceptions=True)
            record.slots_free = await slots_free(browser, base, args, seeds)
        finally:
            await browser.close()


async def slots_free(browser, base: str, args, seeds) -> str:
    """max_concurrent fresh visitors click Train at once: every slot is free if each trains and none is told to wait."""
    n = Limits().max_concurrent
    record = Round(n)
    fresh = [Visitor(browser, base, 1000 + i, record, args, seeds) for i in range(n)]
    for v in fresh:
        await v.start()
        await v.timed("switch page", v.switch(next(p for p in PAGES if p.url_path == "train")))
        await v.timed("sidebar input", v.set_seed(next(seeds)))
    clicks = [v.tab.get_by_role("button", name=TRAIN_BUTTON).click(timeout=30_000) for v in fresh]
    await asyncio.gather(*clicks)
    done = [v.tab.wait_for_function(TRAINED, timeout=ACTION_TIMEOUT * 1000, polling=100) for v in fresh]
    results = await asyncio.gather(*done, return_exceptions=True)
    waited = [await v.tab.evaluate("window.envelope.waited") for v in fresh]
    for v in fresh:
        await v.close()
    trained = sum(not isinstance(r, BaseException) for r in results)
    ok = trained == n and not any(waited) and not record.tracebacks
    return "yes" if ok else f"NO ({trained}/{n} trained, {sum(waited)} waited)"


def store_check(location: Path) -> str:
    env = os.environ | {store.ENV_VAR: str(location)}
    done = subprocess.run([sys.executable, "-m", "attncore", "cache", "check"], cwd=ROOT, env=env, capture_output=True,
                          text=True)  # fmt: skip
    line = (done.stdout.strip().splitlines() or [done.stderr.strip()[-200:]])[-1]
    return f"{'ok' if done.returncode == 0 else f'FAILED (exit {done.returncode})'}: {line}"


def one_round(location: Path, n: int, args, seeds, log: Path) -> Round:
    record = Round(n)
    env = {store.ENV_VAR: str(location), "ATTNLAB_HOSTED": "1"}
    with streamlit_server(env, log) as (base, proc):
        sampler = Sampler(proc.pid, record)
        sampler.start()
        try:
            asyncio.run(drive(base, n, record, args, seeds))
        finally:
            sampler.stop.set()
            sampler.join()
    stored = {s["config"]["train"]["seed"] for s in store.list_cached(location=location)}
    lost = [seed for seed in record.trained if seed not in stored]
    record.stored = "all" if not lost else f"{len(lost)} LOST"
    record.check = store_check(location)
    return record


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def table(rounds: list[Round]) -> None:
    head = ("N", "actions", "p50 s", "p95 s", "trains", "train p50 s", "failed", "tracebacks", "busy")
    head += ("peak server MiB", "server+workers MiB", "procs", "runs kept", "slots free", "store check")
    rows = []
    for r in rounds:
        rendered = [s for kind, s, _, _ in r.actions if s is not None and kind != "train"]
        trains = [s for kind, s, _, _ in r.actions if s is not None and kind == "train"]
        failed = sum(s is None for _, s, _, _ in r.actions)
        rows.append((r.n, len(r.actions), f"{percentile(rendered, 50):.2f}", f"{percentile(rendered, 95):.2f}",
                     len(trains), f"{percentile(trains, 50):.2f}", failed, len(r.tracebacks), len(r.busy),
                     f"{r.peak_server_mb:.0f}", f"{r.peak_total_mb:.0f}", r.peak_processes, r.stored, r.slots_free,
                     r.check.split(":")[0]))  # fmt: skip
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]
    for row in (head, *rows):
        print("  ".join(str(x).rjust(w) for x, w in zip(row, widths, strict=True)))


def role(process: str) -> str:
    """What a process of the server's tree is, from its "pid command" line."""
    command = process.split(" ", 1)[1]
    if "streamlit" in command:
        return "server"
    if " -c from " in command:  # loky's and multiprocessing's resource trackers (the command is cut at 80 characters)
        return "resource tracker"
    if "loky" in command:
        return "worker"
    return command[:40]


def machine() -> str:
    info = provenance.current()
    return f"{provenance.describe(info)}; {os.cpu_count()} cores"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--visitors", type=int, nargs="+", default=[5, 10, 20], help="visitors at once, one round each")
    parser.add_argument("--seconds", type=float, default=120, help="how long each round's visitors act")
    parser.add_argument("--seeds", type=int, default=16, help="seeds of the filled store's task-by-length grid")
    parser.add_argument("--steps", type=int, default=30, help="steps of the filled runs and of the visitors' trainings")
    parser.add_argument("--think", type=float, default=2.0, help="a visitor's mean pause between actions (s)")
    parser.add_argument("--tiny", action="store_true", help="one visitor, 5 s, a 9-run store: a smoke run")
    args = parser.parse_args()
    if args.tiny:
        args.visitors, args.seconds, args.seeds, args.think = [1], 5.0, 1, 0.5
    print(f"machine: {machine()}")
    print(f"load average at start: {load()}")
    with tempfile.TemporaryDirectory() as tmp:
        location = Path(tmp) / "cache"
        start = time.perf_counter()
        held = fill(location, args.seeds, args.steps, page_runs=not args.tiny)
        print(f"store: {held} runs trained by the command line's sweep in {time.perf_counter() - start:.0f} s")
        seeds = iter(range(FRESH_SEED, 10**4))
        rounds = []
        for n in args.visitors:
            record = one_round(location, n, args, seeds, Path(tmp) / f"streamlit-{n}.log")
            rounds.append(record)
            print(f"N = {n}: load average {load()}; store check {record.check}", flush=True)
            top = sorted(record.peak_detail.items(), key=lambda kv: -kv[1])
            print("  at the peak (MiB): " + ", ".join(f"{role(name)} {mb:.0f}" for name, mb in top))
            slowest = sorted((a for a in record.actions if a[1] is not None), key=lambda a: -a[1])[:5]
            print("  slowest: " + ", ".join(f"{kind} /{page} {s:.1f} s" for kind, s, page, _ in slowest))
            for kind, _, page, detail in record.actions:
                if detail:
                    print(f"  failed {kind} /{page}: {detail}")
            for text in record.tracebacks:
                print(f"  traceback: {text[:300]}")
            for text in record.busy:
                print(f"  busy: {text}")
    print(f"\nhosted server (ATTNLAB_HOSTED=1), {args.seconds:g} s a round, think {args.think:g} s, {held} runs filled")
    table(rounds)
    print(f"load average at end: {load()}")


if __name__ == "__main__":
    main()
