"""Run bundles: any set of stored runs in one .zip with no pickle in it (manifest.json + one .npz per run).

An import treats the file as hostile: size caps before reading, a fixed list of member names, the schema,
every digest, every array's shape against its config, the numerics version; only then are runs stored.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

from attncore.config import RunConfig
from lab import provenance, store
from lab.store import codec

FORMAT = "attnlab-bundle/1"
MANIFEST = "manifest.json"
MAX_BUNDLE_BYTES = 200 * 2**20  # default cap on a bundle file (and on what it unpacks to, times 2)
MAX_RUNS = 5000


class BundleError(ValueError):
    """A bundle that cannot be imported; the message never quotes the file's content."""


def _member(i: int) -> str:
    return f"runs/{i:05d}.npz"


def export_bundle(target, runs=None, *, location=None) -> int:
    """Write the stored runs (all of this numerics version, or those of `runs`, configs) to `target`.

    `target` is a path or a binary file. Each run is checked on the way out. Returns how many runs were written.
    """
    configs = (
        [s["config"] for s in store.list_cached(location=location)] if runs is None else [r.to_dict() for r in runs]
    )
    metas, blobs = [], []
    for config in configs:
        entry = store._Entry(RunConfig.from_dict(config), location)
        try:
            record = entry.read(warn=True)
        except OSError:
            record = None
        if record is None:
            continue  # listed but damaged or gone: the store warned, the bundle leaves it out
        meta, data = codec.encode(record)
        meta["numerics_version"] = store.NUMERICS_VERSION
        metas.append(meta)
        blobs.append(data)
    manifest = {"format": FORMAT, "numerics_version": store.NUMERICS_VERSION, "runs": metas}
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr(MANIFEST, json.dumps(manifest))
        for i, data in enumerate(blobs):
            z.writestr(_member(i), data)
    return len(metas)


def bundle_bytes(runs=None, *, location=None) -> bytes:
    """export_bundle into memory (the dashboard's download)."""
    buffer = io.BytesIO()
    export_bundle(buffer, runs, location=location)
    return buffer.getvalue()


def read_bundle(source, max_bytes: int = MAX_BUNDLE_BYTES) -> list:
    """The RunRecords of a bundle (a path or bytes), every check passed; BundleError naming the first failure."""
    if isinstance(source, (str, Path)):
        try:
            size = Path(source).stat().st_size
            if size > max_bytes:
                raise BundleError(f"the bundle is {size / 2**20:.1f} MB; the limit is {max_bytes / 2**20:.0f} MB")
            data = Path(source).read_bytes()
        except OSError as exc:
            raise BundleError(f"cannot read the bundle ({exc.strerror or type(exc).__name__})") from None
    else:
        data = bytes(source)
    if len(data) > max_bytes:
        raise BundleError(f"the bundle is {len(data) / 2**20:.1f} MB; the limit is {max_bytes / 2**20:.0f} MB")
    try:
        z = zipfile.ZipFile(io.BytesIO(data))
        infos = {info.filename: info for info in z.infolist()}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError):
        raise BundleError("not a bundle: the file is not a zip archive") from None
    if MANIFEST not in infos:
        raise BundleError(f"not a bundle: no {MANIFEST}")
    if sum(info.file_size for info in infos.values()) > 2 * max_bytes:
        raise BundleError("the bundle unpacks to more than its size limit allows")
    try:
        manifest = json.loads(z.read(MANIFEST))
        metas = manifest["runs"]
        if manifest["format"] != FORMAT or not isinstance(metas, list):
            raise TypeError
    except (ValueError, KeyError, TypeError, zipfile.BadZipFile, OSError, EOFError):
        raise BundleError(f"not a bundle: {MANIFEST} is not a {FORMAT} manifest") from None
    if manifest.get("numerics_version") != store.NUMERICS_VERSION:
        raise BundleError(
            f"the bundle was computed by another numerics version; this code computes version {store.NUMERICS_VERSION}"
        )
    if len(metas) > MAX_RUNS:
        raise BundleError(f"the bundle holds more than {MAX_RUNS} runs")
    if set(infos) != {MANIFEST} | {_member(i) for i in range(len(metas))}:
        raise BundleError("the bundle holds files other than its manifest and its runs")
    out = []
    for i, meta in enumerate(metas):
        try:
            if not isinstance(meta, dict):
                raise codec.RecordError("its entry in the manifest is not an object")
            out.append(codec.decode(meta, z.read(_member(i)), store.NUMERICS_VERSION))
        except codec.RecordError as exc:
            raise BundleError(f"run {i + 1} of {len(metas)}: {exc}") from None
        except (zipfile.BadZipFile, OSError, EOFError, ValueError):
            raise BundleError(f"run {i + 1} of {len(metas)}: its array file cannot be read") from None
    return out


def import_bundle(source, max_bytes: int = MAX_BUNDLE_BYTES, *, location=None) -> tuple[int, int]:
    """Check the whole bundle, then store its runs; (stored, already there). Runs already stored are kept as they are.

    Nothing is stored unless every run of the bundle passes its checks.
    """
    return import_bundle_report(source, max_bytes, location=location)[:2]


def import_bundle_report(source, max_bytes: int = MAX_BUNDLE_BYTES, *, location=None) -> tuple[int, int, dict]:
    """import_bundle, and {kernel family: runs} of the bundle's runs computed on another BLAS kernel family than
    this machine's (lab.provenance.foreign; 'unknown' for runs stored before records carried their platform).
    They are stored under the same keys as this machine's own: served as they are, their platform shown."""
    stored = kept = 0
    imported = read_bundle(source, max_bytes)
    for record in imported:
        if store.is_cached(record.config, location=location):
            kept += 1
            continue
        store.put_run(record, location=location)
        stored += 1
    if stored:
        store.enforce_cap(location=location, keep=[r.config for r in imported])
    return stored, kept, provenance.foreign([r.summary() for r in imported])


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
