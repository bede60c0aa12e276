"""The Grokking page's parts: its controls (URL-bound, within the hosted caps), the tables and the sources it is read
against. The experiment itself is lab.experiments.grokking's."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from attncore.tasks.modular import MAX_P, MIN_P, MODULAR_RUN
from lab import formats
from lab.experiments import grokking
from lab.jobs.limits import Limits
from ui import compare_view, sweeps, tables
from ui.params import url_number, url_select
from ui.plain import plain

FRACTIONS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
DECAYS = (0.1, 0.3, 1.0, 3.0)
LRS = (1e-3, 3e-3, 1e-2)
SOURCES = "Power et al. 2022, Nanda et al. 2023 (the key frequencies) and Thilak et al. 2022 (slingshots)."


def controls(lim: Limits) -> tuple[dict, list[int]]:
    """(grokking.runs_of settings, the seeds) from the page's widgets (URL keys grok_*), within the hosted caps."""
    c1, c2, c3, c4, c5, c6 = st.columns(6)
    with c1:
        p = url_number(
            "Modulus p",
            "grok_p",
            MODULAR_RUN["length"],
            MIN_P,
            min(MAX_P, lim.max_modulus),
            help="Numbers 0 to p − 1; the p² pairs (a, b) are split once, by p and the fraction.",
        )
    with c2:
        fraction = url_select(
            "Fraction trained",
            "grok_frac",
            list(FRACTIONS),
            MODULAR_RUN["fraction"],
            format_func=lambda f: f"{f:g}",
            help="The share of the p² pairs that trains; the rest is held out.",
        )
    with c3:
        decay = url_select(
            "Weight decay λ",
            "grok_wd",
            list(DECAYS),
            MODULAR_RUN["weight_decay"],
            format_func=lambda w: f"{w:g}",
            help="The variant with decay (AdamW), against λ = 0.",
        )
    with c4:
        lr = url_select("Learning rate", "grok_lr", list(LRS), MODULAR_RUN["lr"], format_func=formats.learning_rate)
    with c5:
        options = [s for s in (500, 1000, 2000, 3000, 5000, 10000) if s <= lim.max_steps] or [lim.max_steps]
        steps = url_select("Steps per run", "grok_steps", options, MODULAR_RUN["steps"], format_func=str)
    with c6:
        seeds = compare_view.seeds_input("grok_seeds", default=grokking.DEFAULT_SEEDS)
    return {"weight_decay": decay, "length": p, "fraction": fraction, "lr": lr, "steps": steps}, seeds


def variant_table(table: pd.DataFrame) -> None:
    """Per variant: the seeds whose accuracies reached 99 %, the steps (mean and range), the accuracies over the final
    window, the seeds that ended grokked and the spikes."""

    def steps(r, key: str) -> str:
        k = int(r[f"{key}_reached"])
        if not k:
            return "never"
        low, high = r[f"{key}_min"], r[f"{key}_max"]
        spread = f" ({low:,.0f}–{high:,.0f})" if k > 1 and low != high else ""
        return f"{r[f'{key}_mean']:,.0f}{spread}, {k} of {r['seeds']}"

    def final(r, key: str) -> str:
        return f"{formats.accuracy(r[key])} ({formats.accuracy(r[f'{key}_min'])})"

    def spikes(r) -> str:
        return f"{int(r['spikes'])} on {int(r['spiking_seeds'])} of {r['seeds']}" if r["spikes"] else "none"

    rows = list(table.iterrows())
    shown = pd.DataFrame(
        {
            "variant": table["variant"],
            "ended grokked": [f"{int(r['grokked'])} of {r['seeds']}" for _, r in rows],
            "train, window": [final(r, "final_train_accuracy") for _, r in rows],
            "held out, window": [final(r, "final_test_accuracy") for _, r in rows],
            "spikes": [spikes(r) for _, r in rows],
            "train 99 %": [steps(r, "train_step_99") for _, r in rows],
            "held out 99 %": [steps(r, "test_step_99") for _, r in rows],
            "delay": [steps(r, "delay") for _, r in rows],
        }
    )
    tables.show(shown)
    st.caption(
        "Train / held out 99 %: the first snapshot step at which the accuracy on the training (held-out) pairs is at "
        "least 99 %, mean (range) over the seeds that reached it; delay: held-out minus training step, per seed. "
        f"Train, held out, window: the accuracy averaged over {grokking.window_words(table.iloc[0])}, the mean over "
        f"the seeds (the lowest seed's); a seed ended grokked when both are at least {grokking.GROKKED * 100:.0f} %. "
        f"Spikes: falls of the training accuracy under {grokking.SPIKE_BELOW * 100:.0f} % after it reached 99 %, seen "
        "at the snapshots (how many, on how many seeds). The weight norm and the frequencies at the end: the finding "
        "above and the charts below."
    )


def finding(table: pd.DataFrame, rows: pd.DataFrame, steps: int) -> None:
    st.markdown(f"**What the lab found.** {plain(grokking.finding(table, rows, steps))}")


def cost(wanted) -> None:
    """What training this view costs here: the cost model's computing (lab.cost_model), and on two cores half of it."""
    work = sweeps.computing(wanted)
    st.caption(
        f"Training this view ({formats.count(len(wanted), 'run')}) costs about {formats.duration(work)} of computing "
        f"on this machine, about {formats.duration(work / 2)} on two otherwise idle cores (the cost model's estimate "
        "from the runs' sizes, calibrated on this CPU; the store keeps them, so it is paid once)."
    )


def spike_count(table: pd.DataFrame) -> str:
    """'weight decay 1: 2 spikes on 1 of 6 seeds; no weight decay: none' from lab.experiments.grokking.variant_table."""
    said = [
        f"{r['variant']}: "
        + (
            f"{tables.count(int(r['spikes']), 'spike')} on {int(r['spiking_seeds'])} of {r['seeds']} seeds"
            if r["spikes"]
            else "none"
        )
        for _, r in table.iterrows()
    ]
    return "; ".join(said)
