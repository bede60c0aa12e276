"""Run bundles: any set of stored runs in one .zip with no pickle in it (manifest.json + one .npz per run).

An import treats the file as hostile: size caps before reading, a fixed list of member names, the schema,
every digest, every array's shape against its config, the numerics version; only then are runs stored.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import zipfile
from pathlib import Path

import numpy as np

from attncore.config import RunConfig
from lab import provenance, store
from lab.store import codec

FORMAT = "attnlab-bundle/1"
MANIFEST = "manifest.json"
MAX_BUNDLE_BYTES = 200 * 2**20  # default cap on a bundle file (and on what it unpacks to, times 2)
MAX_RUNS = 5000
MANIFEST_BYTES_PER_RUN = 64 * 2**10  # a run's manifest entry: ~4 kB (2 layers), ~50 kB at the 64-layer maximum
MAX_MANIFEST_BYTES = 8 * 2**20  # whatever the run count: json.loads of this costs < 0.1 s and < 100 MB
CONTAINERS_PER_RUN = 2048  # objects and lists in one run's entry: ~90 (2 layers), ~1,600 at 64 layers
MAX_CONTAINERS = 2**20  # ~70 MB of empty objects at most
MAX_DEPTH = 16  # a real manifest nests 6 deep (manifest, runs, run, summary, config, model)
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"{}[]")


class BundleError(ValueError):
    """A bundle that cannot be imported; the message never quotes the file's content."""


def _member(i: int) -> str:
    return f"runs/{i:05d}.npz"


def export_bundle(target, runs=None, *, location=None, max_bytes: int | None = None) -> int:
    """Write the stored runs (all of this numerics version, or those of `runs`, configs) to `target`.

    `target` is a path or a binary file (it may be unseekable, like stdout). The runs stream through one at a
    time: each entry's stored arrays are checked against its sealed sidecar and copied as they are (no
    parsing, no re-encoding), so memory stays at about one run. BundleError once more than `max_bytes` of
    runs would be written. With ATTNCORE_CACHE_KEY set, every run is signed. Returns how many runs were written.
    """
    configs = (
        [s["config"] for s in store.list_cached(location=location)] if runs is None else [r.to_dict() for r in runs]
    )
    metas, total = [], 0
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_STORED) as z:
        for config in configs:
            try:
                found = store._Entry(RunConfig.from_dict(config), location).stored_bytes(warn=True)
            except OSError:
                found = None
            if found is None:
                continue  # listed but damaged or gone: the store warned, the bundle leaves it out
            meta, data = found
            total += len(data)
            if max_bytes is not None and total > max_bytes:
                raise BundleError(f"the runs are more than the limit of {max_bytes / 2**20:,.1f} MB")
            z.writestr(_member(len(metas)), data)  # an .npz of plain arrays: deflating gains little
            mac = codec.sign(meta)  # a keyed process vouches for its runs; a store with the same key accepts them
            metas.append(meta if mac is None else meta | {"hmac": mac})
            del data, found
        manifest = {"format": FORMAT, "numerics_version": store.NUMERICS_VERSION, "runs": metas}
        z.writestr(MANIFEST, json.dumps(manifest), compress_type=zipfile.ZIP_DEFLATED)
    return len(metas)


def _read_file(path, max_bytes: int) -> bytes:
    """A regular file's bytes, at most max_bytes: device files, FIFOs and folders are refused before reading."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise BundleError("the bundle is not a regular file")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO swapped in cannot block the open
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise BundleError("the bundle is not a regular file")
            if st.st_size > max_bytes:
                raise BundleError(f"the bundle is {st.st_size / 2**20:.1f} MB; the limit is {max_bytes / 2**20:.0f} MB")
            data = fh.read(max_bytes + 1)  # never more than the cap, whatever the size said
    except OSError as exc:
        raise BundleError(f"cannot read the bundle ({exc.strerror or type(exc).__name__})") from None
    if len(data) > max_bytes:
        raise BundleError(f"the bundle is larger than the limit of {max_bytes / 2**20:.0f} MB")
    return data


def _manifest_limit(n_runs: int) -> int:
    return min(MAX_MANIFEST_BYTES, 4096 + n_runs * MANIFEST_BYTES_PER_RUN)


def _check_structure(text: bytes, n_runs: int) -> None:
    """Refuse JSON nested deeper than MAX_DEPTH or with more objects and lists than n_runs runs need, before parsing.

    Strings are blanked first (a bracket inside one is not structure); what json.loads then parses has exactly
    the structure counted here, or is not JSON at all.
    """
    bare = _STRING.sub(b'""', text)
    if bare.count(b"{") + bare.count(b"[") > min(MAX_CONTAINERS, 16 + n_runs * CONTAINERS_PER_RUN):
        raise BundleError(f"not a bundle: {MANIFEST} holds more objects than {n_runs} runs need")
    brackets = np.frombuffer(bare.translate(None, _NOT_BRACKET), dtype=np.uint8)
    steps = np.where((brackets == ord("{")) | (brackets == ord("[")), 1, -1).astype(np.int32)
    if steps.size and int(np.cumsum(steps).max()) > MAX_DEPTH:
        raise BundleError(f"not a bundle: {MANIFEST} is nested deeper than {MAX_DEPTH} levels")


def _manifest(z: zipfile.ZipFile, info: zipfile.ZipInfo, n_runs: int) -> dict:
    """The parsed manifest, its size (declared and read) and structure bounded for n_runs runs before json.loads."""
    limit = _manifest_limit(n_runs)
    if info.file_size > limit or info.compress_size > limit:
        raise BundleError(f"not a bundle: {MANIFEST} is larger than {n_runs} runs need ({limit / 2**20:.1f} MB)")
    try:
        with z.open(info) as fh:
            text = fh.read(limit + 1)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, NotImplementedError, RuntimeError):
        raise BundleError(f"not a bundle: {MANIFEST} cannot be unpacked") from None
    if len(text) > limit:
        raise BundleError(f"not a bundle: {MANIFEST} is larger than {n_runs} runs need ({limit / 2**20:.1f} MB)")
    _check_structure(text, n_runs)
    try:
        manifest = json.loads(text)
        if manifest["format"] != FORMAT or not isinstance(manifest["runs"], list):
            raise TypeError
    except (ValueError, KeyError, TypeError, RecursionError, MemoryError):
        raise BundleError(f"not a bundle: {MANIFEST} is not a {FORMAT} manifest") from None
    return manifest


def read_bundle(source, max_bytes: int = MAX_BUNDLE_BYTES, *, trust: bool = False) -> list:
    """The RunRecords of a bundle (a path or bytes), every check passed; BundleError naming the first failure.

    Everything is bounded before it is allocated: the file (a regular one, read up to max_bytes), the member
    list, the manifest's size and structure, every .npy header against its run's config. With
    ATTNCORE_CACHE_KEY set, every run must carry a valid signature under it unless `trust` (the operator's
    command line only; the runs are then signed when stored).
    """
    data = _read_file(source, max_bytes) if isinstance(source, (str, Path)) else bytes(source)
    if len(data) > max_bytes:
        raise BundleError(f"the bundle is {len(data) / 2**20:.1f} MB; the limit is {max_bytes / 2**20:.0f} MB")
    try:
        z = zipfile.ZipFile(io.BytesIO(data))
        infos = {info.filename: info for info in z.infolist()}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError):
        raise BundleError("not a bundle: the file is not a zip archive") from None
    if MANIFEST not in infos:
        raise BundleError(f"not a bundle: no {MANIFEST}")
    n_runs = len(infos) - 1
    if n_runs > MAX_RUNS:
        raise BundleError(f"the bundle holds more than {MAX_RUNS} runs")
    if set(infos) != {MANIFEST} | {_member(i) for i in range(n_runs)}:
        raise BundleError("the bundle holds files other than its manifest and its runs")
    if sum(info.file_size for info in infos.values()) > 2 * max_bytes:
        raise BundleError("the bundle unpacks to more than its size limit allows")
    manifest = _manifest(z, infos[MANIFEST], n_runs)
    metas = manifest["runs"]
    if manifest.get("numerics_version") != store.NUMERICS_VERSION:
        raise BundleError(
            f"the bundle was computed by another numerics version; this code computes version {store.NUMERICS_VERSION}"
        )
    if len(metas) > MAX_RUNS:
        raise BundleError(f"the bundle holds more than {MAX_RUNS} runs")
    if len(metas) != n_runs:
        raise BundleError("the bundle holds files other than its manifest and its runs")
    keyed = codec.sign({}) is not None
    out = []
    for i, meta in enumerate(metas):
        try:
            if not isinstance(meta, dict):
                raise codec.RecordError("its entry in the manifest is not an object")
            meta = dict(meta)
            mac = meta.pop("hmac", None)
            if keyed and not trust and not codec.signed(meta, mac):
                raise BundleError(
                    f"run {i + 1} of {len(metas)} is not signed with this store's {codec.KEY_VAR}; only bundles "
                    f"exported by a process with that key are accepted (or pass --trust to `cache import`)"
                )
            info = infos[_member(i)]
            if not isinstance(meta.get("npz_bytes"), int) or info.file_size != meta["npz_bytes"]:
                raise codec.RecordError("the array file's SHA-256 does not match its sidecar")
            with z.open(info) as fh:
                blob = fh.read(info.file_size + 1)
            out.append(codec.decode(meta, blob, store.NUMERICS_VERSION, imported=True))
        except BundleError:
            raise
        except codec.RecordError as exc:
            raise BundleError(f"run {i + 1} of {len(metas)}: {exc}") from None
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError):
            raise BundleError(f"run {i + 1} of {len(metas)}: its array file cannot be read") from None
    return out


def import_bundle(source, max_bytes: int = MAX_BUNDLE_BYTES, *, location=None, trust: bool = False) -> tuple[int, int]:
    """Check the whole bundle, then store its runs; (stored, already there). Runs already stored are kept as they are.

    Nothing is stored unless every run of the bundle passes its checks, and an import the store refuses
    midway (a full disk) takes back the runs it had stored and raises the OSError: all of its runs or none.
    """
    return import_bundle_report(source, max_bytes, location=location, trust=trust)[:2]


def import_bundle_report(
    source, max_bytes: int = MAX_BUNDLE_BYTES, *, location=None, trust: bool = False
) -> tuple[int, int, dict]:
    """import_bundle, and {kernel family: runs} of the bundle's runs computed on another BLAS kernel family than
    this machine's (lab.provenance.foreign; 'unknown' for runs stored before records carried their platform).
    They are stored under the same keys as this machine's own: served as they are, their platform shown."""
    imported = read_bundle(source, max_bytes, trust=trust)
    new, kept = [], 0
    for record in imported:
        if store.is_cached(record.config, location=location):
            kept += 1
        else:
            new.append(record)
    done = []
    try:
        for record in new:
            store.put_run(record, location=location)
            done.append(record.config)
    except BaseException:
        store.remove_runs(done, location=location)
        raise
    if done:
        store.enforce_cap(location=location, keep=[r.config for r in imported])
    return len(done), kept, provenance.foreign([r.summary() for r in imported])


def foreign_text(families: dict) -> str:
    """'' or ' 3 of them computed on another BLAS kernel family than this machine's (openblas SkylakeX): ...'."""
    if not families:
        return ""
    listed = ", ".join(f"{family} ({n})" if len(families) > 1 else family for family, n in families.items())
    return (
        f" {sum(families.values())} of them computed on another BLAS kernel family than this machine's "
        f"({provenance.here()}): {listed}. Their numbers are served as they are; a rerun here lands elsewhere "
        "within the seed spread."
    )
