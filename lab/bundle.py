"""Run bundles: any set of stored runs in one .zip with no pickle in it (manifest.json + one .npz per run).

An import treats the file as hostile: size caps before reading, a fixed list of member names, the schema,
every digest, every array's shape against its config, the numerics version; only then are runs stored.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import stat
import time
import uuid
import zipfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import numpy as np

from attncore.config import RunConfig
from lab import provenance, store
from lab.store import codec

try:
    import fcntl
except ImportError:  # no flock (Windows): a journal left is reported at the next start, even one still under way
    fcntl = None

FORMAT = "attnlab-bundle/1"
MANIFEST = "manifest.json"
MAX_BUNDLE_BYTES = 200 * 2**20  # default cap on a bundle file (and on what it unpacks to, times 2)
MAX_RUNS = 5000
# A run's manifest entry: ~4 kB, ~90 objects and lists, ~170 commas with 2 layers; each layer adds ~0.75 kB, 24
# and 28 (~50 kB, ~1,600, ~1,900 at the 64-layer maximum). One run may take the most; the whole manifest is
# sized for MAX_RUNS runs of about 4 layers (8 kB, 160, 320 each): json.loads of 5,000 2-layer entries (19 MB)
# costs ~0.6 s and ~100 MB, and of the worst manifest within every cap ~1 s and ~150 MB (scalars are counted).
MANIFEST_BYTES_PER_RUN = 64 * 2**10
MAX_MANIFEST_BYTES = MAX_RUNS * 8 * 2**10
CONTAINERS_PER_RUN = 2048
MAX_CONTAINERS = MAX_RUNS * 160
VALUES_PER_RUN = 4096  # commas (one per value beyond each object's or list's first)
MAX_VALUES = MAX_RUNS * 320
MAX_DEPTH = 16  # a real manifest nests 6 deep (manifest, runs, run, summary, config, model)
FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # every member's timestamp: the same runs give the same bytes
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

    The same stored runs give the same bytes (fixed timestamps; the manifest's SHA-256 as the zip's comment,
    at its very end), so a server that keeps downloads by content (Streamlit does) holds one copy of them.
    """
    configs = (
        [s["config"] for s in store.list_cached(location=location)] if runs is None else [r.to_dict() for r in runs]
    )
    if len(configs) > MAX_RUNS:  # an import would refuse the bundle: refused before anything is written
        raise BundleError(f"{len(configs):,} runs are more than a bundle holds ({MAX_RUNS:,}); export a part of them")
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
                raise BundleError(f"the runs are more than the limit of {_bytes(max_bytes)}")
            z.writestr(_fixed(_member(len(metas))), data)  # an .npz of plain arrays: deflating gains little
            mac = codec.sign(meta)  # a keyed process vouches for its runs; a store with the same key accepts them
            metas.append(meta if mac is None else meta | {"hmac": mac})
            del data, found
        document = {"format": FORMAT, "numerics_version": store.NUMERICS_VERSION, "runs": metas}
        manifest = json.dumps(document).encode()
        _importable(manifest, document, len(metas))
        z.writestr(_fixed(MANIFEST, zipfile.ZIP_DEFLATED), manifest)
        z.comment = f"{FORMAT} manifest sha256 {hashlib.sha256(manifest).hexdigest()}".encode()
    return len(metas)


def _importable(manifest: bytes, document: dict, n_runs: int) -> None:
    """BundleError unless read_bundle's manifest checks accept `manifest` (json.dumps of `document`): runs of
    many layers weigh more. The structure is counted on the document, which costs no copy of the text."""
    limit = _manifest_limit(n_runs)
    try:
        if len(manifest) > limit:
            raise BundleError(f"{MANIFEST} would be {_bytes(len(manifest))}, more than {_bytes(limit)}")
        containers, commas, depth = _structure(document)
        _check_counts(containers, commas, n_runs, depth)
    except BundleError as exc:
        raise BundleError(f"an import would refuse this bundle ({exc}); export fewer runs at once") from None


def _fixed(name: str, compression: int = zipfile.ZIP_STORED) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
    info.compress_type, info.external_attr = compression, 0o644 << 16
    return info


def write_bundle(path, runs=None, *, location=None, max_bytes: int | None = None) -> int:
    """export_bundle into the file `path`, replacing it only once the bundle is whole; how many runs it holds.

    The bundle goes to a temporary file beside `path`, renamed over it on success: a full disk or any other
    error leaves an existing file as it was (and no temporary file). BundleError, with `path` untouched,
    when no run is left to write (none stored or matched, or all damaged) or more than `max_bytes` would
    be. A `path` that exists but is not
    a regular file (a FIFO, /dev/stdout) is written in place.
    """
    target = Path(os.path.realpath(path))  # a symlink's file is replaced, the link kept
    if target.exists() and not target.is_file():
        with open(target, "wb") as fh:
            return _some(export_bundle(fh, runs, location=location, max_bytes=max_bytes))
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as to open()
        with os.fdopen(fd, "wb") as fh:
            n = _some(export_bundle(fh, runs, location=location, max_bytes=max_bytes))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return n


def _some(n: int) -> int:
    if n == 0:
        raise BundleError("no stored run was written (none matched, or those that did failed their checks)")
    return n


@contextmanager
def _opened_file(path, max_bytes: int):
    """A regular file opened for reading, at most max_bytes: device files, FIFOs and folders are refused first."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise BundleError("the bundle is not a regular file")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO swapped in cannot block the open
    except OSError as exc:
        raise BundleError(f"cannot read the bundle ({exc.strerror or type(exc).__name__})") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise BundleError("the bundle is not a regular file")
        if st.st_size > max_bytes:
            raise BundleError(f"the bundle is {_bytes(st.st_size)}; the limit is {_bytes(max_bytes)}")
        yield fh


def _bytes(n: int) -> str:
    """A size in bytes, exact: '50,000,000 bytes' (the callers' MB differ: 10**6 on Home's upload, 2**20 on the CLI)."""
    return f"{n:,} bytes"


def _manifest_limit(n_runs: int) -> int:
    return 4096 + min(MAX_MANIFEST_BYTES, n_runs * MANIFEST_BYTES_PER_RUN)


def _check_structure(text: bytes, n_runs: int) -> None:
    """Refuse JSON nested deeper than MAX_DEPTH or with more objects and lists, or more values, than n_runs runs
    need, before parsing.

    Strings are blanked first (a bracket or comma inside one is not structure); what json.loads then parses
    has exactly the structure counted here, or is not JSON at all.
    """
    bare = _STRING.sub(b'""', text)
    _check_counts(bare.count(b"{") + bare.count(b"["), bare.count(b","), n_runs)
    brackets = np.frombuffer(bare.translate(None, _NOT_BRACKET), dtype=np.uint8)
    steps = np.where((brackets == ord("{")) | (brackets == ord("[")), 1, -1).astype(np.int32)
    _check_counts(0, 0, n_runs, int(np.cumsum(steps).max()) if steps.size else 0)


def _check_counts(containers: int, commas: int, n_runs: int, depth: int = 0) -> None:
    if containers > 16 + min(MAX_CONTAINERS, n_runs * CONTAINERS_PER_RUN):
        raise BundleError(f"not a bundle: {MANIFEST} holds more objects than {n_runs} runs need")
    if commas > 16 + min(MAX_VALUES, n_runs * VALUES_PER_RUN):
        raise BundleError(f"not a bundle: {MANIFEST} holds more values than {n_runs} runs need")
    if depth > MAX_DEPTH:
        raise BundleError(f"not a bundle: {MANIFEST} is nested deeper than {MAX_DEPTH} levels")


def _structure(value, depth: int = 1) -> tuple[int, int, int]:
    """(objects and lists, commas, deepest nesting) of `value` written as JSON: what _check_structure counts."""
    if not isinstance(value, (dict, list)):
        return 0, 0, depth - 1
    containers, commas, deepest = 1, max(len(value) - 1, 0), depth
    for child in value.values() if isinstance(value, dict) else value:
        c, k, d = _structure(child, depth + 1)
        containers, commas, deepest = containers + c, commas + k, max(deepest, d)
    return containers, commas, deepest


def _manifest(z: zipfile.ZipFile, info: zipfile.ZipInfo, n_runs: int) -> dict:
    """The parsed manifest, its size (declared and read) and structure bounded for n_runs runs before json.loads."""
    limit = _manifest_limit(n_runs)
    if info.file_size > limit or info.compress_size > limit:
        raise BundleError(f"not a bundle: {MANIFEST} is larger than {n_runs} runs need ({_bytes(limit)})")
    try:
        with z.open(info) as fh:
            text = fh.read(limit + 1)
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, NotImplementedError, RuntimeError):
        raise BundleError(f"not a bundle: {MANIFEST} cannot be unpacked") from None
    if len(text) > limit:
        raise BundleError(f"not a bundle: {MANIFEST} is larger than {n_runs} runs need ({_bytes(limit)})")
    _check_structure(text, n_runs)
    try:
        manifest = json.loads(text)
        if manifest["format"] != FORMAT or not isinstance(manifest["runs"], list):
            raise TypeError
    except (ValueError, KeyError, TypeError, RecursionError, MemoryError):
        raise BundleError(f"not a bundle: {MANIFEST} is not a {FORMAT} manifest") from None
    return manifest


class _Bundle:
    """A bundle opened for reading, its members and manifest checked; its runs decoded one at a time on request."""

    def __init__(self, z: zipfile.ZipFile, infos: dict, metas: list, trust: bool):
        self.z, self.infos, self.metas, self.trust = z, infos, metas, trust
        self.keyed = codec.sign({}) is not None

    def record(self, i: int):
        """Run i's RunRecord, every check passed (signature, size, digest, shapes); BundleError naming it."""
        n = len(self.metas)
        try:
            meta = self.metas[i]
            if not isinstance(meta, dict):
                raise codec.RecordError("its entry in the manifest is not an object")
            meta = dict(meta)
            mac = meta.pop("hmac", None)
            if self.keyed and not self.trust and not codec.signed(meta, mac):
                raise BundleError(
                    f"run {i + 1} of {n} is not signed with this store's {codec.KEY_VAR}; only bundles "
                    f"exported by a process with that key are accepted (or pass --trust to `cache import`)"
                )
            info = self.infos[_member(i)]
            if not isinstance(meta.get("npz_bytes"), int) or info.file_size != meta["npz_bytes"]:
                raise codec.RecordError("the array file's SHA-256 does not match its sidecar")
            with self.z.open(info) as fh:
                blob = fh.read(info.file_size + 1)
            return codec.decode(meta, blob, store.NUMERICS_VERSION, imported=True)
        except BundleError:
            raise
        except codec.RecordError as exc:
            raise BundleError(f"run {i + 1} of {n}: {exc}") from None
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError):
            raise BundleError(f"run {i + 1} of {n}: its array file cannot be read") from None


@contextmanager
def _open_bundle(source, max_bytes: int, trust: bool) -> Iterator[_Bundle]:
    """The bundle at `source` (a path, read from its file as needed; or bytes) with its structure checked.

    Everything is bounded before it is allocated: the file (a regular one, at most max_bytes), the member
    list, the manifest's size and structure; each run's .npy headers are checked against its config when the
    run is decoded (_Bundle.record). A path is never read into memory whole.
    """
    with ExitStack() as stack:
        if isinstance(source, (str, Path)):
            fh = stack.enter_context(_opened_file(source, max_bytes))
        else:
            if len(source) > max_bytes:
                raise BundleError(f"the bundle is {_bytes(len(source))}; the limit is {_bytes(max_bytes)}")
            fh = io.BytesIO(source)
        try:
            z = stack.enter_context(zipfile.ZipFile(fh))
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
                "the bundle was computed by another numerics version; this code computes version "
                f"{store.NUMERICS_VERSION}"
            )
        if len(metas) > MAX_RUNS:
            raise BundleError(f"the bundle holds more than {MAX_RUNS} runs")
        if len(metas) != n_runs:
            raise BundleError("the bundle holds files other than its manifest and its runs")
        yield _Bundle(z, infos, metas, trust)


def read_bundle(source, max_bytes: int = MAX_BUNDLE_BYTES, *, trust: bool = False) -> list:
    """The RunRecords of a bundle (a path or bytes), every check passed; BundleError naming the first failure.

    With ATTNCORE_CACHE_KEY set, every run must carry a valid signature under it unless `trust` (the operator's
    command line only; the runs are then signed when stored). All the runs are in memory at once: an import
    streams them instead (import_bundle).
    """
    with _open_bundle(source, max_bytes, trust) as opened:
        return [opened.record(i) for i in range(len(opened.metas))]


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
    this machine's (lab.provenance.foreign).
    They are stored under the same keys as this machine's own: served as they are, their platform shown.

    The counts are of the bundle's distinct runs (a run listed twice counts once) and of what this call
    wrote: a run stored meanwhile by another process (a concurrent import) counts as already there.
    """
    with _open_bundle(source, max_bytes, trust) as opened:
        last, summaries = {}, {}  # each distinct run: where it is last listed (its entry wins), its summary
        for i in range(len(opened.metas)):  # first pass: every run checked, one at a time, none kept
            record = opened.record(i)
            key = _key(record.config)
            last[key], summaries[key] = (i, record.config), record.summary()
            del record
        distinct = dict(last.values())  # index -> config, in the order the runs are first listed
        new = [i for i, config in distinct.items() if not store.is_cached(config, location=location)]
        done = []
        try:  # second pass: each run decoded again and stored in turn (checked again under its lock)
            with _journal(location, source, [distinct[i] for i in new]):
                records = (opened.record(i) for i in new)
                for i, wrote in zip(new, store.put_runs(records, location=location, replace=False), strict=True):
                    if wrote:
                        done.append(distinct[i])
        except BaseException:
            store.remove_runs(done, location=location)
            raise
    if done:
        store.enforce_cap(location=location, keep=list(distinct.values()))
    return len(done), len(distinct) - len(done), provenance.foreign(list(summaries.values()))


# An import writes a journal of the runs it is storing into <store>/imports/ and holds a lock on it until it ends;
# one killed midway (SIGKILL, a power cut) leaves it, and the next start of a server or of a `cache` command says how
# many of those runs came in (each entry is written whole or not at all) and removes it.
IMPORTS = "imports"


@contextmanager
def _journal(location, source, runs):
    folder = Path(location if location is not None else store.cache_dir()) / IMPORTS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{uuid.uuid4().hex}.json"
    name = os.fspath(source) if isinstance(source, str | os.PathLike) else "an uploaded bundle"
    with open(path, "w") as fh:
        if fcntl is not None:
            fcntl.flock(fh, fcntl.LOCK_EX)  # held until the import ends: a journal locked is an import under way
        json.dump({"source": name, "started": time.time(), "keys": store.entry_keys(runs, location=location)}, fh)
        fh.flush()
        try:
            yield
        finally:
            path.unlink(missing_ok=True)


def interrupted_imports(location=None) -> list[str]:
    """One line for each import that was stopped before its end (its journal left, its lock free): how many of its
    runs came in, each whole; the journal is then removed. Imports under way are left to finish."""
    folder = Path(location if location is not None else store.cache_dir()) / IMPORTS
    try:
        journals = sorted(folder.glob("*.json"))
    except OSError:
        return []
    lines = []
    for path in journals:
        try:
            fh = open(path)
        except OSError:
            continue
        with fh:
            if fcntl is not None:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue  # under way in another process
            try:
                journal = json.load(fh)
                keys, source = list(journal["keys"]), str(journal["source"])[:200]
                started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(float(journal["started"])))
            except (ValueError, KeyError, TypeError):
                keys = None
            if keys is not None:
                came = store.whole_entries(keys, location=location)
                lines.append(
                    f"an import of {len(keys):,} runs from {source} (started {started}) was stopped before its end: "
                    f"{came:,} of them came in, each whole (every check passed), {len(keys) - came:,} did not; "
                    "importing the same bundle again brings in the rest"
                )
            path.unlink(missing_ok=True)
    return lines


def _key(run: RunConfig) -> str:
    return json.dumps(run.to_dict(), sort_keys=True)


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
