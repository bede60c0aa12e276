"""The dashboard costs no more than the command line: Home's "Reproduce the article" against
`python -m attncore sweep --preset article`, the same 23 runs from empty stores, side by side.

    python benchmarks/dashboard_vs_cli.py [--rounds 2]

Each round, in alternating order: the command line in a fresh process on an empty store (wall time from start
to exit); a real `streamlit run dashboard.py` on 127.0.0.1 on another empty store, opened in headless Chromium
(its first render, the cost model's calibration included, before the clock), then the time from the click on
Reproduce until the sweep's progress is gone and the article's table is drawn. Printed per round: both, their
ratio, and the bound it is held to (1.1 x the command line + 3 s); then the medians, with the platform and load.
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
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from lab.provenance import current, describe  # noqa: E402


def cli_seconds(location: Path) -> float:
    env = os.environ | {"ATTNCORE_CACHE_DIR": str(location)}
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "attncore", "sweep", "--preset", "article"],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def dashboard_seconds(location: Path, log: Path) -> float:
    from browser_helpers import CHROMIUM, CHROMIUM_ARGS, streamlit_server, sync_api, wait_for_app

    env = {"ATTNCORE_CACHE_DIR": str(location), "ATTNLAB_HOSTED": "0"}
    with streamlit_server(env, log) as (base, _), sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            tab = browser.new_page(viewport={"width": 1400, "height": 1600})
            tab.goto(base)
            wait_for_app(tab, timeout=120)
            button = tab.get_by_role("button", name="Reproduce the article", exact=False)
            start = time.perf_counter()
            button.click()
            tab.get_by_test_id("stProgress").wait_for(timeout=60_000)
            tab.wait_for_function(
                "() => !document.querySelector('[data-testid=stProgress]')"
                " && ![...document.querySelectorAll('button')].some(b => b.innerText.startsWith('Reproduce'))",
                timeout=30 * 60_000,
                polling=100,
            )
            wait_for_app(tab, timeout=120)
            return time.perf_counter() - start
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    a = parser.parse_args()
    print(f"platform: {describe(current())}; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    rows = []
    for r in range(a.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            order = ("cli", "dashboard") if r % 2 == 0 else ("dashboard", "cli")
            got = {}
            for name in order:
                if name == "cli":
                    got[name] = cli_seconds(tmp / "cli-store")
                else:
                    got[name] = dashboard_seconds(tmp / "dashboard-store", tmp / "streamlit.log")
            rows.append((got["cli"], got["dashboard"]))
            cli, dash = rows[-1]
            print(
                f"round {r + 1}: command line {cli:.1f} s, dashboard {dash:.1f} s, ratio {dash / cli:.2f}; bound "
                f"1.1 x {cli:.1f} + 3 = {1.1 * cli + 3:.1f} s ({'within' if dash <= 1.1 * cli + 3 else 'over'}); "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    cli, dash = (statistics.median(col) for col in zip(*rows, strict=True))
    print(f"median of {a.rounds}: command line {cli:.1f} s, dashboard {dash:.1f} s, ratio {dash / cli:.2f}")


if __name__ == "__main__":
    main()
