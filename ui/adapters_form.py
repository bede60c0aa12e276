"""The engine fit's settings beyond the model, as URL-mirrored widgets in one expander: LoRA adapters
(serving.lora), a drafter for speculative decoding (serving.speculative) and the CUDA-graph profiling of vLLM 0.21
on (serving.cuda_graphs). `choices` draws them; `settings` builds the EngineSettings fields (ConfigError on a bad
mix, which the page shows in one line)."""

from __future__ import annotations

import streamlit as st

from serving import lora, speculative
from serving.presets import PRESETS
from ui.params import url_multiselect, url_number, url_select, url_toggle

NONE = "none"
DRAFT_DEFAULT = "llama-3.2-1b"
LORA, SPEC, GRAPHS = "LoRA adapters (--enable-lora)", "Speculative decoding", "CUDA-graph profiling (0.21 on)"


def choices(graphs_default: bool = False) -> dict:
    """The widgets' values (plain numbers and names; nothing built yet). graphs_default: whether the release the
    page fits as profiles CUDA graphs by default (serving.cuda_graphs.profiles), as the command line does."""
    opened = url_toggle(LORA, "kv_e_lora", False, peek=True)
    opened = opened or url_toggle(GRAPHS, "kv_e_graphs", graphs_default, peek=True) != graphs_default
    opened = opened or url_select(SPEC, "kv_e_spec", [NONE, *speculative.METHODS], NONE, peek=True) != NONE
    with st.expander("LoRA adapters, speculative decoding, CUDA graphs", expanded=opened):
        cols = st.columns(3)
        with cols[0]:
            use = url_toggle(LORA, "kv_e_lora", False)
            out = dict(lora=use, max_loras=url_number("max_loras", "kv_e_loras", 1, 1, 4096, disabled=not use))
            out["rank"] = url_select("max_lora_rank", "kv_e_rank", list(lora.MAX_LORA_RANKS), 16, disabled=not use)
            out["targets"] = url_multiselect("lora_target_modules (none: every linear layer)", "kv_e_targets",
                                             list(lora.MODULES), (), disabled=not use)  # fmt: skip
        with cols[1]:
            method = url_select(SPEC, "kv_e_spec", [NONE, *speculative.METHODS], NONE,
                                help="draft: a second model; eagle, eagle3: a head of the target's widths; mtp: the "
                                "model's own multi-token-prediction layers")  # fmt: skip
            out["method"] = method
            out["tokens"] = url_number("num_speculative_tokens", "kv_e_spec_k", 1, 1, speculative.MAX_TOKENS,
                                       disabled=method == NONE)  # fmt: skip
            out["draft"] = url_select("Draft model", "kv_e_draft", list(PRESETS), DRAFT_DEFAULT,
                                      disabled=method != "draft")  # fmt: skip
            out["mtp"] = url_number("MTP layers (num_nextn_predict_layers)", "kv_e_mtp", 1, 1, 100,
                                    disabled=method != "mtp")  # fmt: skip
        with cols[2]:
            graphs = url_toggle(
                GRAPHS,
                "kv_e_graphs",
                graphs_default,
                help="Releases from 0.21 subtract a CUDA-graph estimate before sizing the cache",
            )
            logged = url_toggle("Its estimate from my log", "kv_e_graph_on", False, disabled=not graphs)
            gib = url_number("Estimated CUDA graph memory (GiB)", "kv_e_graph_gib", 0.0, 0.0, 1e5, fmt="%.2f",
                             disabled=not (graphs and logged))  # fmt: skip
            out |= dict(graphs=graphs, graph_gib=gib if graphs and logged else None)
    return out


def settings(c: dict) -> dict:
    """EngineSettings' lora, speculative, cuda_graph_profiling and cuda_graph_gib from `choices`."""
    lora_settings = None
    if c["lora"]:
        lora_settings = lora.LoraSettings(c["max_loras"], c["rank"], tuple(c["targets"]))
    spec = None
    if c["method"] != NONE:
        draft = PRESETS[c["draft"]].arch if c["method"] == "draft" else None
        spec = speculative.Speculative(c["method"], c["tokens"], draft, c["mtp"] if c["method"] == "mtp" else 0)
    return dict(lora=lora_settings, speculative=spec, cuda_graph_profiling=c["graphs"], cuda_graph_gib=c["graph_gib"])


def caption(extras: dict | None) -> str | None:
    """What the extras' notes say, in one line (None without any)."""
    notes = list((extras or {}).get("notes", ()))
    return "Note: " + "; ".join(notes) + "." if notes else None
