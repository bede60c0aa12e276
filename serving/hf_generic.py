"""The attention fields of a config.json whose architecture no formula here knows: enough for its KV cache (layers,
KV heads, head_dim, a sliding window and which layers have it) and the widths an engine's activation peak needs,
under the names released configs use. The parameters are then the checkpoint's own count
(safetensors_count.py), never a formula's; the ModelFile says so (counted False).
"""

from __future__ import annotations

from attncore.checks import ConfigError
from serving.context_limit import derived_limit
from serving.decoder import Decoder
from serving.hf_fields import Fields, ModelFile
from serving.hf_weights import weights

# each quantity under the names configs give it, the first one present read
NAMES = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "hidden": ("hidden_size", "n_embd", "d_model", "dim"),
    "kv_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num"),
    "ffn": ("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim"),
}
MODERN = dict(ffn="swiglu", bias="none", norm="rmsnorm", tied_embeddings=False, position="rope", max_len=0)


def _first(f: Fields, quantity: str, low: int, high: int, default=None) -> int | None:
    for key in NAMES[quantity]:
        if f.has(key):
            return f.int(key, low, high)
    if default is None:
        others = ", ".join(NAMES[quantity][1:])
        raise ConfigError(f.name(NAMES[quantity][0]), f"missing (nor {others}): an architecture without a formula "
                                                      "needs it for its KV cache")  # fmt: skip
    return default


ATTENTION_TYPES = ("full_attention", "sliding_attention", "chunked_attention")


def _attention_layers(inner: dict, mt: str, prefix: str) -> tuple[dict, list[str]]:
    """A hybrid no formula knows (layer_types naming linear_attention, mamba, conv ... layers): its attention layers
    alone, with a note; their state is not sized (hf_hybrid.py reads the hybrids it knows)."""
    types, key = inner.get("layer_types"), next((k for k in NAMES["layers"] if k in inner), None)
    if not isinstance(types, list) or key is None or len(types) != inner[key]:
        return inner, []
    if any(not isinstance(t, str) for t in types):
        return inner, []  # refused by the reader, naming the entry
    kept = [t for t in types if t in ATTENTION_TYPES]
    if len(kept) == len(types):
        return inner, []
    names = ", ".join(sorted({t if len(t) <= 24 else t[:21] + "..." for t in types if t not in ATTENTION_TYPES})[:4])
    if not kept:
        why = f"names no attention layer ({names}): no formula here sizes the state of model_type {mt}"
        raise ConfigError(prefix + "layer_types", why)
    note = (
        f"layer_types: {len(types) - len(kept):,} of {len(types):,} layers are not attention ({names}): their "
        f"state is not sized for model_type {mt}; the KV cache counts the {len(kept):,} attention layers"
    )
    return inner | {"layer_types": kept, key: len(kept)}, [note]


def read_attention(data: dict) -> ModelFile:
    """A ModelFile of the attention fields alone (its arch a modern decoder with these widths, counted False)."""
    wrapper = data.get("model_type") if isinstance(data.get("text_config"), dict) else None
    inner = data["text_config"] if wrapper is not None else data
    mt = inner.get("model_type", wrapper or data.get("model_type"))
    mt = mt if isinstance(mt, str) and len(mt) <= 40 else "unknown"
    inner, state_note = _attention_layers(inner, mt, "text_config." if wrapper else "")
    f, top = Fields(inner, mt, "text_config." if wrapper else ""), Fields(data, mt)
    f.read.add("model_type")
    notes = [f"model_type {mt}: no formula here counts its parameters; the KV cache is computed from its attention "
             "fields (layers, KV heads, head_dim, window), the parameters are the checkpoint's own count",
             *state_note]  # fmt: skip
    layers, heads = _first(f, "layers", 1, 10_000), _first(f, "heads", 1, 100_000)
    hidden = _first(f, "hidden", 1, 1_000_000)
    kv = 1 if f.has("multi_query") and f.flag("multi_query", False) else _first(f, "kv_heads", 1, heads, heads)
    if heads % kv:
        raise ConfigError(f.name("num_key_value_heads"), f"must divide the {heads} attention heads, got {kv}")
    head_dim = f.int("head_dim", 1, 100_000, None, nullable=True) if f.has("head_dim") else None
    if head_dim is None and hidden % heads:
        raise ConfigError(f.name("head_dim"), f"missing, and the {heads} heads do not divide hidden_size {hidden:,}")
    window = f.int("sliding_window", 1, 2**31, None, nullable=True) if f.has("sliding_window") else None
    if window and f.has("use_sliding_window") and not f.flag("use_sliding_window", False):
        window = None
    chunk = f.int("attention_chunk_size", 1, 2**31, None, nullable=True) if f.has("attention_chunk_size") else None
    kinds = ["sliding" if window else "full"] * layers
    types = f.strings("layer_types", ATTENTION_TYPES, layers) if (
        (window or chunk) and f.has("layer_types")) else None  # fmt: skip
    f.read.add("layer_types")
    if types is not None:
        kinds = [{"full_attention": "full", "chunked_attention": "chunked"}.get(t, "sliding") for t in types]
        if "sliding" in kinds and "chunked" in kinds:
            raise ConfigError(f.name("layer_types"), "sliding and chunked layers in one model are not modelled")
        if "chunked" in kinds:  # local attention within chunks of attention_chunk_size (Llama 4's kind)
            if chunk is None:
                raise ConfigError(f.name("attention_chunk_size"), "missing: layer_types names chunked layers")
            window = chunk
        elif "sliding" in kinds and window is None:
            raise ConfigError(f.name("sliding_window"), "missing: layer_types names sliding layers")
    elif window:
        notes.append(f"sliding_window {window:,} without layer_types: every layer assumed windowed")
    elif chunk:
        notes.append(f"attention_chunk_size {chunk:,} without layer_types: every layer assumed full (the chunked "
                     "ones are not named)")  # fmt: skip
    arch = Decoder(
        d_model=hidden, n_layers=layers, n_heads=heads, n_kv_heads=kv, head_dim=head_dim,
        vocab_size=f.int("vocab_size", 1, 100_000_000, 32_000), d_ff=_first(f, "ffn", 1, 10_000_000, 4 * hidden),
        sliding_window=window if any(k != "full" for k in kinds) else None,
        full_layers=kinds.count("full") if window else 0, window_kind="chunked" if "chunked" in kinds else "sliding",
        **MODERN,
    )  # fmt: skip
    ignored: list[str] = []
    storage, serving = weights(f, top, arch, notes, ignored)
    limit = derived_limit(inner, mt)
    longest = limit.tokens if limit else None
    stored = any(x.has(k) for x in (top, f) for k in ("torch_dtype", "dtype"))
    return ModelFile(mt, wrapper, arch, storage, serving, tuple(kinds), longest, tuple(f.defaults), tuple(notes),
                     (), limit, stored, counted=False)  # fmt: skip
