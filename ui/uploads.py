"""What a visitor can make the server hold through uploads: Streamlit's server keeps every file PUT to its upload
route in memory, up to server.maxUploadSize each, under any file id, for as long as the session is stored (a closed
tab's uploads stayed for good). install() bounds the server's upload manager, once per process and when the server
starts (ui.server_start): each visitor (ui.visitors: an address, over all its tabs) to `per_session` bytes, the
server to `total` (a file past either is refused: HTTP 413), and lets a session's files go once it is no longer
connected; where Home loads no bundles, a body over a config.json's size is not even read. room() is the sentence
a page shows beside its uploader when a file would be refused (the browser itself says only "413").
"""

from __future__ import annotations

from streamlit import config
from streamlit.runtime import Runtime
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from serving.hf_config import MAX_BYTES as CONFIG_BYTES
from ui.bundles import UPLOAD_MB
from ui.limits import headless, limits
from ui.visitors import visitor

IN_FLIGHT = 2  # a file uploader replacing its file: the new one arrives before the old one's DELETE
MIN_TOTAL = 64 * 2**20  # the server's floor: thousands of config.json files of a few kB, held at once
# server.maxUploadSize where only a config.json (1,000,000 bytes) is taken, and the calculators' uploader's limit:
# 2 MiB (2,097,152 bytes) on the server, 2 x 10^6 in Streamlit's browser code, so a file just over 1 MB reaches the
# page and is refused with its size (the browser's own words were "1.0MB ... must be 1.0MB or smaller" for 1,000,001)
CONFIG_UPLOAD_MB = 2


class BoundedUploads(MemoryUploadedFileManager):
    """MemoryUploadedFileManager with a byte budget per visitor (their sessions together) and one for the server.
    The files of sessions no longer connected go at the next upload or read of any session's files (Streamlit keeps
    a closed tab's session for reconnection and, once its time is up, drops it without letting its files go)."""

    per_session: int  # a visitor's bytes, over all their sessions
    total: int

    def add_file(self, session_id: str, file: UploadedFileRec) -> None:
        size = len(file.data)
        with self._lock:
            self._release_gone()
            held = self.file_storage.get(session_id, {})
            replaced = len(held[file.file_id].data) if file.file_id in held else 0
            reason = self._refusal(session_id, size - replaced)
            if reason:
                raise refused(reason)
            if file.file_id not in held:
                self._file_count += 1
            self.file_storage[session_id][file.file_id] = file
            self._total_bytes += size - replaced

    def _visitor_bytes(self, session_id: str) -> int:
        """The bytes held by the sessions of this session's visitor (called with the lock held)."""
        owners = self.__dict__.setdefault("owners", {})  # session id -> visitor, fixed at its first upload
        if session_id not in owners:
            owners[session_id] = visitor(session_id)
        who = owners[session_id]
        mine = [files for s, files in self.file_storage.items() if owners.get(s) == who]
        return sum(len(f.data) for files in mine for f in files.values())

    def _refusal(self, session_id: str, more: int) -> str | None:
        """Why `more` bytes for this session would be refused, or None (called with the lock held)."""
        mine = self._visitor_bytes(session_id)
        if mine + more > self.per_session:
            return f"your uploads (in every tab) hold {mine:,} bytes, at most {self.per_session:,}"
        if self._total_bytes + more > self.total:
            return f"the server holds {self._total_bytes:,} bytes of everyone's uploads, at most {self.total:,}"
        return None

    def room(self, session_id: str, size: int) -> str | None:
        """Why a new file of `size` bytes from this session would be refused now, or None."""
        with self._lock:
            self._release_gone()
            return self._refusal(session_id, size)

    def get_files(self, session_id: str, file_ids):
        with self._lock:
            self._release_gone()
        return super().get_files(session_id, file_ids)

    def _release_gone(self) -> None:
        """Let go of the files of every session no longer connected (called with the lock held)."""
        runtime = Runtime.instance()
        owners = self.__dict__.get("owners", {})
        for session_id in [s for s in owners if not runtime.is_active_session(s) and s not in self.file_storage]:
            del owners[session_id]  # a session that only asked room() of a page
        for session_id in [s for s in self.file_storage if not runtime.is_active_session(s)]:
            owners.pop(session_id, None)
            gone = self.file_storage.pop(session_id)
            self._total_bytes -= sum(len(f.data) for f in gone.values())
            self._file_count -= len(gone)


def refused(reason: str) -> Exception:
    """What the upload route answers 413 with (Starlette's HTTPException, the server's own)."""
    from starlette.exceptions import HTTPException

    return HTTPException(status_code=413, detail=f"Upload refused: {reason}")


def caps() -> tuple[int, int]:
    """(per session, server-wide) bytes: a session holds a bundle (where Home loads them) or a config.json, twice
    over while an uploader replaces its file; the server holds several sessions' worth, at least MIN_TOTAL."""
    lim = limits()
    largest = lim.max_bundle_mb * UPLOAD_MB if lim.upload_allowed(headless()) else CONFIG_BYTES
    per_session = IN_FLIGHT * largest
    return per_session, max(MIN_TOTAL, 4 * per_session)


def install() -> None:
    """Bound this server's upload manager (idempotent). The manager is the object Streamlit's upload route and every
    session already hold, so its class is switched in place rather than a new manager made. Where Home loads no
    bundles, the route's own size check (server.maxUploadSize, read on each PUT) comes down to a config.json's
    CONFIG_UPLOAD_MB too: a larger body is refused by its Content-Length, before it is read into memory."""
    manager = Runtime.instance().uploaded_file_mgr if Runtime.exists() else None
    if type(manager) is not MemoryUploadedFileManager:  # already bounded, no server (AppTest), or not Streamlit's
        return
    manager.per_session, manager.total = caps()
    manager.__class__ = BoundedUploads
    if not limits().upload_allowed(headless()) and config.get_option("server.maxUploadSize") > CONFIG_UPLOAD_MB:
        config.set_option("server.maxUploadSize", CONFIG_UPLOAD_MB)


def room(session_id: str | None, size: int) -> str | None:
    """The sentence a page shows when a file of `size` bytes uploaded now would be refused (None: it would not, or
    this server's uploads are not bounded here: an AppTest)."""
    manager = Runtime.instance().uploaded_file_mgr if Runtime.exists() else None
    if not isinstance(manager, BoundedUploads) or session_id is None:
        return None
    reason = manager.room(session_id, size)
    return f"An upload here would be refused now: {reason}." if reason else None
