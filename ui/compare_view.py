"""What the Ablations and Compare pages share: seeds as replicates, the levels a factor may take, training the
missing runs as one metered sweep, and the grouped results (tables with verdicts, CSV downloads).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
import streamlit as st

from attncore import ConfigError, RunConfig
from attncore.config import POSITIONS, TASKS
from lab.compare import RULE
from lab.factors import FACTORS, level_label, with_seed
from lab.store import RunRecord
from ui import runs, tables
from ui.charts import compare as compare_charts
from ui.limits import Limits, limits
from ui.params import url_multiselect, url_number, url_toggle
from ui.sidebar import FIELD_LABELS, LEARNING_RATES

FIELD_LABELS = FIELD_LABELS | {"scaling": "Scaling"}


def level_options(factor: str, lim: Limits) -> tuple[list, list]:
    """(the levels offered for a factor within the hosted caps, the default levels); the first is the baseline."""

    def upto(values, cap):
        return [v for v in values if v <= cap]

    table = {
        "task": (list(TASKS), ["copy", "sort"]),
        "length": (list(range(1, lim.max_length + 1)), [4, 6, 8]),
        "position": (list(POSITIONS), ["learned", "none"]),
        "norm": (["pre", "post"], ["pre", "post"]),
        "scaling": ([True, False], [True, False]),
        "lr": (LEARNING_RATES, [1e-3, 3e-3, 1e-2]),
        "d": (upto([8, 16, 32, 64, 128, 256], lim.max_d_model), [16, 32, 64]),
        "heads": (upto([1, 2, 4, 8, 16], lim.max_heads), [1, 2, 4]),
        "layers": (list(range(1, lim.max_layers + 1)), [1, 2]),
        "steps": (upto([100, 250, 500, 1000, 1500, 2000, 3000], lim.max_steps), [500, 1500]),
        "batch": (upto([8, 16, 32, 64, 128], lim.max_batch), [16, 32, 64]),
        "range": ([None, 1, 2, 4], [None, 1]),
        "randomized": ([None, 32, 64, 128, 256], [None, 64]),
    }
    options, default = table[factor]
    return options, [v for v in default if v in options]


def level_picker(factor: str, title: str, key: str, lim: Limits) -> list:
    """A URL-bound multiselect of a factor's levels (within the hosted caps), its default levels preselected."""
    options, default = level_options(factor, lim)
    return url_multiselect(title, key, options, default, format_func=format_level(factor))


def seeds_input(key: str) -> list[int]:
    """Seeds as replicates: N (default 3, at most the hosted max_seeds) from the sidebar's seed on."""
    lim = limits()
    n = url_number("Seeds", key, 3, 1, lim.max_seeds, help=f"Replicates per setting (at most {lim.max_seeds} here).")
    first = int(st.session_state.get("seed", 0))
    return list(range(first, first + n))


def seeds_text(seeds: Sequence[int]) -> str:
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}-{seeds[-1]}"


def show_invalid_combination(e: ConfigError) -> None:
    """One message naming the field, its allowed values and the level that asked for it (lab.factors says which)."""
    label = FIELD_LABELS.get(e.field, e.field)
    st.error(f"**This comparison is not valid.** {label}: {e.message}.", icon=":material/error:")


def ensure_trained(wanted: Sequence[RunConfig], what: str, key: str) -> dict[RunConfig, RunRecord] | None:
    """{run: record} once every run is in the store; else the count of what is cached, a button that trains the
    missing ones as one sweep (within max_sweep_runs, or a message saying what is over it), and None.
    A view of more than max_compare_runs runs is refused with a message before anything is loaded."""
    lim = limits()
    if len(wanted) > lim.max_compare_runs:
        st.warning(
            f"This view has {len(wanted)} runs; this server shows at most {lim.max_compare_runs} at once: "
            "choose fewer levels, panels, variants or seeds.",
            icon=":material/block:",
        )
        return None
    records, missing = runs.cached_many(wanted)
    if missing:
        notice = st.empty()
        notice.info(
            f"**{len(wanted) - len(missing)} of {tables.count(len(wanted), 'run')} cached**; "
            f"{tables.count(len(missing), 'run')} still to train. The results appear once all are trained.",
            icon=":material/science:",
        )
        if len(missing) > lim.max_sweep_runs:
            st.warning(
                f"{len(missing)} runs is more than this server trains at once ({lim.max_sweep_runs}): "
                "choose fewer levels, variants or seeds.",
                icon=":material/block:",
            )
            return None
        if not st.button(f"Train the {tables.count(len(missing), 'missing run')}", type="primary", key=key):
            return None
        if runs.sweep(missing, what) is None:
            return None
        records, missing = runs.cached_many(wanted)
        if missing:
            return None
        notice.empty()
    return {r.config: r for r in records}


def grouped(by_run: dict[RunConfig, RunRecord], labelled: dict[str, RunConfig], seeds: Sequence[int]):
    """{label: [records over the seeds]} for {label: run at any seed}."""
    return {label: [by_run[with_seed(run, s)] for s in seeds] for label, run in labelled.items()}


def show_tables(summary: pd.DataFrame, comparisons: pd.DataFrame, level: str = "level", facet: str = "facet") -> None:
    """The grouped table and the paired differences with their verdicts, and the rule they follow."""
    names = {"level": level, "facet": facet}
    tables.show(summary.rename(columns=names))
    st.caption("Mean, min and max over the seeds of each setting.")
    if len(comparisons):
        shown = comparisons.rename(columns=names).drop(columns=["mean_abs_delta"])
        tables.show(shown.replace({"metric": METRIC_NAMES}), height=min(35 * (len(shown) + 1) + 3, 800))
    st.caption(RULE)


METRIC_NAMES = {"final_loss": "final loss", "token_accuracy": "per-token", "sequence_accuracy": "per-sequence"}


def downloads(summary: pd.DataFrame, comparisons: pd.DataFrame, stem: str) -> None:
    c1, c2 = st.columns(2)
    c1.download_button(
        "Download the grouped table (CSV)", summary.to_csv(index=False), f"{stem}-groups.csv", "text/csv"
    )
    c2.download_button(
        "Download the comparisons (CSV)", comparisons.to_csv(index=False), f"{stem}-comparisons.csv", "text/csv"
    )


def factor_label(factor: str) -> str:
    return FACTORS[factor].label


def format_level(factor: str):
    return lambda v: level_label(factor, v)


@st.fragment
def loss_panel(prefix: str, bands_of: Callable[[int], pd.DataFrame], caption: str) -> None:
    """Log scale and smoothing (URL keys <prefix>_log, <prefix>_smooth) beside the loss bands that
    `bands_of(smooth)` returns; a fragment, so changing them redraws only this panel."""
    c1, c2 = st.columns([1, 4])
    with c1:
        log = url_toggle("Log scale", f"{prefix}_log", True)
        smooth = url_number("Smoothing (steps)", f"{prefix}_smooth", 25, 1, 500, help="Trailing moving average.")
    with c2:
        st.altair_chart(compare_charts.band_curves(bands_of(smooth), log=log), width="stretch")
    st.caption(caption)
