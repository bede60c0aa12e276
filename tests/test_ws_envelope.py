"""The browserless visitors of benchmarks/ (st_client, ws_envelope): what they read from Streamlit's messages, and a
smoke run of a small class over every page. Timings are printed by the benchmarks, never asserted here."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import ROOT
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

sys.path.insert(0, str(ROOT / "benchmarks"))
import st_client  # noqa: E402

from ui.nav import PAGES  # noqa: E402


def test_a_view_counts_tracebacks_and_finds_widgets_by_label():
    view = st_client.View()
    msg = ForwardMsg()
    msg.delta.new_element.exception.type = "ValueError"
    msg.delta.new_element.exception.message = "bad seed"
    st_client.element(msg.delta.new_element, view)
    widget = ForwardMsg()
    widget.delta.new_element.number_input.id = "$$ID-seed"
    widget.delta.new_element.number_input.label = "Seed"
    st_client.element(widget.delta.new_element, view)
    text = ForwardMsg()
    text.delta.new_element.markdown.body = "The server is busy"
    st_client.element(text.delta.new_element, view)
    assert view.exceptions == ["ValueError: bad seed"]
    assert view.widgets["Seed"][:2] == ("number_input", "$$ID-seed")
    assert view.texts == ["The server is busy"] and view.elements == 3


def test_the_cpu_of_a_process_tree_counts_this_process():
    import os

    before = st_client.tree_cpu_seconds(os.getpid())
    sum(i * i for i in range(3_000_000))  # some CPU in this process
    assert st_client.tree_cpu_seconds(os.getpid()) > before
    assert st_client.tree_cpu_seconds(os.getpid()) >= st_client.process_cpu_seconds(os.getpid())


@pytest.mark.slow
def test_the_websocket_envelope_renders_every_page_for_a_small_class_without_a_traceback():
    """benchmarks/ws_envelope.py --tiny: three websocket visitors on a hosted server over a 9-run store, each viewing
    every page once (and changing the sidebar's seed on some): every page rendered, no view failed, no traceback,
    the store whole after."""
    from browser_helpers import free_port

    script = ROOT / "benchmarks" / "ws_envelope.py"
    done = subprocess.run([sys.executable, str(script), "--tiny", "--port", str(free_port())], cwd=ROOT,
                          capture_output=True, text=True, timeout=1800)  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert f"pages rendered at least once: {len(PAGES)} of {len(PAGES)}" in out, out
    views = re.search(r"(\d+) views in .*rendered (\d+), failed (\d+)", out)
    assert views and int(views[1]) >= 3 * len(PAGES) and views[1] == views[2] and views[3] == "0", out
    assert "tracebacks: 0" in out and "store check: ok" in out, out
    peak = re.search(r"peak RSS: server (\d+) MiB, server \+ workers (\d+) MiB", out)
    assert peak and int(peak[2]) >= int(peak[1]) > 0, out
