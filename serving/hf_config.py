"""A Hugging Face config.json in, the lab's Decoder and the weights' storage out: the reader behind `--config` and
the calculator pages' upload and paste.

The text is parsed with the standard library's json (never code from the file) and every field is checked before
anything is built: a file the lab cannot read raises one ConfigError naming the field and what it accepts, and
nothing is half-read. hf_families.py maps each known model_type; multimodal wrappers are read from text_config.
"""

from __future__ import annotations

import json
import math
import re

from attncore.checks import ConfigError
from serving import hf_families, hf_generic
from serving.hf_fields import ModelFile, pattern_text  # noqa: F401  (re-exported: the reader's result)

MAX_BYTES = 1_000_000  # a config.json is a few kB; the largest released ones (layer lists, id2label) are ~100 kB
SOURCE = "config.json"  # the field a refusal of the whole file names
# where transformers writes Infinity, -Infinity or NaN into a config.json (json.dumps of a float's inf): the Mamba2
# time-step clamp, (0.0, inf) by default (Nemotron-H, Falcon-H1, Granite 4.0); any other field refuses them
NON_FINITE_KEYS = ("time_step_limit", "mamba_dt_limit")
CONSTANT = re.compile(r"\b(?:Infinity|NaN)\b")
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # \ud800 to \udfff: half of a UTF-16 pair, alone or not
LONE_SURROGATE = ("not text: it holds a lone surrogate (one of \\ud800 to \\udfff without its pair), which is no "
                  "character; a config.json is UTF-8 text")  # fmt: skip


def too_large(size: int, at_least: bool = False) -> ConfigError:
    """The refusal of a config.json of `size` bytes (at_least: of `size` bytes or more)."""
    more = " or more" if at_least else ""
    return ConfigError(SOURCE, f"over 1 MB ({size:,} bytes{more}; at most {MAX_BYTES:,}): a config.json is a few kB")


def decode(raw: bytes | str) -> dict:
    """The JSON object of a config.json's text or bytes (at most MAX_BYTES); ConfigError in one line otherwise."""
    size = len(raw)  # characters of a text: each at least a byte, so more than MAX_BYTES of them is over
    at_least = size == MAX_BYTES + 1  # all a reader capped at one past the limit took: the whole may be longer
    if isinstance(raw, str) and size <= MAX_BYTES:
        size = len(raw.encode("utf-8", "surrogatepass"))
        if size <= MAX_BYTES and _has_lone_surrogate(raw):
            raise ConfigError(SOURCE, LONE_SURROGATE)
    if size > MAX_BYTES:
        raise too_large(size, at_least)
    if isinstance(raw, bytes | bytearray):
        try:
            raw = bytes(raw).decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ConfigError(SOURCE, "not UTF-8 text: a config.json is JSON text") from None
    if not raw.strip():
        raise ConfigError(SOURCE, "empty: paste or upload a model's config.json")

    try:
        data = json.loads(raw)  # NaN, Infinity, -Infinity: not JSON, but transformers writes them; checked below
    except RecursionError:
        raise ConfigError(SOURCE, "not JSON the lab reads: nested too deeply") from None
    except ValueError as e:  # JSONDecodeError, a constant, an integer of more than 4,300 digits
        where = f" (line {e.lineno}, column {e.colno})" if isinstance(e, json.JSONDecodeError) else ""
        reason = e.msg if isinstance(e, json.JSONDecodeError) else str(e).split(";")[0]
        raise ConfigError(SOURCE, f"not JSON{where}: {reason[:80]}") from None
    if not isinstance(data, dict):
        raise ConfigError(SOURCE, f"must be a JSON object {{...}} with model_type, got {json_kind(data)}")
    if CONSTANT.search(raw):
        _check_constants(data)
    if SURROGATE_ESCAPE.search(raw) and _has_lone_surrogate(data):  # json reads \ud800 alone as a str of it
        raise ConfigError(SOURCE, LONE_SURROGATE)
    return data


def _check_constants(data: dict) -> None:
    """Refuse a non-finite number anywhere but in NON_FINITE_KEYS (at any depth: a wrapper's text_config), naming
    the first field that holds one; a walk with its own stack (json.loads already bounded the depth)."""
    stack: list[tuple[str, object]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            allowed = ", ".join(NON_FINITE_KEYS)
            raise ConfigError(path or SOURCE, f"must be a finite number, got {json.dumps(value)} (only {allowed} may "
                              "hold Infinity, -Infinity or NaN)")  # fmt: skip
        if isinstance(value, dict):
            for key, item in value.items():
                if key not in NON_FINITE_KEYS or not isinstance(item, list):
                    shown = key if len(key) <= 60 else key[:57] + "..."
                    stack.append((f"{path}.{shown}" if path else shown, item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in enumerate(value))


def json_kind(value) -> str:
    """What a JSON value is, in JSON's words: 'null', 'a string', 'an array', 'a number', 'true'."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return {str: "a string", list: "an array", dict: "an object"}.get(type(value), "a number")


def _has_lone_surrogate(value: str | dict) -> bool:
    """Whether a text, or any key or string of parsed JSON, holds a surrogate that no pair made a character: one
    encoding to UTF-8 tells, in linear time (json reads a pair written as two escapes as its one character)."""
    try:
        (value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)).encode("utf-8")
    except UnicodeEncodeError:
        return True
    except RecursionError:  # as deep as json.loads took: a structure is not text, and none was found above
        raise ConfigError(SOURCE, "not JSON the lab reads: nested too deeply") from None
    return False


def read_config(raw: bytes | str) -> ModelFile:
    """The ModelFile of a config.json's text (see decode and from_dict)."""
    return from_dict(decode(raw))


def from_dict(data: dict) -> ModelFile:
    """The ModelFile of a parsed config.json; a multimodal wrapper's language model is read from text_config."""
    return hf_families.read(data)


def read_any(raw: bytes | str, counted_elsewhere: bool) -> ModelFile:
    """read_config; a model_type no family reads is, when the checkpoint's own count is at hand
    (`counted_elsewhere`), read for its attention fields alone (hf_generic.py: counted False)."""
    data = decode(raw)
    try:
        return from_dict(data)
    except hf_families.UnknownArchitecture:
        if not counted_elsewhere:
            raise
        return hf_generic.read_attention(data)
