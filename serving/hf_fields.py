"""The pieces of the config.json reader: Fields (one JSON object read key by key, each checked against its type and
range, with the defaults it used recorded) and ModelFile (what a file says: the Decoder, the weights' storage, the
attention pattern layer by layer, the notes and the keys no rule reads). hf_families.py uses both.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

from attncore.checks import ConfigError
from serving.context_limit import ContextLimit
from serving.decoder import Decoder, window_words
from serving.weights import WeightFormat

REQUIRED = object()  # a field without a default: refused when absent


class Fields:
    """One JSON object being read: each getter checks a key's type and range (ConfigError naming the key, with
    `prefix` inside a wrapper) and records it as read, or records the default it used."""

    def __init__(self, data: dict, model_type: str, prefix: str = ""):
        self.data, self.model_type, self.prefix = data, model_type, prefix
        self.read: set[str] = set()
        self.defaults: list[str] = []  # "num_key_value_heads = 16 (absent: = num_attention_heads)"

    def name(self, key: str) -> str:
        return self.prefix + key

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def _get(self, key, default, shown=None):
        """(value, given): the file's value (null stays None: 'sliding_window': null means no window, not the
        default), else the default, recorded; a required field absent is refused, naming what the family needs."""
        self.read.add(key)
        if key in self.data:
            return self.data[key], self.data[key] is not None
        if default is REQUIRED:
            raise ConfigError(self.name(key), f"missing; model_type {self.model_type} needs {', '.join(self.required)}")
        if default is not None:
            self.defaults.append(f"{key} = {shown if shown is not None else json.dumps(default)} (absent)")
        return default, False

    required: tuple[str, ...] = ()  # set by the family, for the message of a missing field

    def int(self, key: str, low: int, high: int, default=REQUIRED, shown=None, nullable=False) -> int | None:
        """A whole number in [low, high]; null only where `nullable` (a window, a rank that may be off)."""
        value, given = self._get(key, default, shown)
        if not given:
            if key in self.data and not nullable:  # null where a number is needed
                raise ConfigError(self.name(key), f"must be a whole number from {low:,} to {high:,}, got null")
            return value if key not in self.data else None
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(self.name(key), f"must be a whole number from {low:,} to {high:,}, got {_short(value)}")
        if not low <= value <= high:
            shown = f"{value:,}" if abs(value) < 10**18 else _short(value)
            raise ConfigError(self.name(key), f"must be from {low:,} to {high:,}, got {shown}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        value, given = self._get(key, default, str(default).lower())
        if key in self.data and not isinstance(value, bool):
            raise ConfigError(self.name(key), f"must be true or false, got {_short(value)}")
        return value

    def text(self, key: str, choices: tuple[str, ...], default=REQUIRED) -> str:
        value, given = self._get(key, default)
        if key in self.data and (not isinstance(value, str) or value not in choices):
            raise ConfigError(self.name(key), f"must be one of {', '.join(choices)}; got {_short(value)}")
        return value

    def number(self, key: str, default=None) -> float | None:
        """A finite number or null (read for a note, e.g. query_pre_attn_scalar)."""
        value, given = self._get(key, default)
        if given and (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)):
            raise ConfigError(self.name(key), f"must be a number, got {_short(value)}")
        return value

    def object(self, key: str) -> dict | None:
        """A JSON object, or None when absent or null."""
        value, given = self._get(key, None)
        if given and not isinstance(value, dict):
            raise ConfigError(self.name(key), f"must be a JSON object {{...}}, got {_short(value)}")
        return value

    def strings(self, key: str, choices: tuple[str, ...], length: int) -> list[str] | None:
        """A list of `length` choices (layer_types), or None when absent."""
        value, given = self._get(key, None)
        if not given:
            return None
        if not isinstance(value, list) or len(value) != length:
            got = f"a list of {len(value):,}" if isinstance(value, list) else _short(value)
            raise ConfigError(self.name(key), f"must be a list of {length:,} entries (one per layer), got {got}")
        for i, entry in enumerate(value):
            if entry not in choices:
                raise ConfigError(self.name(key), f"entry {i} must be one of {', '.join(choices)}; got {_short(entry)}")
        return value

    def ignored(self) -> list[str]:
        """The keys no rule read, each clipped to 60 characters (a key is the file's own text)."""
        return [self.prefix + (k if len(k) <= 60 else k[:57] + "...") for k in self.data if k not in self.read]


def _short(value) -> str:
    """A value as the file has it, in one short line: a structure by its size, never its contents."""
    if isinstance(value, dict):
        return f"an object of {len(value):,} keys"
    if isinstance(value, list):
        return f"a list of {len(value):,}"
    text = repr(value) if isinstance(value, str) else json.dumps(value)  # null, true, a number
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(frozen=True)
class ModelFile:
    """What a config.json says: the model, how its weights are stored, its attention pattern layer by layer."""

    model_type: str  # the language model's (inside a wrapper: text_config's)
    wrapper: str | None  # the multimodal wrapper's model_type, when read from its text_config
    arch: Decoder
    weights: WeightFormat  # as the checkpoint stores them
    serving_dtype: str  # what vLLM's dtype "auto" runs and caches in: float32 checkpoints in bf16
    layer_kinds: tuple[str, ...]  # "full", "sliding", "chunked" (a hybrid's: state.LAYER_KINDS), one per layer
    max_position_embeddings: int | None
    defaults: tuple[str, ...]  # the fields taken from the model_type's defaults, as "key = value (absent)"
    notes: tuple[str, ...]  # what the file implies beyond the counts, and what it cannot say
    ignored: tuple[str, ...]  # keys read by no rule here
    limit: ContextLimit | None = None  # the longest max_model_len vLLM starts with (None: no position key)
    dtype_stored: bool = True  # False: no torch_dtype in the file, the weights' element type is assumed
    counted: bool = True  # False: no formula knows the architecture; arch holds its attention fields and widths only

    def pattern(self) -> str:
        """The attention pattern in words: 'every layer full', '21 sliding (4,096) and 21 full: S F repeated'."""
        return pattern_text(self.layer_kinds, self.arch.sliding_window)

    def summary(self) -> str:
        """'42 layers, d_model 3,584, 16 query heads, 8 KV heads, head_dim 256, ...': what the file implies."""
        return f"{self.arch.describe(self.pattern())}, weights {self.weights.label}"

    def ignored_text(self, limit: int = 40) -> str:
        """The ignored keys in one line, at most `limit` of them named."""
        shown = ", ".join(self.ignored[:limit])
        return shown + (f", and {len(self.ignored) - limit:,} more" if len(self.ignored) > limit else "")

    def to_dict(self) -> dict:
        return {
            "model_type": self.model_type, "wrapper": self.wrapper, "architecture": asdict(self.arch),
            "weights": asdict(self.weights) | {"label": self.weights.label}, "serving_dtype": self.serving_dtype,
            "layer_kinds": list(self.layer_kinds), "pattern": self.pattern(),
            "max_position_embeddings": self.max_position_embeddings, "summary": self.summary(),
            "defaults": list(self.defaults), "notes": list(self.notes), "ignored": list(self.ignored),
            "derived_max_model_len": self.limit.tokens if self.limit else None,
            "derived_max_model_len_rule": self.limit.rule if self.limit else None, "dtype_stored": self.dtype_stored,
            "counted": self.counted,
        }  # fmt: skip


# a hybrid's layer kinds: (letter, words)
HYBRID_WORDS = {
    "state": ("M", "state layers"),
    "ffn": ("-", "FFN-only layers"),
    "parallel": ("P", "attention + state layers"),
    "full": ("F", "full attention"),
}


def pattern_text(kinds: tuple[str, ...], window: int | None) -> str:
    """Layer kinds in words, with the shortest repeating pattern (S sliding, C chunked, F full) when it is short; a
    hybrid's by kind (M a state layer, F attention, - an FFN alone, P attention and a state mixer side by side)."""
    if any(k in ("state", "ffn", "parallel") for k in kinds):
        letters = "".join(HYBRID_WORDS.get(k, ("F", ""))[0] for k in kinds)
        counts = [f"{kinds.count(k):,} {HYBRID_WORDS.get(k, ('', k))[1]}" for k in dict.fromkeys(kinds)]
        period = shortest_period(letters)
        shape = f": {' '.join(letters[:period])} repeated" if period <= 8 and period < len(letters) else ""
        return ", ".join(counts) + (f" ({window:,})" if window else "") + shape
    windowed = len(kinds) - kinds.count("full")
    if not windowed:
        return "every layer full attention"
    every, some = window_words("chunked" if "chunked" in kinds else "sliding")
    if windowed == len(kinds):
        return f"every layer {every} of {window:,}"
    letters = "".join({"sliding": "S", "chunked": "C"}.get(k, "F") for k in kinds)
    period = shortest_period(letters)
    shape = f": {' '.join(letters[:period])} repeated" if period <= 8 and period < len(letters) else ""
    return f"{windowed:,} {some} layers ({window:,}) and {len(kinds) - windowed:,} full{shape}"


def shortest_period(text) -> int:
    """The least p with text[i] == text[i % p] for every i, in linear time: len(text) less its longest border (a
    proper prefix that is also a suffix), from the prefix function (Knuth-Morris-Pratt's failure function). Trying
    each p against the whole text is quadratic: seconds for 10,000 layers."""
    n = len(text)
    border = [0] * n  # border[i]: the longest proper border of text[: i + 1]
    k = 0
    for i in range(1, n):
        c = text[i]
        while k and c != text[k]:
            k = border[k - 1]
        if c == text[k]:
            k += 1
        border[i] = k
    return n - border[-1] if n else 0
