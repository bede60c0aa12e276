"""A run record as data, never pickle: arrays in an .npz (allow_pickle=False) and a sealed JSON sidecar.

The sidecar carries the config, the numerics version, the platform that computed it (lab.provenance), the
scalars, the arrays' shapes and the SHA-256 of the .npz bytes; it is sealed by a SHA-256 of its own canonical
text, and by an HMAC when ATTNCORE_CACHE_KEY is set. Everything read back is treated as untrusted: digests
first, then schema and shapes against the config, then the numbers' ranges (check_values, as for an import). A
sidecar whose digest holds but whose HMAC does not verify under the current key is UnverifiedError: untrusted,
not damaged (the store keeps it).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import io
import json
import math
import os
import zipfile

import numpy as np

from attncore import task as tasks
from attncore.config import ConfigError, RunConfig
from attncore.evaluate import EvalResult
from attncore.interpret import norms
from attncore.model import param_shapes
from attncore.sequences import N_TEST
from attncore.snapshots import run_snapshot_steps, stack, task_snapshot_steps, unstack
from lab import provenance

from .record import RunRecord

FORMAT = "attnlab-run/1"
KEY_VAR = "ATTNCORE_CACHE_KEY"
PARAM_PREFIX = "params."
SNAPSHOT_PREFIX = "snapshots."  # step, token_accuracy, sequence_accuracy, probe_attention (attncore.snapshots.stack)
NORMS_PREFIX = "norms."  # the snapshots' norms (attncore.interpret.norms.stack); absent in records stored before them
EVAL_FIELDS = ("token_accuracy", "sequence_accuracy", "distinct_accuracy", "n_distinct")
EVAL_FIELDS += ("repeated_accuracy", "n_repeated", "eval_seconds")


class RecordError(ValueError):
    """Stored or uploaded run data that is damaged, forged, or not what it claims to be."""


class UnverifiedError(RecordError):
    """A sidecar whose own digest holds but whose HMAC does not verify under the current ATTNCORE_CACHE_KEY.

    Untrusted, not damaged: sealed without a key or under another one (a changed key, a key set on an unkeyed
    store). Such an entry is never served and never deleted automatically (`cache sign`, `--drop-unverified`).
    """


def _canonical(meta: dict) -> bytes:
    return json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()


def _key() -> bytes | None:
    key = os.environ.get(KEY_VAR)
    return key.encode() if key else None


def key_id() -> str:
    """A short digest naming the current ATTNCORE_CACHE_KEY ('' when none is set); never the key itself."""
    key = _key()
    return hashlib.sha256(b"attnlab key id\0" + key).hexdigest()[:16] if key else ""


def seal(meta: dict) -> str:
    """The sidecar text: meta plus its own SHA-256, and an HMAC-SHA256 when ATTNCORE_CACHE_KEY is set."""
    body = _canonical(meta)
    sealed = {"meta": meta, "sha256": hashlib.sha256(body).hexdigest()}
    key = _key()
    if key:
        sealed["hmac"] = hmac.new(key, body, hashlib.sha256).hexdigest()
    return json.dumps(sealed, sort_keys=True)


def open_seal(text: str | bytes) -> tuple[dict, bool]:
    """(meta, signed) of a sidecar whose own SHA-256 holds; `signed`: its HMAC verifies under the current key
    (always True when no key is set). RecordError when the text is unreadable or its digest does not match."""
    try:
        sealed = json.loads(text)
        meta, digest = sealed["meta"], sealed["sha256"]
        body = _canonical(meta)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, RecursionError) as exc:
        raise RecordError(f"unreadable sidecar ({type(exc).__name__})") from None
    if not isinstance(digest, str) or not hmac.compare_digest(digest, hashlib.sha256(body).hexdigest()):
        raise RecordError("the sidecar's digest does not match its content")
    if not isinstance(meta, dict):
        raise RecordError("the sidecar's meta is not an object")
    key, mac = _key(), sealed.get("hmac")
    if not key:
        return meta, True
    return meta, isinstance(mac, str) and hmac.compare_digest(mac, hmac.new(key, body, hashlib.sha256).hexdigest())


def unseal(text: str | bytes) -> dict:
    """The meta of a sidecar whose seal holds and whose HMAC holds, when a key is set.

    RecordError when damaged; UnverifiedError (a RecordError) when whole but not signed with the current key.
    """
    meta, signed = open_seal(text)
    if not signed:
        raise UnverifiedError(f"the sidecar is not signed with this store's {KEY_VAR}")
    return meta


def sign(meta: dict) -> str | None:
    """The HMAC-SHA256 of meta's canonical text under ATTNCORE_CACHE_KEY (a bundle's per-run signature), or None."""
    key = _key()
    return hmac.new(key, _canonical(meta), hashlib.sha256).hexdigest() if key else None


def signed(meta: dict, mac) -> bool:
    """Whether `mac` is meta's HMAC under ATTNCORE_CACHE_KEY (False when no key is set)."""
    expected = sign(meta)
    return expected is not None and isinstance(mac, str) and hmac.compare_digest(mac, expected)


def seal_bytes(body: bytes) -> bytes:
    """`body` behind a header line with its SHA-256 (and HMAC when a key is set): fast to check for large files."""
    key = _key()
    mac = hmac.new(key, body, hashlib.sha256).hexdigest() if key else "-"
    return f"{hashlib.sha256(body).hexdigest()} {mac}\n".encode() + body


def unseal_bytes(data: bytes) -> bytes:
    """The body of seal_bytes' output if its digest (and HMAC, when a key is set) holds; else RecordError."""
    header, _, body = data.partition(b"\n")
    parts = header.decode("ascii", "replace").split(" ")
    if len(parts) != 2 or not hmac.compare_digest(parts[0], hashlib.sha256(body).hexdigest()):
        raise RecordError("the file's digest does not match its content")
    key = _key()
    if key and not hmac.compare_digest(parts[1], hmac.new(key, body, hashlib.sha256).hexdigest()):
        raise RecordError(f"the file is not signed with this store's {KEY_VAR}")
    return body


def _number(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def encode(record) -> tuple[dict, bytes]:
    """(meta, npz bytes) of a RunRecord; meta holds the npz's SHA-256."""
    arrays = {
        "loss_history": record.loss_history,
        "probe_tokens": record.probe_tokens,
        "probe_attention": record.probe_attention,
    }
    arrays |= {PARAM_PREFIX + name: value for name, value in record.params.items()}
    arrays |= {SNAPSHOT_PREFIX + name: value for name, value in stack(record.snapshots).items()}
    if record.norms is not None:
        arrays |= {NORMS_PREFIX + name: value for name, value in norms.stack(record.norms).items()}
    buffer = io.BytesIO()
    np.savez(buffer, **{name: np.ascontiguousarray(a) for name, a in arrays.items()})
    data = buffer.getvalue()
    e = record.eval.to_dict()
    meta = {
        "format": FORMAT,
        "numerics_version": None,  # filled by the caller (lab.store.record owns NUMERICS_VERSION)
        "config": record.config.to_dict(),
        "summary": record.summary(),
        "final_loss": float(record.final_loss),
        "train_seconds": float(record.train_seconds),
        "n_params": int(record.n_params),
        "eval": {k: _number(v) if isinstance(v, float) else v for k, v in e.items()},
        "arrays": {name: {"shape": list(a.shape), "dtype": a.dtype.str} for name, a in arrays.items()},
        "npz_sha256": hashlib.sha256(data).hexdigest(),
        "npz_bytes": len(data),
        "platform": record.platform,
    }
    return meta, data


def expected_arrays(run: RunConfig, with_norms: bool = True) -> dict[str, tuple[tuple[int, ...], tuple[str, ...]]]:
    """name -> (shape, allowed dtypes) of every array a record of this run must hold, and nothing else; a record
    stored before records carried norms holds none (with_norms=False)."""
    return dict(_expected_arrays(run.model, run.task, run.train.steps, with_norms))


def _has_norms(names) -> bool:
    return any(name.startswith(NORMS_PREFIX) for name in names)


@functools.lru_cache(maxsize=1024)  # the seeds of a sweep share it; a rebuild of the index checks thousands
def _expected_arrays(m, task, steps: int, with_norms: bool) -> dict[str, tuple[tuple[int, ...], tuple[str, ...]]]:
    T = task.n_inputs  # the probe's positions: 2L, or the induction task's T - 1
    floats = (np.dtype(m.dtype).str,)
    out = {
        "loss_history": ((steps,), (np.dtype(np.float64).str, np.dtype(np.float32).str)),
        "probe_tokens": ((T,), (np.dtype(np.int64).str, np.dtype(np.int32).str)),
        "probe_attention": ((m.n_layers, m.n_heads, T, T), floats),
    }
    for name, shape in param_shapes(m).items():
        out[PARAM_PREFIX + name] = (tuple(shape), floats)
    n = len(task_snapshot_steps(task.name, steps))
    out[SNAPSHOT_PREFIX + "step"] = ((n,), (np.dtype(np.int64).str,))
    for name in ("token_accuracy", "sequence_accuracy"):
        out[SNAPSHOT_PREFIX + name] = ((n,), (np.dtype(np.float64).str,))
    out[SNAPSHOT_PREFIX + "probe_attention"] = ((n, m.n_layers, m.n_heads, T, T), floats)
    for name, shape in tasks.get(task.name).snapshot_shapes(m.n_layers, m.n_heads, n).items():  # the task's figures
        out[SNAPSHOT_PREFIX + name] = (shape, (np.dtype(np.float64).str,))
    if with_norms:
        for name, shape in norms.array_shapes(m.n_layers, n).items():
            kind = np.int64 if name == "step" else np.float64
            out[NORMS_PREFIX + name] = (shape, (np.dtype(kind).str,))
    return out


def check_meta(meta: dict, numerics_version: int, config: dict | None = None) -> RunConfig:
    """The RunConfig of a sidecar's meta, after checking format, version, config and declared arrays."""
    if meta.get("format") != FORMAT:
        raise RecordError(f"the format is not {FORMAT}")
    if meta.get("numerics_version") != numerics_version:
        raise RecordError(f"computed by another numerics version (this code computes version {numerics_version})")
    if config is not None and meta.get("config") != config:
        raise RecordError("the entry holds another run's config")
    try:
        run = RunConfig.from_dict(meta["config"])
        declared = {name: (tuple(a["shape"]), a["dtype"]) for name, a in meta["arrays"].items()}
        if not isinstance(meta["npz_sha256"], str) or not isinstance(meta["npz_bytes"], int):
            raise TypeError
        if not isinstance(meta["summary"], dict) or meta["summary"].get("config") != meta["config"]:
            raise TypeError
        provenance.checked(meta["platform"])
        provenance.checked(meta["summary"]["platform"])
        scalars = [meta["final_loss"], meta["train_seconds"], meta["n_params"]]
        eval_values = [meta["eval"][k] for k in EVAL_FIELDS]
    except ConfigError as exc:
        raise RecordError(f"invalid config ({exc.field})") from None
    except (KeyError, TypeError, ValueError, AttributeError):
        raise RecordError("the sidecar lacks a field or has one of the wrong type") from None
    if not all(x is None or (isinstance(x, (int, float)) and not isinstance(x, bool)) for x in scalars + eval_values):
        raise RecordError("a scalar of the record is not a number")
    expected = expected_arrays(run, _has_norms(declared))
    if declared.keys() != expected.keys():
        raise RecordError("the arrays do not match the config's model")
    for name, (shape, dtypes) in expected.items():
        if declared[name][0] != shape:
            raise RecordError(f"array {name} does not fit the config (expected shape {shape})")
        if declared[name][1] not in dtypes:
            raise RecordError(_dtype_text(name, declared[name][1], dtypes))
    return run


def _dtype_name(dtype) -> str:
    """'float64' for '<f8'; an untrusted string that is no dtype, shown short."""
    try:
        return np.dtype(dtype).name
    except (TypeError, ValueError, SyntaxError):
        text = repr(dtype)
        return text if len(text) <= 24 else text[:21] + "..."


def _dtype_text(name: str, found, dtypes) -> str:
    return f"array {name} holds {_dtype_name(found)} numbers where its config needs " + " or ".join(
        _dtype_name(d) for d in dtypes
    )


def _finite(x, low: float = 0.0, high: float = math.inf) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and low <= x <= high


def _count(x, low: int, high: int) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and low <= x <= high


@functools.lru_cache(maxsize=256)
def _n_distinct(task) -> int:
    """Sequences of the fixed test set (Task.test_set) whose L symbols (induction: first copy) all differ."""
    return int(tasks.get(task.name).test_distinct(task).sum())


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def _check_numbers(v: dict, run: RunConfig, stored: bool) -> None:
    """The record's scalars (the keys of RunRecord.summary(): final_loss, n_params, train_seconds, the eval's)."""
    loss = v["final_loss"]
    diverged = stored and isinstance(loss, float) and (math.isnan(loss) or loss == math.inf)
    if not (diverged or _finite(loss)):
        raise RecordError("final_loss is not a finite number >= 0")
    for name in ("train_seconds", "eval_seconds"):
        if not _finite(v[name], 0.0, 1e9):
            raise RecordError(f"{name} is not a number of seconds from 0 to 1e9")
    for name in ("token_accuracy", "sequence_accuracy"):
        if not _finite(v[name], 0.0, 1.0):
            raise RecordError(f"{name} is not a number from 0 to 1")
    n_test = tasks.get(run.task.name).test_size(run.task) or N_TEST  # the modular task's: its held-out pairs
    for kind in ("distinct", "repeated"):
        n, acc = v[f"n_{kind}"], v[f"{kind}_accuracy"]
        if not _count(n, 0, n_test):
            raise RecordError(f"n_{kind} is not a count from 0 to {n_test}")
        if (acc is None) != (n == 0) or (acc is not None and not _finite(acc, 0.0, 1.0)):
            raise RecordError(f"{kind}_accuracy is not a number from 0 to 1 (or empty when n_{kind} is 0)")
    if v["n_distinct"] + v["n_repeated"] != n_test:
        raise RecordError(f"n_distinct + n_repeated is not the test set's {n_test} sequences")
    if v["n_distinct"] != _n_distinct(run.task):
        raise RecordError(f"n_distinct is not the count of the fixed test set's ({_n_distinct(run.task)})")
    n_params = _n_params(run.model)
    if v["n_params"] != n_params:
        raise RecordError(f"n_params is not the config's model's {n_params:,} parameters")
    held_out = v.get("test_loss")
    diverged = stored and isinstance(held_out, float) and (math.isnan(held_out) or held_out == math.inf)
    if "test_loss" in v and not (diverged or _finite(held_out)):  # diverged weights score NaN, as their final loss
        raise RecordError("test_loss is not a finite number >= 0")
    task = tasks.get(run.task.name)
    for name in _all_metrics():
        own = name in task.metrics
        if (name in v) != own:
            what = "missing" if own else f"not a figure of the {run.task.name} task"
            raise RecordError(f"{name} is {what}")
        x = v.get(name)
        low = task.metric_low(name) if own else 0.0  # the in-context score is a difference of losses: any number
        if own and not ((stored and isinstance(x, float) and math.isnan(x)) or _finite(x, low)):
            raise RecordError(f"{name} is not a finite number{' >= 0' if low == 0 else ''}")


def _all_metrics() -> tuple[str, ...]:
    """Every registered task's figures (Task.metrics), each once: a record holds its own task's only."""
    return tuple(dict.fromkeys(name for t in tasks.names() for name in tasks.get(t).metrics))


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


SUMMARY_NUMBERS = ("final_loss", "n_params", "train_seconds", *EVAL_FIELDS)


def check_values(meta: dict, run: RunConfig, *, stored: bool = False) -> None:
    """A record's numbers are possible for its config; RecordError naming the first that is not.

    Finite non-negative loss and times; accuracies from 0 to 1 (the subset accuracies None only when their
    subset is empty); the test set's counts adding up to its N_TEST sequences; n_params the model's count;
    test_loss, where a record has one, finite and >= 0; its task's figures (Task.metrics: an induction run's) present
    and finite, the losses >= 0, and no other task's; the summary's numbers the record's. `stored` (a record
    this store computed) also accepts a training that diverged (final loss NaN or infinite); an import does not.
    """
    values = {k: meta[k] for k in ("final_loss", "n_params", "train_seconds")}
    values |= {k: meta["eval"][k] for k in EVAL_FIELDS}
    for source in (meta, meta["eval"], meta["summary"]):
        if "test_loss" in source:
            values.setdefault("test_loss", source["test_loss"])
            if not _same(source["test_loss"], values["test_loss"]):
                raise RecordError("the summary's numbers are not the record's")
    values |= {k: meta["summary"][k] for k in _all_metrics() if k in meta["summary"]}  # the summary holds them
    _check_numbers(values, run, stored)
    s = meta["summary"]
    if any(not _same(s.get(k), values[k]) for k in SUMMARY_NUMBERS):
        raise RecordError("the summary's numbers are not the record's")


@functools.lru_cache(maxsize=1024)
def _n_params(model) -> int:
    return sum(math.prod(shape) for shape in param_shapes(model).values())


@functools.lru_cache(maxsize=4096)
def _run_of(config_text: str) -> RunConfig:
    """RunConfig.from_dict of a config's canonical JSON, memoised: an index of thousands is re-read often."""
    return RunConfig.from_dict(json.loads(config_text))


def check_summary(summary) -> None:
    """An index line's summary (RunRecord.summary()) is what a checked sidecar holds; RecordError otherwise."""
    try:
        run = _run_of(json.dumps(summary["config"], sort_keys=True))
        provenance.checked(summary["platform"])
        _check_numbers(summary, run, stored=True)
    except ConfigError as exc:
        raise RecordError(f"invalid config ({exc.field})") from None
    except (KeyError, TypeError, ValueError, AttributeError):
        raise RecordError("the summary lacks a field or has one of the wrong type") from None


MAX_NPY_HEADER = 10_000  # bytes of an .npy header (numpy's own default limit)


def check_headers(z: zipfile.ZipFile, infos: dict, expected: dict) -> None:
    """Every .npy member's header (shape, dtype, order) against `expected`, read before any array is allocated."""
    fmt = np.lib.format
    for name, (shape, dtypes) in expected.items():
        try:
            with z.open(infos[name]) as fh:
                version = fmt.read_magic(fh)
                if version == (1, 0):
                    header = fmt.read_array_header_1_0(fh, max_header_size=MAX_NPY_HEADER)
                elif version == (2, 0):
                    header = fmt.read_array_header_2_0(fh, max_header_size=MAX_NPY_HEADER)
                else:
                    raise ValueError
        except (ValueError, TypeError, SyntaxError, OSError, EOFError, zipfile.BadZipFile, RecursionError):
            raise RecordError(f"array {name} has no readable .npy header") from None
        found, fortran, dtype = header
        if tuple(found) != shape or fortran:
            raise RecordError(f"array {name} does not have the shape {shape} its config needs")
        if dtype.str not in dtypes:
            raise RecordError(_dtype_text(name, dtype, dtypes))


def decode(meta: dict, data: bytes, numerics_version: int, config: dict | None = None, *, imported: bool = False):
    """The RunRecord stored as (meta, npz bytes), checked: digest of the bytes, then schema, then every array.

    Every array's .npy header is checked before numpy allocates it; `imported` (a bundle's run) also checks
    that the numbers are possible for the config (check_values) and that the loss history is finite.
    """
    if len(data) != meta.get("npz_bytes") or not hmac.compare_digest(
        hashlib.sha256(data).hexdigest(), str(meta.get("npz_sha256"))
    ):
        raise RecordError("the array file's SHA-256 does not match its sidecar")
    run = check_meta(meta, numerics_version, config)
    if imported:
        check_values(meta, run)
    expected = expected_arrays(run, _has_norms(meta["arrays"]))
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            names = {info.filename.removesuffix(".npy"): info for info in z.infolist()}
            if names.keys() != expected.keys():
                raise RecordError("the array file holds other arrays than its sidecar declares")
            for name, (shape, _) in expected.items():  # no member may inflate beyond its array (a zip bomb)
                if names[name].file_size > 4096 + 8 * math.prod(shape):
                    raise RecordError(f"array {name} is larger than its shape allows")
                info = names[name]  # np.savez stores, never deflates: an array is never larger than the file
                if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
                    raise RecordError(f"array {name} is compressed (np.savez stores arrays as they are)")
            check_headers(z, names, expected)
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in expected}
    except RecordError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise RecordError(f"unreadable array file ({type(exc).__name__})") from None
    for name, (shape, dtypes) in expected.items():
        if arrays[name].shape != shape:
            raise RecordError(f"array {name} does not have the shape {shape} its config needs")
        if arrays[name].dtype.str not in dtypes:
            raise RecordError(_dtype_text(name, arrays[name].dtype, dtypes))
    snaps = {name.removeprefix(SNAPSHOT_PREFIX): a for name, a in arrays.items() if name.startswith(SNAPSHOT_PREFIX)}
    if snaps["step"].tolist() != run_snapshot_steps(run):
        raise RecordError("the snapshots were not taken at the steps the config's training takes them")
    if not all(np.all((a >= 0) & (a <= 1)) for a in (snaps["token_accuracy"], snaps["sequence_accuracy"])):
        raise RecordError("a snapshot's accuracy is not a number from 0 to 1")
    if not tasks.get(run.task.name).snapshot_figures_possible(snaps):
        what = "a negative loss, a score outside 0-1"
        raise RecordError(f"a snapshot's {run.task.name} figures are not possible ({what})")
    if imported and not np.all(np.isfinite(arrays["loss_history"])):
        raise RecordError("the loss history holds a number that is not finite")
    found = {name.removeprefix(NORMS_PREFIX): a for name, a in arrays.items() if name.startswith(NORMS_PREFIX)}
    if found and found["step"].tolist() != snaps["step"].tolist():
        raise RecordError("the norms were not measured at the steps the config's training takes its snapshots")
    try:
        losses = arrays["loss_history"] if imported else None  # an import's are finite: its norms must be too
        figures = norms.unstack(found, run.model, run.task.n_inputs, losses) if found else None
    except ValueError as exc:
        raise RecordError(f"array {NORMS_PREFIX}{exc}") from None
    ev = {k: float("nan") if meta["eval"][k] is None else meta["eval"][k] for k in EVAL_FIELDS}
    return RunRecord(
        config=run,
        loss_history=arrays["loss_history"],
        final_loss=meta["final_loss"],
        eval=EvalResult(**ev),
        train_seconds=meta["train_seconds"],
        n_params=meta["n_params"],
        probe_tokens=arrays["probe_tokens"],
        probe_attention=arrays["probe_attention"],
        params={name.removeprefix(PARAM_PREFIX): a for name, a in arrays.items() if name.startswith(PARAM_PREFIX)},
        snapshots=unstack(snaps),
        platform=provenance.checked(meta["platform"]),
        test_loss=meta["summary"].get("test_loss"),  # absent in records stored before it was kept: computed when asked
        norms=figures,  # None in records stored before they carried norms
        figures={k: meta["summary"][k] for k in tasks.get(run.task.name).metrics} or None,
    )
