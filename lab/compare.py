"""Groups of runs over seeds: mean/min/max per group, loss curves as a band, and paired
differences to a baseline group with the sign-flip interval, an exact sign-flip p, Holm's correction and a
verdict (lab.stats). The loss compared is the test loss (held out, the same sequences for every
run of a task and L), not the last training minibatch's.

Groups are {label: records} with the baseline first; a record is a RunRecord or its summary() dict
(curves need RunRecords: summaries carry no loss history). Pure functions: records in, DataFrame out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from attncore.task import get as get_task
from lab import formats, stats
from lab.store import RunRecord

METRICS = ("test_loss", "token_accuracy", "sequence_accuracy")


def metrics_of(task: str) -> tuple[str, ...]:
    """The metrics a comparison of runs of `task` pairs: METRICS, and the task's own it names (Task.paired: on the
    induction task its repeat and first-copy losses, its test loss being over every position, most of them
    unpredictable)."""
    return METRICS + get_task(task).paired


RULE = stats.METHOD
GROUP_COLUMNS = ["level", "n"] + [f"{m}_{s}" for m in METRICS for s in ("mean", "min", "max")]
COMPARISON_COLUMNS = ["level", "baseline", "metric", "n", "n_nonzero", "delta_mean", "delta_min", "delta_max"]
COMPARISON_COLUMNS += ["ci_low", "ci_high", "ci_level", "t_low", "t_high", "p_value", "p_floor", "p_corrected"]
COMPARISON_COLUMNS += ["verdict"]
CURVE_COLUMNS = ["level", "step", "seeds", "mean", "min", "max"]


def _summary(record) -> dict:
    return record.summary() if isinstance(record, RunRecord) else record


def _value(summary: dict, metric: str) -> float:
    """A metric of a summary; NaN where it is missing (a test loss that could not be computed)."""
    value = summary.get(metric)
    return np.nan if value is None else float(value)


def _by_seed(label: str, records: Iterable) -> dict[int, dict]:
    """{seed: summary} of one group; a seed twice in a group is an error (pairing would be ambiguous)."""
    out = {}
    for record in records:
        s = _summary(record)
        seed = s["config"]["train"]["seed"]
        if seed in out:
            raise ValueError(f"group {label!r}: seed {seed} appears twice")
        out[seed] = s
    return out


def group_summary(groups: Mapping[str, Iterable]) -> pd.DataFrame:
    """One row per group: level, n (runs), and mean, min, max over its seeds of each metric."""
    rows = []
    for label, records in groups.items():
        by_seed = _by_seed(label, records)
        row = {"level": label, "n": len(by_seed)}
        for m in METRICS:
            values = np.array([_value(s, m) for s in by_seed.values()], dtype=float)
            stats = (values.mean(), values.min(), values.max()) if values.size else (np.nan,) * 3
            row |= {f"{m}_{name}": float(v) for name, v in zip(("mean", "min", "max"), stats, strict=True)}
        rows.append(row)
    return pd.DataFrame(rows, columns=GROUP_COLUMNS)


def paired_differences(
    groups: Mapping[str, Iterable], baseline: str | None = None, metrics: tuple[str, ...] = METRICS
) -> pd.DataFrame:
    """Every other group against the baseline (default: the first), paired by seed, one row per metric.

    Columns: level, baseline, metric, n (paired seeds), n_nonzero (seeds whose delta is not exactly 0),
    delta_mean, delta_min, delta_max, ci_low, ci_high (the sign-flip interval, at confidence ci_level: it holds 0
    exactly when no difference is shown), t_low, t_high (95 % t interval), p_value (exact sign-flip), p_floor
    (2 / 2^n_nonzero), p_corrected (Holm across the levels, per metric) and verdict (lab.stats.VERDICTS), as
    lab.stats.METHOD says. Every group must hold the baseline's
    seeds exactly; otherwise a ValueError names the group and the seeds that differ.
    """
    if not groups:
        return pd.DataFrame(columns=COMPARISON_COLUMNS)
    baseline = next(iter(groups)) if baseline is None else baseline
    if baseline not in groups:
        raise ValueError(f"baseline {baseline!r} is not one of the groups: {', '.join(map(repr, groups))}")
    base = _by_seed(baseline, groups[baseline])
    seeds = sorted(base)
    deltas: dict[str, dict[str, np.ndarray]] = {m: {} for m in metrics}
    for label, records in groups.items():
        if label == baseline:
            continue
        other = _by_seed(label, records)
        if set(other) != set(base):
            missing, extra = sorted(set(base) - set(other)), sorted(set(other) - set(base))
            raise ValueError(f"group {label!r} is not over the baseline's seeds: missing {missing}, extra {extra}")
        for m in metrics:
            base_values = np.array([_value(base[s], m) for s in seeds], dtype=float)
            deltas[m][label] = np.array([_value(other[s], m) for s in seeds], dtype=float) - base_values
    results = {m: stats.compare_paired(deltas[m]) for m in metrics}
    rows = [
        {"level": label, "baseline": baseline, "metric": m} | results[m][label]
        for label in deltas[metrics[0]]
        for m in metrics
    ]
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


LENGTH_METRICS = ("token_accuracy", "sequence_accuracy")


def length_comparisons(results: Mapping[str, Mapping[int, Iterable]]) -> pd.DataFrame:
    """Paired differences at each test length: results are {label: {seed: [LengthResult]}} (attncore.evaluate),
    the labels in order. At each length L' the baseline is the first label with a number there (a learned
    table has none past its trained length), compared with every other label that has one; Holm per length
    and metric. Columns: `test_length`, then paired_differences' columns."""
    by_length: dict[int, dict[str, list[dict]]] = {}
    for label, per_seed in results.items():
        for seed, rows in per_seed.items():
            for r in rows:
                if r.token_accuracy is None or r.sequence_accuracy is None:
                    continue
                values = {"token_accuracy": r.token_accuracy, "sequence_accuracy": r.sequence_accuracy}
                entry = {"config": {"train": {"seed": seed}}} | values
                by_length.setdefault(r.length, {}).setdefault(label, []).append(entry)
    frames = []
    for length in sorted(by_length):
        groups = {label: g for label, g in by_length[length].items() if len(g) == len(results[label])}
        if len(groups) < 2:
            continue
        frame = paired_differences(groups, metrics=LENGTH_METRICS)
        frame.insert(0, "test_length", length)
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=["test_length", *COMPARISON_COLUMNS])
    return pd.concat(frames, ignore_index=True)


def beyond_range_comparisons(results: Mapping[str, Mapping[int, Iterable]], trained_max: int) -> pd.DataFrame:
    """Each label against the first on the mean accuracy past the trained lengths (test lengths > trained_max),
    paired by seed; results as length_comparisons takes them. A label without a number at some length past the
    range (a learned table) is left out; Holm across the labels, per metric. Columns: paired_differences'."""
    groups: dict[str, list[dict]] = {}
    for label, per_seed in results.items():
        entries = []
        for seed, rows in per_seed.items():
            past = [r for r in rows if r.length > trained_max]
            if not past or any(r.token_accuracy is None or r.sequence_accuracy is None for r in past):
                break
            entries.append(
                {"config": {"train": {"seed": seed}}}
                | {m: float(np.mean([getattr(r, m) for r in past])) for m in LENGTH_METRICS}
            )
        else:
            if entries:
                groups[label] = entries
    if len(groups) < 2:
        return pd.DataFrame(columns=COMPARISON_COLUMNS)
    return paired_differences(groups, metrics=LENGTH_METRICS)


def _per_baseline(comparisons: pd.DataFrame) -> int:
    """The most levels that share one baseline (Holm corrects across them), per facet, test length and metric."""
    keys = [c for c in ("facet", "test_length", "baseline", "metric") if c in comparisons.columns]
    return int(comparisons.groupby(keys).size().max())


def _shared_across_cells(comparisons: pd.DataFrame) -> bool:
    """Whether one baseline is compared in more than one cell (facet) for a metric: Holm corrects within a cell."""
    if "facet" not in comparisons.columns or comparisons.empty:
        return False
    return bool(comparisons.groupby(["baseline", "metric"])["facet"].nunique().max() > 1)


def seeds_needed(comparisons: pd.DataFrame) -> int:
    """The fewest seeds that differ (nonzero deltas) with which every comparison of the table could show a
    difference (Holm per baseline and metric: the largest number of levels sharing one baseline decides); 0 for
    an empty table."""
    if comparisons.empty:
        return 0
    return stats.seeds_needed(_per_baseline(comparisons))


def most_levels(seeds: int, alpha: float = stats.ALPHA) -> int:
    """The most levels compared with one baseline (Holm across them) for which `seeds` differing seeds can show a
    difference: m * 2 / 2^seeds < alpha (0 when not even one can)."""
    return max(0, math.ceil(alpha / stats.p_floor(seeds)) - 1) if seeds > 0 else 0


def before_text(
    seeds: int, levels: int, alpha: float = stats.ALPHA, noun: str = "variant", base: str = "the base"
) -> str:
    """What a view of `levels` compared with one baseline over `seeds` seeds can conclude, said before it is
    trained, from the rule its verdicts follow (the exact sign-flip test's floor 2/2ᵐ, Holm across the levels)."""
    if levels < 1 or seeds < 1:
        return ""
    needed, floor = stats.seeds_needed(levels, alpha), stats.p_floor(seeds)
    rule = f"the exact test's smallest p with {formats.count(seeds, 'seed')} is 2/2^{seeds} = {floor:.3g}"
    if levels > 1:
        rule += f", times {levels} {noun}s (Holm) {levels * floor:.3g}"
    article = "An" if noun[0] in "aeiou" else "A"
    if seeds >= needed:
        where = "on every seed" if seeds == needed else "on nearly every seed"
        return (
            f"**What these seeds can conclude.** {article} {noun} can be shown to differ from {base} ({rule}, below "
            f"{alpha:g}) where it lands on the same side of {base} {where}; a difference not shown is not shown "
            "to be absent, and the size of a difference is read from the interval, not the verdict."
        )
    fewer = most_levels(seeds, alpha)
    instead = f" or at most {formats.count(fewer, noun)} at these seeds" if fewer else ""
    return (
        f"**What these seeds can conclude: no difference can be shown** ({rule}, not below {alpha:g}): every "
        f"verdict will be 'too few seeds'. The curves and tables still show what the runs did. To show a "
        f"difference, take {needed} seeds{instead} (more where seeds tie exactly: after the runs the page says how "
        "many)."
    )


def _too_few(comparisons: pd.DataFrame) -> pd.DataFrame:
    return comparisons[comparisons["verdict"] == stats.TOO_FEW]


def seeds_to_ask(comparisons: pd.DataFrame) -> int:
    """The seeds to run so that the 'too few seeds' comparisons could reach seeds_needed differing seeds, if the
    share of seeds that differ stays what it is (k of n differ: needed * n / k); seeds_needed when none is."""
    needed, few = seeds_needed(comparisons), _too_few(comparisons)
    if few.empty:
        return needed
    rates = [math.ceil(needed * r.n / r.n_nonzero) for r in few.itertuples() if r.n_nonzero > 0]
    return max([needed, *rates])


def seeds_text(comparisons: pd.DataFrame) -> str:
    """What the seeds allow, in one sentence for the page and the CLI: how many must differ, how many there are,
    how many differed where the verdict is 'too few seeds'."""
    m, needed = _per_baseline(comparisons), seeds_needed(comparisons)
    n = int(comparisons["n"].min())
    how = "one comparison per baseline" if m == 1 else f"Holm across the {m} levels compared with one baseline"
    if m == 1 and _shared_across_cells(comparisons):
        how = "one comparison per cell, each cell its own question (cells sharing a baseline are not corrected across)"
    text = (
        f"With {how}, per metric, a difference can be shown once {needed} seeds differ (the floor 2/2ᵐ of m "
        f"differing seeds, times {m}, must be below 0.05; a seed on which both score exactly the same carries no "
        f"sign). These runs have {formats.count(n, 'seed')}."
    )
    few = _too_few(comparisons)
    tied = few[few["n_nonzero"] < few["n"]]
    if len(tied):
        worst = tied.loc[tied["n_nonzero"].idxmin()]
        text += (
            f" Where the verdict is 'too few seeds' as few as {int(worst.n_nonzero)} of {int(worst.n)} differed "
            f"({worst.level}, {worst.metric}): at that rate about {seeds_to_ask(comparisons)} seeds would be needed."
        )
    return text


METRIC_WORDS = {"test_loss": "test loss", "token_accuracy": "per-token", "sequence_accuracy": "per-sequence",
                "repeat_loss": "repeat loss", "first_loss": "first-copy loss"}  # fmt: skip


def _base_mean(summary: pd.DataFrame | None, r) -> float:
    """The baseline group's mean of r.metric in group_summary's table (per facet when faceted); NaN if absent."""
    if summary is None or f"{r.metric}_mean" not in summary.columns:
        return math.nan
    rows = summary[summary["level"] == r.baseline]
    if "facet" in summary.columns and hasattr(r, "facet"):
        rows = rows[rows["facet"] == r.facet]
    return float(rows[f"{r.metric}_mean"].iloc[0]) if len(rows) == 1 else math.nan


def differences_text(
    comparisons: pd.DataFrame, names: Mapping[str, str] | None = None, summary: pd.DataFrame | None = None
) -> str:
    """What differs and by how much, level by level, from the comparisons: the metrics with a difference shown
    (Δ mean and its interval; for the test loss, given group_summary's `summary`, also as a share of the baseline's
    mean), those identical on every seed, and those where no difference is shown or the seeds are too few (with how
    many differed). `names`: metric -> words (default METRIC_WORDS). '' for no rows."""
    names = METRIC_WORDS | dict(names or {})
    keys = [c for c in ("facet", "test_length") if c in comparisons.columns] + ["level"]
    parts = []
    for key, rows in comparisons.groupby(keys, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        label = ", ".join(str(k) for k in key)
        said = {v: [] for v in stats.VERDICTS}
        for r in rows.itertuples():
            word = names.get(r.metric, r.metric)
            if r.verdict == stats.SHOWN:
                interval = stats.format_interval(r.ci_low, r.ci_high) + _level_note(r.ci_level)
                word = f"{word} by {stats.format_delta(r.delta_mean)} {interval}"
                base = _base_mean(summary, r) if r.metric == "test_loss" else math.nan
                if base == base and base > 0:
                    share = formats.with_spec(100 * r.delta_mean / base, "+.2g")  # the lab's minus sign
                    word += f", {share} % of {r.baseline}'s mean {formats.loss(base)}"
            elif r.verdict in (stats.TOO_FEW, stats.NOT_SHOWN) and r.n_nonzero < r.n:
                word = f"{word} ({r.n_nonzero} of {r.n} seeds differ)"
            said[r.verdict].append(word)
        segments = [f"{verdict}: {', '.join(words)}" for verdict, words in said.items() if words]
        segments.sort(key=lambda t: not t.startswith(stats.SHOWN))
        parts.append(f"{label}: " + "; ".join(segments))
    return ". ".join(parts) + ("." if parts else "")


def _level_note(confidence: float) -> str:
    """' (97.5 %)' after an interval inverted at another level than 95 % (a Holm step), else ''."""
    if confidence != confidence or abs(confidence - stats.CONFIDENCE) < 1e-12:
        return ""
    return f" ({stats.format_level(confidence)})"


def _spec(values) -> str:
    """lab.formats.column_spec over the finite values: one format for a whole column."""
    return formats.column_spec([v for v in values if v == v and not math.isinf(v)])


def _signed_column(values, spec: str) -> list[str]:
    """Signed differences in the column's one spec; exactly 0 as '0' (identical on every seed), never '+0.0000'."""
    return ["0" if v == 0 else formats.with_spec(v, spec, signed=True) for v in values]


def _interval(low: float, high: float, spec: str) -> str:
    """'[low, high]' in the column's spec; '(−∞, +∞)' when no shift is rejected, '–' when there is none."""
    if low != low or high != high:
        return "–"
    if math.isinf(low) and math.isinf(high):
        return "(−∞, +∞)"
    low_text, high_text = _signed_column([low, high], spec)
    return f"[{low_text}, {high_text}]"


def display(comparisons: pd.DataFrame, each: bool = False) -> pd.DataFrame:
    """The comparisons as text for people, each column in one format (lab.formats.column_spec): differences and
    intervals to 3 significant digits of the column's smallest (scientific when that is below 1e-3; exactly 0 as
    '0', never +0.0000 beside a verdict), the sign-flip interval with its level when it is not 95 %, the t interval
    apart, p, Holm's p and the floor to 4 (lab.formats.p_values), 'differ' as k of n seeds; the verdict next to the
    level and metric, so a narrow table still shows it. each=True writes every number on its own as the command
    line prints it (3 significant digits: lab.stats.format_delta, format_interval; p to 4: '0.03125')."""
    out = comparisons.copy()
    ci = list(zip(out["ci_low"], out["ci_high"], (_level_note(c) for c in out["ci_level"]), strict=True))
    t = list(zip(out["t_low"], out["t_high"], strict=True))
    if each:
        for c in ("delta_mean", "delta_min", "delta_max"):
            out[c] = [stats.format_delta(v) for v in out[c]]
        out["ci_low"] = [stats.format_interval(lo, hi) + note for lo, hi, note in ci]
        out["t_low"] = [stats.format_interval(lo, hi) for lo, hi in t]
        for c in ("p_value", "p_floor", "p_corrected"):
            out[c] = [stats.format_p(v) for v in out[c]]
        return _display_columns(out)
    for c in ("delta_mean", "delta_min", "delta_max"):
        out[c] = _signed_column(out[c], _spec(out[c]))
    spec = _spec([*out["ci_low"], *out["ci_high"]])  # both ends of every row's interval in one format
    out["ci_low"] = [_interval(lo, hi, spec) + note for lo, hi, note in ci]
    spec = _spec([*out["t_low"], *out["t_high"]])
    out["t_low"] = [_interval(lo, hi, spec) for lo, hi in t]
    for c in ("p_value", "p_floor", "p_corrected"):
        out[c] = formats.p_values(out[c])  # one format per column (never 0.007812 beside 0.25)
    return _display_columns(out)


def _display_columns(out: pd.DataFrame) -> pd.DataFrame:
    """display's shared end: 'differ' as k of n, the columns renamed and in reading order."""
    out["n_nonzero"] = [f"{k} of {n}" for k, n in zip(out["n_nonzero"], out["n"], strict=True)]
    out = out.drop(columns=["ci_high", "t_high", "ci_level"])
    out = out.rename(columns={"ci_low": "interval", "t_low": "t_interval", "n_nonzero": "differ"})
    first = [c for c in ("facet", "test_length") if c in out]
    first += ["level", "metric", "verdict", "n", "differ", "delta_mean", "interval", "p_value", "p_corrected"]
    first += ["p_floor", "t_interval", "delta_min", "delta_max", "baseline"]
    return out[first + [c for c in out.columns if c not in first]]


def curve_bands(groups: Mapping[str, Iterable[RunRecord]], smooth: int = 1) -> pd.DataFrame:
    """Loss curves over seeds: per group and step (1-based), the mean, min and max of the training loss.

    smooth > 1 takes a trailing rolling mean over that many steps of each run before the band.
    The runs of one group must have the same number of steps.
    """
    if isinstance(smooth, bool) or not isinstance(smooth, int) or smooth < 1:
        raise ValueError(f"smooth must be an integer >= 1, got {smooth!r}")
    parts = []
    for label, records in groups.items():
        histories = [np.asarray(r.loss_history, dtype=float) for r in records]
        if not histories:
            continue
        if len({h.size for h in histories}) > 1:
            raise ValueError(f"group {label!r}: runs of different lengths {sorted({h.size for h in histories})}")
        curves = pd.DataFrame(np.stack(histories, axis=1))  # (steps, seeds)
        if smooth > 1:
            curves = curves.rolling(smooth, min_periods=1).mean()
        values = curves.to_numpy()
        parts.append(
            pd.DataFrame(
                {
                    "level": label,
                    "step": np.arange(1, len(values) + 1),
                    "seeds": values.shape[1],
                    "mean": values.mean(axis=1),
                    "min": values.min(axis=1),
                    "max": values.max(axis=1),
                }
            )
        )
    if not parts:
        return pd.DataFrame(columns=CURVE_COLUMNS)
    return pd.concat(parts, ignore_index=True)[CURVE_COLUMNS]


def snapshot_bands(groups: Mapping[str, Iterable[RunRecord]], metric: str = "sequence_accuracy") -> pd.DataFrame:
    """Accuracy during training over seeds: per group and snapshot step, the mean, min and max of `metric`
    (token_accuracy or sequence_accuracy on the snapshots' test subset). Columns as curve_bands."""
    if metric not in ("token_accuracy", "sequence_accuracy"):
        raise ValueError(f"metric must be token_accuracy or sequence_accuracy, got {metric!r}")
    parts = []
    for label, records in groups.items():
        runs = [r.snapshots for r in records if r.snapshots]
        if not runs:
            continue
        steps = {tuple(s.step for s in snaps) for snaps in runs}
        if len(steps) > 1:
            raise ValueError(f"group {label!r}: runs with different snapshot steps")
        values = np.array([[getattr(s, metric) for s in snaps] for snaps in runs], dtype=float).T  # (steps, seeds)
        parts.append(
            pd.DataFrame(
                {
                    "level": label,
                    "step": list(steps.pop()),
                    "seeds": values.shape[1],
                    "mean": values.mean(axis=1),
                    "min": values.min(axis=1),
                    "max": values.max(axis=1),
                }
            )
        )
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=CURVE_COLUMNS)
