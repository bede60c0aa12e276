"""A model on the Hugging Face Hub by its id: its config.json and its safetensors headers, never the weights. Every
read is this module's own streamed GET (huggingface_hub's URL helper, its headers with HF_TOKEN, its HTTP session;
HF_ENDPOINT and HF_HUB_OFFLINE read at each call), bounded four ways: in bytes (each file's own cap, and one budget
for the whole fetch, a read stopped at the cap), in count (at most MAX_SHARDS files), in time (the deadline is
checked between chunks and before each request, so the work stops, not only the wait) and on disk (nothing is
written, unless the caller asks to keep the config.json in huggingface_hub's cache, as the command line does).
Requests go to the configured endpoint only, and a redirect only to it or, for the public Hub, its own file hosts.
What fails is one HubError whose sentence names what was tried and how to upload the file instead.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from attncore.checks import ConfigError
from serving.hf_config import MAX_BYTES, ModelFile, read_any
from serving.safetensors_count import MAX_HEADER_BYTES, CheckpointCount, count_headers, parse_header

FIELD = "model"  # the field a malformed id is refused under (the flag --model, the pages' Hub id box)
# org/name as the Hub spells ids: letters, digits, '-', '_', '.', each part 1 to 96 characters, no '--' or '..'
PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
MODEL_ID = re.compile(rf"^({PART})/({PART})$")
REVISION = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._/-]{0,126}[A-Za-z0-9])?$")  # a branch, a tag or a commit
SHARD = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,150}\.safetensors$")  # a shard the index names: a plain file name
TIMEOUT_S = 10.0  # one request's wait for the server
DEADLINE_S = 30.0  # a whole fetch (the config.json, or every header of a sharded checkpoint)
INDEX_BYTES = 16 * 2**20  # model.safetensors.index.json: DeepSeek-V3's 91,000 tensors take about 9 MB
FIRST_BYTES = 100_000  # a header's first read (huggingface_hub's): most headers fit, the rest is a second read
FETCH_BYTES = 64 * 2**20  # everything one fetch reads, index and headers together
MAX_SHARDS = 256  # files of one checkpoint (Llama 3.1 405B has 191)
SHARD_THREADS = 4  # headers read at once
HUB_HOSTS = ("huggingface.co", "hf.co")  # the public Hub redirects a file to its own hosts under these domains
UPLOAD = "download its config.json from the model's page and upload it (or pass --config FILE) instead"


class HubError(Exception):
    """One plain sentence: what was tried, why it failed, what to do instead."""


@dataclass(frozen=True)
class ModelId:
    repo: str  # org/name
    revision: str | None  # None: the default branch

    def __str__(self) -> str:
        return self.repo + (f"@{self.revision}" if self.revision else "")


def parse_model_id(text: str) -> ModelId:
    """org/name or org/name@revision, checked strictly before any request (ConfigError under `model`)."""
    if not isinstance(text, str) or len(text) > 300:
        raise ConfigError(FIELD, "must be a Hub id such as meta-llama/Llama-3.1-8B (at most 300 characters)")
    repo, _, revision = text.strip().partition("@")
    shown = repr(text if len(text) <= 60 else text[:57] + "...")
    if not MODEL_ID.match(repo) or "--" in repo or ".." in repo:
        raise ConfigError(FIELD, f"must be a Hub id org/name (letters, digits, - _ .), such as "
                                 f"meta-llama/Llama-3.1-8B, optionally @revision; got {shown}")  # fmt: skip
    if "@" in text and (not REVISION.match(revision) or ".." in revision or "//" in revision):
        raise ConfigError(FIELD, f"the revision after @ must be a branch, tag or commit (letters, digits, - _ . /); "
                                 f"got {shown}")  # fmt: skip
    return ModelId(repo, revision or None)


def _client() -> dict:
    """huggingface_hub's settings from the environment as it is now (the library reads some only at import)."""
    from huggingface_hub import constants

    home = os.environ.get("HF_HOME")
    cache = os.environ.get("HF_HUB_CACHE") or (str(Path(home) / "hub") if home else constants.HF_HUB_CACHE)
    offline = os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE") or constants.HF_HUB_OFFLINE
    return {"endpoint": os.environ.get("HF_ENDPOINT") or constants.ENDPOINT, "cache_dir": cache, "offline": offline}


def endpoint() -> str:
    """The Hub this process asks now (HF_ENDPOINT, else huggingface_hub's default)."""
    return _client()["endpoint"]


def bounded(what: str, work, model: ModelId, deadline: float):
    """work() in a daemon thread, waited for at most `deadline` seconds. The work itself stops at the same
    deadline (a Reader checks it between chunks and requests), so a thread past the wait ends within a request's
    TIMEOUT_S."""
    done, out = threading.Event(), {}

    def run():
        try:
            out["value"] = work()
        except BaseException as e:  # handed to the caller's thread
            out["error"] = e
        done.set()

    threading.Thread(target=run, name="hub-fetch", daemon=True).start()
    if not done.wait(deadline):
        raise HubError(f"Reading {what} of {model} gave no answer within {deadline:g} s; {UPLOAD}")
    if "error" in out:
        raise out["error"]
    return out["value"]


class Refused(Exception):
    """A read the Hub answered with an error: `why` completes 'The <file> of <model> ...'."""

    def __init__(self, why: str, missing: bool = False):
        super().__init__(why)
        self.why, self.missing = why, missing


class Reader:
    """Streamed reads of one repository's files, all within one deadline and one byte budget."""

    def __init__(self, model: ModelId, deadline: float, budget: int = FETCH_BYTES):
        from huggingface_hub.utils import build_hf_headers, get_session

        self.model, self.endpoint = model, _client()["endpoint"]
        self.ends_at, self.budget, self._lock = time.monotonic() + deadline, budget, threading.Lock()
        self.session, self.headers = get_session(), build_hf_headers()
        self.commit: str | None = None  # X-Repo-Commit of the last answer

    def remaining(self) -> float:
        left = self.ends_at - time.monotonic()
        if left <= 0:
            raise Refused("was not read in time: the fetch's deadline passed")
        return left

    def allowed(self, url: str) -> bool:
        """The configured endpoint, or (the public Hub's endpoint only) an https host under its own domains."""
        there, home = urlsplit(url), urlsplit(self.endpoint)
        if (there.scheme, there.netloc) == (home.scheme, home.netloc):
            return True
        hub = home.hostname in HUB_HOSTS
        return hub and there.scheme == "https" and any((there.hostname or "").endswith("." + h) for h in HUB_HOSTS)

    def read(self, filename: str, limit: int, first: int | None = None, method: str = "GET") -> tuple[bytes, int]:
        """(the file's bytes, at most `limit`; or its first `first` bytes, by a range; its size when said)."""
        from huggingface_hub import hf_hub_url

        url = hf_hub_url(self.model.repo, filename, revision=self.model.revision, endpoint=self.endpoint)
        headers = dict(self.headers)
        if first is not None:
            headers["Range"] = f"bytes=0-{first - 1}"
        for _ in range(5):  # redirects, each checked before it is followed
            wait = min(TIMEOUT_S, self.remaining())
            with self.session.stream(method, url, headers=headers, timeout=wait, follow_redirects=False) as r:
                if r.status_code in (301, 302, 303, 307, 308) and "location" in r.headers:
                    url = urljoin(url, r.headers["location"])
                    if not self.allowed(url):
                        raise Refused(f"was redirected to {urlsplit(url).hostname!s:.60}, a host this server "
                                      "does not reach (the configured endpoint only)")  # fmt: skip
                    if urlsplit(url).netloc != urlsplit(self.endpoint).netloc:
                        headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}  # token: endpoint
                    continue
                self.commit = r.headers.get("x-repo-commit", self.commit)
                _raise_for(r.status_code, r.headers.get("x-error-code", ""))
                size = _size(r.headers)
                if method == "HEAD":
                    return b"", size
                return self._body(r, limit if first is None else min(limit, first)), size
        raise Refused("was redirected more than 4 times")

    def _body(self, r, limit: int) -> bytes:
        declared = r.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise Refused(f"is {int(declared):,} bytes, over the {limit:,} bytes this server reads of it: not read")
        chunks, got = [], 0
        for chunk in r.iter_bytes():  # each network read as it comes: a trickle is checked between reads too
            got += len(chunk)
            if got > limit:
                raise Refused(f"is over the {limit:,} bytes this server reads of it: stopped there")
            with self._lock:
                self.budget -= len(chunk)
                if self.budget < 0:
                    raise Refused(f"is past the {FETCH_BYTES:,} bytes one fetch reads: stopped there")
            self.remaining()
            chunks.append(chunk)
        return b"".join(chunks)


def _raise_for(status: int, code: str) -> None:
    """The Hub's answer as a Refused, from its X-Error-Code as huggingface_hub reads it; nothing for a success."""
    if status < 400:
        return
    if code == "GatedRepo":
        why = ("is gated: accept its licence on its Hub page, then set HF_TOKEN to a token of that account "
               "(huggingface_hub reads it)")  # fmt: skip
    elif code == "RevisionNotFound":
        why = "names a revision the repository does not have"
    elif code == "RepoNotFound" or status == 401:
        why = "was not found: no such model, or a private one (set HF_TOKEN to a token that may read it)"
    elif code == "EntryNotFound" or status == 404:
        raise Refused("does not exist: the repository has no such file", missing=True)
    else:
        why = f"was answered with HTTP {status}"
    raise Refused(why)


def _size(headers) -> int | None:
    """The file's whole size: a range's total, else its Content-Length (huggingface_hub's X-Linked-Size first)."""
    for key in ("x-linked-size", "content-length"):
        if headers.get(key, "").isdigit() and "content-range" not in headers:
            return int(headers[key])
    total = headers.get("content-range", "").rpartition("/")[2]
    return int(total) if total.isdigit() else None


def fetch_config(model: ModelId, deadline: float = DEADLINE_S, keep: bool = False) -> bytes:
    """The config.json's bytes (at most MAX_BYTES + 1: enough for the reader to refuse a larger one); `keep`: also
    put it in huggingface_hub's cache (the command line's), where HF_HUB_OFFLINE finds it."""
    return bounded("the config.json", lambda: _fetch_config(model, deadline, keep), model, deadline + 1)


def _fetch_config(model: ModelId, deadline: float, keep: bool) -> bytes:
    c = _client()
    where = f"config.json of {model} from {c['endpoint']}"
    if c["offline"]:
        return _cached_config(model, c, where)
    try:
        reader = Reader(model, deadline)
        _, size = reader.read("config.json", 0, method="HEAD")  # its size said before a byte is fetched
        if size is not None and size > MAX_BYTES:
            raise HubError(f"The {where} is {size:,} bytes, over the {MAX_BYTES:,} a config.json may be: "
                           f"not fetched; {UPLOAD}")  # fmt: skip
        raw, _ = reader.read("config.json", MAX_BYTES + 1, first=MAX_BYTES + 1)
    except Refused as e:
        raise HubError(f"The {where} {e.why}; {UPLOAD}") from None
    except HubError:
        raise
    except Exception as e:  # the network's errors: each said in one sentence
        raise HubError(explain(e, where)) from None
    if keep and reader.commit and re.fullmatch(r"[0-9a-f]{40}", reader.commit):
        _keep_config(model, reader.commit, raw, c)
    return raw


def _cached_config(model: ModelId, c: dict, where: str) -> bytes:
    from huggingface_hub import try_to_load_from_cache

    path = try_to_load_from_cache(model.repo, "config.json", cache_dir=c["cache_dir"], revision=model.revision)
    if not isinstance(path, str):
        raise HubError(f"The {where} is not in huggingface_hub's cache, and HF_HUB_OFFLINE is set; {UPLOAD}")
    with open(path, "rb") as f:
        return f.read(MAX_BYTES + 1)


def _keep_config(model: ModelId, commit: str, raw: bytes, c: dict) -> None:
    """The config.json in huggingface_hub's cache layout (refs/<revision> -> commit, snapshots/<commit>/config.json),
    written whole or not at all."""
    from huggingface_hub.file_download import repo_folder_name

    root = Path(c["cache_dir"]) / repo_folder_name(repo_id=model.repo, repo_type="model")
    for path, data in ((root / "snapshots" / commit / "config.json", raw),
                       (root / "refs" / (model.revision or "main"), commit.encode())):  # fmt: skip
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f".{path.name}.{os.getpid()}.part")
        part.write_bytes(data)
        os.replace(part, path)


def fetch_checkpoint(model: ModelId, deadline: float = DEADLINE_S) -> CheckpointCount | None:
    """The parameters the checkpoint's safetensors headers hold, per dtype (None: the repository has no
    model.safetensors nor model.safetensors.index.json; offline: None, nothing is asked)."""
    return bounded("the safetensors headers", lambda: _fetch_checkpoint(model, deadline), model, deadline + 1)


def _fetch_checkpoint(model: ModelId, deadline: float) -> CheckpointCount | None:
    c = _client()
    if c["offline"]:
        return None
    where = f"safetensors headers of {model} from {c['endpoint']}"
    try:
        reader = Reader(model, deadline)
        try:
            return count_headers({"model.safetensors": _header(reader, "model.safetensors")})
        except Refused as e:
            if not e.missing:
                raise
        try:
            raw, _ = reader.read("model.safetensors.index.json", INDEX_BYTES)
        except Refused as e:
            if e.missing:
                return None
            raise Refused(f"were not read: their index, model.safetensors.index.json, {e.why}") from None
        shards = _shards(raw)
        with ThreadPoolExecutor(SHARD_THREADS, thread_name_prefix="hub-header") as pool:
            jobs = {name: pool.submit(_header, reader, name) for name in shards}
            try:
                headers = {name: job.result() for name, job in jobs.items()}
            finally:
                for job in jobs.values():  # a failure or the deadline: the shards not yet started never are
                    job.cancel()
        return count_headers(headers)
    except Refused as e:
        raise HubError(f"The {where} {e.why}; {UPLOAD}") from None
    except ValueError as e:  # a header or index that is not what it must be: said as for any input
        raise HubError(f"The {where} could not be read: {e}; {UPLOAD}") from None
    except Exception as e:
        raise HubError(explain(e, where)) from None


def _shards(raw: bytes) -> list[str]:
    """The safetensors files an index names (its weight_map's values), checked: plain names, at most MAX_SHARDS."""
    try:
        weight_map = json.loads(raw).get("weight_map")
    except (ValueError, AttributeError, RecursionError):
        raise ValueError("model.safetensors.index.json must be a JSON object with a weight_map") from None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise ValueError("model.safetensors.index.json: weight_map must map tensor names to file names")
    names = sorted(set(weight_map.values()))
    if not 1 <= len(names) <= MAX_SHARDS:
        raise ValueError(f"model.safetensors.index.json: its files must number 1 to {MAX_SHARDS}, got {len(names):,}")
    bad = next((n for n in names if not SHARD.match(n) or ".." in n), None)
    if bad is not None:
        raise ValueError(f"model.safetensors.index.json: a file name must be a plain *.safetensors name, "
                         f"got {bad[:60]!r}")  # fmt: skip
    return names


def _header(reader: Reader, name: str) -> dict:
    """One file's header: its first FIRST_BYTES, and the rest of a longer header by a second range read."""
    raw, _ = reader.read(name, FIRST_BYTES, first=FIRST_BYTES)
    if len(raw) >= 8:
        length = int.from_bytes(raw[:8], "little")
        if length > MAX_HEADER_BYTES:
            raise ValueError(f"{name}: header length must be at most {MAX_HEADER_BYTES:,} bytes, got {length:,}")
        if 8 + length > len(raw):
            raw, _ = reader.read(name, 8 + length, first=8 + length)
    return parse_header(raw, name)


def explain(e: Exception, where: str) -> str:
    """One sentence for a fetch of `where` that failed on the network (a request past its wait: a timeout)."""
    if "Timeout" in type(e).__name__:
        return f"The {where} gave no answer in time ({type(e).__name__}); {UPLOAD}"
    return f"The {where} could not be reached ({type(e).__name__}); {UPLOAD}"


@dataclass(frozen=True)
class HubModel:
    """What the Hub gave for one id: the config.json's bytes and the checkpoint's count (None: no safetensors
    files, or not read, as `checkpoint_note` says)."""

    model_id: ModelId
    endpoint: str
    config: bytes
    checkpoint: CheckpointCount | None
    checkpoint_note: str  # why there is no count, or ""

    def read(self) -> ModelFile:
        """The config.json read; an architecture no formula knows is read for its attention fields when the
        checkpoint's count is at hand (ConfigError otherwise, naming the field)."""
        return read_any(self.config, counted_elsewhere=self.checkpoint is not None)


def fetch_model(model: ModelId, deadline: float = DEADLINE_S, keep: bool = False) -> HubModel:
    """The config.json (HubError when it cannot be had), then the safetensors headers (a failure there is a note:
    the config.json alone still sizes a known architecture). `keep`: the config.json also in huggingface_hub's
    cache (the command line's choice; a server keeps nothing on disk)."""
    started = time.monotonic()
    raw = fetch_config(model, deadline, keep)
    note = ""
    try:
        checkpoint = fetch_checkpoint(model, max(1.0, deadline - (time.monotonic() - started)))
        if checkpoint is None:
            note = ("HF_HUB_OFFLINE is set: the safetensors headers were not read" if _client()["offline"] else
                    "the repository has no model.safetensors nor model.safetensors.index.json")  # fmt: skip
    except HubError as e:
        checkpoint, note = None, str(e).split("; download")[0]
    return HubModel(model, _client()["endpoint"], raw, checkpoint, note)
