"""One run's entry on disk: joblib's store backend writing record.npz + record.json, per-run locks, joblib's code file.

Writes go to temporary files renamed into place (sidecar last), and are removed again if the disk refuses
them, so a reader sees a whole entry or none. Nothing here unpickles: see lab.codec.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
import uuid
import warnings
from contextlib import contextmanager
from pathlib import Path

from joblib import register_store_backend
from joblib._store_backends import FileSystemStoreBackend
from joblib.memory import extract_first_line

from . import codec
from .record import NotStoredWarning, describe

try:
    import fcntl
except ImportError:  # no flock (Windows): atomic renames still let the last writer win whole
    fcntl = None

BACKEND = "attnlab"
RECORD_FILE = "record.npz"
SIDECAR_FILE = "record.json"
TMP_SUFFIX = ".tmp"


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same folder; no partial file on any error."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}-{os.getpid()}-{threading.get_ident()}{TMP_SUFFIX}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_entry(path: Path, meta: dict, data: bytes) -> None:
    """Store (meta, npz bytes) in the entry folder `path`: arrays first, sealed sidecar last; OSError if refused."""
    path.mkdir(parents=True, exist_ok=True)
    (path / SIDECAR_FILE).unlink(missing_ok=True)  # no moment where an old sidecar vouches for new arrays
    try:
        write_atomic(path / RECORD_FILE, data)
        write_atomic(path / SIDECAR_FILE, codec.seal(meta).encode())
    except BaseException:
        remove_entry(path)  # arrays without a sidecar are no entry: nothing is left behind
        raise


def remove_entry(path: Path) -> None:
    """Delete an entry folder's files (sidecar first, so no reader sees it whole meanwhile) and the folder."""
    for name in (SIDECAR_FILE, RECORD_FILE):
        try:
            (path / name).unlink(missing_ok=True)
        except OSError:
            pass
    try:
        path.rmdir()
    except OSError:
        pass  # joblib's metadata.json or a write in progress: cache check --repair tidies what stays


MAX_SIDECAR_BYTES = 2**20  # a real sidecar is a few kB


def _read_capped(path: Path, limit: int) -> bytes:
    """The file's bytes, refused (RecordError) before reading when it is larger than `limit`."""
    if path.stat().st_size > limit:
        raise codec.RecordError(f"{path.name} is larger than its sidecar allows")
    return path.read_bytes()


def read_sidecar(path: Path) -> bytes:
    """The entry folder's sidecar bytes (OSError if absent; RecordError beyond MAX_SIDECAR_BYTES)."""
    return _read_capped(path / SIDECAR_FILE, MAX_SIDECAR_BYTES)


def read_meta(path: Path, numerics_version: int, config: dict | None = None, *, unsigned: bool = False) -> dict:
    """The entry's checked sidecar meta (seal, format, version, config, declared shapes, the numbers' ranges);
    RecordError otherwise (UnverifiedError when whole but not signed with the current key, unless `unsigned`)."""
    try:
        text = _read_capped(path / SIDECAR_FILE, MAX_SIDECAR_BYTES)
    except OSError as exc:
        raise codec.RecordError(f"no readable sidecar ({exc.strerror or type(exc).__name__})") from None
    meta = codec.open_seal(text)[0] if unsigned else codec.unseal(text)
    run = codec.check_meta(meta, numerics_version, config)
    codec.check_values(meta, run, stored=True)
    return meta


def read_entry(path: Path, numerics_version: int, config: dict | None = None):
    """(RunRecord, meta) of the entry, every check passed before any array is parsed; RecordError otherwise."""
    meta = read_meta(path, numerics_version, config)
    try:
        data = _read_capped(path / RECORD_FILE, meta["npz_bytes"])
    except OSError as exc:
        raise codec.RecordError(f"no readable array file ({exc.strerror or type(exc).__name__})") from None
    return codec.decode(meta, data, numerics_version, config), meta


def read_verified(
    path: Path, numerics_version: int, config: dict | None = None, *, unsigned: bool = False
) -> tuple[dict, bytes]:
    """(meta, npz bytes) when the sidecar holds and the bytes' digest matches it (no parsing); RecordError otherwise."""
    meta = read_meta(path, numerics_version, config, unsigned=unsigned)
    try:
        data = _read_capped(path / RECORD_FILE, meta["npz_bytes"])
    except OSError:
        raise codec.RecordError("no readable array file") from None
    if not hmac.compare_digest(hashlib.sha256(data).hexdigest(), str(meta["npz_sha256"])):
        raise codec.RecordError("the array file's SHA-256 does not match its sidecar")
    return meta, data


def verify_entry(path: Path, numerics_version: int, config: dict | None = None, *, unsigned: bool = False) -> dict:
    """The meta when the sidecar holds and the array file's digest matches it (no parsing); RecordError otherwise."""
    return read_verified(path, numerics_version, config, unsigned=unsigned)[0]


class ClearRefused(RuntimeError):
    """A deletion of a folder of runs outside lab.store.clear_cache (the `cache clear` command)."""


_clearing: set[str] = set()  # the store folders whose runs clear_cache is deleting now
_clearing_lock = threading.Lock()


@contextmanager
def clearing(location: Path):
    """Let joblib delete the folders of runs under `location` for the duration: lab.store.clear_cache only."""
    key = os.path.abspath(location)
    with _clearing_lock:
        _clearing.add(key)
    try:
        yield
    finally:
        with _clearing_lock:
            _clearing.discard(key)


def _may_clear(path: str) -> bool:
    with _clearing_lock:
        return any(path == root or path.startswith(root + os.sep) for root in _clearing)


class RunBackend(FileSystemStoreBackend):
    """joblib's file-system backend with RunRecords stored as lab.store.codec data instead of output.pkl."""

    numerics_version: int | None = None  # set by the store through backend_options: what its keys carry

    def configure(self, location, verbose=1, backend_options=None):
        options = dict(backend_options or {})
        self.numerics_version = options.pop("numerics_version", None)
        super().configure(location, verbose, options)

    def dump_item(self, call_id, item, verbose=1):
        meta, data = codec.encode(item)
        meta["numerics_version"] = self.numerics_version
        path = Path(self.location, *call_id)
        try:
            write_entry(path, meta, data)
        except OSError as exc:  # disk full, read-only: the caller still gets its run
            try:
                path.rmdir()  # only if empty: write_entry leaves no partial file behind
            except OSError:
                pass
            warnings.warn(
                NotStoredWarning(
                    f"could not store {describe(item.config)} in {self.location} ({exc.strerror or exc}); "
                    "the run is returned but not stored",
                    exc.strerror or type(exc).__name__,
                ),
                stacklevel=2,
            )

    def load_item(self, call_id, verbose=1, timestamp=None, metadata=None):
        return read_entry(Path(self.location, *call_id), self.numerics_version)[0]

    def contains_item(self, call_id):
        return Path(self.location, *call_id, SIDECAR_FILE).exists()

    def store_metadata(self, call_id, metadata):
        if not self.contains_item(call_id):
            return  # the entry could not be written: no note about it either
        try:
            super().store_metadata(call_id, metadata)
        except OSError:
            pass  # joblib's timing note only; the entry is whole without it

    def clear_item(self, call_id):
        """One run's entry (joblib's per-call clearing): deleted as the store deletes an entry."""
        path = Path(self.location, *call_id)
        if path.is_dir():
            remove_entry(path)

    def clear_location(self, location):
        """joblib's deletion of a function's folder or of the whole store (Memory.clear, MemorizedFunc.clear, a
        changed func_code.py, reduce_size): refused, in one line, except inside clearing() (`cache clear`)."""
        if not _may_clear(os.path.abspath(location)):
            only = "only `python -m attncore cache clear` deletes a store's runs"
            raise ClearRefused(f"refused to delete the runs in {location}: {only}")
        super().clear_location(location)

    def get_cached_func_code(self, call_id):
        try:
            return super().get_cached_func_code(call_id)
        except UnicodeDecodeError:  # damaged: joblib rewrites it on OSError instead of failing every call
            raise OSError("func_code.py is not text") from None


register_store_backend(BACKEND, RunBackend)


def repair_func_code(func) -> bool:
    """Rewrite joblib's func_code.py if it is missing, damaged or stale; True if it was rewritten.

    The store never asks joblib to compare it (keys carry NUMERICS_VERSION), so a bad file cannot make
    joblib wipe the stored runs; it is kept right for anyone who calls the memoized function directly.
    """
    code, _, first_line = func.func_code_info
    try:
        old, old_first = extract_first_line(func.store_backend.get_cached_func_code([func.func_id]))
        if (old, old_first) == (code, first_line):
            return False
    except OSError:
        pass
    try:
        func._write_func_code(code, first_line)
    except OSError:
        return False
    return True


@contextmanager
def locked(path: Path, remove: bool = True):
    """An exclusive flock on `path` for the duration (True), or no lock where none can be made (False).

    With remove, the lock file is deleted before release; a waiter that then wakes on the deleted file
    notices (its inode is gone from the path) and takes the lock again on a fresh file.
    """
    fh = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fh = open(path, "a")
            if fcntl is None:
                break
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                if os.stat(path).st_ino == os.fstat(fh.fileno()).st_ino:
                    break
            except FileNotFoundError:
                pass
            fh.close()
    except OSError:  # a read-only store: compute without a lock (writes fail whole and are reported)
        if fh is not None:
            fh.close()
        yield False
        return
    try:
        yield True
    finally:
        if remove:
            path.unlink(missing_ok=True)
        fh.close()  # closing releases the flock
