"""The KV-cache page's model: its cache geometry as URL-mirrored widgets (switches for a window and a latent cache,
never a magic 0), the presets' and a config.json's values for them, and for a model read from a file the rest of
its fields (ui.model_form), so its weights and the engine's activation peak follow the file."""

from __future__ import annotations

import streamlit as st

from attncore import ConfigError
from serving import kvcache as kv
from serving import parameters as calc
from serving.presets import PRESETS
from ui import model_form, weights_form
from ui.config_input import FILE, checkpoint_total, read_model, show_read
from ui.params import show_invalid, url_number, url_toggle

CUSTOM = "custom"  # keeps the geometry as it is; a fresh URL starts it from the lab's model
NAMES = {CUSTOM: CUSTOM, FILE: "from config.json"}
GEOMETRY = {"n_layers": ("Layers", None), "n_heads": ("Query heads", None), "kv_heads": ("KV heads", "1: MQA")}
GEOMETRY |= {"head_dim": ("Head dim", None)}
# features a model may not have: a switch, then its sizes (field: label, smallest, largest), never a magic 0
OPTIONAL = {
    "window_on": ("Sliding window", {"window": ("Window (tokens)", 1, 10**7),
                                     "window_layers": ("Layers with it", 0, 10_000)}),
    "mla_on": ("Latent cache (MLA)", {"kv_lora_rank": ("MLA latent rank", 1, 10**7),
                                      "rope_head_dim": ("MLA RoPE dims", 0, 10**7)}),
}  # fmt: skip
SHOWN_WHEN_OFF = {"window": 4096, "kv_lora_rank": 512, "rope_head_dim": 64}  # the inputs' values while switched off
KEYS = {"window_layers": "kv_e_wlayers"}  # its key from when only the engine's fit had it, so old links still work
# the model's fields beyond the cache geometry, for a model read from a config.json (its weights, activation peak)
REST = ["d_model", "d_ff", "vocab_size", "ffn", "bias", "norm", "position", "max_len", "tied_embeddings", "final_norm"]
REST += ["head_bias", "norm_placement", "qk_norm", "q_lora_rank", "v_head_dim", "n_experts", "moe_d_ff"]
REST += ["experts_per_token", "n_shared_experts", "n_dense_layers", "router_bias", "attention_sinks", "window_kind"]


def kinds_rows(cache: kv.KVCache) -> list[dict]:
    """A hybrid's cache by layer kind, for a table: each kind's layers, the bytes one sequence keeps (per token for
    attention, per sequence for state, with the state's dtypes) and the total at the workload's batch and context."""
    rows = []
    for row in cache.by_kind():
        if row["kind"] == "state":
            kind, each = f"state ({row['mixer']})", f"{row['bytes_per_sequence']:,} B a sequence"
            each += f" ({' + '.join(row['dtypes'])})"
        else:
            kind, each = row["kind"], f"{row['bytes_per_token']:,} B a token (keys and values)"
        rows.append(
            {
                "layer kind": kind,
                "layers": row["layers"],
                "one sequence": each,
                f"total at batch {cache.batch:,}, context {cache.context:,}": kv.human_bytes(row["bytes"]),
            }
        )
    return rows  # fmt: skip


def limit_of(preset: str):
    """The derived maximum of the model read from a config.json in this session (None: another model, or opened from
    a link, which carries the fields, not the file)."""
    model = read_model("kv_") if preset == FILE else None
    return model.limit if model is not None else None


def widget_key(f: str) -> str:
    return KEYS.get(f, f"kv_{f}")


def geometry_of(a: calc.Decoder) -> dict:
    """A model's geometry as the page's widgets hold it: switches on/off, every size a number."""
    g = kv.cache_geometry(a)
    on = {"window_on": g["window"] is not None, "mla_on": g["kv_lora_rank"] > 0}
    sizes = {f: g[f] or SHOWN_WHEN_OFF[f] for f in SHOWN_WHEN_OFF}
    sizes["window_layers"] = a.n_layers if g["window_layers"] is None else g["window_layers"]
    return g | sizes | on


def preset_geometry(name: str) -> dict:
    return geometry_of(PRESETS[name].arch if name in PRESETS else PRESETS["attncore"].arch)


FIELDS = [*GEOMETRY, *OPTIONAL, *(f for _, sizes in OPTIONAL.values() for f in sizes)]


def load_preset() -> None:
    """Fill the geometry from the chosen preset; 'custom' and a config.json keep it as it is (so the URL keeps it)."""
    name = st.session_state["kv_preset"]
    if name in PRESETS:
        st.session_state.update({widget_key(f): v for f, v in preset_geometry(name).items() if f in FIELDS})
        st.session_state.update(weights_form.fields_state("kv_", PRESETS[name].weights))


def from_file(model) -> dict:
    """The session state that shows a config.json's model: its geometry, the rest of its fields, its storage."""
    geometry = {widget_key(f): v for f, v in geometry_of(model.arch).items() if f in FIELDS}
    for _, sizes in OPTIONAL.values():
        for size, (_label, low, high) in sizes.items():
            value = geometry[widget_key(size)]
            if not low <= value <= high:
                raise ConfigError(size, f"{value:,} is beyond this page's field ({low} to {high:,})")
    state = geometry | model_form.form_state("kv_a_", model.arch, REST)
    state |= weights_form.fields_state("kv_", model.weights)
    state |= {"kv_wdtype": model.serving_dtype, "kv_dtype": model.serving_dtype}  # vLLM's dtype auto, and its cache
    return state | {"kv_preset": FILE}


def hybrid_of(preset: str) -> calc.Decoder | None:
    """The hybrid model (attention beside state layers) the page shows, a preset's or this session's config.json's;
    None for any other model."""
    model = PRESETS[preset].model if preset in PRESETS else read_model("kv_") if preset == FILE else None
    return model.arch if model is not None and model.arch.mixer is not None else None


HYBRID_KEYS = ("n_layers", "window", "window_layers", "state_layers", "mixer")  # what its layer pattern fixes


def inputs(preset: str) -> tuple[dict, int | None, calc.Decoder | None]:
    """(the cache geometry, the weights' parameters typed for a custom model, the model: a preset's, a config.json's
    fields, or None for bare geometry); a model whose fields the Decoder refuses stops the page with its message. A
    hybrid's layers follow its pattern: its attention and state layers are counted from it, not typed."""
    default, geometry, hybrid = preset_geometry(preset), {}, hybrid_of(preset)
    with st.container(border=True):
        for col, (f, (label, hint)) in zip(st.columns(len(GEOMETRY)), GEOMETRY.items(), strict=True):
            with col:
                fixed = hybrid is not None and f == "n_layers"
                hint = "a hybrid's attention layers, from its layer pattern" if fixed else hint
                geometry[f] = url_number(label, f"kv_{f}", default[f], 0, 10**7, help=hint, disabled=fixed)
        for col, (switch, (label, sizes)) in zip(st.columns(len(OPTIONAL)), OPTIONAL.items(), strict=True):
            with col:
                on = url_toggle(label, f"kv_{switch}", default[switch])
                for f, (size_label, low, high), size_col in zip(
                    sizes, sizes.values(), st.columns(len(sizes)), strict=True
                ):
                    with size_col:
                        value = url_number(size_label, widget_key(f), default[f], low, high, disabled=not on)
                    geometry[f] = value if on else None
        if preset == CUSTOM and url_toggle("Count the weights", "kv_weights_on", False):
            params = url_number("Weights (parameters)", "kv_weights", 10**9, 1, 10**13)
        else:
            params = None
    geometry["kv_lora_rank"], geometry["rope_head_dim"] = geometry["kv_lora_rank"] or 0, geometry["rope_head_dim"] or 0
    if hybrid is not None:
        geometry |= {k: v for k, v in kv.cache_geometry(hybrid).items() if k in HYBRID_KEYS}
    base = PRESETS[preset].arch if preset in PRESETS else None
    if preset == FILE:
        rest_default = calc.form_values(PRESETS["attncore"].arch)
        with st.expander("The rest of the model (its weights and the engine's activation peak need them)"):
            rest = model_form.inputs("kv_a_", REST, rest_default)
            st.caption(model_form.TOGGLES_SAID)
        try:
            start = hybrid if hybrid is not None else PRESETS["attncore"].arch  # a hybrid keeps its layer pattern
            base = calc.with_form_values(start, rest, **kv.geometry_fields(geometry))
        except ConfigError as e:
            show_invalid(e, "model")
            st.stop()
        model = read_model("kv_")
        show_read("kv_", model is not None and model.arch.resolved() != base.resolved(), base.describe())
        params = params or checkpoint_total("kv_", model)
    return geometry, params, base
