"""Parameters: the parameter count of a decoder, a real model's or this lab's own, component by component."""

import streamlit as st

from attncore import ConfigError
from attncore.serving import parameters as calc
from attncore.serving.presets import PRESETS
from lab import formats
from ui import docs
from ui.charts import calculators as cc
from ui.params import folded, show_invalid, url_number, url_select, url_toggle

CUSTOM = "custom"  # keeps the fields as they are; a fresh URL starts it from the lab's model
MAIN = {"d_model": "Width d_model", "n_layers": "Layers", "n_heads": "Query heads", "n_kv_heads": "KV heads"}
MAIN |= {"head_dim": "Head dim", "d_ff": "FFN width", "ffn": "FFN kind", "bias": "Biases"}
MAIN |= {"norm": "Norm", "vocab_size": "Vocabulary", "position": "Positions", "max_len": "Learned positions"}
MAIN |= {"tied_embeddings": "Tied embeddings", "final_norm": "Final norm", "head_bias": "Output-head bias"}
MORE = {"kv_lora_rank": "MLA latent rank", "q_lora_rank": "MLA query rank", "rope_head_dim": "MLA RoPE dim"}
MORE |= {"v_head_dim": "MLA value dim", "n_experts": "Routed experts", "moe_d_ff": "Expert width"}
MORE |= {
    "experts_per_token": "Experts per token",
    "n_shared_experts": "Shared experts",
    "n_dense_layers": "Dense layers",
}
# fields whose 0 means "derived": offered as a named choice, not a magic zero (the Decoder still stores 0)
DERIVED = {"n_kv_heads": ("= query heads", 256), "head_dim": ("d ÷ heads", 1024)}  # fits its select
DERIVED |= {"v_head_dim": ("= head dim", 1024)}
LIVE_LIMIT = 20_000_000  # parameters instantiated for the live cross-check


def load_preset() -> None:
    """Fill every field from the chosen preset; 'custom' sets them again as they are, so the URL keeps them."""
    name, keys = st.session_state["par_preset"], {f"par_{f}": f for f in MAIN | MORE}
    values = (
        {f: st.session_state[k] for k, f in keys.items()} if name == CUSTOM else calc.form_values(PRESETS[name].arch)
    )
    st.session_state.update({k: values[f] for k, f in keys.items()})


def field(f: str, label: str, d, peek: bool = False):
    """One URL-mirrored widget per Decoder field: a toggle for a flag, a select for a choice, else a whole number."""
    if isinstance(d, bool):
        return url_toggle(label, f"par_{f}", d, peek=peek)
    if f in calc.CHOICES:
        return url_select(label, f"par_{f}", calc.CHOICES[f], d, peek=peek)
    if f in DERIVED:
        named, top = DERIVED[f]
        shown = lambda v: named if v == 0 else f"{v:,}"  # noqa: E731
        return url_select(label, f"par_{f}", range(top + 1), d, format_func=shown, peek=peek)
    return url_number(label, f"par_{f}", d, 0, 10**8, peek=peek)  # the Decoder rejects a bad 0, with a message


def inputs(labels: dict, default: dict, n_cols: int = 5) -> dict:
    cols, out = st.columns(n_cols), {}
    for i, (f, label) in enumerate(labels.items()):
        with cols[i % n_cols]:
            out[f] = field(f, label, default[f])
    return out


st.title("Parameters")
st.caption(
    "Every trained tensor of a decoder-only transformer, counted. Presets land exactly on their published "
    "totals (✓); change any field to see where the parameters go: mostly the FFN, and the embeddings "
    "when the vocabulary is large for the width."
)
docs.link("parameter-count", "Where 12d² + 13d per block comes from")
left, right = st.columns([1, 2], vertical_alignment="bottom")
with left:
    preset = url_select("Preset", "par_preset", [CUSTOM, *PRESETS], "gpt2", on_change=load_preset)
base = PRESETS["attncore"].arch if preset == CUSTOM else PRESETS[preset].arch
right.caption("Fields start from the lab's model." if preset == CUSTOM else f"**Source:** {PRESETS[preset].source}.")
default = calc.form_values(base)
with st.container(border=True):
    values = inputs(MAIN, default)
more = {f: field(f, label, default[f], peek=True) for f, label in MORE.items()}
with folded("Latent attention (MLA) and mixture of experts (MoE): a rank or count of 0 means none", "par_more",
            lambda: calc.with_form_values(base, values | more), MORE):  # fmt: skip
    values |= inputs(MORE, default)
try:
    arch = calc.with_form_values(base, values)
except ConfigError as e:
    show_invalid(e, "architecture")
    st.stop()

count = calc.count_parameters(arch)
published = None if preset == CUSTOM else PRESETS[preset].published
for col, metric in zip(st.columns([5, 5, 3, 3]), cc.count_metrics(count, published, preset, arch != base), strict=True):
    col.metric(*metric, delta_color="off", delta_arrow="off")
if count.active != count.total:
    st.caption(f"Mixture of experts: {count.active:,} parameters ({count.active / count.total:.0%}) used per token.")

st.subheader("Where the parameters are")
table, number = cc.breakdown_frame(count), st.column_config.NumberColumn
left, right = st.columns([2, 3])
config = {"params": number(format="localized"), "share": number("share")}  # its text: lab.formats.share
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
