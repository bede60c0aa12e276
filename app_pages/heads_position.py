"""Heads and position: parameters independent of h, the permutation test, four encodings drawn (ALiBi, a bias on
the scores rather than a vector, is on the Length page)."""

import streamlit as st

from attncore import ConfigError
from attncore.mechanisms.demos import attention_param_counts, permutation_test, position_encodings, rope_relative_dots
from lab import formats
from ui import docs, tables
from ui.charts.base import diverging, grid_frame, heatmap
from ui.charts.position import (
    encoding_lines,
    param_chart,
    param_table,
    permutation_chart,
    permutation_frame,
    rope_offset_table,
)
from ui.figure import show_chart
from ui.params import show_invalid, url_number, url_radio

ENCODINGS = {"sinusoidal": "sinusoidal", "learned": "learned", "rope": "RoPE", "none": "none"}
NOTES = {
    "sinusoidal": "Added to the token embeddings: sin and cos waves whose wavelength grows along the dimensions.",
    "learned": "Added: a trained (T, d) table, here at its initialisation N(0, 1)·0.1; undefined past its last row.",
    "rope": "Nothing added: q and k are rotated pair by pair by an angle growing with the position (here its cos).",
    "none": "Nothing added (the ablation). A causal decoder may still infer position, since row t averages over "
    "exactly t + 1 keys: a plausible explanation of what it recovers, not tested in this lab.",
}

st.title("Heads and position")
st.caption(
    "Splitting d into h heads of size d/h costs no parameters: h does not appear in the count. Without position "
    "information attention sees what a token is, not where it sits: permuting the tokens permutes the output "
    "(equivariance). Each position encoding breaks that symmetry in its own way."
)
docs.link("multi-head-attention", "Heads, the permutation test and position encodings explained")

st.subheader("Parameters against the number of heads")
left, right = st.columns([1, 2])
with left:
    d_model = url_number("Model width d", "hp_d", 64, 2, 512, step=8)
    counts = attention_param_counts(d_model)
    st.metric(
        "Attention per block, every h", f"{counts[0]['attention_params']:,}", "4d² + 4d", "off", delta_arrow="off"
    )
    st.metric("Block with d_ff = 4d, every h", f"{counts[0]['block_params']:,}", "12d² + 13d", "off", delta_arrow="off")
show_chart(param_chart(counts), "parameters", where=right, width="stretch")
with st.expander(f"Counted from the parameter shapes, for each of the {len(counts)} h that divide d"):
    st.dataframe(param_table(counts), hide_index=True, width="stretch")

st.subheader("Permutation test")
c1, c2, c3 = st.columns(3)
with c1:
    t = url_number("Positions T", "hp_T", 8, 2, 64)
with c2:
    heads = url_number("Heads (d = 16)", "hp_heads", 4, 1, 16, help="Must divide 16 and leave an even head size.")
with c3:
    seed = url_number("Seed", "hp_seed", 0, 0, 9999, help="Seeds the weights, the tokens and the permutation.")
try:
    perm = permutation_frame(permutation_test(t, 16, heads, seed))
except ConfigError as e:
    show_invalid(e)
else:
    left, right = st.columns(2)
    show_chart(permutation_chart(perm), "permutation", where=left, width="stretch")
    deviations = {c: formats.loss for c in perm.columns[1:3]}  # one format per column: scientific below 1e-3
    right.dataframe(tables.styled(perm, deviations), hide_index=True)
    st.caption(
        "One random permutation Π of the tokens of X; positions stay where they are. Equivariance error: "
        "max |attn(ΠX) − Π attn(X)|; change: max |attn(ΠX) − attn(X)|. Without position the error is rounding "
        "(~1e-16) while the output still changes; every encoding, and the causal mask alone, makes it order 1."
    )

st.subheader("Four position encodings, drawn")
c1, c2, c3 = st.columns([2, 1, 1])
with c1:
    kind = url_radio("Encoding", "hp_enc", list(ENCODINGS), "sinusoidal", format_func=ENCODINGS.get)
with c2:
    t_enc = url_number("Positions", "hp_encT", 32, 4, 128)
with c3:
    d_enc = url_number("Width d (even)", "hp_encD", 16, 2, 64, step=2)
enc = position_encodings(t_enc, d_enc, seed)
table = enc["rope_cos"] if kind == "rope" else enc[kind]  # (T, D), or RoPE's (T, D/2) angles
axis, value = ("pair", "cos(angle)") if kind == "rope" else ("dimension", "added value")
left, right = st.columns([3, 2])
cell = (max(3, 400 // t_enc), max(8, 280 // table.shape[1]))  # about 400 x 280 pixels: the left column's width
heat = heatmap(
    grid_frame(table.T, (axis, "position"), value),
    "position",
    axis,
    value,
    scale=diverging(table),
    text_format=None,
    cell=cell,
    legend="top",  # above the map: a legend at its right ran out of the column
)
show_chart(heat, "encoding-map", where=left, width="content")
show_chart(
    encoding_lines(table, list(range(0, min(8, table.shape[1]), 2)), value),
    "encoding-lines",
    where=right,
    width="stretch",
)
st.caption(NOTES[kind])

st.subheader("RoPE: q_m · k_n depends only on m − n")
try:
    rope = rope_relative_dots(t=min(t_enc, 24), d_head=d_enc, offsets=(0, 1, 3, -2), seed=seed)
except ConfigError as e:
    show_invalid(e)
    st.stop()
m1, m2 = st.columns(2)
m1.metric("RoPE: largest spread along a diagonal m − n", f"{rope['spread']:.1e}", border=True)
m2.metric("Sinusoids added instead: the same spread", f"{rope['additive_spread']:.2f}", border=True)
left, right = st.columns(2)
for col, key, title in (
    (left, "dots", "RoPE: rot_m(q) · rot_n(k)"),
    (right, "additive", "added: (q + p_m) · (k + p_n)"),
):
    dots = grid_frame(rope[key], ("m", "n"), "dot")
    scale = diverging(rope[key])
    chart = heatmap(dots, "n", "m", "dot", scale=scale, text_format=None, cell=13, title=title, legend="top")
    show_chart(chart, f"rope-{key}", where=col, width="content")
offsets = rope_offset_table(rope["rows"])
dots_text = {c: formats.loss for c in offsets.columns[2:]}  # one format per column (was 2.4724 beside 2.204)
st.dataframe(tables.styled(offsets, dots_text), hide_index=True, width="stretch")
st.caption(
    "One query and one key placed at every pair of positions (m, n). With RoPE each diagonal m − n = const holds "
    "one value to rounding (min = max in the table): the dot product sees only the distance. Added sinusoids "
    "do not have this property."
)
