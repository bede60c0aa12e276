"""The Induction heads page's parts: its controls (URL-bound, within the hosted caps), the causal check
metered as page work, the tables and the sources it is read against. The experiment itself is experiments.induction's.
"""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from attncore.config import NORMS
from attncore.tasks import N_TEST
from attncore.tasks.induction import INDUCTION_RUN
from lab import formats
from lab.experiments import induction
from lab.jobs.limits import Limits
from lab.jobs.slots import BusyError
from lab.store import RunRecord
from ui import metered, runs, tables
from ui.params import url_multiselect, url_select
from ui.plain import plain
from ui.sidebar import NORM_LABELS

VARIANT_OPTIONS = [induction.Variant(n, p) for n, p in ((2, "rope"), (1, "rope"), (2, "none"), (2, "learned"),
                                                        (1, "none"), (3, "rope"))]  # fmt: skip
DEFAULT_VARIANTS = [induction.Variant(n, p) for n, p in induction.PAGE_VARIANTS]
EMBED_STDS = {1.0: "1: nn.Embedding's (the default here)", 0.1: "0.1: the lab's article model"}
SOURCES = "Olsson et al. 2022, *In-context Learning and Induction Heads*."


def variant_picker() -> list[induction.Variant]:
    """The variants to train (URL key ind_var), the first the baseline of every comparison."""
    return url_multiselect("Variants (the first is the baseline)", "ind_var", VARIANT_OPTIONS, DEFAULT_VARIANTS,
                           format_func=lambda v: v.label, placeholder="Pick variants")  # fmt: skip


def controls(lim: Limits) -> dict:
    """lab.experiments.induction.runs_of settings from the page's widgets (URL keys ind_*), within the hosted caps."""
    c1, c2, c3 = st.columns(3)
    with c1:
        options = [s for s in (100, 500, 1000, 2000, 3000) if s <= lim.max_steps]
        steps = url_select("Steps per run", "ind_steps", options, INDUCTION_RUN["steps"], format_func=str)
    with c2:
        embed = url_select("Embedding std at init", "ind_emb", list(EMBED_STDS),
                           INDUCTION_RUN["embed_std"], format_func=EMBED_STDS.get)  # fmt: skip
    with c3:
        norm = url_select("LayerNorm", "ind_norm", list(NORMS), INDUCTION_RUN["norm"], format_func=NORM_LABELS.get,
                          help="Where each block's LayerNorm sits, in every variant: before the sublayer (pre-LN, "
                          "the default) or after the residual sum (post-LN).")  # fmt: skip
    return {"steps": steps, "embed_std": embed, "norm": norm}


def ablations(wanted, by_run: dict) -> dict | None:
    """{run: experiments.induction.ablations(record)} (each head zeroed on the 500 held-out sequences), metered as page
    work (server-wide memo, else a slot); None with a message when the server is busy."""
    out = {}
    try:
        for run in wanted:
            record: RunRecord = by_run[run]
            key = runs.run_key(run)
            out[run] = metered.metered("induction-ablation", key, lambda r=record: induction.ablations(r), "ablations")
    except BusyError as e:
        st.warning(str(e), icon=":material/hourglass_top:")
        return None
    return out


def finding(table: pd.DataFrame, rows: pd.DataFrame, vocab: int) -> None:
    st.markdown(f"**What the lab found.** {plain(induction.finding(table, rows, vocab))}")


def phase_table(table: pd.DataFrame, icl: list[float]) -> None:
    """Per variant: the seeds with a phase change, its step's mean and range, the final losses and the final
    in-context score (`icl`: lab.experiments.induction.icl_means, in the table's order)."""

    def steps(r) -> str:
        if not r["changed"]:
            return "none"
        return f"{r['step_mean']:,.0f} ({r['step_min']:,.0f}–{r['step_max']:,.0f})"

    # short headers (the caption says the rest): with "at the end" in two of them the table ran past a 1,280 px
    # window and its last column, the in-context score, was out of view
    shown = pd.DataFrame({
        "variant": table["variant"],
        "phase change": [f"{int(r['changed'])} of {int(r['seeds'])}" for _, r in table.iterrows()],
        "phase step (range)": [steps(r) for _, r in table.iterrows()],
        f"{induction.figures.WINDOW}-step drop": [formats.loss(x) for x in table["largest_drop"]],
        "repeat loss": [formats.loss(x) for x in table["repeat_final"]],
        "first-copy loss": [formats.loss(x) for x in table["first_final"]],
        "in-context score": [formats.signed_loss(x) for x in icl],
    })  # fmt: skip
    tables.show(shown)
    threshold = formats.loss(induction.figures.PHASE_THRESHOLD)
    st.caption(
        f"A phase change: the held-out repeat loss falls by more than {threshold} nats within "
        f"{induction.figures.WINDOW} steps (the {induction.figures.WINDOW}-step drop: its largest such drop); its step "
        "is where the loss has made half of that drop, the mean over the seeds that have one (the range: their "
        f"earliest and latest). Means over the seeds; the repeat and first-copy losses on the {N_TEST} held-out "
        "sequences with the final weights. The "
        "in-context score is Olsson et al.'s, on the probe set with the final weights: the loss at a token of the "
        "repeat minus at the same token of the first copy (below 0: the context helps). The step has no paired "
        "test: a variant without a change has no step to pair."
    )


def ln_v(vocab: int) -> str:
    return f"ln {vocab} = {formats.loss(math.log(vocab))}"


def levels(table: pd.DataFrame, chosen, vocab: int) -> dict[str, float]:
    """The causal check's reference lines: ln V, and the one-layer variant's final repeat loss at the baseline's
    position when it is among the variants."""
    out = {ln_v(vocab): math.log(vocab)}
    baseline = chosen[0]
    for v in chosen:
        if v.layers == 1 and v.position == baseline.position:
            out[f"{v.label}, repeat"] = float(table[table["variant"] == v.label]["repeat_final"].iloc[0])
    return out
