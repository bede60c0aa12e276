"""Cost: attention's time and memory against the sequence length T, timed live on this machine."""

import streamlit as st

from attncore import ConfigError
from attncore.mechanisms.attention_cost import attention_memory, loglog_slope, time_attention
from lab.jobs.slots import BusyError
from ui import docs
from ui.charts.cost import cost_frame, memory_chart, time_chart
from ui.figure import show_chart
from ui.frames import parse_ints
from ui.limits import limits
from ui.params import show_invalid, url_number, url_text
from ui.slots import training_slot


def default_lengths(cap: int) -> str:
    """256 to 2048 in powers of two, those within the cap (small T would bend the fitted slope)."""
    return " ".join(str(t) for t in (256, 512, 1024, 2048) if t <= cap) or str(cap)


st.title("Cost of attention")
st.caption(
    "The scores form a T × T matrix, so time grows like T²·d and memory like T² per head and sequence, while "
    "Q, K and V grow only like T: on log-log axes time approaches a line of slope 2 at large T. Timed live: "
    "single-head causal attention in float64, the minimum over trials after one warm-up call."
)
docs.link("cost-of-attention", "Why attention costs T², and the article's timings")
cap = limits().max_cost_t


def parse_lengths(text: str) -> list[int]:
    """The typed lengths, sorted without repeats; ConfigError unless each is from 1 to the cap."""
    lengths = sorted(set(parse_ints(text, "lengths")))
    if max(lengths) > cap or min(lengths) < 1:
        raise ConfigError("lengths", f"each T must be from 1 to {cap} on this server, got {lengths}")
    return lengths


c1, c2, c3, c4 = st.columns([3, 1, 1, 1])
with c1:
    text = url_text(
        "Lengths T",
        "cost_T",
        default_lengths(cap),
        check=parse_lengths,
        help=f"Up to 12 lengths, each from 1 to {cap}.",
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
        with training_slot("these timings"):  # timings share the CPU with trainings: take turns
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
        st.error(f"**Could not time**: {e}", icon=":material/error:")
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
    left.info("Press **Run the timings** to time these lengths on this server.", icon=":material/timer:")
else:
    show_chart(time_chart(frame, slope), "time", where=left, width="stretch")
show_chart(memory_chart(frame), "memory", where=right, width="stretch")
st.dataframe(
    frame,
    hide_index=True,
    width="stretch",
    column_config={"T": st.column_config.NumberColumn(format="localized")}
    | {c: st.column_config.NumberColumn(format="%.3f") for c in frame.columns[1:]},
)
st.caption(
    f"Memory is arithmetic, float64, one head and one sequence, d_k = {d_k}. At small T fixed overheads hide "
    "the T², so the default lengths start at 256 and the slope is fitted over exactly the lengths shown; another "
    "program on the machine adds noise to the times (the minimum over trials removes most of it)."
)
