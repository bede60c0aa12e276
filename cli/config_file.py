"""`--config FILE|-` of `params` and `kv-cache`: a Hugging Face config.json read (serving.hf_config) from a
file or standard input, at most 1 MB, and what was read printed before the figures.

A file the reader refuses raises ConfigError under --config (the field inside the file named after it), which
cli.main turns into one line and exit code 2.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from attncore.config import ConfigError
from cli.text import escaped
from serving import hub
from serving.hf_config import MAX_BYTES, ModelFile, read_config
from serving.weights import WeightFormat, stored_weights

FLAG = "--config"
HUB_FLAG = "--model"


def read_bytes(path: str) -> bytes:
    """At most MAX_BYTES + 1 bytes of the file (or of standard input for '-'): enough to refuse a larger one."""
    if path == "-":
        return sys.stdin.buffer.read(MAX_BYTES + 1)
    try:
        with open(path, "rb") as f:
            return f.read(MAX_BYTES + 1)
    except OSError as e:
        raise ConfigError(FLAG, f"cannot read {path!r}: {e.strerror or e}") from None


def load(a) -> ModelFile | None:
    """The parsed --config file or --model id of these flags (read once: standard input cannot be read twice, and
    the Hub is asked once), or None."""
    hub_id = getattr(a, "model", None)
    if getattr(a, "config", None) is None and hub_id is None:
        return None
    if getattr(a, "_model_file", None) is None:
        flag = HUB_FLAG if hub_id is not None else FLAG
        if getattr(a, "preset", None) or (hub_id is not None and a.config is not None):
            raise ConfigError(flag, "give one of --config FILE, --model ID and --preset NAME")
        try:
            if hub_id is None:
                a._config_bytes = read_bytes(a.config)  # kept: the file's other keys (MTP layers) are read later
            a._model_file = read_config(a._config_bytes) if hub_id is None else from_hub(a, hub_id)
        except ConfigError as e:
            where = "" if e.field in ("config.json", hub.FIELD, FLAG) else f"{e.field}: "
            if hub_model(a) is not None:  # the id's file was fetched, and refused: say whose
                where = f"the config.json of {hub_model(a).model_id}: {where}"
            raise ConfigError(flag, f"{where}{e.message}") from None
    return a._model_file


def from_hub(a, text: str) -> ModelFile:
    """The config.json of a Hub id, fetched (serving.hub: huggingface_hub, never the weights), and the checkpoint's
    count kept on the flags (a._hub) for the figures beside the formula's."""
    try:
        a._hub = hub.fetch_model(hub.parse_model_id(text), keep=True)  # a command keeps it, as huggingface_hub would
    except hub.HubError as e:
        raise ConfigError(hub.FIELD, str(e)) from None
    return a._hub.read()


def hub_model(a) -> hub.HubModel | None:
    """What the Hub gave for --model (after load), or None."""
    return getattr(a, "_hub", None)


def name_of(a) -> str:
    if getattr(a, "model", None) is not None:
        return f"config.json of {escaped(hub_model(a).model_id)}"
    return "config.json from standard input" if a.config == "-" else escaped(Path(a.config).name)


def served(model: ModelFile) -> WeightFormat:
    """The weights as the engine loads them: the checkpoint's storage, a float32 checkpoint in 16 bits."""
    return replace(model.weights, dtype=model.serving_dtype) if model.weights.dtype == "fp32" else model.weights


def summary(model: ModelFile, arch) -> dict:
    """What the file said, for --json: its model_type, the summary line, defaults, notes, ignored keys, storage."""
    stored = stored_weights(arch, model.weights)
    out = {k: v for k, v in model.to_dict().items() if k not in ("architecture", "layer_kinds")}
    return out | {"stored_weights": stored.to_dict(), "changed_by_flags": arch != model.arch}


def print_read(model: ModelFile, arch, name: str) -> None:
    """'read from <file> (gemma2): ...', then the defaults used, the notes and the keys ignored, one line each (the
    file's own words escaped: a key may hold a terminal's control sequences)."""
    wrapped = f" in {escaped(model.wrapper)}'s text_config" if model.wrapper else ""
    print(f"read from {name} ({escaped(model.model_type)}{wrapped}): {escaped(model.summary())}")
    if arch != model.arch:
        print("  flags changed some fields: the figures below follow the flags")
    if model.defaults:
        print(f"  defaults (the file leaves them out): {'; '.join(model.defaults)}")
    for note in model.notes:
        print(f"  note: {escaped(note)}")
    if model.ignored:
        print(f"  ignored: {escaped(model.ignored_text())}")
