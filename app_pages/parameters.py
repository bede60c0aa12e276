"""Parameters: the parameter count of a decoder, a real model's or this lab's own, component by component."""

import streamlit as st

from attncore import ConfigError
from lab import formats
from serving import parameters as calc
from serving.kvcache import DTYPES
from serving.presets import PRESETS
from serving.weights import WeightFormat, stored_weights, weights_checked
from ui import docs, model_form, tables, weights_form
from ui.charts import calculators as cc
from ui.config_input import FILE, read_checkpoint, read_model, reader, show_read
from ui.params import folded, show_invalid, url_select, write_to_url

CUSTOM = "custom"  # keeps the fields as they are; a link's fields not given are the lab's model's (as ever)
TYPED = "typed"  # a model typed by its fields: those not given a modern decoder's, as on the command line with --d
MAIN = ["d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim", "d_ff", "ffn", "bias", "norm", "vocab_size"]
MAIN += ["position", "max_len", "tied_embeddings", "final_norm", "head_bias", "norm_placement", "qk_norm"]
MORE = ["kv_lora_rank", "q_lora_rank", "rope_head_dim", "v_head_dim", "n_experts", "moe_d_ff", "experts_per_token"]
MORE += ["n_shared_experts", "n_dense_layers", "router_bias", "attention_sinks"]
MORE += ["sliding_window", "full_layers", "window_kind"]  # no count: the pattern a link carries (its sentence)
LIVE_LIMIT = calc.CROSSCHECK_LIMIT  # parameters instantiated for the live cross-check (benchmarks/parameters_page.py)
NAMES = {CUSTOM: CUSTOM, TYPED: TYPED, FILE: "from config.json"}
SHAPE = ["d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim", "d_ff", "vocab_size"]  # what typed keeps


def load_preset() -> None:
    """Fill every field from the chosen preset; 'custom' and a config.json keep them as they are (so the URL keeps
    them)."""
    name = st.session_state["par_preset"]
    if name == TYPED:  # the shape as it is, every choice a modern decoder's
        shape = {f: st.session_state[f"par_{f}"] for f in SHAPE if f"par_{f}" in st.session_state}
        try:
            typed = calc.with_form_values(calc.typed_decoder({"d_model": shape.get("d_model", 32)}), shape)
        except ConfigError:  # a shape the Decoder refuses: left as it is, and said below the fields
            return
        st.session_state.update(model_form.form_state("par_", typed, MAIN + MORE))
        write_to_url(f"par_{f}" for f in MAIN + MORE)
    if name in PRESETS:
        st.session_state.update(model_form.form_state("par_", PRESETS[name].arch, MAIN + MORE))
        st.session_state.update(weights_form.fields_state("par_", PRESETS[name].weights))


def from_file(model) -> dict:
    """The session state that shows a config.json's model: every field, its storage, the preset select on it."""
    state = model_form.form_state("par_", model.arch, MAIN + MORE) | weights_form.fields_state("par_", model.weights)
    return state | {"par_preset": FILE, "par_wdtype": model.weights.dtype}


st.title("Parameters")
st.caption(
    "Every trained tensor of a decoder-only transformer, counted. Presets land exactly on their published "
    "totals (✓); read your own model's config.json, or change any field to see where the parameters go: mostly "
    "the FFN, and the embeddings when the vocabulary is large for the width."
)
docs.link("parameter-count", "Where 12d² + 13d per block comes from")
reader("par_", from_file)
left, right = st.columns([1, 2], vertical_alignment="bottom")
with left:
    preset = url_select("Preset", "par_preset", [CUSTOM, TYPED, FILE, *PRESETS], "gpt2", on_change=load_preset,
                        format_func=lambda n: NAMES.get(n, n))  # fmt: skip
known = preset in PRESETS
base = PRESETS[preset].arch if known else PRESETS["attncore"].arch
if preset == TYPED:  # a link's fields not given: the command line's for --d, the FFN width its width's
    width, ffn = (
        model_form.field("par_", f, d, peek=True) for f, d in (("d_model", calc.TYPED_WIDTH), ("ffn", "swiglu"))
    )
    base = calc.typed_decoder({"d_model": calc.TYPED_WIDTH, "d_ff": calc.typed_d_ff(width, ffn)})
if known:
    right.caption(f"**Source:** {PRESETS[preset].source}.")
else:
    right.caption(
        {
            CUSTOM: "Fields start from the lab's model.",
            TYPED: "A model typed by its fields: those not typed are a modern decoder's (as `params --d`).",
        }.get(preset, "Fields read from a config.json.")
    )
hybrid = PRESETS[preset].model if known else read_model("par_") if preset == FILE else None
if hybrid is not None and hybrid.arch.mixer is not None:  # its layer pattern and mixers are not form fields
    base = hybrid.arch if preset == FILE else base
    st.caption(f"A hybrid model ({hybrid.arch.mixer.kind} state layers): {hybrid.pattern()}. The mixer component "
               "counts its state layers' tensors; its layers follow this pattern.")  # fmt: skip
default = calc.form_values(base)
with st.container(border=True):
    values = model_form.inputs("par_", MAIN, default)
more = model_form.peeked("par_", MORE, default)
with folded("Latent attention (MLA), mixture of experts (MoE), sinks, sliding window: 0 means none", "par_more",
            lambda: calc.with_form_values(base, values | more), MORE):  # fmt: skip
    values |= model_form.inputs("par_", MORE, default)
    st.caption(model_form.TOGGLES_SAID)
try:
    arch = calc.with_form_values(base, values)
except ConfigError as e:
    show_invalid(e, "architecture")
    st.stop()
if preset == TYPED and (said := calc.assumed(arch, {f for f in MAIN + MORE if values[f] != default[f]})):
    st.caption(f"Assumed, not typed: {', '.join(words for _, words in said)}. Change any of them in the fields "
               "above (the **attncore** preset is this lab's own model).")  # fmt: skip
if preset == FILE:
    model, now = read_model("par_"), calc.form_values(arch)
    read = calc.form_values(model.arch) if model is not None else now  # the counted fields, not the window
    changed = any(now[f] != read[f] for f in MAIN + MORE)  # the fields against the file's, not the lab's model
    show_read("par_", changed, arch.describe())

with st.expander("How the weights are stored: element type, quantisation"):
    left, right = st.columns([1, 4])
    stored_default = PRESETS[preset].weights if known else WeightFormat()
    with left:
        dtype = url_select("Element type", "par_wdtype", DTYPES, "bf16", help="of every tensor a quantisation leaves")
    if preset == FILE and model is not None and not model.dtype_stored:
        right.caption("The file has no torch_dtype: the element type is assumed, not read from the checkpoint.")
    with right:
        try:
            storage = weights_form.storage("par_", dtype, stored_default)
            stored = stored_weights(arch, storage) if storage != WeightFormat("bf16") else None
            if stored is not None:
                weights_checked(storage, arch)
        except ConfigError as e:
            show_invalid(e, "weight storage")
            stored = None

count = calc.count_parameters(arch)
published, label = (PRESETS[preset].published if known else None), NAMES.get(preset, preset)
if preset == FILE and (checkpoint := read_checkpoint("par_")) is not None:  # a model fetched by its Hub id
    published, label = checkpoint.total, "its safetensors"
metrics = cc.count_metrics(count, published, label, changed if preset == FILE else arch != base, stored)
for col, metric in zip(st.columns([5, 5, 3, 3]), metrics, strict=True):
    col.metric(*metric, delta_color="off", delta_arrow="off")
if count.active != count.total:
    st.caption(f"Mixture of experts: {count.active:,} parameters ({count.active / count.total:.0%}) used per token.")

st.subheader("Where the parameters are")
table, number = cc.breakdown_frame(count), st.column_config.NumberColumn
left, right = st.columns([2, 3])
config = {"params": tables.number_column(table["params"], format="localized"), "share": number("share")}  # its text:
# lab.formats.share; params written out as text past 64 bits (breakdown_frame)
left.dataframe(table.style.format({"share": formats.share}), hide_index=True, width="stretch", column_config=config)
right.altair_chart(cc.share_chart(table), width="stretch")
blocks = " / ".join(f"{n:,}" for n in sorted(set(count.per_layer)))
st.caption(f"Per block: {blocks}. Only a learned position table has parameters; a tied head adds none.")

st.subheader("Cross-check against an instantiated attncore model")
cfg = calc.attncore_config(arch)
if cfg is None or count.total > LIVE_LIMIT:
    st.info(
        "attncore builds ReLU FFNs, biases everywhere, LayerNorm, MHA and an untied head with a bias: choose the "
        f"**attncore** preset (or any such model up to {LIVE_LIMIT:,} parameters) to compare the formula with "
        "the arrays of a freshly initialised model.",
        icon=":material/science:",
    )
else:
    rows = calc.crosscheck_attncore(cfg)
    ok = all(r["equal"] for r in rows)
    (st.success if ok else st.error)(
        f"Formula {rows[-1]['formula']:,} {'=' if ok else '≠'} attncore.model.init_params {rows[-1]['model']:,}",
        icon=":material/science:",
    )
    counts = {c: number(format="localized") for c in ("formula", "model")}  # 27,253, with separators
    st.dataframe(cc.crosscheck_frame(rows), hide_index=True, width="stretch", column_config=counts)
