"""Llama 4's text model in a config.json (transformers' Llama4TextConfig and modeling_llama4.py): its attention
pattern, RoPE layers attending within chunks of attention_chunk_size tokens and NoPE layers to every token, and its
FFNs, MoE layers with routed experts and a shared one beside dense layers of intermediate_size_mlp. hf_families.py
maps the model_type llama4_text (and the llama4 wrapper's text_config) here.
"""

from __future__ import annotations

from attncore.checks import ConfigError
from serving.decoder import MAX_WINDOW
from serving.hf_fields import Fields


def chunks(f: Fields, layers: int, notes: list) -> tuple[int | None, list[str]]:
    """Llama 4's pattern: (attention_chunk_size, per-layer kinds 'chunked'/'full'). layer_types when the file has
    them, else no_rope_layers (1: a RoPE layer, chunked; 0: a NoPE layer, global; an empty list or none: every
    no_rope_layer_interval-th layer NoPE, as transformers' Llama4TextConfig derives it)."""
    chunk = f.int("attention_chunk_size", 1, MAX_WINDOW, 8192, nullable=True)
    types = f.strings("layer_types", ("full_attention", "chunked_attention"), layers)
    flags = f.data.get("no_rope_layers")
    f.read.add("no_rope_layers")
    if types is not None:
        rope = [t == "chunked_attention" for t in types]
        f.read.add("no_rope_layer_interval")
    elif flags:  # at least one entry per layer, each 0 or 1 (transformers reads the first num_hidden_layers)
        if not isinstance(flags, list) or len(flags) < layers or any(
            isinstance(x, bool | float) or x not in (0, 1) for x in flags
        ):  # fmt: skip
            raise ConfigError(f.name("no_rope_layers"), f"must be a list of at least {layers:,} entries (one per "
                              "layer), each 1 (RoPE, chunked) or 0 (NoPE, global)")  # fmt: skip
        rope = [bool(x) for x in flags[:layers]]
        f.read.add("no_rope_layer_interval")
    else:
        interval = f.int("no_rope_layer_interval", 1, 10_000, 4)
        rope = [(i + 1) % interval != 0 for i in range(layers)]
    if chunk is None:
        if any(rope):
            notes.append("attention_chunk_size null: the RoPE layers attend to every token (full attention)")
        return None, ["full"] * layers
    kinds = ["chunked" if r else "full" for r in rope]
    if "chunked" not in kinds:
        return None, kinds
    nope = kinds.count("full")
    notes.append(f"{len(kinds) - nope:,} RoPE layers attend within chunks of {chunk:,} tokens (their cache keeps at "
                 f"most {chunk:,} a sequence), {nope:,} NoPE layers to every token")  # fmt: skip
    return chunk, kinds


def llama4_experts(f: Fields, shape: dict, notes: list) -> dict:
    """Llama 4's FFNs: the MoE layers (moe_layers, else every interleave_moe_layer_step-th) with routed experts and
    one shared expert of intermediate_size; the others dense of intermediate_size_mlp."""
    layers = shape["n_layers"]
    n = f.int("num_local_experts", 1, 1_000_000)
    k = f.int("num_experts_per_tok", 1, n, 1)
    dense_d_ff = f.int("intermediate_size_mlp", 1, 10_000_000, 16384)
    listed = f.data.get("moe_layers")
    f.read.add("moe_layers")
    if listed is None:
        step = f.int("interleave_moe_layer_step", 1, 10_000, 1)
        moe = list(range(step - 1, layers, step))
    else:
        f.read.add("interleave_moe_layer_step")  # moe_layers wins, as in transformers
        if not isinstance(listed, list) or len(set(map(repr, listed))) != len(listed) or any(
            isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < layers for i in listed
        ):  # fmt: skip
            raise ConfigError(f.name("moe_layers"), f"must be a list of distinct layer indices, 0 to {layers - 1:,}")
        moe = listed
    if f.flag("use_qk_norm", True):
        notes.append("use_qk_norm: an L2 norm of the RoPE layers' queries and keys, without parameters")
    if not moe:
        return dict(d_ff=dense_d_ff)
    dense = layers - len(moe)
    if dense and moe != list(range(dense, layers)):
        notes.append(f"{len(moe):,} MoE layers interleaved with {dense:,} dense ones (intermediate_size_mlp "
                     f"{dense_d_ff:,}): counted by kind, their order changes no count")  # fmt: skip
    return dict(n_experts=n, experts_per_token=k, moe_d_ff=shape["d_ff"], n_shared_experts=1, n_dense_layers=dense,
                d_ff=dense_d_ff)  # fmt: skip
