"""The grokking experiment (Power et al. 2022, arXiv:2201.02177; Nanda et al. 2023, arXiv:2301.05217;
docs/grokking.md): modular addition trained with and without weight decay over the same seeds, each run's steps to
99 % accuracy on its training and held-out pairs and the delay between them, the weight norm and the embedding's
Fourier spectrum over training, and the two variants compared by the comparison rule of lab.compare.

Pure functions: configs out, records in, figures, DataFrames, JSON and sentences out (attncore.tasks.modular
measures).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from attncore.config import RunConfig
from attncore.tasks import modular as figures
from attncore.tasks.modular import MODULAR_RUN, make_modular
from attncore.train import initial_params
from lab import compare, formats, stats
from lab.store import RunRecord

DEFAULT_SEEDS = 6  # the fewest with which one comparison can show a difference (floor 2/2^6 < 0.05)
THRESHOLD = 0.99  # an accuracy "reaches" it at the first snapshot at or above it
METRICS = ("token_accuracy", "test_loss", "weight_norm")  # paired by seed: held-out accuracy and loss, weight norm
METRIC_WORDS = {"token_accuracy": "held-out accuracy", "test_loss": "held-out loss", "weight_norm": "weight norm"}
SETTINGS = ("length", "fraction", "lr", "steps", "d_model")  # what the page and the command line may change
FLAGS = {"length": "--p", "fraction": "--fraction", "lr": "--lr", "steps": "--steps", "d_model": "--d"}


def label(weight_decay: float) -> str:
    """A variant's name: 'weight decay 1' or 'no weight decay'."""
    return f"weight decay {weight_decay:g}" if weight_decay else "no weight decay"


def decays(weight_decay: float = MODULAR_RUN["weight_decay"]) -> list[float]:
    """The variants' weight decays, the baseline first: λ and 0 (λ alone when it is 0)."""
    return list(dict.fromkeys([float(weight_decay), 0.0]))


def runs_of(seeds: Sequence[int], weight_decay: float = MODULAR_RUN["weight_decay"], **settings):
    """{variant label: its runs over the seeds} at the grokking defaults (attncore.tasks.modular.MODULAR_RUN) with
    `settings` (make_run arguments: length = p, fraction, lr, steps, ...) overridden; with λ and without."""
    return {label(w): [make_modular(s, **settings | {"weight_decay": w}) for s in seeds] for w in decays(weight_decay)}


def all_runs(by_variant: Mapping[str, Sequence[RunConfig]]) -> list[RunConfig]:
    """Every run once, in order: the one sweep that trains the experiment."""
    return list(dict.fromkeys(run for runs in by_variant.values() for run in runs))


def command(seeds: Sequence[int], weight_decay: float = MODULAR_RUN["weight_decay"], **settings) -> str:
    """The command line that trains the runs of runs_of (settings at the grokking default left out)."""
    parts = ["python -m attncore grokking", "--seeds", *(str(s) for s in seeds)]
    if weight_decay != MODULAR_RUN["weight_decay"]:
        parts += ["--weight-decay", f"{weight_decay:g}"]
    for key, flag in FLAGS.items():
        if key in settings and settings[key] != MODULAR_RUN[key]:
            parts += [flag, f"{settings[key]:g}"]
    return " ".join(parts)


# --- one run ------------------------------------------------------------------------------------------------------


def step_99(steps, accuracies, threshold: float = THRESHOLD) -> int | None:
    """The first snapshot step whose accuracy is at least `threshold`; None when none is."""
    steps, accuracies = np.asarray(steps), np.asarray(accuracies, dtype=np.float64)
    reached = np.flatnonzero(accuracies >= threshold)
    return int(steps[reached[0]]) if reached.size else None


def curve(record: RunRecord) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(steps (S,), {train_accuracy, test_accuracy, train_loss, test_loss, weight_norm, fourier_frequencies,
    fourier_share: (S,)}) of a run's snapshots (its held-out accuracy is the snapshot's token accuracy)."""
    snaps = record.snapshots
    values = {k: np.array([s.figures[k] for s in snaps]) for k in figures.SNAPSHOT_SCALARS}
    values["test_accuracy"] = np.array([s.token_accuracy for s in snaps])
    return np.array([s.step for s in snaps]), values


def run_figures(record: RunRecord) -> dict:
    """One run's figures for the command line's JSON and the page's tables."""
    run = record.config
    steps, values = curve(record)
    train_99 = step_99(steps, values["train_accuracy"])
    test_99 = step_99(steps, values["test_accuracy"])
    initial = initial_params(run)
    return {
        "seed": run.train.seed,
        "weight_decay": run.train.weight_decay,
        "train_step_99": train_99,
        "test_step_99": test_99,
        "delay": test_99 - train_99 if train_99 is not None and test_99 is not None else None,
        "final_train_accuracy": record.figures["train_accuracy"],
        "final_test_accuracy": record.eval.token_accuracy,
        "final_train_loss": record.figures["train_loss"],
        "final_test_loss": record.held_out_loss(),
        "weight_norm_start": figures.weight_norm(initial),
        "weight_norm_final": record.figures["weight_norm"],
        "fourier_frequencies_start": figures.effective_frequencies(
            figures.embedding_spectrum(initial, run.task.length)
        ),
        "fourier_frequencies_final": record.figures["fourier_frequencies"],
        "fourier_share_final": record.figures["fourier_share"],
    }


def spectrum_frame(record: RunRecord) -> pd.DataFrame:
    """Rows frequency k (1 .. p // 2), when (at initialisation, at the end), share of the embedding's power."""
    p = record.config.task.length
    rows = []
    for when, params in (("at initialisation", initial_params(record.config)), ("at the end", record.params)):
        spectrum = figures.embedding_spectrum(params, p)
        rows.append(pd.DataFrame({"frequency": np.arange(1, len(spectrum) + 1), "when": when, "share": spectrum}))
    return pd.concat(rows, ignore_index=True)


def key_frequencies(record: RunRecord, k: int = figures.KEY_FREQUENCIES) -> list[int]:
    """The k frequencies with the most power in the final embedding, strongest first."""
    spectrum = figures.embedding_spectrum(record.params, record.config.task.length)
    return [int(i) + 1 for i in np.argsort(spectrum)[::-1][:k]]


# --- over seeds ---------------------------------------------------------------------------------------------------


def _summary(record: RunRecord) -> dict:
    """A summary lab.compare pairs by seed: the config and the compared figures."""
    return {
        "config": record.config.to_dict(),
        "token_accuracy": record.eval.token_accuracy,
        "test_loss": record.held_out_loss(),
        "weight_norm": record.figures["weight_norm"],
    }


def comparisons(records: Mapping[str, Sequence[RunRecord]]) -> pd.DataFrame:
    """Without weight decay against with it (the baseline), paired by seed, one row per metric: each group's mean and
    lab.compare's columns; empty with one variant."""
    if len(records) < 2:
        return pd.DataFrame()
    groups = {name: [_summary(r) for r in rs] for name, rs in records.items()}
    rows = []
    for _, c in compare.paired_differences(groups, metrics=METRICS).iterrows():
        means = {
            f"{which}_mean": float(np.mean([s[c["metric"]] for s in groups[c[col]]]))
            for which, col in (("baseline", "baseline"), ("variant", "level"))
        }
        rows.append(c.to_dict() | means)
    return pd.DataFrame(rows)


def variant_table(per_run: Sequence[dict]) -> pd.DataFrame:
    """Per variant: seeds, seeds whose training and held-out accuracy reached 99 %, the steps and delay (mean, min,
    max over the seeds that reached it), the final accuracies' and weight norm's means."""
    frame = pd.DataFrame(per_run)
    rows = []
    for decay, part in frame.groupby("weight_decay", sort=False):
        row = {"variant": label(decay), "weight_decay": float(decay), "seeds": len(part)}
        for key in ("train_step_99", "test_step_99", "delay"):
            found = [int(x) for x in part[key] if x is not None and x == x]
            row[f"{key}_reached"] = len(found)
            row |= {
                f"{key}_{name}": float(f(found)) if found else math.nan
                for name, f in (("mean", np.mean), ("min", min), ("max", max))
            }
        for key in ("final_train_accuracy", "final_test_accuracy", "weight_norm_final", "fourier_frequencies_final"):
            row[key] = float(part[key].mean())
        rows.append(row)
    return pd.DataFrame(rows)


def _reached(row, key: str, what: str) -> str:
    n, k = int(row["seeds"]), int(row[f"{key}_reached"])
    if not k:
        return f"{what} never reached 99 % on its {formats.count(n, 'seed')}"
    where = f"step {row[f'{key}_mean']:,.0f}"
    if k > 1 and row[f"{key}_min"] == row[f"{key}_max"]:
        where += " on each"
    elif k > 1:
        where += f" on average ({row[f'{key}_min']:,.0f}–{row[f'{key}_max']:,.0f})"
    return f"{what} reached 99 % on {k} of {n} at {where}"


def finding(table: pd.DataFrame, rows: pd.DataFrame, steps: int) -> str:
    """A paragraph from the numbers: each variant's steps to 99 % and the delay, the final accuracies, then every
    paired comparison in words with its verdict."""
    parts = []
    for _, r in table.iterrows():
        text = f"{r['variant']}: {_reached(r, 'train_step_99', 'training accuracy')}; " + _reached(
            r, "test_step_99", "held-out accuracy"
        )
        if r["delay_reached"]:
            text += f", {r['delay_mean']:,.0f} steps after the training accuracy on average"
        text += (
            f"; after {steps:,} steps held-out accuracy {formats.accuracy(r['final_test_accuracy'])}, weight norm "
            f"{r['weight_norm_final']:.1f}, the embedding's power spread over {r['fourier_frequencies_final']:.1f} "
            "frequencies"
        )
        parts.append(text)
    out = "; ".join(parts) + "."
    if rows.empty:
        return out
    said = [
        f"{METRIC_WORDS[c['metric']]} Δ {stats.format_delta(c['delta_mean'])} "
        f"{stats.format_interval(c['ci_low'], c['ci_high'])} ({c['verdict']})"
        for _, c in rows.iterrows()
    ]
    first = rows.iloc[0]
    return out + f" {first['level']} minus {first['baseline']}, paired by seed: " + "; ".join(said) + "."


def to_json(per_run: Sequence[dict], rows: pd.DataFrame, table: pd.DataFrame, text: str) -> dict:
    """The command line's --json object: seeds (one object per run: seed, weight_decay, train_step_99,
    test_step_99 (null when not reached), delay, final accuracies, ...), variants, comparisons, finding, method."""

    def plain(value):
        if isinstance(value, float) and math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return None if isinstance(value, float) and value != value else value

    def records(frame: pd.DataFrame) -> list[dict]:
        return [{k: plain(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]

    return {
        "seeds": [{k: plain(v) for k, v in r.items()} for r in per_run],
        "variants": records(table),
        "comparisons": records(rows),
        "finding": text,
        "method": compare.RULE,
    }


# --- frames for the page's charts (ui.charts.grokking) --------------------------------------------------------------

CURVES = {
    "train_accuracy": ("accuracy", "training"),
    "test_accuracy": ("accuracy", "held out"),
    "train_loss": ("loss", "training"),
    "test_loss": ("loss", "held out"),
    "weight_norm": ("weight norm", "all weights"),
    "fourier_frequencies": ("frequencies", "embedding"),
}


def curves_frame(records: Mapping[str, Sequence[RunRecord]]) -> pd.DataFrame:
    """One row per variant, seed, snapshot step and measure: figure (accuracy, loss, weight norm, frequencies), part
    (training, held out, ...), value."""
    rows = []
    for variant, runs in records.items():
        for record in runs:
            steps, values = curve(record)
            for key, (figure, part) in CURVES.items():
                rows.append(
                    pd.DataFrame(
                        {
                            "variant": variant,
                            "seed": record.config.train.seed,
                            "step": steps,
                            "figure": figure,
                            "part": part,
                            "value": values[key],
                        }
                    )
                )
    columns = ["variant", "seed", "step", "figure", "part", "value"]
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=columns)


def steps_frame(per_run: Sequence[dict]) -> pd.DataFrame:
    """One row per run and accuracy that reached 99 %: variant, seed, part (training, held out), step."""
    rows = [
        {"variant": label(r["weight_decay"]), "seed": r["seed"], "part": part, "step": r[key]}
        for r in per_run
        for key, part in (("train_step_99", "training"), ("test_step_99", "held out"))
        if r[key] is not None
    ]
    return pd.DataFrame(rows, columns=["variant", "seed", "part", "step"])


def runs_csv(per_run: Sequence[dict]) -> str:
    return pd.DataFrame(per_run).to_csv(index=False)
