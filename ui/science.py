"""The Science page's figures: the article's figures redrawn from the lab's own numbers, where the lab measures
the same thing (the √d_k table, attention's cost against T, the copy head's attention map)."""

from __future__ import annotations

import streamlit as st

from attncore import make_run
from attncore.mechanisms.attention_cost import attention_memory, loglog_slope
from attncore.mechanisms.demos import scaling_statistics
from lab.jobs.slots import BusyError
from ui import frames, runs
from ui.charts import runs as run_charts
from ui.charts.cost import cost_frame, memory_chart, time_chart
from ui.charts.scaling import TABLE_FORMATS, scaling_table
from ui.figure import show_chart
from ui.metered import metered

SCALING_KEY = ((8, 64, 512), 64, 400, 0)  # the article's d_k, T, repetitions; seed 0 (the Scaling page's default)
COST_LENGTHS = (128, 256, 512, 1024, 2048)
COPY_RUN = make_run("copy", 6, 0)  # the article's copy run, whose heads the article drew


def scaling_figure() -> None:
    """The √d_k table, drawn here from the lab's own draw (memoised with the Scaling page's default)."""
    try:
        rows = metered("scaling", SCALING_KEY, lambda: scaling_statistics(*SCALING_KEY), "this draw")
    except BusyError as e:
        st.warning(str(e), icon=":material/hourglass_top:")
        return
    table = scaling_table(rows)
    config = {c: st.column_config.NumberColumn(format=TABLE_FORMATS.get(c, "%.4f")) for c in table.columns[2:]}
    st.markdown("**The same table, drawn by this lab** (seed 0, T = 64, 400 repetitions, computed on this server):")
    st.dataframe(table, hide_index=True, width="stretch", column_config=config)


def cost_figure() -> None:
    """The T × T memory from the lab's arithmetic, and the time slope if this visitor timed on the Cost page."""
    timed = st.session_state.get("cost_results") or {}
    rows = list(timed.values())[-1] if timed else None
    frame = cost_frame(rows or [attention_memory(t, 64) for t in COST_LENGTHS])
    if rows and len(rows) > 1:
        slope = loglog_slope(frame["T"], frame["ms"])
        left, right = st.columns(2)
        show_chart(time_chart(frame, slope), "attention-time", where=left, width="stretch")
        show_chart(memory_chart(frame), "attention-memory", where=right, width="stretch")
        st.caption(f"Time: your last timing on the Cost page, log-log slope {slope:.2f}. Memory: arithmetic.")
        return
    show_chart(memory_chart(frame), "attention-memory", width="stretch")
    st.caption(
        "Memory of one head and sequence, float64, d_k = 64: arithmetic, the same on every machine. The time "
        "against T is measured, not typed: press Run the timings on the Cost page, and its curve and slope "
        "appear here."
    )


def copy_heads_figure() -> None:
    """Every head of the article's copy run (L = 6, seed 0) on its probe sequence, if that run is stored."""
    record = runs.cached(COPY_RUN)
    if record is None:
        st.info(
            "The article's copy run (L = 6, seed 0) is not in this server's store yet: its heads are drawn here "
            "once it is (Home: Reproduce the article, or the Train page at the defaults).",
            icon=":material/science:",
        )
        return
    st.markdown("**The copy run's heads, from this lab's stored run** (copy, L = 6, seed 0, probe sequence):")
    show_chart(
        run_charts.attention_heatmaps(frames.attention_frame(record.probe_attention, record.probe_tokens)), "copy-heads"
    )
    st.caption("Rows: queries, columns: keys. On copy, a head that solves the task looks a constant L = 6 back.")


AFTER = {"why-divide-by-d_k": scaling_figure, "cost-of-attention": cost_figure}
AFTER |= {"attention-maps-and-head-ablation": copy_heads_figure}
