"""A minimal Streamlit visitor without a browser: one websocket session speaking Streamlit's protocol, and the CPU
time of a server's process tree read from /proc. Used by page_cpu.py and ws_envelope.py.

The protocol (streamlit/web/server/starlette/starlette_websocket.py, streamlit/runtime/app_session.py): the client
connects to /_stcore/stream with the subprotocol "streamlit" and sends BackMsg.rerun_script (a ClientState: the
page's URL path as page_name, its query string, the widgets' states); the server answers with ForwardMsgs (new_session,
deltas drawing elements, script_finished). An element with a widget id is a widget a later rerun can set.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from pathlib import Path

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

FINISHED = ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY
COMPILE_ERROR = ForwardMsg.ScriptFinishedStatus.FINISHED_WITH_COMPILE_ERROR
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class View:
    """What one script run sent: the widgets drawn (label -> (kind, id, proto)), tracebacks, texts, and whether it
    finished."""

    widgets: dict = field(default_factory=dict)
    exceptions: list = field(default_factory=list)  # "Type: message" of each exception element
    texts: list = field(default_factory=list)  # markdown, alert and text bodies (for "busy" notices)
    elements: int = 0
    finished: bool = False
    messages: int = 0


class Session:
    """One visitor's websocket session on a page."""

    def __init__(self, base: str, page: str, query: str = ""):
        self.url = base.replace("http://", "ws://") + "/_stcore/stream"
        self.page, self.query, self.states = page, query, {}  # widget id -> WidgetState proto
        self.pages: dict[str, str] = {}  # url path -> page script hash, from the server's navigation message
        self.ws = None

    async def __aenter__(self) -> Session:
        self.ws = await websockets.connect(self.url, subprotocols=["streamlit"], max_size=2**26, open_timeout=60)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.ws.close()

    async def run(self, timeout: float, page: str | None = None) -> View:
        """Ask for a script run with the current widget states (of `page`, a URL path, as a click in the navigation
        would: by its script hash once the server named it); the View when it finished (or timed out)."""
        msg = BackMsg()
        state = msg.rerun_script
        if page is not None and page != self.page:
            self.page, self.states = page, {}  # another page: its widgets are not these
        state.query_string, state.page_name = self.query, self.page
        if self.page in self.pages:
            state.page_script_hash = self.pages[self.page]
        state.widget_states.widgets.extend(self.states.values())
        await self.ws.send(msg.SerializeToString())
        view = View()
        try:
            await asyncio.wait_for(self._read(view), timeout)
        except TimeoutError:
            pass
        return view

    async def _read(self, view: View) -> None:
        while True:
            fwd = ForwardMsg()
            fwd.ParseFromString(await self.ws.recv())
            view.messages += 1
            kind = fwd.WhichOneof("type")
            if kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                element(fwd.delta.new_element, view)
            elif kind == "navigation":
                self.pages |= {p.url_pathname: p.page_script_hash for p in fwd.navigation.app_pages}
            elif kind == "page_info_changed":
                self.query = fwd.page_info_changed.query_string  # the page wrote its settings into the URL
            elif kind == "script_finished":
                if fwd.script_finished == COMPILE_ERROR:
                    view.exceptions.append("compile error")
                if fwd.script_finished in (FINISHED, COMPILE_ERROR):
                    view.finished = True
                    return

    def set_widget(self, widget_id: str, **value) -> None:
        """Set a widget for the next run, e.g. set_widget(id, int_value=3) or string_value='sort'."""
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        state = WidgetState(id=widget_id)
        for name, v in value.items():
            if name.endswith("_array_value"):
                getattr(state, name).data.extend(v)
            else:
                setattr(state, name, v)
        self.states[widget_id] = state


def element(el, view: View) -> None:
    view.elements += 1
    kind = el.WhichOneof("type")
    if kind is None:
        return
    body = getattr(el, kind)
    if kind == "exception":
        view.exceptions.append(f"{body.type}: {body.message}"[:400])
    elif kind in ("markdown", "alert", "text"):
        view.texts.append(body.body)
    fields = body.DESCRIPTOR.fields_by_name
    if "id" in fields and "label" in fields and body.id:
        view.widgets[body.label] = (kind, body.id, body)


def tree_pids(pid: int) -> list[int]:
    """pid and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def tree_cpu_seconds(pid: int) -> float:
    """utime + stime of pid and its live descendants, plus the children it has waited for (cutime + cstime)."""
    total = 0.0
    for p in tree_pids(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))
        if p == pid:
            ticks += int(fields[13]) + int(fields[14])  # cutime, cstime: its reaped children
        total += ticks / TICKS
    return total


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of one process (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


async def one_view(base: str, page: str, query: str, timeout: float) -> View:
    """A new session opens `page` and waits until its script run finishes."""
    async with Session(base, page, query) as s:
        return await s.run(timeout)
