"""Speculative decoding in a serving engine's memory: the drafter's weights and the KV cache of its attention layers,
which join the target's in the same block pool.

As vLLM's V1 engine loads them (vllm/config/speculative.py, vllm/v1/spec_decode/eagle.py, draft_model.py): a draft
model ("draft") is a whole second model with its own layers, embeddings and head; an EAGLE head (Li et al. 2024,
arXiv:2401.15077) is one decoder layer (or its config's num_hidden_layers) of the target's widths plus fc, a
2·H → H projection of the token embedding and the target's hidden state, sharing the target's embeddings and head;
EAGLE-3 (Li et al. 2025, arXiv:2503.01840) feeds the layer's q/k/v with 2·H, projects three of the target's
hidden states (fc, 3·H → H), adds a norm of the hidden state and has its own head over draft_vocab_size tokens;
MTP layers (DeepSeek-V3, arXiv:2412.19437; num_nextn_predict_layers) are the model's own extra decoder layers, each
with eh_proj (2·H → H) and three norms, sharing the embeddings and head. Every attention layer of the drafter is a
layer of the KV cache (the drafter's layers get their own KV cache specs, merged into the target's groups).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from attncore.checks import ConfigError, check_choice, check_int
from serving.decoder import Decoder
from serving.hf_config import decode
from serving.parameters import count_parameters, param_inventory

METHODS = ("draft", "eagle", "eagle3", "mtp")
MTP_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers")  # DeepSeek-V3, GLM-4.5, MiMo; Qwen3-Next
MAX_TOKENS = 64  # --num-speculative-tokens


@dataclass(frozen=True)
class Speculative:
    """--speculative-method, --num-speculative-tokens, and the drafter's geometry: the draft model, or an EAGLE
    head's config (None: the target's widths); mtp_layers the target's own MTP layers; draft_vocab EAGLE-3's head."""

    method: str
    num_tokens: int = 1
    model: Decoder | None = None
    mtp_layers: int = 0
    draft_vocab: int | None = None

    def __post_init__(self):
        check_choice("speculative_method", self.method, METHODS)
        check_int("num_speculative_tokens", self.num_tokens, 1, MAX_TOKENS)
        if self.method == "draft" and self.model is None:
            raise ConfigError("speculative_model", "the draft method needs a draft model (a preset or config.json)")
        if self.method == "mtp":
            if self.model is not None:
                raise ConfigError("speculative_model", "mtp uses the model's own MTP layers: give no draft model")
            check_int("mtp_layers", self.mtp_layers, 1, 100)
            if self.num_tokens > self.mtp_layers and self.num_tokens % self.mtp_layers:  # vLLM reuses the layers
                raise ConfigError("num_speculative_tokens", f"above the model's {self.mtp_layers} MTP layers must be a "
                                  f"multiple of them, got {self.num_tokens}")  # fmt: skip
        if self.draft_vocab is not None:
            check_int("draft_vocab_size", self.draft_vocab, 1, 100_000_000)


@dataclass(frozen=True)
class Drafter:
    """What the drafter adds on one GPU: its parameters (by part), its attention layers and their geometry."""

    method: str
    num_tokens: int
    params: int
    parts: dict  # part -> parameters
    kv_layers: int
    kv_model: Decoder  # whose attention fields give the drafter's KV page
    same_page: bool  # its page is the target's: its layers simply join the target's block
    notes: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"method": self.method, "num_speculative_tokens": self.num_tokens, "params": self.params,
                "parts": dict(self.parts), "kv_layers": self.kv_layers, "same_page": self.same_page,
                "notes": list(self.notes)}  # fmt: skip


def _one_block(a: Decoder, moe: bool) -> int:
    """Parameters of one decoder layer of `a`: one with experts (`moe`), or a dense one."""
    one = replace(a, n_layers=1, full_layers=0, layer_kinds=(), mixer=None,
                  n_dense_layers=0 if moe else int(bool(a.n_experts)))  # fmt: skip
    return sum(t.size for t in param_inventory(one) if t.name.startswith("blocks."))


def _page_fields(a: Decoder) -> tuple:
    return (a.kv_heads, a.d_head, a.kv_lora_rank, a.rope_head_dim)


def drafter(target: Decoder, spec: Speculative) -> Drafter:
    """The drafter of `spec` for `target`: its own parameters (what it shares with the target not counted) and its
    KV layers."""
    H, notes = target.d_model, []
    if spec.method == "draft":
        d = spec.model
        count = count_parameters(d)
        parts = {"draft model": count.total}
        if d.vocab_size != target.vocab_size:
            notes.append(f"the draft model's vocabulary ({d.vocab_size:,}) differs from the target's "
                         f"({target.vocab_size:,}): vLLM serves such a pair only with "
                         "use_heterogeneous_vocab")  # fmt: skip
        return Drafter("draft", spec.num_tokens, count.total, parts, d.n_layers, d,
                       _page_fields(d) == _page_fields(target), tuple(notes))  # fmt: skip
    if spec.method == "mtp":
        moe = bool(target.n_experts)  # DeepSeek-V3's MTP layer is a MoE layer, as its last decoder layers
        layer = _one_block(target, moe)
        parts = {"decoder layers": spec.mtp_layers * layer, "eh_proj": spec.mtp_layers * 2 * H * H,
                 "norms": spec.mtp_layers * 3 * H}  # fmt: skip
        notes.append("the MTP layers share the target's embeddings and head")
        return Drafter("mtp", spec.num_tokens, sum(parts.values()), parts, spec.mtp_layers, target, True, tuple(notes))
    head = spec.model or target  # an EAGLE head's config, or the target's widths
    n = head.n_layers if spec.model is not None else 1
    if head.d_model != H:
        raise ConfigError("speculative_model", f"an EAGLE head's hidden_size must be the target's ({H:,}), got "
                          f"{head.d_model:,}")  # fmt: skip
    layer = _one_block(head, bool(head.n_experts) and spec.model is not None)
    if spec.model is None and target.n_experts:
        notes.append("the head's layer is taken as a dense layer of the target's FFN width (give the head's "
                     "config.json for its own)")  # fmt: skip
    parts = {"decoder layers": n * layer}
    if spec.method == "eagle":
        parts["fc"] = 2 * H * H
        notes.append("the head shares the target's embeddings and head")
    else:  # eagle3
        q_k_v = (head.n_heads + 2 * head.kv_heads) * head.d_head
        parts["fc"] = 3 * H * H
        parts["qkv of the doubled input"] = q_k_v * H  # the first layer's q/k/v read 2·H
        parts["norms"] = 2 * H  # hidden_norm and the final norm
        vocab = spec.draft_vocab or target.vocab_size
        parts["head"] = vocab * H
        notes.append(f"the head predicts over {vocab:,} tokens"
                     + (" (draft_vocab_size)" if spec.draft_vocab else " (the target's vocabulary)"))  # fmt: skip
    return Drafter(spec.method, spec.num_tokens, sum(parts.values()), parts, n, head,
                   _page_fields(head) == _page_fields(target), tuple(notes))  # fmt: skip


def config_int(raw: bytes | str, keys: tuple[str, ...], high: int) -> int | None:
    """The first of `keys` a config.json gives (an integer from 0 to high; ConfigError naming it otherwise), or
    None. Reads a wrapper's text_config too."""
    data = decode(raw)
    scopes = [data] + ([data["text_config"]] if isinstance(data.get("text_config"), dict) else [])
    for scope in scopes:
        for key in keys:
            value = scope.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
                raise ConfigError(key, f"must be an integer from 0 to {high}, got {str(value)[:40]!r}")
            return value
    return None


def mtp_layers(raw: bytes | str) -> int:
    """The model's MTP layers from its config.json (num_nextn_predict_layers or mtp_num_hidden_layers); ConfigError
    when it has none."""
    n = config_int(raw, MTP_KEYS, 100)
    if not n:
        raise ConfigError("speculative_method", f"mtp needs a config.json with {' or '.join(MTP_KEYS)} above 0; "
                          "this model has no MTP layers")  # fmt: skip
    return n
