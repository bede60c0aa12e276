"""Runs in and out of the store from the dashboard: the ATTNLAB_BUNDLE warm start, download and upload, the size cap.

Uploads are checked by lab.bundle like any untrusted file; messages never quote the file's content.
"""

from __future__ import annotations

import os
import sys
import tempfile

import streamlit as st

from lab import bundle, store
from ui.limits import background_slot, limits
from ui.plain import plain

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
    if n := len(report["unverified"]):
        print(
            f"run store: kept {n:,} runs not signed with ATTNCORE_CACHE_KEY (not served); `python -m attncore cache "
            "sign` re-seals them under the key, `cache check --repair --drop-unverified` deletes them",
            file=sys.stderr,
        )


def warm_start() -> str | None:
    """Check the store, then import $ATTNLAB_BUNDLE, once per process and store (a fresh server starts warm)."""
    location = str(store.cache_dir())
    _checked(location)
    path = os.environ.get(BUNDLE_VAR)
    return _warm(path, location) if path else None


def all_runs_bundle(max_bytes: int) -> bytes:
    """Every stored run as one bundle's bytes, built and read back under one of the server's slots.

    The runs stream from the store into a temporary file one at a time (lab.bundle.export_bundle), which
    is read back once and deleted, so a build holds about one run and then the bundle, and no more builds
    than there are slots run at once. The same stored runs give the same bytes, which Streamlit keeps once
    (by content) however many visitors click how often. BundleError beyond `max_bytes`, BusyError when no
    slot freed up.
    """
    with background_slot("Download all runs"):
        with tempfile.TemporaryFile(prefix="attnlab-download-", suffix=".zip") as fh:
            bundle.export_bundle(fh, max_bytes=max_bytes)
            fh.seek(0)
            return fh.read()


def _download_all() -> bytes:
    """The deferred download's callable (run by Streamlit off the script, when clicked): the reason on the log."""
    try:
        return all_runs_bundle(limits().max_download_mb * 2**20)
    except Exception as exc:  # Streamlit shows "Failed to generate file for download" under the button
        print(f"Download all runs failed: {exc}", file=sys.stderr)
        raise


def download_section(lim) -> None:
    """'Download all runs' when the store holds runs and their bundle fits max_download_mb; else why not."""
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
    if size > lim.max_download_mb * 2**20:
        st.info(
            f"The {n:,} stored runs weigh {size / 2**20:,.0f} MB, more than this server's download limit of "
            f"{lim.max_download_mb:,} MB; `cache export` on the server writes them (or a part) to a file.",
            icon=":material/info:",
        )
        return
    st.download_button(
        "Download all runs",
        data=_download_all,  # built only when clicked, under a slot (all_runs_bundle)
        file_name="attention-lab-runs.zip",
        mime="application/zip",
        icon=":material/download:",
        on_click="ignore",
        key="bundle_download",
        help=f"{n:,} runs, about {size / 2**20:,.1f} MB, in one .zip",
    )


def share_section() -> bool:
    """'Download all runs' and, where the server allows it, 'Load a bundle'; True when an upload stored runs."""
    lim = limits()
    download_section(lim)
    if not lim.upload_allowed():
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
