"""Scaling: why the scores are divided by √d_k, measured live against the theory."""

import streamlit as st

from attncore import ConfigError
from attncore.mechanisms.demos import scaling_statistics
from lab import formats
from lab.jobs.slots import BusyError
from ui import docs
from ui.charts.scaling import STATISTICS, TABLE_FORMATS, scaling_long, scaling_table, statistic_chart
from ui.figure import show_chart
from ui.limits import limits
from ui.metered import metered
from ui.params import show_invalid, url_multiselect, url_number

D_K_OPTIONS = [2**i for i in range(12)]  # 1 .. 2048
MAX_DRAWS = limits().max_scaling_draws  # sum(d_k) * T * repetitions normal draws: ~1.5 s of CPU at 10^8

st.title("Scaling: why divide by √d_k")
st.caption(
    "Random queries and keys of iid N(0, 1) components, scored raw and divided by √d_k: the softmax statistics of "
    "each, measured against the theory. Try a larger d_k, or more keys."
)
docs.link("why-divide-by-d_k", "Why divide by √d_k, and the article's measurements")
c1, c2, c3, c4 = st.columns([3, 1, 1, 1])
with c1:
    d_ks = url_multiselect(
        "d_k (key and query size)", "scal_dk", D_K_OPTIONS, [8, 64, 512], placeholder="Pick d_k values"
    )
with c2:
    n_keys = url_number("Keys T", "scal_T", 64, 2, 1024, help="Keys per query: the softmax runs over T scores.")
with c3:
    reps = url_number("Repetitions", "scal_reps", 400, 2, 5000, step=100, help="Independent query-keys draws.")
with c4:
    seed = url_number("Seed", "scal_seed", 0, 0, 9999)
if not d_ks:
    st.info("Choose at least one d_k.")
    st.stop()
if sum(d_ks) * n_keys * reps > MAX_DRAWS:
    st.error(
        f"**Too much work**: Σd_k · T · repetitions must stay under {MAX_DRAWS:.0e}. Use fewer or smaller "
        "d_k, fewer keys or fewer repetitions.",
        icon=":material/error:",
    )
    st.stop()
try:
    key = (tuple(sorted(d_ks)), n_keys, reps, seed)
    with st.spinner("Drawing queries and keys..."):
        rows = metered("scaling", key, lambda: scaling_statistics(*key), "this draw")
except ConfigError as e:
    show_invalid(e)
    st.stop()
except BusyError as e:
    st.warning(str(e), icon=":material/hourglass_top:")
    st.stop()

m1, m2, m3 = st.columns(3)
m1.metric("Maximum entropy ln T", f"{rows[0]['max_entropy']:.4f}", border=True)
m2.metric("Maximum sensitivity 1 − 1/T", f"{rows[0]['max_sensitivity']:.4f}", border=True)
m3.metric("Max weight if uniform, 1/T", f"{rows[0]['min_max_weight']:.4f}", border=True)

st.subheader("Softmax saturation against d_k")
long = scaling_long(rows)
for col, stat in zip(st.columns(3), STATISTICS, strict=True):
    show_chart(statistic_chart(long, stat), f"statistic-{stat}", where=col, width="stretch")
widest = long.loc[long["se"].idxmax()]  # the longest error bar drawn
st.caption(
    "Orange: raw scores q·k; blue: divided by √d_k. Bars: ±2 standard errors over the repetitions, at most "
    f"±{formats.significant(2 * widest['se'], 2)} here ({STATISTICS[widest['statistic']][0]}, d_k = "
    f"{widest['d_k']}): a bar shorter than its point is hidden behind it. Dashed: the limit of uniform weights. "
    "Unscaled, the curves run away from the limit as d_k grows; scaled, they stay flat."
)

st.subheader("Measured, with the theory beside each")
table = scaling_table(rows)
theory = {"theory d_k", "theory sd", "1/T", "ln T", "1 − 1/T"}
st.dataframe(
    table,
    hide_index=True,
    width="stretch",
    column_config={
        c: st.column_config.NumberColumn(
            format=TABLE_FORMATS.get(c, "%.4f"), help="theory" if c in theory else "measured"
        )
        for c in table.columns[2:]
    },
)
st.caption(
    f"{reps} repetitions of one query against {n_keys} keys per d_k, seed {seed}; a d_k's draw does not depend on "
    "the other d_k chosen, and scaled and unscaled rows share it. Var(q·k) and the sd of the scores should sit "
    "within a few percent of the theory; a new seed moves the softmax statistics by about their standard error."
)
