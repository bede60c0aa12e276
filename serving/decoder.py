"""The Decoder: a decoder-only transformer described by the fields its parameter count and its KV cache depend on.

Each field is checked on construction (ConfigError naming it and its range). parameters.py counts its tensors,
kvcache.py and engine.py size its cache, hf_config.py reads one from a Hugging Face config.json.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from attncore.checks import ConfigError, check_choice, check_int
from serving.state import LAYER_KINDS, StateMixer

FFN_KINDS = ("relu", "gelu", "swiglu", "geglu")  # two matrices, two, three (gate w1, up w3, down w2), three
GATED_FFNS = ("swiglu", "geglu")  # a gate and an up projection, then the down projection
BIAS_KINDS = ("none", "all", "qkv", "attention")  # qkv: query, key and value only; attention: those and the output
NORM_KINDS = ("layernorm", "rmsnorm")  # gamma and beta, gamma only
POSITION_KINDS = ("learned", "sinusoidal", "rope", "alibi", "none")  # only a learned table has parameters
# where a block's two norms sit: before each sublayer (GPT-2, Llama), after it (OLMo 2), or both (Gemma 2/3: four);
# parallel: attention and FFN read one norm's output side by side (Falcon 7B, Command-R: one norm a layer)
NORM_PLACEMENTS = ("pre", "post", "sandwich", "parallel")
# q/k norms: none; one of head_dim for the queries and one for the keys, shared by the heads (Qwen3, Gemma 3); or
# one over each projection's whole width, heads x head_dim (OLMo 2)
QK_NORMS = ("none", "head", "projection")
# what a windowed layer keeps: the last `sliding_window` keys (Mistral, Gemma), or the keys of its own chunk of
# `sliding_window` tokens (Llama 4's chunked local attention: at most that many, as a window, for the cache)
WINDOW_KINDS = ("sliding", "chunked")
MAX_WINDOW = 2**31  # the longest sliding window, in a config.json, a form, a flag or the cache's own figures
CHOICES = {
    "ffn": FFN_KINDS, "bias": BIAS_KINDS, "norm": NORM_KINDS, "position": POSITION_KINDS,
    "norm_placement": NORM_PLACEMENTS, "qk_norm": QK_NORMS, "window_kind": WINDOW_KINDS,
}  # fmt: skip


@dataclass(frozen=True)
class Decoder:
    """A decoder-only transformer, as far as its parameter count and its KV cache are concerned.

    The defaults describe a GPT-2-style model; parameters.describe_attncore gives this lab's own model.
    """

    d_model: int
    n_layers: int
    n_heads: int
    vocab_size: int
    d_ff: int
    n_kv_heads: int | None = None  # None: n_heads (MHA); 1: MQA; in between: GQA
    head_dim: int | None = None  # None: d_model // n_heads; with MLA the query/key part without RoPE
    ffn: str = "gelu"
    bias: str = "all"
    norm: str = "layernorm"
    tied_embeddings: bool = True  # the output head reuses the token embedding
    position: str = "learned"
    max_len: int = 1024  # rows of the learned position table
    final_norm: bool = True
    head_bias: bool = False
    sliding_window: int | None = None  # keys a windowed layer attends to, and so caches
    # multi-head latent attention (DeepSeek-V2): per token and layer the cache holds kv_lora_rank + rope_head_dim
    kv_lora_rank: int = 0  # 0: ordinary attention
    q_lora_rank: int = 0  # 0: a full-rank query projection
    rope_head_dim: int = 0  # the decoupled RoPE part of each query and of the shared key
    v_head_dim: int | None = None  # None: head_dim
    # mixture of experts: every layer after the first n_dense_layers has routed and shared experts
    n_experts: int = 0  # routed experts; 0: dense FFN everywhere
    n_shared_experts: int = 0
    experts_per_token: int = 0
    moe_d_ff: int = 0
    n_dense_layers: int = 0  # the first layers keep a dense FFN of width d_ff
    norm_placement: str = "pre"
    qk_norm: str = "none"
    # the per-layer attention pattern of a model with a window: full_layers attend to every token, the others only to
    # the last sliding_window (Gemma 2: half full, Gemma 3: one in six); 0: every layer windowed. Their order changes
    # no count, only their number (hf_config.py reads the pattern layer by layer).
    full_layers: int = 0
    attention_sinks: bool = False  # one learned logit per query head and layer (GPT-OSS)
    router_bias: bool = False  # a bias per routed expert on the router (GPT-OSS; DeepSeek-V3's score correction)
    window_kind: str = "sliding"  # the windowed layers' kind: sliding, or chunked (Llama 4); the cache is the same
    # a hybrid model (Qwen3-Next, Nemotron-H, Jamba, ...): each layer's kind in order (state.LAYER_KINDS; () when
    # the counts above say it all) and its state layers' mixer (None: attention only)
    layer_kinds: tuple[str, ...] = ()
    mixer: StateMixer | None = None

    def __post_init__(self):
        check_int("d_model", self.d_model, 1, 1_000_000)
        check_int("n_layers", self.n_layers, 1, 10_000)
        check_int("n_heads", self.n_heads, 1, 100_000)
        check_int("vocab_size", self.vocab_size, 1, 100_000_000)
        check_int("d_ff", self.d_ff, 1, 10_000_000)
        if self.head_dim is None and self.d_model % self.n_heads:
            divisors = [h for h in range(1, min(self.d_model, 1024) + 1) if self.d_model % h == 0]
            raise ConfigError(
                "n_heads", f"must divide d_model={self.d_model} unless head_dim is given; allowed: {divisors}"
            )
        if self.head_dim is not None:
            check_int("head_dim", self.head_dim, 1, 100_000)
        if self.n_kv_heads is not None:
            check_int("n_kv_heads", self.n_kv_heads, 1, self.n_heads)
            if self.n_heads % self.n_kv_heads:
                raise ConfigError("n_kv_heads", f"must divide n_heads={self.n_heads}, got {self.n_kv_heads}")
        for name, kinds in CHOICES.items():
            check_choice(name, getattr(self, name), kinds)
        if self.position == "learned":
            check_int("max_len", self.max_len, 1, 100_000_000)
        if self.sliding_window is not None:
            check_int("sliding_window", self.sliding_window, 1, MAX_WINDOW)
        check_int("full_layers", self.full_layers, 0, self.n_layers)
        for name in ("kv_lora_rank", "q_lora_rank", "rope_head_dim", "n_experts", "n_shared_experts"):
            check_int(name, getattr(self, name), 0, 1_000_000)
        if self.v_head_dim is not None:
            check_int("v_head_dim", self.v_head_dim, 1, 100_000)
        if self.kv_lora_rank and self.bias != "none":
            raise ConfigError("bias", "latent attention (kv_lora_rank > 0) is modelled without biases: use none")
        if self.kv_lora_rank and self.qk_norm != "none":
            raise ConfigError("qk_norm", "latent attention (kv_lora_rank > 0) is modelled without q/k norms: use none")
        if self.n_experts:
            check_int("moe_d_ff", self.moe_d_ff, 1, 10_000_000)
            check_int("experts_per_token", self.experts_per_token, 1, self.n_experts)
            check_int("n_dense_layers", self.n_dense_layers, 0, self.n_layers)
        elif self.router_bias:
            raise ConfigError("router_bias", "needs routed experts (n_experts > 0)")
        if self.layer_kinds:
            if len(self.layer_kinds) != self.n_layers:
                n = len(self.layer_kinds)
                raise ConfigError("layer_kinds", f"must name n_layers={self.n_layers} layers, got {n}")
            for kind in self.layer_kinds:
                check_choice("layer_kinds", kind, LAYER_KINDS)
        if any(k in self.layer_kinds for k in ("state", "parallel")) != (self.mixer is not None):
            raise ConfigError("mixer", "a model has a mixer exactly when layer_kinds has state (or parallel) layers")

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads if self.head_dim is None else self.head_dim

    @property
    def attention(self) -> str:
        if self.kv_lora_rank:
            return "MLA"
        return "MHA" if self.kv_heads == self.n_heads else "MQA" if self.kv_heads == 1 else "GQA"

    def describe(self, pattern: str | None = None) -> str:
        """'42 layers, d_model 3,584, 16 query heads, 8 KV heads, head_dim 256, geglu FFN 14,336, ...': the model in
        one line; `pattern` words the attention pattern (else the counts of windowed and full layers)."""
        if self.kv_lora_rank:
            attention = f"{self.n_heads} heads, MLA latent {self.kv_lora_rank:,} + RoPE key {self.rope_head_dim}"
        else:
            kv = f"{self.kv_heads} KV head{'s' * (self.kv_heads > 1)}"
            attention = f"{self.n_heads} query heads, {kv}, head_dim {self.d_head}"
        ffn = f"{self.ffn} FFN {self.d_ff:,}"
        if self.n_experts:
            shared = f" + {self.n_shared_experts} shared" if self.n_shared_experts else ""
            first = f"first {self.n_dense_layers}" if self.n_dense_layers > 1 else "first"
            dense = f", the {first} dense" if self.n_dense_layers else ""
            ffn = f"{self.n_experts} experts of {self.moe_d_ff:,} ({self.experts_per_token} a token){shared}{dense}"
        extras = [x for x, on in (("q/k norms", self.qk_norm != "none"), ("attention sinks", self.attention_sinks),
                                  ("router bias", self.router_bias)) if on]  # fmt: skip
        norms = {"pre": "2 norms a layer", "post": "2 norms a layer, after the sublayers",
                 "sandwich": "4 norms a layer", "parallel": "1 norm a layer, attention and FFN in parallel"
                 }[self.norm_placement]  # fmt: skip
        if pattern is None:
            w, kind = self.windowed_layers, window_words(self.window_kind)
            pattern = "every layer full attention" if not w else (
                f"every layer {kind[0]} of {self.sliding_window:,}" if w == self.n_layers
                else f"{w} {kind[1]} layers ({self.sliding_window:,}) and {self.n_layers - w} full")  # fmt: skip
        parts = [
            f"{self.n_layers} layers", f"d_model {self.d_model:,}", attention, ffn,
            f"vocab {self.vocab_size:,} {'tied' if self.tied_embeddings else 'untied'}", f"biases {self.bias}",
            norms + (f" + {', '.join(extras)}" if extras else ""), pattern,
        ]  # fmt: skip
        return ", ".join(parts)

    def resolved(self) -> Decoder:
        """The same model with its derived fields written out (head_dim, KV heads, value width; no full layers without
        a window): two descriptions of one model compare equal."""
        full = self.full_layers if self.sliding_window else 0
        v = (self.v_head_dim or self.d_head) if self.kv_lora_rank else self.v_head_dim
        return replace(self, head_dim=self.d_head, n_kv_heads=self.kv_heads, v_head_dim=v, full_layers=full)

    @property
    def windowed_layers(self) -> int:
        """Layers whose cache the sliding window caps (0 without a window)."""
        return 0 if self.sliding_window is None else self.n_layers - self.full_layers


def window_words(kind: str) -> tuple[str, str]:
    """(every layer '<a window>' of N, N '<kind>' layers): the words of a window kind."""
    return ("a sliding window", "sliding-window") if kind == "sliding" else ("chunked attention", "chunked-attention")
