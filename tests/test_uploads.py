"""What a visitor can make the server hold through uploads (ui.uploads): a session and the server each at most
their bytes, whatever the uploader widget says, and a closed session's files let go when room is needed. The
manager alone, then a real server on 127.0.0.1 taking PUTs past the limits while its memory is read."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
import uuid
from contextlib import ExitStack
from pathlib import Path

import pytest
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from serving.hf_config import MAX_BYTES
from ui import uploads

MB = 10**6


class FakeRuntime:
    def __init__(self):
        self.active: set[str] = set()

    def is_active_session(self, session_id: str) -> bool:
        return session_id in self.active


def bounded(per_session: int, total: int) -> MemoryUploadedFileManager:
    manager = MemoryUploadedFileManager("/_stcore/upload_file")
    manager.per_session, manager.total = per_session, total
    manager.__class__ = uploads.BoundedUploads
    return manager


def add(manager, session_id: str, size: int, file_id: str | None = None) -> int:
    """The status the upload route answers: 204 stored, 413 refused."""
    from starlette.exceptions import HTTPException

    try:
        manager.add_file(session_id, UploadedFileRec(file_id or uuid.uuid4().hex, "config.json", "application/json",
                                                     b"x" * size))  # fmt: skip
    except HTTPException as e:
        return e.status_code
    return 204


def test_a_session_and_the_server_hold_at_most_their_bytes(monkeypatch):
    runtime = FakeRuntime()
    monkeypatch.setattr(uploads.Runtime, "instance", staticmethod(lambda: runtime))
    manager = bounded(per_session=3_000, total=7_000)
    runtime.active |= {"a", "b", "c"}
    assert [add(manager, "a", 1_000) for _ in range(4)] == [204, 204, 204, 413]  # any file ids, 3,000 bytes
    assert add(manager, "a", 2_000, "same") == 413 and add(manager, "b", 2_000, "same") == 204
    assert add(manager, "b", 3_000, "same") == 204  # a file replaced by its id counts once
    assert [add(manager, "c", 1_000) for _ in range(2)] == [204, 413]  # 8,000 > 7,000, every session connected
    assert (manager._total_bytes, manager._file_count) == (7_000, 5)
    runtime.active.discard("a")  # a's tab closed: its files go at the next upload or read of any session's files
    assert add(manager, "c", 1_000) == 204
    assert "a" not in manager.file_storage and (manager._total_bytes, manager._file_count) == (5_000, 3)
    runtime.active.discard("c")
    assert len(manager.get_files("b", ["same"])) == 1 and "c" not in manager.file_storage
    assert (manager._total_bytes, manager._file_count) == (3_000, 1)
    manager.remove_session_files("b")
    assert manager._total_bytes == 0 and manager._file_count == 0


def test_the_caps_follow_what_the_server_lets_visitors_upload(monkeypatch):
    monkeypatch.setenv("ATTNLAB_BUNDLE_UPLOAD", "0")
    assert uploads.caps() == (2 * MAX_BYTES, uploads.MIN_TOTAL)  # a hosted server: config.json files only
    monkeypatch.setenv("ATTNLAB_BUNDLE_UPLOAD", "1")
    monkeypatch.setenv("ATTNLAB_MAX_BUNDLE_MB", "50")
    assert uploads.caps() == (100 * MB, 400 * MB)  # Home loads bundles of 50 MB


def test_install_switches_streamlits_own_manager_once(monkeypatch):
    manager = MemoryUploadedFileManager("/_stcore/upload_file")

    class Running:
        uploaded_file_mgr = manager

    monkeypatch.setattr(uploads.Runtime, "exists", staticmethod(lambda: True))
    monkeypatch.setattr(uploads.Runtime, "instance", staticmethod(lambda: Running))
    monkeypatch.setenv("ATTNLAB_BUNDLE_UPLOAD", "0")
    monkeypatch.setattr(uploads.config, "set_option", lambda key, value: options.append((key, value)))
    options = []
    uploads.install()
    assert type(manager) is uploads.BoundedUploads and manager.per_session == 2 * MAX_BYTES
    assert options == [("server.maxUploadSize", uploads.CONFIG_UPLOAD_MB)]  # .streamlit/config.toml's 50 lowered
    assert 2 * MAX_BYTES >= uploads.CONFIG_UPLOAD_MB * 10**6 and uploads.CONFIG_UPLOAD_MB * 2**20 > 10**6 + MAX_BYTES
    manager.per_session = 7
    uploads.install()
    assert manager.per_session == 7 and len(options) == 1  # not installed twice


# --- a real server ----------------------------------------------------------------------------------------------


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def put(base: str, session_id: str, size: int) -> int:
    """PUT one file of `size` bytes to the upload route under a new file id, as a visitor's own tab can."""
    boundary = uuid.uuid4().hex
    head = f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="config.json"\r\n\r\n'
    body = head.encode() + b"x" * size + f"\r\n--{boundary}--\r\n".encode()
    request = urllib.request.Request(
        f"{base}/_stcore/upload_file/{session_id}/{uuid.uuid4()}", data=body, method="PUT",
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )  # fmt: skip
    try:
        return urllib.request.urlopen(request, timeout=300).status
    except urllib.error.HTTPError as e:
        return e.code
    except urllib.error.URLError as e:  # refused by its Content-Length: answered and closed while the body was sent
        if not isinstance(e.reason, ConnectionResetError | BrokenPipeError):
            raise
        return 413


def open_session(stack: ExitStack, base: str):
    """(websocket, session id) of a session whose first script run has finished (dashboard.py ran in it)."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from websockets.sync.client import connect

    ws = stack.enter_context(connect(base.replace("http", "ws", 1) + "/_stcore/stream", subprotocols=["streamlit"]))
    rerun = BackMsg()
    rerun.rerun_script.query_string = ""
    ws.send(rerun.SerializeToString())
    session_id = None
    while True:
        msg = ForwardMsg()
        msg.ParseFromString(ws.recv(timeout=600))
        if msg.WhichOneof("type") == "new_session":
            session_id = msg.new_session.initialize.session_id
        elif msg.WhichOneof("type") == "script_finished":
            return ws, session_id


def test_a_server_refuses_uploads_past_its_bytes_and_its_memory_stays_bounded(tmp_path):
    """Home loads bundles here (50 MB): a session holds at most 100 MB, the server 400 MB. Eight 45 MB PUTs past a
    session's bytes are refused and the server's memory does not grow with them (before: each was stored, 8 x 45 MB
    held); the server's bytes are full after four sessions, until one of them closes."""
    pytest.importorskip("websockets")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from browser_helpers import streamlit_server

    env = {"ATTNLAB_BUNDLE_UPLOAD": "1", "ATTNLAB_MAX_BUNDLE_MB": "50", "STREAMLIT_SERVER_ENABLE_XSRF_PROTECTION": "0",
           "ATTNCORE_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    with streamlit_server(env, tmp_path / "server.log") as (base, proc), ExitStack() as stack:
        sessions = [open_session(stack, base) for _ in range(5)]
        (first_ws, first), (_, second), *_ = sessions
        assert [put(base, first, 45 * MB) for _ in range(2)] == [204, 204]
        held = rss_mb(proc.pid)
        assert [put(base, first, 45 * MB) for _ in range(8)] == [413] * 8  # 90 MB held: no third file
        assert rss_mb(proc.pid) < held + 100  # at most one refused body in flight, not 8 x 45 MB stored
        for _, session_id in sessions[1:4]:
            assert [put(base, session_id, 45 * MB) for _ in range(2)] == [204, 204]  # 360 MB on the server
        last = sessions[4][1]
        assert put(base, last, 45 * MB) == 413  # 405 MB > 400 MB, every session still connected
        assert rss_mb(proc.pid) < held + 3 * 90 + 100
        first_ws.close()  # the first tab closes: its 90 MB go when room is needed
        statuses = [put(base, last, 45 * MB)]
        while statuses[-1] == 413 and len(statuses) < 50:  # until the server has seen the tab go
            statuses.append(put(base, last, 45 * MB))
        assert statuses[-1] == 204, statuses
        assert put(base, second, 45 * MB) == 413  # the second session is still at its own cap


def test_a_hosted_server_refuses_a_body_past_a_config_json_before_reading_it(tmp_path):
    """Home loads no bundles here (a headless server's default): a session holds at most two config.json files, and
    a PUT past 1 MiB is refused by its Content-Length, so eight of 45 MB leave the server's memory as it was
    (before: each stored, 8 x 45 MB held)."""
    pytest.importorskip("websockets")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from browser_helpers import streamlit_server

    env = {"ATTNLAB_BUNDLE_UPLOAD": "0", "STREAMLIT_SERVER_ENABLE_XSRF_PROTECTION": "0",
           "ATTNCORE_CACHE_DIR": str(tmp_path / "cache")}  # fmt: skip
    with streamlit_server(env, tmp_path / "server.log") as (base, proc), ExitStack() as stack:
        _, session_id = open_session(stack, base)
        before = rss_mb(proc.pid)
        assert [put(base, session_id, 45 * MB) for _ in range(8)] == [413] * 8
        assert rss_mb(proc.pid) < before + 20 and proc.poll() is None  # no body read: not one 45 MB buffer
        assert [put(base, session_id, MAX_BYTES) for _ in range(3)] == [204, 204, 413]


def test_a_visitors_tabs_share_one_budget_and_the_page_is_told_why_before_the_browser_says_413(monkeypatch):
    runtime = FakeRuntime()
    monkeypatch.setattr(uploads.Runtime, "instance", staticmethod(lambda: runtime))
    monkeypatch.setattr(uploads, "visitor", lambda session_id: "ip:203.0.113.7" if session_id < "m" else session_id)
    manager = bounded(per_session=2_000, total=10_000)
    runtime.active |= {"a", "b", "c", "x", "y"}
    assert add(manager, "a", 1_500) == 204
    assert add(manager, "b", 1_000) == 413  # another tab of the same visitor: before, each session had 2,000 bytes
    assert "your uploads (in every tab) hold 1,500 bytes, at most 2,000" in manager.room("c", 1_000)
    assert manager.room("x", 1_000) is None and add(manager, "x", 2_000) == 204  # another visitor has their share
    assert add(manager, "b", 500) == 204  # within the visitor's share
    monkeypatch.setattr(uploads.Runtime, "exists", staticmethod(lambda: True))
    runtime.uploaded_file_mgr = manager
    said = uploads.room("c", 1)
    assert said.startswith("An upload here would be refused now: your uploads (in every tab) hold 2,000 bytes")
    runtime.active.discard("a")  # a tab closed: its bytes go, the visitor may upload again
    assert uploads.room("c", 1_000) is None
