"""How the lab's tables are shown: short column labels and number formats (display only; CSVs keep lab's names)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from lab import formats

LOSS = None  # losses are formatted in Python by lab.formats (TEXT below): printf's %g cannot switch to 3.10e-05

_LABELS = {
    "length": ("L", "%d"),
    "seeds": ("seeds", "%d"),
    "token_accuracy_mean": ("per-token mean", "%.3f"),
    "token_accuracy_min": ("per-token min", "%.3f"),
    "sequence_accuracy_mean": ("per-seq mean", "%.3f"),
    "sequence_accuracy_min": ("per-seq min", "%.3f"),
    "final_loss": ("last-batch loss", LOSS),  # the training loss of the last step; comparisons use test_loss
    "test_loss": ("test loss", LOSS),
    "token_accuracy": ("per-token", "%.3f"),
    "sequence_accuracy": ("per-seq", "%.3f"),
    "distinct_accuracy": ("distinct", "%.3f"),
    "repeated_accuracy": ("repeated", "%.3f"),
    "final_loss_diff": ("Δ loss", None),
    "test_loss_diff": ("Δ test loss", None),
    "token_accuracy_diff": ("Δ per-token", None),
    "sequence_accuracy_diff": ("Δ per-seq", None),
    "train_seconds": ("train s", "%.1f"),
    # groups over seeds and paired differences (lab.compare)
    "n": ("seeds", "%d"),
    "final_loss_mean": ("loss mean", LOSS),
    "final_loss_min": ("loss min", LOSS),
    "final_loss_max": ("loss max", LOSS),  # the worst seed's
    "test_loss_mean": ("test loss mean", LOSS),
    "test_loss_min": ("test loss min", LOSS),
    "test_loss_max": ("test loss max", LOSS),  # the worst seed's
    "token_accuracy_max": ("per-token max", "%.3f"),
    "sequence_accuracy_max": ("per-seq max", "%.3f"),
    "delta_mean": ("Δ mean", "%+.4f"),
    "delta_min": ("Δ min", "%+.4f"),
    "delta_max": ("Δ max", "%+.4f"),
    "baseline_spread": ("baseline spread", None),
    "mean max weight": ("mean max weight", "%.3f"),
    "per-seq acc. zeroed": ("per-seq, zeroed", "%.3f"),
    "drop": ("drop", None),
}


# Columns whose text comes from lab.formats (one format per column: a loss column holds 3 significant digits of
# its smallest value, all of it scientific when that is below 1e-3, so '2.00e-04' stands above '1.97e-04', never
# '1.87e-04' above '0.471'; signed differences with the lab's one minus sign); the table still sorts by the numbers.
TEXT = {c: formats.loss for c in ("final_loss", "final_loss_mean", "final_loss_min", "final_loss_max")}
TEXT |= {c: formats.loss for c in ("test_loss", "test_loss_mean", "test_loss_min", "test_loss_max")}
TEXT |= {
    "lr": formats.learning_rate,
    "final_loss_diff": formats.signed_loss,
    "test_loss_diff": formats.signed_loss,
    "token_accuracy_diff": formats.signed_accuracy,
    "sequence_accuracy_diff": formats.signed_accuracy,
    "drop": formats.signed_accuracy,
    "baseline_spread": formats.loss,
    "median TVD shuffled": formats.loss,
}
COLUMN_WISE = {formats.loss: False, formats.signed_loss: True}  # rule -> signed: one spec for the whole column


def styled(frame: pd.DataFrame, text: dict | None = None):
    """The frame with lab.formats' text for the columns of TEXT (and `text`: {column: format}) as a Styler, so
    st.dataframe shows that text and still sorts by the numbers; the frame itself when no column needs it."""
    rules = {c: _column_rule(frame[c], f) for c, f in (TEXT | (text or {})).items() if c in frame.columns}
    if not rules:
        return frame
    return frame.style.format({c: lambda v, f=f: _text(v, f) for c, f in rules.items()})


def _column_rule(values: pd.Series, rule):
    """A loss rule becomes the column's one spec (lab.formats.column_spec) over its numbers; others stay."""
    if rule not in COLUMN_WISE:
        return rule
    spec = formats.column_spec([v for v in values if not isinstance(v, str) and v is not None])
    return lambda v: formats.with_spec(v, spec, COLUMN_WISE[rule])


def _text(value, rule) -> str:
    """A cell through its rule; a cell that is already text (a level label such as lr '3e-3') stays as it is."""
    if isinstance(value, str):
        return value
    return "–" if value is None or value != value else rule(value)


def show(frame: pd.DataFrame, text: dict | None = None, **kw) -> None:
    """st.dataframe with the lab's short labels and formats for the columns it knows (`text`: more columns
    formatted by a function, e.g. {'score': lab.formats.accuracy})."""
    config = {
        c: st.column_config.NumberColumn(label, format=fmt) for c, (label, fmt) in _LABELS.items() if c in frame.columns
    }
    for c in text or {}:
        config.setdefault(c, st.column_config.NumberColumn(c))
    st.dataframe(styled(frame, text), hide_index=True, width="stretch", column_config=config, **kw)


def number_column(values: pd.Series, label: str | None = None, **kw):
    """A NumberColumn for these values, or a TextColumn where ui.frames.within_int64 wrote them as text (whole
    numbers past 64 bits, exact with their separators)."""
    if pd.api.types.is_numeric_dtype(values):
        return st.column_config.NumberColumn(label, **kw)
    return st.column_config.TextColumn(label)


count = formats.count  # '1 run', '3 runs', '27,253'


def setting_text(column: str, value) -> str:
    """A run setting in the sidebar's words: 'learned position', 'pre-LN', 'lr 3e-3', '1,500 steps', '1 layer'."""
    if column == "lr":
        return f"lr {formats.learning_rate(float(value))}"
    if column == "scaling":
        return f"scaling {'on' if value else 'off'}"
    nouns = {"steps": "step", "n_heads": "head", "n_layers": "layer"}
    if column in nouns:
        return formats.count(int(value), nouns[column])
    named = {"position": "{} position", "norm": "{}-LN", "batch_size": "batch {}", "d_model": "d={}"}
    return named.get(column, column + " {}").format(value)


METRICS = ("test_loss", "token_accuracy", "sequence_accuracy")
# what a grouped table (lab.compare.group_summary) shows of each metric: the mean and the worst seed
WORST_SEED = ("test_loss_mean", "test_loss_max", "token_accuracy_mean", "token_accuracy_min")
WORST_SEED += ("sequence_accuracy_mean", "sequence_accuracy_min")
SPREAD_COLUMNS = {f"{m}_{s}" for m in METRICS for s in ("mean", "min", "max")}


def worst_seed_columns(frame: pd.DataFrame) -> list[str]:
    """The columns of a grouped table to show in a 1,280 px main area without sideways scrolling: the leading
    columns, then each metric's mean and worst seed (the CSV download keeps min and max of every metric)."""
    lead = [c for c in frame.columns if c not in SPREAD_COLUMNS]
    return lead + [c for c in WORST_SEED if c in frame.columns]
