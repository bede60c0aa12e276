"""The model_types the config.json reader knows, each mapped to a Decoder: the style its architecture fixes (FFN,
norms, biases, q/k norms), the fields it reads with transformers' defaults where released configs leave them out,
its attention pattern layer by layer, its experts and latent attention; then the weights' storage (hf_weights.py).
read() unwraps a multimodal wrapper's text_config first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from attncore.checks import ConfigError
from attncore.config import POSITIONS, ModelConfig
from serving.context_limit import derived_limit
from serving.decoder import MAX_WINDOW, Decoder
from serving.hf_fields import REQUIRED, Fields, ModelFile
from serving.hf_hybrid import HYBRID_TYPES, read_hybrid
from serving.hf_hybrid import TEXT_OF as HYBRID_TEXT_OF
from serving.hf_llama4 import chunks, llama4_experts
from serving.hf_weights import weights
from serving.parameters import describe_attncore

LLAMA = dict(ffn="swiglu", bias="none", norm="rmsnorm", position="rope", max_len=0)  # and every family below
GATED_GELU = LLAMA | {"ffn": "geglu"}
SHAPE = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
LAYER_TYPES = ("full_attention", "sliding_attention")


@dataclass(frozen=True)
class Family:
    style: dict  # Decoder fields the architecture fixes
    tied: bool  # tie_word_embeddings when absent (transformers' default for the model_type)
    window: str  # how the attention pattern is read: none, uniform, qwen, alternate, every, olmo3 (_pattern), chunks
    moe: str = ""  # mixtral, qwen, deepseek, gpt_oss, olmoe, llama4
    head_dim: int | None = None  # head_dim when absent (None: hidden_size / num_attention_heads)
    bias: str = "flag"  # flag: attention_bias (and mlp_bias); fixed: the style's
    window_default: int | None = None  # sliding_window when absent
    defaults: dict = field(default_factory=dict)  # shape fields released configs leave to the class's defaults
    required: tuple[str, ...] = SHAPE


FAMILIES = {
    "llama": Family(LLAMA, False, "none"),
    "mistral": Family(LLAMA, False, "uniform", bias="fixed", window_default=4096),
    "mixtral": Family(LLAMA, False, "uniform", moe="mixtral", bias="fixed",
                      required=(*SHAPE, "num_local_experts", "num_experts_per_tok")),
    "qwen2": Family(LLAMA | {"bias": "qkv"}, False, "qwen", bias="fixed"),
    "qwen3": Family(LLAMA | {"qk_norm": "head"}, False, "qwen", head_dim=128),
    "qwen3_moe": Family(LLAMA | {"qk_norm": "head"}, False, "qwen", moe="qwen", head_dim=128,
                        required=(*SHAPE, "num_experts", "num_experts_per_tok", "moe_intermediate_size")),
    "phi3": Family(LLAMA, False, "uniform", bias="fixed"),
    "olmo2": Family(LLAMA | {"norm_placement": "post", "qk_norm": "projection"}, False, "none"),
    "olmo3": Family(LLAMA | {"norm_placement": "post", "qk_norm": "projection"}, False, "olmo3", window_default=4096),
    "gemma": Family(GATED_GELU, True, "none", head_dim=256),
    "gemma2": Family(GATED_GELU | {"norm_placement": "sandwich"}, True, "alternate", head_dim=256,
                     window_default=4096),
    "gemma3_text": Family(GATED_GELU | {"norm_placement": "sandwich", "qk_norm": "head"}, True, "every", head_dim=256,
                          window_default=4096, required=("hidden_size", "num_hidden_layers", "intermediate_size"),
                          defaults={"num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 262_208}),
    "deepseek_v2": Family(LLAMA, False, "none", moe="deepseek",
                          required=(*SHAPE, "kv_lora_rank", "n_routed_experts", "num_experts_per_tok",
                                    "moe_intermediate_size")),
    "deepseek_v3": Family(LLAMA, False, "none", moe="deepseek",
                          required=(*SHAPE, "kv_lora_rank", "n_routed_experts", "num_experts_per_tok",
                                    "moe_intermediate_size")),
    "gpt_oss": Family(LLAMA, False, "alternate", moe="gpt_oss", head_dim=64, window_default=128,
                      required=(*SHAPE, "num_local_experts", "num_experts_per_tok")),
    # Phi-3.5-MoE: biases on q, k, v and o, LayerNorms, an output-head bias (lm_head_bias), 16 experts a layer
    "phimoe": Family(LLAMA | {"norm": "layernorm"}, False, "uniform", moe="mixtral",
                     required=(*SHAPE, "num_local_experts", "num_experts_per_tok")),
    # StarCoder2: GELU FFN (c_fc, c_proj), LayerNorms, biases everywhere (use_bias), a window in every layer
    "starcoder2": Family(LLAMA | {"ffn": "gelu", "norm": "layernorm"}, True, "uniform", bias="use_bias"),
    "granite": Family(LLAMA, False, "none"),  # Llama's tensors; its multipliers are scalars, not parameters
    # Command-R: attention and FFN in parallel after one LayerNorm without bias (a gamma: counted as RMSNorm's);
    # use_qk_norm adds such norms over each projection's heads × head_dim
    "cohere": Family(LLAMA | {"norm_placement": "parallel"}, True, "none"),
    # OLMoE: q/k norms over the whole projection (as OLMo 2) before each sublayer, 64 experts of intermediate_size
    "olmoe": Family(LLAMA | {"qk_norm": "projection"}, False, "none", moe="olmoe",
                    required=(*SHAPE, "num_experts", "num_experts_per_tok")),
    # Llama 4 (text): every interleave_moe_layer_step-th layer (or those moe_layers names) has num_local_experts
    # routed experts and one shared expert, all of intermediate_size, and a router without bias; the other layers a
    # dense SwiGLU of intermediate_size_mlp. use_qk_norm is an L2 norm without parameters. The RoPE layers
    # (no_rope_layers 1) attend within chunks of attention_chunk_size tokens, the NoPE ones (0) to every token.
    "llama4_text": Family(LLAMA, False, "chunks", moe="llama4", head_dim=128,
                          defaults={"num_key_value_heads": 8}, required=(*SHAPE, "num_local_experts")),
}  # fmt: skip
GPT2_REQUIRED = ("n_embd", "n_layer", "n_head", "vocab_size")
FALCON_REQUIRED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
ATTNCORE_REQUIRED = ("vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "max_len")
KNOWN = (*sorted([*FAMILIES, *HYBRID_TYPES, "gpt2", "falcon", "attncore"]),)
# a wrapper whose text_config may leave out its model_type
TEXT_OF = {"gemma3": "gemma3_text", "llama4": "llama4_text"} | HYBRID_TEXT_OF
KEY_OF = {  # Decoder field -> the config key a cross-field refusal names
    "d_model": "hidden_size", "n_layers": "num_hidden_layers", "n_heads": "num_attention_heads",
    "n_kv_heads": "num_key_value_heads", "d_ff": "intermediate_size", "moe_d_ff": "moe_intermediate_size",
    "experts_per_token": "num_experts_per_tok", "n_dense_layers": "first_k_dense_replace", "bias": "attention_bias",
    "rope_head_dim": "qk_rope_head_dim", "full_layers": "layer_types",
}  # fmt: skip
# every field a faithful count needs (each a flag of params and kv-cache; with --d the flags not given are a modern
# decoder's, said when assumed): the refusal of an unknown model_type lists them, in one line under 600 characters
NEEDED = (
    "num_key_value_heads, head_dim, tie_word_embeddings; FFN, norms, biases, experts, windows; positions, q/k norms, "
    "MLA, sinks (--ffn swiglu --norm rmsnorm --bias none --position rope --no-tied-embeddings --no-head-bias)"
)


SHOWN_NAME = 24  # characters of an unknown model_type's repr shown (escaped): the refusal stays one short line


class UnknownArchitecture(ConfigError):
    """A model_type no family here reads: its parameters need the checkpoint's own count (hf_generic.py)."""


def unknown(model_type) -> ConfigError:
    named = isinstance(model_type, str) and len(model_type) <= 40
    shown = repr(model_type) if named else "this one"
    shown = shown if len(shown) <= SHOWN_NAME else shown[: SHOWN_NAME - 4] + "...'"
    return UnknownArchitecture("model_type", f"{shown} is not one the lab reads: {', '.join(KNOWN)}. It needs {NEEDED}")


def _shape(f: Fields, fam: Family) -> dict:
    d = f.int("hidden_size", 1, 1_000_000)
    layers = f.int("num_hidden_layers", 1, 10_000)
    heads = f.int("num_attention_heads", 1, 100_000, fam.defaults.get("num_attention_heads", REQUIRED))
    kv = f.int("num_key_value_heads", 1, heads, fam.defaults.get("num_key_value_heads", heads),
               shown=fam.defaults.get("num_key_value_heads", f"{heads}, = num_attention_heads"))  # fmt: skip
    if heads % kv:
        raise ConfigError(f.name("num_key_value_heads"), f"must divide num_attention_heads={heads}, got {kv}")
    head_dim = f.int("head_dim", 1, 100_000, fam.head_dim, nullable=True)
    if head_dim is None and d % heads and fam.moe != "deepseek":  # latent attention sets its own widths
        raise ConfigError(
            f.name("num_attention_heads"), f"must divide hidden_size={d:,} when head_dim is absent, got {heads}"
        )
    return dict(
        d_model=d, n_layers=layers, n_heads=heads, n_kv_heads=kv, head_dim=head_dim,
        d_ff=f.int("intermediate_size", 1, 10_000_000),
        vocab_size=f.int("vocab_size", 1, 100_000_000, fam.defaults.get("vocab_size", REQUIRED)),
        tied_embeddings=f.flag("tie_word_embeddings", fam.tied),
    )  # fmt: skip


def _bias(f: Fields, fam: Family, mt: str) -> dict:
    if fam.bias == "fixed":
        return {}
    if fam.bias == "use_bias":  # one switch for every linear layer
        return {"bias": "all" if f.flag("use_bias", True) else "none"}
    attention = f.flag("attention_bias", mt == "gpt_oss")
    mlp = f.flag("mlp_bias", False) if mt in ("llama", "granite") else False
    if mt == "gpt_oss":  # its experts always have biases
        if not attention:
            raise ConfigError(f.name("attention_bias"), "the lab models GPT-OSS with attention biases; got false")
        return {"bias": "all"}
    if mlp and not attention:
        raise ConfigError(f.name("mlp_bias"), "biases on the FFN without the attention's are not modelled")
    return {"bias": "all" if mlp else "attention" if attention else "none"}


def _pattern(f: Fields, fam: Family, layers: int, notes: list) -> tuple[int | None, list[str]]:
    """(window, per-layer kinds 'full'/'sliding') from layer_types if the file has them, else the family's rule."""
    if fam.window == "none":
        return None, ["full"] * layers
    types = f.strings("layer_types", LAYER_TYPES, layers)
    window = f.int("sliding_window", 1, MAX_WINDOW, fam.window_default, nullable=True)
    if types is not None:
        kinds = ["sliding" if t == "sliding_attention" else "full" for t in types]
    elif fam.window == "uniform":
        kinds = ["sliding" if window else "full"] * layers
    elif fam.window == "qwen":
        on = f.flag("use_sliding_window", False)
        first = f.int("max_window_layers", 0, 10_000, 28)
        kinds = ["sliding" if on and window and i >= first else "full" for i in range(layers)]
        if not on and window:
            notes.append(f"use_sliding_window false: full attention in every layer (sliding_window {window:,} unused)")
    elif fam.window == "alternate":  # Gemma 2, GPT-OSS: sliding, full, sliding, ...
        kinds = ["sliding" if i % 2 == 0 else "full" for i in range(layers)]
    elif fam.window == "every":  # Gemma 3: every sliding_window_pattern-th layer full
        period = f.int("sliding_window_pattern", 1, 10_000, 6)
        kinds = ["full" if (i + 1) % period == 0 else "sliding" for i in range(layers)]
    else:  # olmo3: three sliding, one full
        kinds = ["full" if (i + 1) % 4 == 0 else "sliding" for i in range(layers)]
    if "sliding" in kinds and window is None:
        raise ConfigError(f.name("sliding_window"), f"must be a whole number from 1 to {MAX_WINDOW:,} when layers "
                                                    "are sliding, got null")  # fmt: skip
    if "sliding" not in kinds:
        window = None
    return window, kinds


def _experts(f: Fields, fam: Family, shape: dict, notes: list) -> dict:
    if fam.moe == "olmoe":  # every layer: num_experts of intermediate_size, no shared ones
        n = f.int("num_experts", 1, 1_000_000)
        return dict(n_experts=n, experts_per_token=f.int("num_experts_per_tok", 1, n), moe_d_ff=shape["d_ff"])
    if fam.moe in ("mixtral", "gpt_oss"):
        n = f.int("num_local_experts", 1, 1_000_000)
        k = f.int("num_experts_per_tok", 1, n)
        out = dict(n_experts=n, experts_per_token=k, moe_d_ff=shape["d_ff"])
        if fam.moe == "gpt_oss":
            f.read.add("experts_per_token")  # the same as num_experts_per_tok
            out |= dict(router_bias=True, attention_sinks=True)
        return out
    if fam.moe == "qwen":
        n = f.int("num_experts", 1, 1_000_000)
        step = f.int("decoder_sparse_step", 1, 10_000, 1)
        if step != 1:
            raise ConfigError(f.name("decoder_sparse_step"), f"the lab reads 1 (every layer MoE), got {step}")
        dense = f.data.get("mlp_only_layers", [])
        f.read.add("mlp_only_layers")
        if not isinstance(dense, list) or dense != list(range(len(dense))):
            raise ConfigError(f.name("mlp_only_layers"), "the lab reads [] or the first layers ([0, 1, ...]) only")
        if len(dense) > shape["n_layers"]:  # the dense layers' own key, not deepseek's first_k_dense_replace
            raise ConfigError(f.name("mlp_only_layers"), f"names {len(dense):,} layers, more than num_hidden_layers "
                              f"= {shape['n_layers']:,}")  # fmt: skip
        return dict(n_experts=n, experts_per_token=f.int("num_experts_per_tok", 1, n), n_dense_layers=len(dense),
                    moe_d_ff=f.int("moe_intermediate_size", 1, 10_000_000))  # fmt: skip
    n = f.int("n_routed_experts", 1, 1_000_000)  # deepseek
    freq = f.int("moe_layer_freq", 1, 10_000, 1)
    if freq != 1:
        raise ConfigError(f.name("moe_layer_freq"), f"the lab reads 1 (every layer after the dense ones), got {freq}")
    if mtp := f.int("num_nextn_predict_layers", 0, 100, None, nullable=True):
        notes.append(f"num_nextn_predict_layers: {mtp} multi-token-prediction layer(s) in the checkpoint, not counted "
                     "(vLLM loads them only for speculative decoding)")  # fmt: skip
    method = f.text("topk_method", ("greedy", "group_limited_greedy", "noaux_tc"), "greedy")
    return dict(
        n_experts=n, n_shared_experts=f.int("n_shared_experts", 0, 1_000_000, 0, nullable=True) or 0,
        experts_per_token=f.int("num_experts_per_tok", 1, n), moe_d_ff=f.int("moe_intermediate_size", 1, 10_000_000),
        n_dense_layers=f.int("first_k_dense_replace", 0, shape["n_layers"], 0), router_bias=method == "noaux_tc",
    )  # fmt: skip


def _latent(f: Fields) -> dict:
    """DeepSeek's multi-head latent attention: the per-head width without RoPE is qk_nope_head_dim."""
    return dict(
        kv_lora_rank=f.int("kv_lora_rank", 1, 1_000_000), head_dim=f.int("qk_nope_head_dim", 1, 100_000, 128),
        q_lora_rank=f.int("q_lora_rank", 1, 1_000_000, 1536, nullable=True) or 0,
        rope_head_dim=f.int("qk_rope_head_dim", 0, 100_000, 64), v_head_dim=f.int("v_head_dim", 1, 100_000, 128),
        bias="none",
    )  # fmt: skip


def _family(f: Fields, mt: str, notes: list) -> tuple[dict, list[str]]:
    fam = FAMILIES[mt]
    f.required = fam.required
    shape = _shape(f, fam)
    kw = fam.style | shape | _bias(f, fam, mt)
    if mt.startswith("deepseek"):
        kw |= _latent(f)
        if f.flag("attention_bias", False):
            raise ConfigError(f.name("attention_bias"), "latent attention is modelled without biases; got true")
    if fam.moe:
        kw |= llama4_experts(f, shape, notes) if fam.moe == "llama4" else _experts(f, fam, shape, notes)
    if fam.window == "chunks":
        window, kinds = chunks(f, shape["n_layers"], notes)
        kw["window_kind"] = "chunked"
    else:
        window, kinds = _pattern(f, fam, shape["n_layers"], notes)
    kw |= dict(sliding_window=window, full_layers=kinds.count("full") if window else 0)
    if mt == "phimoe":
        kw["head_bias"] = f.flag("lm_head_bias", False)
    if mt == "cohere" and f.flag("use_qk_norm", False):
        kw["qk_norm"] = "projection"
    if mt in ("gemma2", "gemma3_text"):
        scalar = f.number("query_pre_attn_scalar", 256)
        if scalar is not None and scalar > 0:
            notes.append(f"query_pre_attn_scalar {scalar:g}: scores scaled by 1/√{scalar:g} (no parameters)")
    return kw, kinds


def _gpt2(f: Fields) -> tuple[dict, list[str]]:
    f.required = GPT2_REQUIRED
    d = f.int("n_embd", 1, 1_000_000)
    heads = f.int("n_head", 1, 100_000)
    if d % heads:
        raise ConfigError(f.name("n_head"), f"must divide n_embd={d:,}, got {heads}")
    layers = f.int("n_layer", 1, 10_000)
    kw = dict(
        d_model=d, n_layers=layers, n_heads=heads, vocab_size=f.int("vocab_size", 1, 100_000_000),
        d_ff=f.int("n_inner", 1, 10_000_000, 4 * d, shown=f"{4 * d:,}, 4 × n_embd", nullable=True) or 4 * d,
        max_len=f.int("n_positions", 1, 100_000_000, 1024), tied_embeddings=f.flag("tie_word_embeddings", True),
    )  # fmt: skip
    return kw, ["full"] * layers


def _falcon(f: Fields) -> tuple[dict, list[str]]:
    """Falcon: fused q/k/v with multi-query (7B) or num_kv_heads groups (new_decoder_architecture: 40B, 180B),
    a GELU FFN of ffn_hidden_size (4 × hidden), LayerNorms: one a layer where attention and FFN run in parallel
    (parallel_attn, 7B), two under the new architecture (ln_attn, ln_mlp) or without parallel attention."""
    f.required = FALCON_REQUIRED
    d = f.int("hidden_size", 1, 1_000_000)
    heads = f.int("num_attention_heads", 1, 100_000)
    layers = f.int("num_hidden_layers", 1, 10_000)
    new = f.flag("new_decoder_architecture", False)
    if new:
        kv = f.int("num_kv_heads", 1, heads, heads)
        one_norm = f.int("num_ln_in_parallel_attn", 1, 2, 2, nullable=True) == 1
    else:
        kv = 1 if f.flag("multi_query", True) else heads
        one_norm = f.flag("parallel_attn", True)
    if heads % kv or (d % heads and not f.has("head_dim")):
        raise ConfigError(f.name("num_kv_heads"), f"must divide num_attention_heads={heads}, as the heads hidden_size")
    alibi = f.flag("alibi", False)
    d_ff = f.int("ffn_hidden_size", 1, 10_000_000, 4 * d, shown=f"{4 * d:,}, 4 × hidden_size", nullable=True)
    kw = dict(
        d_model=d, n_layers=layers, n_heads=heads, n_kv_heads=kv, head_dim=f.int("head_dim", 1, 100_000, None,
        nullable=True), vocab_size=f.int("vocab_size", 1, 100_000_000), ffn="gelu", norm="layernorm",
        d_ff=d_ff or 4 * d,
        bias="all" if f.flag("bias", False) else "none", position="alibi" if alibi else "rope", max_len=0,
        tied_embeddings=f.flag("tie_word_embeddings", True), norm_placement="parallel" if one_norm else "pre",
    )  # fmt: skip
    return kw, ["full"] * layers


def _attncore(f: Fields) -> tuple[Decoder, list[str]]:
    f.required = ATTNCORE_REQUIRED
    ints = {k: f.int(k, 1, 10**8) for k in ATTNCORE_REQUIRED}
    cfg = ModelConfig(**ints, position=f.text("position", POSITIONS, "learned"))
    return describe_attncore(cfg), ["full"] * cfg.n_layers


def read(data: dict) -> ModelFile:
    """The ModelFile of a parsed config.json (a JSON object); ConfigError naming the field otherwise."""
    top_type = data.get("model_type")
    top = Fields(data, top_type if isinstance(top_type, str) else "?")
    top.read.add("model_type")
    inner, wrapper, notes = data, None, []
    if isinstance(data.get("text_config"), dict):
        named = isinstance(top_type, str) and 0 < len(top_type) <= 40
        inner, wrapper = data["text_config"], top_type if named else "a wrapper"
        top.read |= {"text_config", "vision_config"} if "vision_config" in data else {"text_config"}
        if "vision_config" in data:
            notes.append("vision_config: the vision tower and its projector are not counted (the language model is)")
        if "tie_word_embeddings" in data and "tie_word_embeddings" not in inner:  # the wrapper's ties the head
            inner = inner | {"tie_word_embeddings": data["tie_word_embeddings"]}
            top.read.add("tie_word_embeddings")
    elif "text_config" in data and data["text_config"] is not None:
        raise ConfigError("text_config", "must be a JSON object {...} holding the language model's fields")
    mt = inner.get("model_type", TEXT_OF.get(wrapper) if wrapper else top_type)
    mt = HYBRID_TEXT_OF.get(mt, mt) if isinstance(mt, str) else mt  # a flat Qwen3.5 file reads as its text model
    if not isinstance(mt, str) or mt not in (*FAMILIES, *HYBRID_TYPES, "gpt2", "falcon", "attncore"):
        if mt is None:
            name = "text_config.model_type" if wrapper else "model_type"
            raise ConfigError(name, f"missing; it names the architecture, one of {', '.join(KNOWN)}")
        raise unknown(mt)
    f = Fields(inner, mt, "text_config." if wrapper else "")
    f.read.add("model_type")
    if mt == "attncore":
        arch, kinds = _attncore(f)
    else:
        if mt in HYBRID_TYPES:
            f.required = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
            kw, kinds = read_hybrid(f, mt, notes)
        else:
            kw, kinds = _gpt2(f) if mt == "gpt2" else _falcon(f) if mt == "falcon" else _family(f, mt, notes)
        try:
            arch = Decoder(**kw)
        except ConfigError as e:
            raise ConfigError(f.name(KEY_OF.get(e.field, e.field)), e.message) from None
    longest = f.int("max_position_embeddings", 1, 10**9, None, nullable=True) if mt != "gpt2" else arch.max_len
    quantization_ignored: list[str] = []
    storage, serving = weights(f, top, arch, notes, quantization_ignored)
    limit = derived_limit(inner, mt)
    if isinstance(inner.get("rope_scaling"), dict):  # it changes the derived maximum
        f.read.add("rope_scaling")
    ignored = (top.ignored() if wrapper else []) + f.ignored() + quantization_ignored
    stored = any(x.has(k) for x in (top, f) for k in ("torch_dtype", "dtype"))
    return ModelFile(mt, wrapper, arch, storage, serving, tuple(kinds), longest, tuple(f.defaults), tuple(notes),
                     tuple(ignored), limit, stored)  # fmt: skip
