"""LoRA adapters in a serving engine's memory: the stacked buffers vLLM preallocates for every layer it wraps, and
the reading of a PEFT adapter_config.json (its r and target_modules).

vLLM allocates, once at model load and whatever the adapters' own ranks, for each wrapped linear layer and each of
its slices (q, k, v of qkv_proj; gate, up of gate_up_proj) A = max_loras × max_lora_rank × input and
B = max_loras × slice output × max_lora_rank elements per tensor-parallel rank, sharded as the layer is
(vllm/lora/layers/base_linear.py and column_parallel_linear.py create_lora_weights: a column-parallel layer splits
B's output, a row-parallel one A's input); the vocabulary embedding's A is vocabulary × rank and its B width ×
rank, the output head's A rank × width and B the whole vocabulary × rank on every rank (vocal_parallel_embedding.py,
logits_processor.py). The dtype is --lora-dtype ("auto": the model's, vllm/config/lora.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from attncore.checks import ConfigError, check_choice, check_int
from serving.decoder import GATED_FFNS, Decoder
from serving.hf_config import decode

MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # vllm/config/lora.py MaxLoRARanks
LORA_DTYPES = ("auto", "fp16", "bf16")  # vLLM's auto, float16, bfloat16
LINEAR = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")  # vLLM's packed names of a block's linear layers
MODULES = (*LINEAR, "embed_tokens", "lm_head")
# a PEFT adapter's module names -> the vLLM layer that holds them (q, k and v are slices of one qkv_proj)
PEFT_NAMES = {
    "q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj", "qkv_proj": "qkv_proj",
    "o_proj": "o_proj", "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj", "gate_up_proj": "gate_up_proj",
    "down_proj": "down_proj", "embed_tokens": "embed_tokens", "lm_head": "lm_head",
}  # fmt: skip
MAX_HEAD_VOCAB = 258_048  # logits_processor.py: "When using LoRA, vocab size must be <= 258048"
MAX_TARGETS = 64  # module names an adapter_config.json may list here


def rank_needed(r: int) -> int:
    """The least max_lora_rank vLLM accepts that holds an adapter of rank r."""
    check_int("r", r, 1, MAX_LORA_RANKS[-1])
    return next(rank for rank in MAX_LORA_RANKS if rank >= r)


@dataclass(frozen=True)
class LoraSettings:
    """vLLM's LoRA flags that size its buffers: --max-loras, --max-lora-rank, --lora-target-modules (empty: every
    linear layer of the blocks, vLLM's default), --lora-dtype."""

    max_loras: int = 1
    max_lora_rank: int = 16
    target_modules: tuple[str, ...] = ()
    lora_dtype: str = "auto"

    def __post_init__(self):
        check_int("max_loras", self.max_loras, 1, 4096)
        if self.max_lora_rank not in MAX_LORA_RANKS or isinstance(self.max_lora_rank, bool):
            raise ConfigError("max_lora_rank", f"must be one of {', '.join(map(str, MAX_LORA_RANKS))} (vLLM's "
                              f"choices), got {self.max_lora_rank!r}")  # fmt: skip
        if not isinstance(self.target_modules, tuple):
            raise ConfigError("lora_target_modules", f"must be a tuple of module names, got {self.target_modules!r}")
        for name in self.target_modules:
            check_choice("lora_target_modules", name, MODULES)
        check_choice("lora_dtype", self.lora_dtype, LORA_DTYPES)

    @property
    def modules(self) -> tuple[str, ...]:
        """The layers wrapped, in MODULES order."""
        chosen = set(self.target_modules or LINEAR)
        return tuple(m for m in MODULES if m in chosen)


@dataclass(frozen=True)
class LoraBuffers:
    """The buffers of one tensor-parallel rank: bytes per wrapped module (summed over its layers), and what is not
    counted."""

    bytes: int
    by_module: dict  # module -> bytes on one rank
    elements: int
    dtype_bytes: int
    notes: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"bytes": self.bytes, "by_module": dict(self.by_module), "elements": self.elements,
                "dtype_bytes": self.dtype_bytes, "notes": list(self.notes)}  # fmt: skip


def _slices(a: Decoder, tp: int) -> dict[str, tuple[tuple[int, int], ...]]:
    """Per block: module -> ((input width, output width) of each slice) on one rank."""
    H, dh = a.d_model, a.d_head
    q, kv = max(1, a.n_heads // tp) * dh, max(1, a.kv_heads // tp) * dh  # KV heads replicated when tp > heads
    ffn = a.d_ff // tp
    gate_up = ((H, ffn), (H, ffn)) if a.ffn in GATED_FFNS else ((H, ffn),)
    return {
        "qkv_proj": ((H, q), (H, kv), (H, kv)),  # column-parallel: B's output split
        "o_proj": ((a.n_heads * dh // tp, H),),  # row-parallel: A's input split, B's output whole
        "gate_up_proj": gate_up,
        "down_proj": ((ffn, H),),
    }


def lora_buffers(a: Decoder, s: LoraSettings, tp: int = 1, model_bytes: int = 2) -> LoraBuffers:
    """The bytes vLLM preallocates on one tensor-parallel rank for model `a` with these LoRA settings."""
    check_int("tensor_parallel_size", tp, 1, 1024)
    L, r = s.max_loras, s.max_lora_rank
    dtype_bytes = model_bytes if s.lora_dtype == "auto" else 2
    dense = a.n_dense_layers if a.n_experts else a.n_layers  # MoE layers: their experts are not counted here
    layers = {"qkv_proj": a.n_layers, "o_proj": a.n_layers, "gate_up_proj": dense, "down_proj": dense}
    notes = []
    if a.kv_lora_rank and ({"qkv_proj", "o_proj"} & set(s.modules)):
        layers["qkv_proj"] = layers["o_proj"] = 0
        notes.append("latent attention (MLA): its projections' LoRA buffers are not counted")
    if a.n_experts and ({"gate_up_proj", "down_proj"} & set(s.modules)):
        notes.append(f"MoE: the {a.n_layers - dense} expert layers' LoRA buffers (FusedMoEWithLoRA) are not counted")
    if a.layer_kinds and "state" in a.layer_kinds:
        notes.append("a hybrid model's state layers are counted as attention layers")
    slices = _slices(a, tp)
    by_module, elements = {}, 0
    for module in s.modules:
        if module == "embed_tokens":
            n = L * a.vocab_size * r + L * a.d_model * r
        elif module == "lm_head":
            if a.vocab_size > MAX_HEAD_VOCAB:
                raise ConfigError("lora_target_modules", f"lm_head: vLLM refuses an output-head LoRA over a "
                                  f"vocabulary above {MAX_HEAD_VOCAB:,}, this one has {a.vocab_size:,}")  # fmt: skip
            n = L * r * a.d_model + L * a.vocab_size * r  # the whole vocabulary on every rank
        else:
            n = layers[module] * sum(L * r * d_in + L * d_out * r for d_in, d_out in slices[module])
        by_module[module] = n * dtype_bytes
        elements += n
    return LoraBuffers(sum(by_module.values()), by_module, elements, dtype_bytes, tuple(notes))


@dataclass(frozen=True)
class Adapter:
    """What an adapter_config.json (PEFT) says that sizes a server: its rank (the largest of r and rank_pattern's)
    and the vLLM layers its target_modules name."""

    r: int
    modules: tuple[str, ...]  # vLLM's names, in MODULES order
    names: tuple[str, ...]  # as the file lists them

    @property
    def max_lora_rank(self) -> int:
        return rank_needed(self.r)


def read_adapter_config(raw: bytes | str) -> Adapter:
    """A PEFT adapter_config.json (at most 1 MB of JSON): r (1 to 512), rank_pattern's ranks, target_modules (a list
    of module names, or "all-linear"); ConfigError naming the field otherwise. A regular expression is not run."""
    data = decode(raw)
    r = data.get("r")
    if isinstance(r, bool) or not isinstance(r, int) or not 1 <= r <= MAX_LORA_RANKS[-1]:
        raise ConfigError("r", f"must be an integer from 1 to {MAX_LORA_RANKS[-1]} (vLLM's largest rank), got "
                          f"{str(r)[:40]!r}")  # fmt: skip
    pattern = data.get("rank_pattern") or {}
    if not isinstance(pattern, dict) or len(pattern) > 10_000:
        raise ConfigError("rank_pattern", "must be an object of module name: rank")
    for rank in pattern.values():
        if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= MAX_LORA_RANKS[-1]:
            raise ConfigError("rank_pattern", f"ranks must be integers from 1 to {MAX_LORA_RANKS[-1]}, got "
                              f"{str(rank)[:40]!r}")  # fmt: skip
        r = max(r, rank)
    targets = data.get("target_modules")
    if targets == "all-linear":
        return Adapter(r, LINEAR, ("all-linear",))
    if isinstance(targets, str):
        raise ConfigError("target_modules", "a regular expression is not read here: list the modules, or give "
                          "--lora-target-modules")  # fmt: skip
    if not isinstance(targets, list) or not 1 <= len(targets) <= MAX_TARGETS:
        raise ConfigError("target_modules", f'must be a list of 1 to {MAX_TARGETS} module names or "all-linear"')
    unknown = [t for t in targets if not isinstance(t, str) or PEFT_NAMES.get(t.rsplit(".", 1)[-1]) is None]
    if unknown:
        shown = ", ".join(repr(str(t)[:40]) for t in unknown[:5])
        raise ConfigError("target_modules", f"names no layer read here: {shown}; allowed: {', '.join(PEFT_NAMES)}")
    chosen = {PEFT_NAMES[t.rsplit(".", 1)[-1]] for t in targets}
    return Adapter(r, tuple(m for m in MODULES if m in chosen), tuple(targets))
