"""What a server installs when it starts (ui.server_start, the st.App that dashboard.py hands to `streamlit run`):
the static folder's guard and the upload bounds hold for the first request, before any page has run. A real
server on 127.0.0.1, asked before any session exists, and by a session whose first page has not run yet."""

from __future__ import annotations

import shutil
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest
from test_static_files import fill_store, get, make_run
from test_uploads import MB, put

from lab import store
from serving.hf_config import MAX_BYTES

pytestmark = pytest.mark.slow  # a real server


def session_before_its_page(stack: ExitStack, base: str) -> str:
    """The id of a session whose first script run has only started (its new_session message, the run's first)."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from websockets.sync.client import connect

    ws = stack.enter_context(connect(base.replace("http", "ws", 1) + "/_stcore/stream", subprotocols=["streamlit"]))
    rerun = BackMsg()
    rerun.rerun_script.query_string = ""
    ws.send(rerun.SerializeToString())
    while True:
        msg = ForwardMsg()
        msg.ParseFromString(ws.recv(timeout=600))
        if msg.WhichOneof("type") == "new_session":
            return msg.new_session.initialize.session_id


def test_a_fresh_server_guards_its_static_folder_and_bounds_uploads_before_any_page(tmp_path):
    pytest.importorskip("websockets")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from browser_helpers import streamlit_server

    from ui import bundles

    mine, theirs = tmp_path / "cache", tmp_path / "other"
    fill_store(mine, 2, make_run())
    fill_store(theirs, 2, make_run())
    other = bundles.bundle_file(store.listing_digest(location=theirs), theirs)
    try:
        other.parent.mkdir(parents=True, exist_ok=True)
        other.write_bytes(b"PK")
        env = {"ATTNCORE_CACHE_DIR": str(mine), "ATTNLAB_BUNDLE_UPLOAD": "0",
               "STREAMLIT_SERVER_ENABLE_XSRF_PROTECTION": "0"}  # fmt: skip
        with streamlit_server(env, tmp_path / "server.log") as (base, _), ExitStack() as stack:
            # no session yet: before, the guard came with the first page run and this was served (200)
            assert get(f"{base}/app/static/downloads/{other.parent.name}/{other.name}") == 404
            session_id = session_before_its_page(stack, base)
            # the page has not run: before, these were taken (204), the bounds not yet installed
            assert put(base, session_id, 45 * MB) == 413
            assert [put(base, session_id, MAX_BYTES) for _ in range(3)] == [204, 204, 413]
        assert "Traceback" not in (tmp_path / "server.log").read_text()
    finally:
        for location in (mine, theirs):
            shutil.rmtree(bundles.downloads_dir(location), ignore_errors=True)
            shutil.rmtree(bundles.build_dir(location), ignore_errors=True)
