"""Runs in and out of the store from the dashboard: the ATTNLAB_BUNDLE warm start, download (a file served from
disk) and upload, the size cap.

Uploads are checked by lab.bundle like any untrusted file; messages never quote the file's content.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import sys
import uuid
from contextlib import contextmanager, suppress
from pathlib import Path

import streamlit as st

from lab import bundle, store
from lab.jobs.slots import BusyError
from lab.store import backend
from ui.limits import headless, limits
from ui.plain import plain
from ui.slots import background_slot

try:
    import fcntl
except ImportError:  # no flock (Windows): a start tidies its own store's build folder regardless
    fcntl = None

BUNDLE_VAR = "ATTNLAB_BUNDLE"
# An upload's MB is 10**6 bytes: the unit in which Streamlit's browser code refuses files above maxUploadSize
# (2**20 only on Windows; its server allows maxUploadSize * 2**20), so what the browser sends is what Home takes.
UPLOAD_MB = 10**6


def enforce_store_cap(keep=()) -> None:
    """Evict least-recently-used runs beyond the server's max_store_mb (never the article's, nor `keep`'s)."""
    try:
        store.enforce_cap(limits().store_bytes(), keep=keep)
    except OSError:
        pass  # a read-only store cannot grow either


@st.cache_resource(show_spinner="Loading the runs shipped with this app...")
def _warm(path: str, location: str) -> str | None:
    """Import the bundle once per server process and store; an error line for the server log and Home, or None."""
    try:
        stored, kept = bundle.import_bundle(path)  # the operator's own file: the default cap
    except bundle.BundleError as exc:
        message = f"{BUNDLE_VAR} was not loaded: {exc}"
    except OSError as exc:
        message = f"{BUNDLE_VAR} was not loaded: the run store cannot be written ({exc.strerror or exc})"
    else:
        print(f"{BUNDLE_VAR}: stored {stored} runs ({kept} were already stored) from {path}", file=sys.stderr)
        return None
    print(message, file=sys.stderr)
    return message


@st.cache_resource(show_spinner="Checking the run store...")
def _checked(location: str) -> None:
    """`cache check --repair` once per server process and store: damaged entries go, so no count sticks.

    Runs not signed with the current ATTNCORE_CACHE_KEY are untrusted, not damaged: kept (Home says so)."""
    try:
        report = store.check_store(repair=True)
    except OSError:
        return
    for path, problem in report["damaged"]:
        print(f"run store: deleted a damaged entry {path}: {problem}", file=sys.stderr)
    for line in bundle.interrupted_imports():  # after the check: what it counts came in whole
        print(f"run store: {line}", file=sys.stderr)
    if n := len(report["unverified"]):
        print(
            f"run store: kept {n:,} runs not signed with ATTNCORE_CACHE_KEY (not served); `python -m attncore cache "
            "sign` re-seals them under the key, `cache check --repair --drop-unverified` deletes them",
            file=sys.stderr,
        )


@st.cache_resource(show_spinner=False)
def _tidied(location: str) -> None:
    """The download folders tidied once per server process and store (tidy_downloads)."""
    with suppress(OSError):
        tidy_downloads()


def warm_start() -> str | None:
    """Check the store, then import $ATTNLAB_BUNDLE, once per process and store (a fresh server starts warm)."""
    location = str(store.cache_dir())
    _checked(location)
    _tidied(location)
    path = os.environ.get(BUNDLE_VAR)
    return _warm(path, location) if path else None


# Streamlit serves <the main script's folder>/static/ at app/static/ from disk (server.enableStaticServing, set in
# .streamlit/config.toml), in chunks, up to 200 MiB a file: a download costs the server no memory however many
# visitors click. Each store has a folder of its own there, holding the bundle of its current runs only.
STATIC_DIR = Path(__file__).resolve().parents[1] / "static"
STATIC_URL = "app/static"
MAX_STATIC_BYTES = 200 * 2**20  # Streamlit's static handler answers 404 above this (MAX_APP_STATIC_FILE_SIZE)
BUNDLE_PREFIX = "attention-lab-runs-"
BUILD_FOLDER, BUILD_LOCK = ".downloads-build", "build.lock"  # beside static/: written there, never served
MAX_DOWNLOADS_BYTES = 2 * MAX_STATIC_BYTES  # static/downloads/ in all: this store's bundle and a few others'


def downloads_dir(location: Path | None = None) -> Path:
    """The static folder of the store at `location` (default: this process's store), named by its path's hash."""
    location = Path(location or store.cache_dir()).resolve()
    return STATIC_DIR / "downloads" / hashlib.sha256(str(location).encode()).hexdigest()[:16]


def bundle_file(digest: str, location: Path | None = None) -> Path:
    """Where the bundle of the store's runs at `digest` (store.listing_digest) is served from."""
    return downloads_dir(location) / f"{BUNDLE_PREFIX}{digest[:24]}.zip"


def build_dir(location: Path | None = None) -> Path:
    """Where the store's bundle is written before it is served, and its build lock: beside static/, never served."""
    return STATIC_DIR.parent / BUILD_FOLDER / downloads_dir(location).name


def prepare_bundle(digest: str, max_bytes: int) -> Path:
    """The bundle of every stored run as a file on disk, built once per store state and served from there.

    The runs stream from the store into a temporary file outside the static folder (lab.bundle.write_bundle: about
    one run in memory), moved into place once whole (copied, then renamed, where static/downloads is on another
    file system); a lock makes visitors who click together wait for one build,
    under one of the server's slots (BusyError when none freed up). A build killed midway left its temporary file
    behind: the next build removes it. The bundles of earlier states are deleted once the new one is whole (a
    download under way keeps its open file), and other stores' bundles, oldest first, while the folder would
    exceed MAX_DOWNLOADS_BYTES. BundleError beyond `max_bytes`; OSError when the folders cannot be written.
    """
    path = bundle_file(digest)
    if path.is_file():
        return path
    with background_slot("Preparing Download all runs"):
        work = build_dir()
        with backend.locked(work / BUILD_LOCK, remove=False):
            _remove_all_but(work, {BUILD_LOCK})  # this store's build is ours now: what is left was killed midway
            if not path.is_file():
                staged = work / path.name
                bundle.write_bundle(staged, max_bytes=min(max_bytes, MAX_STATIC_BYTES))
                path.parent.mkdir(parents=True, exist_ok=True)
                _bound_downloads(path.parent, staged.stat().st_size)
                _move_into(staged, path)
            _remove_all_but(path.parent, {path.name})
    return path


def _move_into(staged: Path, path: Path) -> None:
    """`staged` renamed to `path`; where static/downloads is on another file system (a rename fails with EXDEV),
    copied to a hidden temporary file in `path`'s folder and renamed there, so no visitor sees a part-written
    bundle. The temporary file goes on every path; `staged` once the bundle is in place."""
    try:
        os.replace(staged, path)
        return
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        shutil.copyfile(staged, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    staged.unlink(missing_ok=True)


def tidy_downloads() -> None:
    """At a server's start: this store's folder keeps its current bundle only, a build killed midway loses its
    temporary file (unless another process is building this store's bundle now), and the folder its bound."""
    own = downloads_dir()
    _remove_all_but(own, {bundle_file(store.listing_digest()).name})
    work = build_dir()
    if work.is_dir():
        with _try_lock(work / BUILD_LOCK) as ours:
            if ours:
                _remove_all_but(work, {BUILD_LOCK})
    _bound_downloads(own, 0)


@contextmanager
def _try_lock(path: Path):
    """True holding the build lock at `path`, False when another process holds it (never waits)."""
    try:
        fh = open(path, "a")
    except OSError:
        yield False
        return
    with fh:
        if fcntl is None:
            yield True
            return
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True


def _remove_all_but(folder: Path, keep: set[str]) -> None:
    try:
        found = list(folder.iterdir())
    except OSError:
        return
    for p in found:
        if p.name not in keep and not p.is_dir():
            p.unlink(missing_ok=True)


def _bound_downloads(own: Path, room: int) -> None:
    """Delete other stores' bundles (only their own servers serve them, and those rebuild on a click), oldest
    first, until static/downloads/ holds at most MAX_DOWNLOADS_BYTES with `room` more bytes in `own`."""
    root = STATIC_DIR / "downloads"
    try:
        files = [(f.stat().st_mtime, f.stat().st_size, f) for f in root.glob("*/*") if f.is_file()]
    except OSError:
        return
    total = room + sum(size for _, size, _ in files)
    for _, size, f in sorted(t for t in files if t[2].parent != own):
        if total <= MAX_DOWNLOADS_BYTES:
            break
        f.unlink(missing_ok=True)
        total -= size
        with suppress(OSError):
            f.parent.rmdir()  # once empty


def _download_link(path: Path, n: int, size: int) -> None:
    st.link_button(
        "Download all runs",
        f"{STATIC_URL}/downloads/{path.parent.name}/{path.name}",  # relative: works under any baseUrlPath
        icon=":material/download:",
        help=f"{n:,} runs, {path.stat().st_size / 2**20:,.1f} MB, in one .zip",
    )


def download_section(lim) -> None:
    """'Download all runs' when the store holds runs and their bundle fits max_download_mb; else why not.

    The bundle of the store's current runs is a file served from disk: a link when it exists, else a button
    that builds it (once, whoever clicks) and then shows the link."""
    n, size = len(store.list_cached()), store.stored_bytes()
    if not n:
        st.caption("Download all runs is offered once the store holds a run.")
        return
    if n > bundle.MAX_RUNS:
        st.info(
            f"The store holds {n:,} runs, more than one bundle holds ({bundle.MAX_RUNS:,}); `cache export` on the "
            "server writes a part of them (--preset, --task, --length, --seed) to a file.",
            icon=":material/info:",
        )
        return
    limit = min(lim.max_download_mb * 2**20, MAX_STATIC_BYTES)
    if size > limit:
        st.info(
            f"The {n:,} stored runs weigh {size / 2**20:,.0f} MB, more than this server's download limit of "
            f"{limit / 2**20:,.0f} MB; `cache export` on the server writes them (or a part) to a file.",
            icon=":material/info:",
        )
        return
    if not st.get_option("server.enableStaticServing"):
        st.info(
            "Download all runs is served as a file: it needs server.enableStaticServing = true under [server] in "
            ".streamlit/config.toml (the repository's sets it); `cache export` on the server writes the runs to a "
            "file.",
            icon=":material/settings:",
        )
        return
    digest = store.listing_digest()
    path = bundle_file(digest)
    if path.is_file():
        _download_link(path, n, size)
        return
    if not st.button(
        "Prepare Download all runs",
        icon=":material/folder_zip:",
        key="bundle_prepare",
        help=f"{n:,} runs, about {size / 2**20:,.1f} MB: built once into one .zip, then offered to every visitor",
    ):
        return
    try:
        with st.spinner(f"Writing {n:,} runs into one .zip..."):
            path = prepare_bundle(digest, limit)
    except BusyError as exc:
        st.warning(plain(str(exc)), icon=":material/hourglass_empty:")
    except bundle.BundleError as exc:
        st.error(f"Download all runs is not available: {plain(str(exc))}", icon=":material/block:")
    except OSError as exc:
        st.error(
            "Download all runs is not available: the server cannot write its download folder "
            f"({exc.strerror or 'error'}).",
            icon=":material/block:",
        )
    else:
        _download_link(path, n, size)


def share_section() -> bool:
    """'Download all runs' and, where the server allows it, 'Load a bundle'; True when an upload stored runs."""
    lim = limits()
    download_section(lim)
    if not lim.upload_allowed(headless()):
        return False
    server_mb = st.get_option("server.maxUploadSize")
    if server_mb > lim.max_bundle_mb:  # Streamlit would take larger files into memory before the cap is checked
        st.warning(
            f"Load a bundle is off: Streamlit's server.maxUploadSize is {server_mb} MB, more than this server's "
            f"max_bundle_mb of {lim.max_bundle_mb} MB. Set maxUploadSize = {lim.max_bundle_mb} under [server] in "
            f".streamlit/config.toml (or STREAMLIT_SERVER_MAX_UPLOAD_SIZE={lim.max_bundle_mb}).",
            icon=":material/settings:",
        )
        return False
    cap = lim.max_bundle_mb * UPLOAD_MB
    upload = st.file_uploader(
        f"Load a bundle (a .zip from Download all runs or `cache export`, up to {lim.max_bundle_mb} MB "
        f"= {cap:,} bytes)",
        type=["zip"],
        key="bundle_upload",
        max_upload_size=lim.max_bundle_mb,
    )
    if upload is None or st.session_state.get("bundle_done") == upload.file_id:
        return False
    st.session_state["bundle_done"] = upload.file_id  # one import per uploaded file, not one per rerun
    if upload.size > cap:
        st.error(
            f"The bundle is {upload.size:,} bytes, more than this server's {lim.max_bundle_mb} MB = {cap:,} bytes.",
            icon=":material/block:",
        )
        return False
    try:
        stored, kept, families = bundle.import_bundle_report(upload.getvalue(), cap)
    except bundle.BundleError as exc:
        st.error(f"The bundle was not loaded: {exc}", icon=":material/block:")
        return False
    except OSError as exc:
        st.error(f"The run store cannot be written ({exc.strerror or 'error'}); nothing was loaded.")
        return False
    enforce_store_cap()
    st.success(
        f"Loaded {stored:,} runs from the bundle ({kept:,} were already stored). "
        + plain(bundle.foreign_text(families)),
        icon=":material/check:",
    )
    return stored > 0
