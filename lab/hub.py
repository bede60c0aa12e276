"""A model on the Hugging Face Hub by its id: its config.json and its safetensors headers, through huggingface_hub
(the Hub's own client: HF_ENDPOINT, HF_TOKEN for gated models, its cache and HF_HUB_OFFLINE are honoured, read at
each call). Never the weights: a config.json of at most hf_config.MAX_BYTES, and the headers of the safetensors
files (8 bytes of length, then JSON; range requests, at most huggingface_hub's 25 MB a header), each access bounded
in time. What fails is one HubError whose sentence names what was tried and how to upload the file instead.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from attncore.config import ConfigError
from attncore.serving.hf_config import MAX_BYTES, ModelFile, read_any
from attncore.serving.safetensors_count import CheckpointCount, count_headers

FIELD = "model"  # the field a malformed id is refused under (the flag --model, the pages' Hub id box)
# org/name as the Hub spells ids: letters, digits, '-', '_', '.', each part 1 to 96 characters, no '--' or '..'
PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
MODEL_ID = re.compile(rf"^({PART})/({PART})$")
REVISION = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._/-]{0,126}[A-Za-z0-9])?$")  # a branch, a tag or a commit
TIMEOUT_S = 10.0  # one request's wait for the server
DEADLINE_S = 30.0  # a whole fetch (the config.json, or every header of a sharded checkpoint)
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
    """work() in a daemon thread, waited for at most `deadline` seconds (a thread past it is let go: it holds no
    lock, and huggingface_hub's own timeouts end it)."""
    done, out = threading.Event(), {}

    def run():
        try:
            out["value"] = work()
        except BaseException as e:  # handed to the caller's thread
            out["error"] = e
        done.set()

    threading.Thread(target=run, name="hub-fetch", daemon=True).start()
    if not done.wait(deadline):
        raise HubError(f"The {what} of {model} gave no answer within {deadline:g} s; {UPLOAD}")
    if "error" in out:
        raise out["error"]
    return out["value"]


def fetch_config(model: ModelId, deadline: float = DEADLINE_S) -> bytes:
    """The config.json's bytes (at most MAX_BYTES + 1: enough for the reader to refuse a larger one)."""
    return bounded("the config.json", lambda: _fetch_config(model), model, deadline)


def _fetch_config(model: ModelId) -> bytes:
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url

    c = _client()
    where = f"config.json of {model} from {c['endpoint']}"
    kw = dict(repo_id=model.repo, filename="config.json", revision=model.revision)
    try:
        if not c["offline"]:  # one HEAD first, not retried: its size, and an unreachable Hub said at once
            meta = get_hf_file_metadata(hf_hub_url(**kw, endpoint=c["endpoint"]), timeout=TIMEOUT_S)
            if meta.size is not None and meta.size > MAX_BYTES:
                raise HubError(f"The {where} is {meta.size:,} bytes, over the {MAX_BYTES:,} a config.json may be: "
                               f"not fetched; {UPLOAD}")  # fmt: skip
        path = hf_hub_download(**kw, cache_dir=c["cache_dir"], endpoint=c["endpoint"], etag_timeout=TIMEOUT_S,
                               local_files_only=c["offline"])  # fmt: skip
        with open(path, "rb") as f:
            return f.read(MAX_BYTES + 1)
    except HubError:
        raise
    except Exception as e:  # the client's errors, the network's, the cache's: each said in one sentence
        raise HubError(explain(e, where, c)) from None


def fetch_checkpoint(model: ModelId, deadline: float = DEADLINE_S) -> CheckpointCount | None:
    """The parameters the checkpoint's safetensors headers hold, per dtype (None: the repository has no
    model.safetensors nor model.safetensors.index.json; offline: None, the headers are not in the cache)."""
    return bounded("the safetensors headers", lambda: _fetch_checkpoint(model), model, deadline)


def _fetch_checkpoint(model: ModelId) -> CheckpointCount | None:
    from huggingface_hub import HfApi
    from huggingface_hub.errors import NotASafetensorsRepoError
    from huggingface_hub.utils import disable_progress_bars

    c = _client()
    if c["offline"]:
        return None
    disable_progress_bars()  # the shards' progress bar: noise on a page's server and in a command's output
    try:
        meta = HfApi(endpoint=c["endpoint"]).get_safetensors_metadata(model.repo, revision=model.revision,
                                                                      timeout=TIMEOUT_S)  # fmt: skip
    except NotASafetensorsRepoError:
        return None
    except Exception as e:
        raise HubError(explain(e, f"safetensors headers of {model} from {c['endpoint']}", c)) from None
    headers = {name: {t: (info.dtype, tuple(info.shape)) for t, info in f.tensors.items()}
               for name, f in meta.files_metadata.items()}  # fmt: skip
    return count_headers(headers)


def explain(e: Exception, where: str, client: dict) -> str:
    """One sentence for a failed fetch of `where`."""
    from huggingface_hub import errors

    if isinstance(e, errors.GatedRepoError):
        why = ("is gated: accept its licence on its Hub page, then set HF_TOKEN to a token of that account "
               "(huggingface_hub reads it)")  # fmt: skip
    elif isinstance(e, errors.RevisionNotFoundError):
        why = "names a revision the repository does not have"
    elif isinstance(e, errors.RepositoryNotFoundError):
        why = "was not found: no such model, or a private one (set HF_TOKEN to a token that may read it)"
    elif isinstance(e, errors.LocalEntryNotFoundError):
        why = ("is not in huggingface_hub's cache, and HF_HUB_OFFLINE is set" if client["offline"] else
               "could not be reached, and it is not in huggingface_hub's cache")  # fmt: skip
    elif isinstance(e, errors.EntryNotFoundError):
        why = "does not exist: the repository has no such file"
    elif isinstance(e, errors.OfflineModeIsEnabled):
        why = "needs the network, and HF_HUB_OFFLINE is set"
    elif isinstance(e, errors.HfHubHTTPError) and e.response is not None:
        why = f"was answered with HTTP {e.response.status_code}"
    elif isinstance(e, errors.SafetensorsParsingError):
        why = "could not be parsed as safetensors headers"
    else:
        why = f"could not be reached ({type(e).__name__})"
    return f"The {where} {why}; {UPLOAD}"


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


def fetch_model(model: ModelId, deadline: float = DEADLINE_S) -> HubModel:
    """The config.json (HubError when it cannot be had), then the safetensors headers (a failure there is a note:
    the config.json alone still sizes a known architecture)."""
    raw = fetch_config(model, deadline)
    note = ""
    try:
        checkpoint = fetch_checkpoint(model, deadline)
        if checkpoint is None:
            note = ("HF_HUB_OFFLINE is set: the safetensors headers were not read" if _client()["offline"] else
                    "the repository has no model.safetensors nor model.safetensors.index.json")  # fmt: skip
    except HubError as e:
        checkpoint, note = None, str(e).split("; download")[0]
    return HubModel(model, _client()["endpoint"], raw, checkpoint, note)
