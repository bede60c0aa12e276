"""The hybrid model_types of the config.json reader: models whose layers mix attention with a state layer (Gated
DeltaNet, Mamba2, Mamba, a short convolution, Kimi Delta Attention), each read as transformers' configuration class
derives it (its layer pattern, its defaults) into a Decoder with layer_kinds and a StateMixer (state.py).

Qwen3-Next and Qwen3.5/3.6 (layer_types, else every full_attention_interval-th layer full), Nemotron-H
(hybrid_override_pattern: M Mamba2, * attention, - MLP, E MoE, one sublayer a layer; or layers_block_type), Jamba
(attention where i % attn_layer_period == attn_layer_offset, experts where i % expert_layer_period ==
expert_layer_offset), Falcon-H1 (attention and Mamba2 side by side in every layer), Granite 4.0 hybrids
(layer_types), LFM2 (layer_types, else full_attn_idxs) and Kimi Linear (linear_attn_config's 1-indexed
full_attn_layers and kda_layers, else every fourth layer from the fifth). hf_families.py dispatches here.
"""

from __future__ import annotations

import math

from attncore.checks import ConfigError
from serving.hf_fields import REQUIRED, Fields
from serving.state import StateMixer

MODERN = dict(ffn="swiglu", bias="none", norm="rmsnorm", position="rope", max_len=0)
SSM_DTYPES = ("auto", "float32", "bfloat16", "float16")
HYBRID_TYPES = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "nemotron_h", "jamba", "falcon_h1",
                "granitemoehybrid", "lfm2", "kimi_linear")  # fmt: skip
# a wrapper's model_type -> its text_config's, when the text_config leaves it out or the file is flat
TEXT_OF = {"qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"}
MAX_DIM = 1_000_000
BASIC = ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
NEEDS = {  # the fields without a default, for the message of a missing one
    "qwen3_next": (*BASIC, "num_experts", "moe_intermediate_size"),
    "qwen3_5_moe_text": (*BASIC, "num_experts", "moe_intermediate_size"),
    "qwen3_5_text": (*BASIC, "intermediate_size"),
    "nemotron_h": ("hidden_size", "num_attention_heads", "vocab_size", "intermediate_size", "hybrid_override_pattern"),
    "jamba": (*BASIC, "intermediate_size"), "falcon_h1": (*BASIC, "intermediate_size"), "granitemoehybrid": BASIC,
    "lfm2": BASIC, "kimi_linear": (*BASIC, "intermediate_size", "kv_lora_rank", "num_experts", "moe_intermediate_size"),
}  # fmt: skip


def _attention(f: Fields, d: int, head_dim_default=None) -> dict:
    heads = f.int("num_attention_heads", 1, 100_000)
    kv = f.int("num_key_value_heads", 1, heads, heads, shown=f"{heads}, = num_attention_heads", nullable=True) or heads
    if heads % kv:
        raise ConfigError(f.name("num_key_value_heads"), f"must divide num_attention_heads={heads}, got {kv}")
    head_dim = f.int("head_dim", 1, 100_000, head_dim_default, nullable=True)
    if head_dim is None and d % heads:
        raise ConfigError(f.name("num_attention_heads"), f"must divide hidden_size={d:,} when head_dim is absent")
    return dict(n_heads=heads, n_kv_heads=kv, head_dim=head_dim)


def _base(f: Fields, tied: bool, head_dim=None) -> dict:
    d = f.int("hidden_size", 1, MAX_DIM)
    return MODERN | dict(
        d_model=d, n_layers=f.int("num_hidden_layers", 1, 10_000), vocab_size=f.int("vocab_size", 1, 100_000_000),
        tied_embeddings=f.flag("tie_word_embeddings", tied), bias="attention" if f.flag("attention_bias", False)
        else "none", **_attention(f, d, head_dim),
    )  # fmt: skip


def _types(f: Fields, key: str, n: int, names: dict) -> list[str] | None:
    """A layer list (`key`) mapped through `names` (each entry one of its keys), or None when absent."""
    types = f.strings(key, tuple(names), n)
    return None if types is None else [names[t] for t in types]


def _ssm_dtype(f: Fields, key: str) -> str:
    value = f.text(key, SSM_DTYPES, "auto") if f.has(key) else "auto"
    f.read.add(key)
    return value


def _width(f: Fields, key: str, width: int, how: str) -> int:
    """A Mamba width derived from `key` (`how` says how), at most the StateMixer's 10,000,000."""
    if width > 10_000_000:
        raise ConfigError(f.name(key), f"gives a Mamba width of {width:,} ({how}); at most 10,000,000")
    return width


def _mamba2(f: Fields, d: int, inner: int, names: dict, **extra) -> StateMixer:
    """A Mamba2 mixer from the keys `names` gives (heads, head_dim, state, groups, kernel)."""
    heads = f.int(names["heads"], 1, MAX_DIM, names.get("heads_default", REQUIRED))
    head_dim = f.data.get(names["head_dim"], "auto")
    f.read.add(names["head_dim"])
    if head_dim == "auto" or head_dim is None:
        if inner % heads:
            raise ConfigError(f.name(names["heads"]), f"must divide the Mamba width {inner:,}, got {heads:,}")
        head_dim = inner // heads
    else:
        head_dim = f.int(names["head_dim"], 1, MAX_DIM)
    if heads * head_dim != inner:
        raise ConfigError(f.name(names["head_dim"]), f"times {names['heads']} ({heads:,}) must be the Mamba width "
                                                     f"{inner:,}, got {head_dim:,}")  # fmt: skip
    return StateMixer(
        "mamba2", f.int(names["kernel"], 1, 1024, 4), heads=heads, head_dim=head_dim, inner=inner,
        state_size=f.int(names["state"], 1, MAX_DIM, names.get("state_default", 128)),
        n_groups=f.int(names["groups"], 1, MAX_DIM, 1), conv_bias=f.flag(names["conv_bias"], True), **extra,
    )  # fmt: skip


def _qwen(f: Fields, mt: str, notes: list) -> tuple[dict, list[str], StateMixer]:
    """Qwen3-Next, Qwen3.5/3.6 (dense and MoE): Gated DeltaNet layers and gated attention (q_proj twice as wide),
    q/k norms of head_dim; MoE: experts of moe_intermediate_size and one gated shared expert."""
    kw = _base(f, False, head_dim=256) | {"qk_norm": "head"}
    n = kw["n_layers"]
    moe = mt != "qwen3_5_text"
    kinds = _types(f, "layer_types", n, {"linear_attention": "state", "full_attention": "full"})
    if kinds is None:
        every = f.int("full_attention_interval", 1, 10_000, 4)
        kinds = ["state" if (i + 1) % every else "full" for i in range(n)]
    shared = 0
    if moe:
        e = f.int("num_experts", 1, 1_000_000)
        moe_ff = f.int("moe_intermediate_size", 1, 10_000_000)
        shared = f.int("shared_expert_intermediate_size", 0, 10_000_000, 0)
        dense = f.data.get("mlp_only_layers", [])
        f.read.add("mlp_only_layers")
        if not isinstance(dense, list) or dense != list(range(len(dense))) or len(dense) > n:
            raise ConfigError(f.name("mlp_only_layers"), "the lab reads [] or the first layers ([0, 1, ...]) only")
        step = f.int("decoder_sparse_step", 1, 10_000, 1)
        if step != 1:
            raise ConfigError(f.name("decoder_sparse_step"), f"the lab reads 1 (every layer MoE), got {step}")
        kw |= dict(n_experts=e, experts_per_token=f.int("num_experts_per_tok", 1, e), moe_d_ff=moe_ff,
                   n_shared_experts=1 if shared else 0, n_dense_layers=len(dense),
                   d_ff=f.int("intermediate_size", 1, 10_000_000, moe_ff))  # fmt: skip
    else:
        kw["d_ff"] = f.int("intermediate_size", 1, 10_000_000)
    if mtp := f.int("mtp_num_hidden_layers", 0, 100, None, nullable=True):
        notes.append(f"mtp_num_hidden_layers: {mtp} multi-token-prediction layer(s) in the checkpoint, not counted")
    v_heads = f.int("linear_num_value_heads", 1, MAX_DIM, 32)
    k_heads = f.int("linear_num_key_heads", 1, MAX_DIM, 16)
    if v_heads % k_heads:
        raise ConfigError(f.name("linear_num_key_heads"), f"must divide linear_num_value_heads={v_heads}")
    mixer = StateMixer(
        "gated_deltanet", f.int("linear_conv_kernel_dim", 1, 1024, 4), heads=v_heads, k_heads=k_heads,
        head_dim=f.int("linear_value_head_dim", 1, MAX_DIM, 128), k_head_dim=f.int("linear_key_head_dim", 1, MAX_DIM,
        128), attn_gate=True, shared_d_ff=shared, shared_gate=bool(shared), ssm_dtype=_ssm_dtype(f, "mamba_ssm_dtype"),
    )  # fmt: skip
    return kw, kinds, mixer


NEMOTRON_PATTERN = {"M": "state", "*": "full", "-": "ffn", "E": "ffn"}
NEMOTRON_TYPES = {"mamba": "M", "linear_attention": "M", "attention": "*", "full_attention": "*", "mlp": "-",
                  "moe": "E"}  # fmt: skip


def _with(f: Fields, **derived) -> Fields:
    """The same reader over the object with derived keys added (a count the file implies, not gives)."""
    out = Fields(f.data | derived, f.model_type, f.prefix)
    out.read, out.defaults, out.required = f.read, f.defaults, f.required
    out.defaults.extend(f"{k} = {v:,} (absent: the layer list's length)" for k, v in derived.items())
    return out


def _nemotron_h(f: Fields, notes: list) -> tuple[dict, list[str], StateMixer]:
    """Nemotron-H: each layer one RMSNorm and one sublayer (Mamba2, attention, a ReLU² MLP, or MoE). transformers
    5 writes no num_hidden_layers (the layer list's length is the count): then the pattern's length is."""
    if not f.has("num_hidden_layers"):
        given = f.data.get("hybrid_override_pattern", f.data.get("layers_block_type", f.data.get("layer_types")))
        if isinstance(given, str | list) and 0 < len(given) <= 10_000:
            f = _with(f, num_hidden_layers=len(given))
    kw = _base(f, False) | {"ffn": "relu", "norm_placement": "pre"}
    n = kw["n_layers"]
    if f.has("attention_head_dim") and not f.has("head_dim"):
        kw["head_dim"] = f.int("attention_head_dim", 1, 100_000)
    pattern = f.data.get("hybrid_override_pattern")
    f.read.add("hybrid_override_pattern")
    if pattern is not None:
        if not isinstance(pattern, str) or len(pattern) != n or set(pattern) - set(NEMOTRON_PATTERN):
            got = f"{len(pattern):,} characters" if isinstance(pattern, str) else "not a string"
            raise ConfigError(f.name("hybrid_override_pattern"), f"must be {n:,} characters (one per layer) of M, *, "
                                                                 f"- and E, got {got}")  # fmt: skip
        letters = pattern
    else:
        key = "layers_block_type" if f.has("layers_block_type") else "layer_types"
        letters = "".join(_types(f, key, n, NEMOTRON_TYPES) or [])
        if not letters:
            needs = ", ".join(f.required)
            why = f"missing; model_type nemotron_h needs {needs} (or layers_block_type: each layer's sublayer)"
            raise ConfigError(f.name("hybrid_override_pattern"), why)
    kinds = [NEMOTRON_PATTERN[c] for c in letters]
    kw["d_ff"] = f.int("intermediate_size", 1, 10_000_000)
    mlp_bias = f.flag("mlp_bias", False)
    if mlp_bias:
        raise ConfigError(f.name("mlp_bias"), "biases on the MLP are not modelled for Nemotron-H; got true")
    shared = 0
    if "E" in letters:
        e = f.int("n_routed_experts", 1, 1_000_000)
        shared = f.int("moe_shared_expert_intermediate_size", 0, 10_000_000, 0)
        kw |= dict(n_experts=e, experts_per_token=f.int("num_experts_per_tok", 1, e),
                   moe_d_ff=f.int("moe_intermediate_size", 1, 10_000_000),
                   n_shared_experts=f.int("n_shared_experts", 0, 1_000, 1) if shared else 0,
                   n_dense_layers=letters.count("-"))  # fmt: skip
        if "-" in letters:
            notes.append("MLP and MoE layers are counted by kind (their order changes no count)")
    heads = f.int("mamba_num_heads", 1, MAX_DIM, 128)
    head_dim = f.int("mamba_head_dim", 1, MAX_DIM, 64)
    inner = _width(f, "mamba_head_dim", heads * head_dim, "mamba_num_heads × mamba_head_dim")
    mixer = StateMixer(
        "mamba2", f.int("conv_kernel", 1, 1024, 4), heads=heads, head_dim=head_dim, inner=inner,
        state_size=f.int("ssm_state_size", 1, MAX_DIM, 128), n_groups=f.int("n_groups", 1, MAX_DIM, 8),
        conv_bias=f.flag("use_conv_bias", True), proj_bias=f.flag("use_bias", False), one_sublayer=True,
        shared_d_ff=shared, ssm_dtype=_ssm_dtype(f, "mamba_ssm_cache_dtype"),
    )  # fmt: skip
    f.read |= {"expand", "time_step_limit", "mamba_dt_limit"}
    return kw, kinds, mixer


def _offset(f: Fields, key: str, period: int, default: int) -> int:
    """Jamba's offset within its period, given or default; transformers refuses one that is not below the period."""
    offset = f.int(key, 0, period - 1, default)
    if offset >= period:
        raise ConfigError(f.name(key), f"must be from 0 to {period - 1:,} (below its period {period:,}), got the "
                                       f"default {default}")  # fmt: skip
    return offset


def _jamba(f: Fields, notes: list) -> tuple[dict, list[str], StateMixer]:
    kw = _base(f, False) | {"d_ff": f.int("intermediate_size", 1, 10_000_000)}
    n, d = kw["n_layers"], kw["d_model"]
    period = f.int("attn_layer_period", 1, 10_000, 8)
    offset = _offset(f, "attn_layer_offset", period, 4)
    kinds = ["full" if i % period == offset else "state" for i in range(n)]
    e_period = f.int("expert_layer_period", 1, 10_000, 2)
    e_offset = _offset(f, "expert_layer_offset", e_period, 1)
    e = f.int("num_experts", 1, 1_000_000, 16)
    moe_layers = sum(i % e_period == e_offset for i in range(n)) if e > 1 else 0
    if moe_layers:
        kw |= dict(n_experts=e, experts_per_token=f.int("num_experts_per_tok", 1, e, 2), moe_d_ff=kw["d_ff"],
                   n_dense_layers=n - moe_layers)  # fmt: skip
        notes.append(f"experts in every {e_period}th layer from layer {e_offset}: {moe_layers} MoE layers and "
                     f"{n - moe_layers} dense, counted by kind (their order changes no count)")  # fmt: skip
    rank = f.data.get("mamba_dt_rank", "auto")
    f.read.add("mamba_dt_rank")
    inner = _width(f, "mamba_expand", f.int("mamba_expand", 1, 1_000, 2) * d, "× hidden_size")
    mixer = StateMixer(
        "mamba", f.int("mamba_d_conv", 1, 1024, 4), inner=inner, state_size=f.int("mamba_d_state", 1, MAX_DIM, 16),
        dt_rank=math.ceil(d / 16) if rank == "auto" else f.int("mamba_dt_rank", 1, MAX_DIM),
        conv_bias=f.flag("mamba_conv_bias", True), proj_bias=f.flag("mamba_proj_bias", False),
    )  # fmt: skip
    return kw, kinds, mixer


def _falcon_h1(f: Fields) -> tuple[dict, list[str], StateMixer]:
    """Falcon-H1: attention and a Mamba2 mixer side by side in every layer, then a SwiGLU MLP (mlp_bias)."""
    kw = _base(f, False) | {"d_ff": f.int("intermediate_size", 1, 10_000_000)}
    if f.flag("mlp_bias", False):
        kw["bias"] = "all" if kw["bias"] == "attention" else "none"
        if kw["bias"] == "none":
            raise ConfigError(f.name("mlp_bias"), "biases on the FFN without the attention's are not modelled")
    d = kw["d_model"]
    d_ssm = f.int("mamba_d_ssm", 1, MAX_DIM, None, nullable=True) or _width(
        f, "mamba_expand", f.int("mamba_expand", 1, 1_000, 2) * d, "× hidden_size"
    )
    proj = f.flag("mamba_proj_bias", False)
    if f.flag("projectors_bias", False) != proj:
        raise ConfigError(f.name("projectors_bias"), "the lab reads it equal to mamba_proj_bias (both false in the "
                                                     "released models)")  # fmt: skip
    names = dict(heads="mamba_n_heads", head_dim="mamba_d_head", state="mamba_d_state", groups="mamba_n_groups",
                 kernel="mamba_d_conv", conv_bias="mamba_conv_bias", state_default=256, heads_default=128)  # fmt: skip
    mixer = _mamba2(f, d, d_ssm, names, proj_bias=proj, gated_norm=f.flag("mamba_rms_norm", False))
    f.read |= {"time_step_limit", "mamba_expand"}
    return kw, ["parallel"] * kw["n_layers"], mixer


def _granite(f: Fields) -> tuple[dict, list[str], StateMixer]:
    """Granite 4.0 hybrids: Mamba2 or attention, then experts (input_linear gated, output_linear) beside a shared
    MLP of shared_intermediate_size; without experts (num_local_experts 0) the shared MLP is the FFN."""
    kw = _base(f, False)
    n, d = kw["n_layers"], kw["d_model"]
    names = {"mamba": "state", "linear_attention": "state", "attention": "full", "full_attention": "full"}
    kinds = _types(f, "layer_types", n, names) or _types(f, "layers_block_type", n, names) or ["state"] * n
    shared = f.int("shared_intermediate_size", 1, 10_000_000, 1024)
    e = f.int("num_local_experts", 0, 1_000_000, 8)
    if e:
        kw |= dict(n_experts=e, experts_per_token=f.int("num_experts_per_tok", 1, e, 2), n_shared_experts=1,
                   moe_d_ff=f.int("intermediate_size", 1, 10_000_000, 11008), d_ff=shared)  # fmt: skip
    else:
        kw["d_ff"] = shared
        f.read |= {"intermediate_size", "num_experts_per_tok"}
    inner = _width(f, "mamba_expand", f.int("mamba_expand", 1, 1_000, 2) * d, "× hidden_size")
    names = dict(heads="mamba_n_heads", head_dim="mamba_d_head", state="mamba_d_state", groups="mamba_n_groups",
                 kernel="mamba_d_conv", conv_bias="mamba_conv_bias", state_default=256, heads_default=128)  # fmt: skip
    mixer = _mamba2(f, d, inner, names, proj_bias=f.flag("mamba_proj_bias", False), shared_d_ff=shared if e else 0)
    f.read |= {"time_step_limit", "position_embedding_type"}
    return kw, kinds, mixer


def _lfm2(f: Fields) -> tuple[dict, list[str], StateMixer]:
    """LFM2: gated short convolutions (in_proj to 3 × hidden, a depthwise convolution of conv_L_cache, out_proj)
    and attention with q/k norms of head_dim; a SwiGLU whose width transformers' Lfm2MLP adjusts."""
    tied = f.flag("tie_embedding", True) if f.has("tie_embedding") and not f.has("tie_word_embeddings") else True
    kw = _base(f, tied) | {"qk_norm": "head"}
    n = kw["n_layers"]
    key = "block_ff_dim" if f.has("block_ff_dim") and not f.has("intermediate_size") else "intermediate_size"
    ff = f.int(key, 1, 10_000_000)
    if f.flag("block_auto_adjust_ff_dim", True):
        ff = int(2 * ff / 3)
        multiplier = f.number("block_ffn_dim_multiplier", 1.0)
        if multiplier is not None:
            if not 0 < multiplier <= 1_000:
                raise ConfigError(f.name("block_ffn_dim_multiplier"), f"must be from 0 to 1,000, got {multiplier}")
            multiple = f.int("block_multiple_of", 1, 1_000_000, 256)
            ff = multiple * -(-int(multiplier * ff) // multiple)
    kw["d_ff"] = max(ff, 1)
    kinds = _types(f, "layer_types", n, {"conv": "state", "full_attention": "full"})
    if kinds is None:
        idxs = f.data.get("full_attn_idxs")
        f.read.add("full_attn_idxs")
        if idxs is None:
            kinds = ["full"] * n
        elif not isinstance(idxs, list) or any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n
                                               for i in idxs):  # fmt: skip
            raise ConfigError(f.name("full_attn_idxs"), f"must be a list of layer indices from 0 to {n - 1:,}")
        else:
            full = set(idxs)
            kinds = ["full" if i in full else "state" for i in range(n)]
    bias = f.flag("conv_bias", False)
    mixer = StateMixer("short_conv", f.int("conv_L_cache", 1, 1024, 3), inner=kw["d_model"], conv_bias=bias,
                       proj_bias=bias)  # fmt: skip
    return kw, kinds, mixer


def _dense_first(f: Fields, n: int) -> int:
    """Kimi Linear's dense layers: mlp_layer_types when the file has it (transformers reads it first; the lab reads
    dense layers first only), else first_k_dense_replace."""
    types = f.strings("mlp_layer_types", ("dense", "sparse"), n)
    if types is None:
        return f.int("first_k_dense_replace", 0, n, 1)
    dense = types.count("dense")
    if types[:dense] != ["dense"] * dense:
        raise ConfigError(f.name("mlp_layer_types"), "the lab reads dense layers first, then sparse ones, only")
    f.read.add("first_k_dense_replace")  # mlp_layer_types says it
    return dense


def _kimi(f: Fields, notes: list) -> tuple[dict, list[str], StateMixer]:
    """Kimi Linear: Kimi Delta Attention layers and latent attention (MLA) layers; DeepSeek-style experts with
    shared ones and dense first layers."""
    kw = _base(f, False)
    n = kw["n_layers"]
    kw |= dict(
        kv_lora_rank=f.int("kv_lora_rank", 1, MAX_DIM),
        head_dim=f.int("qk_nope_head_dim", 1, 100_000, 128),
        q_lora_rank=f.int("q_lora_rank", 1, MAX_DIM, None, nullable=True) or 0,
        rope_head_dim=f.int("qk_rope_head_dim", 0, 100_000, 64),
        v_head_dim=f.int("v_head_dim", 1, 100_000, 128),
        d_ff=f.int("intermediate_size", 1, 10_000_000),
    )
    linear = f.object("linear_attn_config") or {}
    sub = Fields(linear, "kimi_linear", f.name("linear_attn_config."))
    kinds = _types(f, "layer_types", n, {"linear_attention": "state", "full_attention": "full"})
    if kinds is None and "full_attn_layers" in linear:
        full, kda = linear.get("full_attn_layers"), linear.get("kda_layers", [])
        sub.read |= {"full_attn_layers", "kda_layers"}
        ok = all(isinstance(x, list) and all(isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= n
                                             for i in x) for x in (full, kda))  # fmt: skip
        if not ok or sorted(full + kda) != list(range(1, n + 1)):
            raise ConfigError(sub.name("full_attn_layers"), f"with kda_layers must name each layer 1 to {n:,} once")
        numbers = set(full)  # 1-indexed
        kinds = ["full" if i + 1 in numbers else "state" for i in range(n)]
    kinds = kinds or ["full" if i and i % 4 == 0 else "state" for i in range(n)]
    e = f.int("num_experts", 1, 1_000_000)
    kw |= dict(n_experts=e, experts_per_token=f.int("num_experts_per_token", 1, e, 8) if f.has(
                   "num_experts_per_token") else f.int("num_experts_per_tok", 1, e, 8),
               moe_d_ff=f.int("moe_intermediate_size", 1, 10_000_000),
               n_shared_experts=f.int("num_shared_experts", 0, 1_000, 1),
               n_dense_layers=_dense_first(f, n))  # fmt: skip
    freq = f.int("moe_layer_freq", 1, 10_000, 1)
    if freq != 1:
        raise ConfigError(f.name("moe_layer_freq"), f"the lab reads 1 (every layer after the dense ones), got {freq}")
    heads = sub.int("num_heads", 1, MAX_DIM, f.int("linear_num_heads", 1, MAX_DIM, 32))
    head_dim = sub.int("head_dim", 1, MAX_DIM, f.int("linear_head_dim", 1, MAX_DIM, 128))
    mixer = StateMixer("kda", sub.int("short_conv_kernel_size", 1, 1024, f.int("linear_conv_kernel_dim", 1, 1024, 4)),
                       heads=heads, head_dim=head_dim)  # fmt: skip
    if sub.ignored():
        notes.append(f"linear_attn_config keys not read: {', '.join(sub.ignored()[:10])}")
    return kw | {"bias": "none"}, kinds, mixer


_MAMBA2 = {"heads": "mamba_n_heads", "head_dim": "mamba_d_head", "state_size": "mamba_d_state",
           "n_groups": "mamba_n_groups", "conv_kernel": "mamba_d_conv"}  # fmt: skip
MIXER_KEYS = {  # a StateMixer field -> the config key a refusal of it names, per family
    "qwen": {"heads": "linear_num_value_heads", "head_dim": "linear_value_head_dim", "k_heads": "linear_num_key_heads",
             "k_head_dim": "linear_key_head_dim", "conv_kernel": "linear_conv_kernel_dim",
             "shared_d_ff": "shared_expert_intermediate_size"},
    "nemotron_h": {"heads": "mamba_num_heads", "head_dim": "mamba_head_dim", "inner": "mamba_num_heads",
                   "state_size": "ssm_state_size", "shared_d_ff": "moe_shared_expert_intermediate_size"},
    "jamba": {"inner": "mamba_expand", "state_size": "mamba_d_state", "dt_rank": "mamba_dt_rank",
              "conv_kernel": "mamba_d_conv"},
    "falcon_h1": _MAMBA2 | {"inner": "mamba_d_ssm"},
    "granitemoehybrid": _MAMBA2 | {"inner": "mamba_expand", "shared_d_ff": "shared_intermediate_size"},
    "lfm2": {"inner": "hidden_size", "conv_kernel": "conv_L_cache"},
    "kimi_linear": {"heads": "linear_attn_config.num_heads", "head_dim": "linear_attn_config.head_dim"},
}  # fmt: skip


def read_hybrid(f: Fields, mt: str, notes: list) -> tuple[dict, list[str]]:
    """(Decoder keyword arguments with layer_kinds and mixer, per-layer kinds) of a hybrid model_type; a mixer's
    width out of range is refused naming the config key it came from."""
    f.required = NEEDS[mt]
    try:
        return _read_hybrid(f, mt, notes)
    except ConfigError as e:
        keys = MIXER_KEYS["qwen" if mt.startswith("qwen") else mt]
        if e.field in keys or e.field in ("inner", "heads", "head_dim", "state_size", "n_groups", "shared_d_ff"):
            raise ConfigError(f.name(keys.get(e.field, e.field)), e.message) from None
        raise


def _read_hybrid(f: Fields, mt: str, notes: list) -> tuple[dict, list[str]]:
    if mt in ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"):
        kw, kinds, mixer = _qwen(f, mt, notes)
    elif mt == "nemotron_h":
        kw, kinds, mixer = _nemotron_h(f, notes)
    elif mt == "jamba":
        kw, kinds, mixer = _jamba(f, notes)
    elif mt == "falcon_h1":
        kw, kinds, mixer = _falcon_h1(f)
    elif mt == "granitemoehybrid":
        kw, kinds, mixer = _granite(f)
    elif mt == "lfm2":
        kw, kinds, mixer = _lfm2(f)
    else:
        kw, kinds, mixer = _kimi(f, notes)
    if not any(k in ("state", "parallel") for k in kinds):
        mixer = None  # every layer attention (a Granite 4.0 dense model): no state
    return kw | dict(layer_kinds=tuple(kinds), mixer=mixer), kinds
