"""The longest max_model_len vLLM starts with for a config.json: its derived maximum, as the engine computes it at
startup (vllm/config ModelConfig._get_and_verify_max_len, 0.6 to 0.11), and the refusal above it.

The least of the position keys the file has, scaled by rope_scaling's factor unless the rope type already counts it
(llama3, longrope/su) or the model is Gemma 3 (its max_position_embeddings is the scaled length); yarn scales
original_max_position_embeddings. VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 turns the refusal into a warning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# the keys vLLM takes the least of, in its order
POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                 "max_sequence_length", "max_seq_length", "seq_len")  # fmt: skip
UNSCALED_ROPE = ("su", "longrope", "llama3", "default", "mrope")  # the position key is already the model's length
OVERRIDE = "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
# what transformers' config class gives where a released file leaves the key out (vLLM reads the class's attribute)
CLASS_DEFAULTS = {"falcon": {"max_position_embeddings": 2048}, "gpt2": {"n_positions": 1024}}


@dataclass(frozen=True)
class ContextLimit:
    """The derived maximum and the rule that gave it, in words."""

    tokens: int
    rule: str  # "max_position_embeddings 8,192, no rope_scaling"

    def refusal(self, max_model_len: int) -> str | None:
        """vLLM's startup refusal of a longer max_model_len, in one sentence (None: it starts)."""
        if max_model_len <= self.tokens:
            return None
        return (
            f"vLLM refuses max_model_len {max_model_len:,} at startup: the model's derived maximum is "
            f"{self.tokens:,} ({self.rule}); only {OVERRIDE} in the server's environment overrides it"
        )

    def warning(self, max_model_len: int) -> str | None:
        """What vLLM logs instead when the override is set (None: within the maximum)."""
        if max_model_len <= self.tokens:
            return None
        return (
            f"max_model_len {max_model_len:,} is above the model's derived maximum {self.tokens:,} ({self.rule}); "
            f"{OVERRIDE} is set, so vLLM starts and warns: positions past {self.tokens:,} were never trained"
        )


def derived_limit(data: dict, model_type: str) -> ContextLimit | None:
    """The derived maximum of a config.json's (language model's) fields, None when no position key is given (vLLM
    then assumes 2,048 and warns). Values the rule cannot use (not positive numbers) are passed over as vLLM's
    min() would refuse them: the reader's own checks name them."""
    given = {k: data[k] for k in POSITION_KEYS if _positive(data.get(k))}
    if not given and model_type in CLASS_DEFAULTS:
        given = dict(CLASS_DEFAULTS[model_type])
        key = next(iter(given))
        return ContextLimit(given[key], f"{key} {given[key]:,}, {model_type}'s default: the file leaves it out")
    if not given:
        return None
    key = min(given, key=lambda k: given[k])
    tokens, rule = given[key], f"{key} {int(given[key]):,}"
    scaling = data.get("rope_scaling")
    if not isinstance(scaling, dict):
        return ContextLimit(int(tokens), rule + ", no rope_scaling")
    kind = scaling.get("rope_type", scaling.get("type"))
    factor = scaling.get("factor")
    if kind in UNSCALED_ROPE or "gemma3" in model_type or not _positive(factor):
        why = "Gemma 3's is already scaled" if "gemma3" in model_type else f"rope_type {kind} is not scaled"
        return ContextLimit(int(tokens), f"{rule}; {why}")
    if kind == "yarn" and _positive(scaling.get("original_max_position_embeddings")):
        tokens = scaling["original_max_position_embeddings"]
        rule = f"yarn: original_max_position_embeddings {int(tokens):,}"
    return ContextLimit(int(tokens * factor), f"{rule} × rope_scaling factor {factor:g} ({kind})")


def _positive(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and 0 < x < 10**12
