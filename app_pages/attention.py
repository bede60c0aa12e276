"""Attention: every head's weights on the probe or a typed sequence, a per-head table, and head ablation."""

import streamlit as st

from attncore.inspect import attention_maps, summary_of
from ui import docs, frames, probe, runs, sidebar, tables
from ui.charts import runs as charts
from ui.figure import show_chart
from ui.params import url_multiselect, url_select_slider

st.title("Attention")
run = sidebar.selected_run()
st.caption(sidebar.describe(run))
record = runs.require(run, "the configuration above")
words, sep = probe.words(run), probe.has_sep(run)
tokens = probe.chosen_tokens(run, record)
on_probe, steps = tokens is record.probe_tokens, run.train.steps
maps = record.probe_attention if on_probe else attention_maps(record.params, run, tokens)
st.markdown(probe.answer_line(run, record, tokens))

st.subheader("Attention weights of every layer and head")
snapshots = {s.step: s for s in record.snapshots}
step = url_select_slider(
    "Training step",
    "attn_step",
    list(snapshots),
    steps,
    format_func=str,
    disabled=not on_probe,
    help="Maps during training are stored for the probe sequence only (clear the input above to see them).",
)
step = step if on_probe else steps
shown = snapshots[step].probe_attention if on_probe else maps  # the last snapshot's maps are the final maps
show_chart(charts.attention_heatmaps(frames.attention_frame(shown, tokens, sep)), "attention-maps")
then = f" ({words.then.format(accuracy=f'{snapshots[step].sequence_accuracy:.3f}')})"
st.caption(
    f"After step {step:,} of {steps:,}{' (the final weights)' if step == steps else then}. Row: a query position, "
    f"column: a key position; each row sums to 1 over the keys it may see (later keys are masked: blank). "
    f"{words.reads} "
    "The table below is of the final weights."
)

summary = summary_of(maps, run)
heads = [(s["layer"], s["head"]) for s in summary]
zeroed = runs.single_head_ablations(record, heads)
capped = f" Only the first {len(zeroed)} of {len(heads)} heads are zeroed one by one on this server."
table = frames.heads_frame(summary, zeroed, record.eval.sequence_accuracy)
st.subheader("Per head: where it looks, and what zeroing it alone costs")
tables.show(table.drop(columns="layer"))
st.caption(
    "Most-weighted key and its offset for each answer query of this input; mean max weight over those queries; "
    f"{words.ablation} on {words.test_set} with only this head's output zeroed."
    + (capped if 0 < len(zeroed) < len(heads) else "")
)


@st.fragment
def head_ablation() -> None:
    labels = {frames.head_label(*h): h for h in heads}
    left, right = st.columns(2)
    with left:
        picked = url_multiselect("Zero these heads", "att_ablate", list(labels), [], placeholder="Pick heads to zero")
        ablated, base = runs.head_ablation(record, [labels[p] for p in picked]), record.eval
        if ablated is None:
            return
        c1, c2, c3 = st.columns(3)
        for col, label, field in ((c1, "Per-sequence", "sequence_accuracy"), (c2, "Per-token", "token_accuracy")):
            now, change = getattr(ablated, field), getattr(ablated, field) - getattr(base, field)
            neutral = round(change, 3) == 0  # no change (e.g. no head zeroed): no green arrow for +0.000
            col.metric(
                label,
                f"{now:.3f}",
                "no change" if neutral else f"{change:+.3f}",
                delta_color="off" if neutral else "normal",
                delta_arrow="off" if neutral else "auto",
            )
        c3.metric("Heads zeroed", f"{len(picked)} of {len(heads)}")
        st.caption(
            f"Accuracy on {words.test_set} with the chosen heads' outputs zeroed, measured as the Train page says; "
            "the change is against the full model."
        )
    with right:
        show_chart(charts.head_effects(table), "head-effects", width="stretch")
        st.caption("Each head zeroed alone: how sharp its weights look, beside what zeroing it costs.")


st.subheader("Head ablation: the intervention")
head_ablation()
st.info(
    "**Weights are not explanations.** A sharp map says where a head reads, not that the answer depends on it; "
    "zeroing heads and measuring the output, as above, says that.",
    icon=":material/lightbulb:",
)
st.page_link(
    "app_pages/patching.py",
    label="Patching: which heads and positions carry an input symbol",
    icon=":material/swap_horiz:",
)
st.page_link(
    "app_pages/explanations.py",
    label="Explanations: does a head's map explain the output? Shuffles, adversarial rows, other seeds",
    icon=":material/psychology_alt:",
)
docs.link("attention-maps-and-head-ablation", "Attention maps, head ablation, and what the article found")
