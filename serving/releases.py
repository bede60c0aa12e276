"""The vLLM releases whose accounting of a hybrid model (state layers beside attention) is modelled, each a record:
its number, how it prints the token line, the attention block alignment and what the record was read from.

A release number implies the V1 engine (V0 has no hybrid KV-cache manager). Read in vLLM's source:
model_executor/models/config.py (HybridAttentionMambaModelConfig.verify_and_update_config, 0.19; later releases
platforms/interface.py), v1/core/kv_cache_utils.py (_report_kv_cache_config) and v1/kv_cache_interface.py
(MambaSpec.max_memory_usage_bytes); docs/serving.md validates each against published logs.
"""

from __future__ import annotations

from dataclasses import dataclass

TOKEN_LINES = ("groups", "concurrency")  # blocks // groups × smallest block size; int(concurrency × max_model_len)


@dataclass(frozen=True)
class Release:
    """One vLLM release's accounting. token_line: how "GPU KV cache size: N tokens" is computed; alignment: the
    attention block size is raised to a multiple of it until an attention page holds a state page."""

    number: str
    token_line: str
    alignment: int
    summary: str  # one line for --help and the page

    def __post_init__(self):
        assert self.token_line in TOKEN_LINES


RELEASES = {
    "0.19": Release(
        "0.19", "groups", 16,
        "0.19: token line = blocks ÷ groups × block size (undercounts a hybrid), block aligned to 16",
    ),
    "0.24": Release(
        "0.24", "concurrency", 16,
        "0.24 (and the 0.27.1 logs): token line = int(concurrency × max_model_len), block aligned to 16 "
        "(FlashAttention's kernel block)",
    ),
}  # fmt: skip
LATEST = "0.24"  # the release a hybrid model is fitted as when none is named


def release_help() -> str:
    """Every release modelled, for --help."""
    return "vLLM release (implies V1): " + "; ".join(r.summary for r in RELEASES.values())
