"""`--config FILE|-` of `params` and `kv-cache`: a Hugging Face config.json read (attncore.serving.hf_config) from a
file or standard input, at most 1 MB, and what was read printed before the figures.

A file the reader refuses raises ConfigError under --config (the field inside the file named after it), which
cli.main turns into one line and exit code 2.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from attncore.config import ConfigError
from attncore.serving.hf_config import MAX_BYTES, ModelFile, read_config
from attncore.serving.weights import WeightFormat, stored_weights
from cli.text import escaped

FLAG = "--config"


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
    """The parsed --config file of these flags (read once: standard input cannot be read twice), or None."""
    if getattr(a, "config", None) is None:
        return None
    if getattr(a, "_model_file", None) is None:
        if getattr(a, "preset", None):
            raise ConfigError(FLAG, "give --config FILE or --preset NAME, not both")
        raw = read_bytes(a.config)
        try:
            a._model_file = read_config(raw)
        except ConfigError as e:
            where = "" if e.field == "config.json" else f"{e.field}: "
            raise ConfigError(FLAG, f"{where}{e.message}") from None
    return a._model_file


def name_of(a) -> str:
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
