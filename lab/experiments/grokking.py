"""The grokking experiment (Power et al. 2022, arXiv:2201.02177; Nanda et al. 2023, arXiv:2301.05217;
docs/grokking.md): modular addition trained with and without weight decay over the same seeds, each run's steps to
99 % accuracy on its training and held-out pairs and the delay between them, its figures over the final window of
snapshots (whether it ended grokked), the loss spikes in its curves (Thilak et al. 2022's slingshots), the weight norm
and the embedding's Fourier spectrum over training, and the two variants compared by the comparison rule of
lab.compare.

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
WINDOW = 0.1  # the final window: the snapshots of the last tenth of the steps; the final figures are its means
GROKKED = 0.95  # a run "ends grokked" when its training and held-out accuracy average at least this over the window
SPIKE_BELOW = 0.9  # a spike: the training accuracy falls under this after it has reached THRESHOLD ...
# ... and it ends when the accuracy is back at THRESHOLD (seen at the snapshots)
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


def window_start(steps: int, share: float = WINDOW) -> int:
    """The first step of the final window of a run of `steps` steps: its last `share` of the steps."""
    return steps - max(1, round(share * steps)) + 1


def window(record: RunRecord) -> dict:
    """The final window of a run: its first and last step, and how many snapshots it holds."""
    steps, _ = curve(record)
    start = window_start(record.config.train.steps)
    return {"share": WINDOW, "from_step": start, "to_step": int(steps[-1]), "snapshots": int((steps >= start).sum())}


def window_means(steps: np.ndarray, values: Mapping[str, np.ndarray], start: int) -> dict[str, float]:
    """Each curve's mean over the snapshots at step `start` and after."""
    inside = np.asarray(steps) >= start
    return {k: float(np.mean(np.asarray(v, dtype=np.float64)[inside])) for k, v in values.items()}


def spikes(steps, train_accuracy, test_accuracy, below: float = SPIKE_BELOW, back: float = THRESHOLD) -> list[dict]:
    """The spikes of a run's curves: after the training accuracy first reaches `back`, each fall under `below` until
    it is back at `back` (or the run ends). Per spike its first snapshot step under `below`, the step it was back
    (None: not by the end), and the lowest training and held-out accuracy during it."""
    steps = np.asarray(steps)
    train, test = np.asarray(train_accuracy, dtype=np.float64), np.asarray(test_accuracy, dtype=np.float64)
    found, start, fitted = [], None, False
    for i, a in enumerate(train):
        if start is None and fitted and a < below:
            start = i
        elif start is not None and a >= back:
            found.append((start, i))
            start = None
        fitted = fitted or a >= back
    if start is not None:
        found.append((start, None))
    return [
        {
            "step": int(steps[i]),
            "back_at": None if j is None else int(steps[j]),
            "lowest_train_accuracy": float(train[i:j].min()),
            "lowest_test_accuracy": float(test[i:j].min()),
        }
        for i, j in found
    ]


def run_figures(record: RunRecord) -> dict:
    """One run's figures for the command line's JSON and the page's tables: the final ones are means over the final
    window (window: its steps and snapshots), the weight norm and frequencies at the end those of the final
    weights."""
    run = record.config
    steps, values = curve(record)
    train_99 = step_99(steps, values["train_accuracy"])
    test_99 = step_99(steps, values["test_accuracy"])
    final = window_means(steps, values, window_start(run.train.steps))
    found = spikes(steps, values["train_accuracy"], values["test_accuracy"])
    initial = initial_params(run)
    return {
        "seed": run.train.seed,
        "weight_decay": run.train.weight_decay,
        "train_step_99": train_99,
        "test_step_99": test_99,
        "delay": test_99 - train_99 if train_99 is not None and test_99 is not None else None,
        "final_train_accuracy": final["train_accuracy"],
        "final_test_accuracy": final["test_accuracy"],
        "final_train_loss": final["train_loss"],
        "final_test_loss": final["test_loss"],
        "grokked": final["train_accuracy"] >= GROKKED and final["test_accuracy"] >= GROKKED,
        "window": window(record),
        "spikes": len(found),
        "spike_steps": [s["step"] for s in found],
        "lowest_train_accuracy_in_spikes": min((s["lowest_train_accuracy"] for s in found), default=None),
        "lowest_test_accuracy_in_spikes": min((s["lowest_test_accuracy"] for s in found), default=None),
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
    """A summary lab.compare pairs by seed: the config and the compared figures, each its mean over the final
    window (the held-out accuracy and loss, the weight norm)."""
    steps, values = curve(record)
    final = window_means(steps, values, window_start(record.config.train.steps))
    return {
        "config": record.config.to_dict(),
        "token_accuracy": final["test_accuracy"],
        "test_loss": final["test_loss"],
        "weight_norm": final["weight_norm"],
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
    max over the seeds that reached it); over the final window the accuracies' means (and the lowest seed's), the
    seeds that ended grokked; the spikes, the seeds with any and the lowest training accuracy in one; the final
    weight norm's and frequencies' means; the window (its first and last step, its snapshots)."""
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
        for key in ("final_train_accuracy", "final_test_accuracy"):
            row |= {key: float(part[key].mean()), f"{key}_min": float(part[key].min())}
        lowest = [x for x in part["lowest_train_accuracy_in_spikes"] if x is not None and x == x]
        row |= {
            "grokked": int(part["grokked"].sum()),
            "spikes": int(part["spikes"].sum()),
            "spiking_seeds": int((part["spikes"] > 0).sum()),
            "lowest_train_accuracy_in_spikes": min(lowest) if lowest else math.nan,
        }
        for key in ("weight_norm_final", "fourier_frequencies_final"):
            row[key] = float(part[key].mean())
        first = part["window"].iloc[0]
        row |= {"window_from": first["from_step"], "window_to": first["to_step"]}
        row["window_snapshots"] = first["snapshots"]
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


def window_words(row) -> str:
    """'the last 300 steps (12 snapshots, steps 2,725–3,000)' of a variant_table row."""
    steps = int(row["window_to"]) - int(row["window_from"]) + 1
    return (
        f"the last {formats.count(steps, 'step')} ({formats.count(int(row['window_snapshots']), 'snapshot')}, "
        f"steps {int(row['window_from']):,}–{int(row['window_to']):,})"
    )


def _spike_words(row) -> str:
    if not row["spikes"]:
        return "no spike (a fall of the training accuracy under 90 % after it reached 99 %)"
    return (
        f"{formats.count(int(row['spikes']), 'spike')} (falls of the training accuracy under 90 % after it reached "
        f"99 %, down to {formats.accuracy(row['lowest_train_accuracy_in_spikes'])}) on "
        f"{int(row['spiking_seeds'])} of {int(row['seeds'])} seeds"
    )


def finding(table: pd.DataFrame, rows: pd.DataFrame, steps: int) -> str:
    """A paragraph from the numbers: each variant's steps to 99 % and the delay, the accuracies over the final window
    and how many seeds ended grokked, its spikes, then every paired comparison in words with its verdict."""
    parts = []
    for _, r in table.iterrows():
        text = f"{r['variant']}: {_reached(r, 'train_step_99', 'training accuracy')}; " + _reached(
            r, "test_step_99", "held-out accuracy"
        )
        if r["delay_reached"]:
            text += f", {r['delay_mean']:,.0f} steps after the training accuracy on average"
        text += (
            f"; over {window_words(r)} of {steps:,} the training accuracy averaged "
            f"{formats.accuracy(r['final_train_accuracy'])} and the held-out accuracy "
            f"{formats.accuracy(r['final_test_accuracy'])} (the lowest seed's "
            f"{formats.accuracy(r['final_train_accuracy_min'])} and {formats.accuracy(r['final_test_accuracy_min'])}):"
            f" {int(r['grokked'])} of {int(r['seeds'])} ended grokked (both at least {GROKKED * 100:.0f} %); "
            f"{_spike_words(r)}; at the end weight norm {r['weight_norm_final']:.1f}, the embedding's power spread "
            f"over {r['fourier_frequencies_final']:.1f} frequencies"
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
    return out + f" Paired by seed, {first['level']} minus {first['baseline']}: " + "; ".join(said) + "."


def to_json(per_run: Sequence[dict], rows: pd.DataFrame, table: pd.DataFrame, text: str) -> dict:
    """The command line's --json object: seeds (one object per run: seed, weight_decay, train_step_99,
    test_step_99 (null when not reached), delay, final accuracies over its window, grokked, spikes, ...), window (how
    the final figures are taken), variants, comparisons, finding, method."""

    def plain(value):
        if isinstance(value, float) and math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return None if isinstance(value, float) and value != value else value

    def records(frame: pd.DataFrame) -> list[dict]:
        return [{k: plain(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]

    return {
        "seeds": [{k: plain(v) for k, v in r.items()} for r in per_run],
        "window": {
            "share": WINDOW,
            "what": f"final_* figures are means over the snapshots of the last {WINDOW * 100:g} % of the steps "
            "(each run's window: its from_step, to_step and snapshots); grokked: training and held-out accuracy "
            f"both at least {GROKKED:g} there",
        },
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


def spikes_frame(per_run: Sequence[dict]) -> pd.DataFrame:
    """One row per spike: variant, seed, step (its first snapshot under SPIKE_BELOW)."""
    rows = [
        {"variant": label(r["weight_decay"]), "seed": r["seed"], "step": step}
        for r in per_run
        for step in r["spike_steps"]
    ]
    return pd.DataFrame(rows, columns=["variant", "seed", "step"])


def runs_csv(per_run: Sequence[dict]) -> str:
    """One row per run; its window as its first and last step, its spikes' steps space-separated."""
    flat = [
        {k: v for k, v in r.items() if k not in ("window", "spike_steps")}
        | {"window_from": r["window"]["from_step"], "window_to": r["window"]["to_step"]}
        | {"spike_steps": " ".join(map(str, r["spike_steps"]))}
        for r in per_run
    ]
    return pd.DataFrame(flat).to_csv(index=False)
