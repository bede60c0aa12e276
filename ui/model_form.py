"""A Decoder's fields as URL-mirrored widgets (the Parameters page's form, and the KV page's model read from a
config.json), and filling them from a Decoder: one widget per field under a page's key prefix, a toggle for a flag,
a select for a choice or a derived field, else a whole number."""

from __future__ import annotations

from collections.abc import Iterable

import streamlit as st

from attncore import ConfigError
from serving import parameters as calc
from ui.params import url_number, url_select, url_toggle

LABELS = {
    "d_model": "Width d_model", "n_layers": "Layers", "n_heads": "Query heads", "n_kv_heads": "KV heads",
    "head_dim": "Head dim", "d_ff": "FFN width", "ffn": "FFN kind", "bias": "Biases", "norm": "Norm",
    "vocab_size": "Vocabulary", "position": "Positions", "max_len": "Learned positions",
    "tied_embeddings": "Tied embeddings", "final_norm": "Final norm", "head_bias": "Output-head bias",
    "norm_placement": "Norm placement", "qk_norm": "Q/K norms",
    "kv_lora_rank": "MLA latent rank", "q_lora_rank": "MLA query rank", "rope_head_dim": "MLA RoPE dim",
    "v_head_dim": "MLA value dim", "n_experts": "Routed experts", "moe_d_ff": "Expert width",
    "experts_per_token": "Experts per token", "n_shared_experts": "Shared experts", "n_dense_layers": "Dense layers",
    "attention_sinks": "Attention sinks", "router_bias": "Router bias",
    "sliding_window": "Sliding window", "full_layers": "Full-attention layers", "window_kind": "Window kind",
}  # fmt: skip
HELP = {
    "norm_placement": "pre: before each sublayer (GPT-2, Llama); post: after it (OLMo 2); sandwich: both (Gemma 2/3); "
    "parallel: one norm feeding attention and FFN side by side (Falcon 7B)",
    "qk_norm": "head: one norm of head_dim for queries and one for keys (Qwen3, Gemma 3); projection: over all heads "
    "(OLMo 2)",
    "sliding_window": "The keys a windowed layer attends to (Mistral 7B v0.1, Gemma 2: 4,096); 0: no window, every "
    "layer full. It changes no count, only the attention pattern and the KV cache.",
    "full_layers": "With a window, the layers that still attend to every token (Gemma 2: half of them; Mistral: 0)",
    "window_kind": "sliding: the last window's keys (Mistral, Gemma); chunked: the keys of the layer's own chunk of "
    "window tokens (Llama 4). The same cache: at most the window's tokens.",
}
TOGGLES_SAID = (
    "Attention sinks: a learned logit per query head and layer (GPT-OSS). Router bias: a bias per routed "
    "expert (GPT-OSS; DeepSeek-V3's score correction)."
)
# fields whose 0 means "derived": offered as a named choice, not a magic zero (the Decoder stores None)
DERIVED = {"n_kv_heads": ("= query heads", 256), "head_dim": ("d ÷ heads", 1024)}  # fits its select
DERIVED |= {"v_head_dim": ("= head dim", 1024)}
TOP = 10**8  # a whole-number field's top; the Decoder refuses a bad value with its own range


def field(prefix: str, f: str, d, peek: bool = False):
    """One URL-mirrored widget for Decoder field f, started at d."""
    label, key, tip = LABELS[f], f"{prefix}{f}", HELP.get(f)
    if isinstance(d, bool):  # no help icon: a toggle's label has a narrow column to itself (HELP says it elsewhere)
        return url_toggle(label, key, d, peek=peek)
    if f in calc.CHOICES:
        return url_select(label, key, calc.CHOICES[f], d, peek=peek, help=tip)
    if f in DERIVED:
        named, top = DERIVED[f]
        shown = lambda v: named if v == 0 else f"{v:,}"  # noqa: E731
        return url_select(label, key, range(top + 1), d, format_func=shown, peek=peek)
    return url_number(label, key, d, 0, TOP, peek=peek, help=tip)


def inputs(prefix: str, fields: Iterable[str], default: dict, n_cols: int = 5) -> dict:
    """The fields' widgets in n_cols columns; returns field -> value."""
    fields = list(fields)
    cols, out = st.columns(n_cols), {}
    for i, f in enumerate(fields):
        with cols[i % n_cols]:
            out[f] = field(prefix, f, default[f])
    return out


def peeked(prefix: str, fields: Iterable[str], default: dict) -> dict:
    """The values the fields' widgets will show, before they are drawn."""
    return {f: field(prefix, f, default[f], peek=True) for f in fields}


def form_state(prefix: str, a: calc.Decoder, fields: Iterable[str]) -> dict:
    """Session-state values that show Decoder `a` in these fields' widgets; ConfigError naming a field whose value
    the page's widget cannot hold (the command line has no such limit)."""
    values = calc.form_values(a)
    out = {}
    for f in fields:
        value = values[f]
        top = DERIVED[f][1] if f in DERIVED else None if isinstance(value, bool | str) else TOP
        if top is not None and value > top:
            raise ConfigError(f, f"{value:,} is beyond this page's field (0 to {top:,}); use the command line")
        out[f"{prefix}{f}"] = value
    return out
