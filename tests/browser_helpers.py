"""Shared by the real-browser tests: the Chromium gate, a `streamlit run` server on 127.0.0.1, waiting for a page.

Importing this module skips the importing test module where Chromium or playwright is missing, except
in CI (CI=1), where a missing browser is a failure. Ports: an OS-assigned free one, or the first free
one in $ATTNLAB_TEST_PORTS (e.g. "8651-8669") when that is set.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
if os.environ.get("CI"):  # CI installs both (.ci/run): there a missing browser is a failure, not a skip
    import playwright.sync_api as sync_api

    assert Path(CHROMIUM).exists(), f"CI needs Debian's chromium at {CHROMIUM}"
else:
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Streamlit probes <page>/_stcore/{health,host-config} before the app root when a page is opened by
# its URL, and logs the 404s (streamlit/streamlit#7074): the only console errors tolerated.
KNOWN_PROBE = re.compile(r"^http://127\.0\.0\.1:\d+/[a-z0-9_-]+/_stcore/(health|host-config|allowed-message-origins)$")


def console_error(message) -> str | None:
    if message.type != "error" or KNOWN_PROBE.match(message.location.get("url", "")):
        return None
    return f"console: {message.text} ({message.location.get('url')})"


def free_port() -> int:
    """A free port on 127.0.0.1: the first one in $ATTNLAB_TEST_PORTS ("lo-hi") if set, else the OS's choice."""
    lo, _, hi = os.environ.get("ATTNLAB_TEST_PORTS", "0").partition("-")
    for port in range(int(lo), int(hi or lo) + 1):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError(f"no free port in ATTNLAB_TEST_PORTS={os.environ['ATTNLAB_TEST_PORTS']}")


@contextmanager
def streamlit_server(env: dict[str, str], log: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """(base URL, process) of `streamlit run dashboard.py` on 127.0.0.1 with `env` added to the environment.

    The server runs in its own process group (with its training workers), killed whole on exit; its
    output goes to `log` (a pipe nobody reads would fill up and stall the server).
    """
    port = free_port()
    env = os.environ | {"PYTHONUNBUFFERED": "1"} | env
    cmd = [sys.executable, "-m", "streamlit", "run", "dashboard.py", "--server.headless", "true"]
    cmd += ["--server.address", "127.0.0.1", "--server.port", str(port), "--server.fileWatcherType", "none"]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if urllib.request.urlopen(f"{base}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"streamlit did not start:\n{log.read_text()}")
            time.sleep(0.3)
        yield base, proc
    finally:
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    try:  # workers outlive a terminated server for a moment: take the whole group down
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@contextmanager
def chromium() -> Iterator:
    """Debian's Chromium under playwright, headless with the project's flags, closed on exit."""
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


# The page has rendered: the script has finished running, no skeleton is left and every chart has drawn.
APP_READY = """() => {
    const app = document.querySelector('[data-testid=stApp]');
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    if (document.querySelector('[data-testid=stSkeleton]')) return false;
    const charts = [...document.querySelectorAll('[data-testid=stVegaLiteChart]')];
    return charts.every(c => c.querySelector('canvas, svg'));
}"""


def wait_for_app(tab, timeout: float = 60.0) -> None:
    """Until the script has finished running and every chart has drawn."""
    tab.wait_for_selector("[data-testid=stApp][data-test-connection-state=CONNECTED]", timeout=timeout * 1000)
    tab.wait_for_function(APP_READY, timeout=timeout * 1000, polling=50)


def process_tree_rss_mb(pid: int) -> dict[str, float]:
    """Resident MB of pid and of each of its descendants ("pid command" -> MB), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    rss, todo = {}, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            command = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:80]
        except OSError:
            continue
        kb = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        rss[f"{p} {command}"] = int(kb.group(1)) / 1024 if kb else 0.0
        todo += children.get(p, [])
    return rss
