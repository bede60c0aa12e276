"""Cost: attention's time and memory against the sequence length T, timed live on this machine (SPEC §9)."""

import os

import streamlit as st

from attncore import ConfigError
from attncore.attention_cost import attention_memory, loglog_slope, time_attention
from ui.limits import BusyError, limits, training_slot
from ui.mechanism_charts import cost_frame, memory_chart, parse_ints, time_chart
from ui.params import show_invalid, url_number, url_text


def max_length() -> int:
    """The hosted cap on T: ui.limits' max_cost_t if it has one, else $ATTNLAB_MAX_COST_T, else 2048."""
    cap = getattr(limits(), "max_cost_t", None)
    try:
        return int(cap or os.environ.get("ATTNLAB_MAX_COST_T", 2048))
    except ValueError:
        return 2048


st.title("Cost of attention")
st.caption(
    "The scores form a T × T matrix, so time grows like T²·d and memory like T² per head and sequence, while "
    "Q, K and V grow only like T: on log-log axes time approaches a line of slope 2 at large T. Timed live: "
    "single-head causal attention in float64, the minimum over trials after one warm-up call."
)
cap = max_length()


def parse_lengths(text: str) -> list[int]:
    """The typed lengths, sorted without repeats; ConfigError unless each is from 1 to the cap."""
    lengths = sorted(set(parse_ints(text, "lengths")))
    if max(lengths) > cap or min(lengths) < 1:
        raise ConfigError("lengths", f"each T must be from 1 to {cap} on this server, got {lengths}")
    return lengths


c1, c2, c3, c4 = st.columns([3, 1, 1, 1])
with c1:
    text = url_text(
        "Lengths T", "cost_T", "128 256 512 1024", check=parse_lengths, help=f"Up to 12 lengths, each from 1 to {cap}."
    )
with c2:
    d_k = url_number("d_k", "cost_dk", 64, 8, 256, step=8)
with c3:
    trials = url_number("Trials", "cost_trials", 3, 1, 10, help="Timed calls per T; the minimum is kept.")
with c4:
    seed = url_number("Seed", "cost_seed", 0, 0, 9999)
try:
    lengths = parse_lengths(text)
except ConfigError as e:
    show_invalid(e)
    st.stop()

key = (tuple(lengths), d_k, trials, seed)
results = st.session_state.setdefault("cost_results", {})
if st.button("Run the timings", type="primary", key="cost_run", icon=":material/timer:"):
    bar = st.progress(0.0, text="Timing...")
    try:
        with training_slot():  # timings share the CPU with trainings: take turns
            rows = time_attention(
                lengths,
                d_k,
                trials,
                seed,
                max_t=cap,
                progress=lambda i, n: bar.progress(i / n, text=f"T = {lengths[i - 1]} done"),
            )
        results[key] = rows
    except (ConfigError, BusyError) as e:
        st.error(f"**Could not time**: {e}", icon="⚠️")
    bar.empty()

rows = results.get(key)  # None until Run is pressed for exactly these inputs
frame = cost_frame(rows or [attention_memory(t, d_k) for t in lengths])
slope = loglog_slope(frame["T"], frame["ms"]) if rows and len(rows) > 1 else None
last = frame.iloc[-1]
m1, m2, m3, m4 = st.columns(4)
slope_help = "Least-squares slope of log time against log T: 2 for quadratic time, 1 for linear."
m1.metric("Log-log slope of time", "—" if slope is None else f"{slope:.2f}", border=True, help=slope_help)
m2.metric(f"Time at T = {lengths[-1]}", "—" if rows is None else f"{last['ms']:.1f} ms", border=True)
m3.metric(f"T × T scores at T = {lengths[-1]}", f"{last['T × T scores (MiB)']:.3g} MiB", border=True)
m4.metric(f"Q, K, V at T = {lengths[-1]}", f"{last['Q, K, V (MiB)']:.3g} MiB", border=True)
left, right = st.columns(2)
if rows is None:
    left.info("Press **Run the timings**: from a fraction of a second to a few seconds.", icon="⏱️")
else:
    left.altair_chart(time_chart(frame, slope), width="stretch")
right.altair_chart(memory_chart(frame), width="stretch")
st.dataframe(
    frame,
    hide_index=True,
    width="stretch",
    column_config={c: st.column_config.NumberColumn(format="%.3f") for c in frame.columns[1:]},
)
st.caption(
    f"Memory is arithmetic, float64, one head and one sequence, d_k = {d_k}. At small T fixed overheads hide "
    "the T², so fit the slope over lengths of 256 and more; another program on the machine adds noise to "
    "the times (the minimum over trials removes most of it)."
)
