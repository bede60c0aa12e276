"""The factors a comparison may vary (task, L, position, ..., the head width d_k), the runs of a comparison over
seeds, and its records grouped by factor level into lab.compare's groups, tables and JSON. Pure: no streamlit.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import pandas as pd

from attncore import ConfigError, RunConfig, settings
from attncore import task as tasks
from attncore.config import OPTIONAL_FIELDS
from lab import compare, formats
from lab.store import RunRecord


def factors_for(task: str) -> list[str]:
    """The factors a comparison of runs of `task` may vary: all of FACTORS but those the task excludes
    (Task.excluded: on the induction task the task, L, a training range or randomized positions, settings of the
    article's tasks)."""
    excluded = tasks.get(task).excluded
    setting = {s.factor: s.name for s in settings.factors().values()}  # d_k: derived from d, never excluded
    return [f for f in FACTORS if setting.get(f) not in excluded]


@dataclass(frozen=True)
class Factor:
    name: str  # the CLI's --group-by name
    arg: str  # the make_run keyword
    label: str  # what the dashboard calls it (short: its URL holds it)
    section: str  # where it lives in RunConfig.to_dict(): model, train or task
    key: str  # the field in that section


def _factors() -> dict[str, Factor]:
    """Every setting that is a factor (attncore.settings), and d_k after the heads: derived, d_k = d_model // n_heads;
    a level v is the run at d_model = v × its heads (head count kept). A range's level is its MIN (make_run's
    train_min), None for a fixed L."""
    out = {}
    for s in settings.factors().values():
        arg = "train_min" if s.name == "train_lengths" else s.name
        out[s.factor] = Factor(s.factor, arg, s.factor_label or s.factor, s.section, s.config_field)
        if s.name == "n_heads":
            out["d_k"] = Factor("d_k", "d_model", "d_k", "model", "d_model")
    return out


FACTORS = _factors()


def _config(record) -> dict:
    """The config dict of a RunConfig, a RunRecord or a summary() dict, with the fields to_dict leaves out at
    their default filled in."""
    if isinstance(record, RunConfig):
        d = record.to_dict()
    else:
        d = record.config.to_dict() if isinstance(record, RunRecord) else record["config"]
    return {section: OPTIONAL_FIELDS.get(section, {}) | fields for section, fields in d.items()}


def value_of(record_or_run, factor: str):
    """The factor's value in a run (RunConfig), a RunRecord or a summary() dict."""
    f = FACTORS[factor]
    config = _config(record_or_run)
    if factor == "d_k":
        return config["model"]["d_model"] // config["model"]["n_heads"]
    value = config[f.section][f.key]
    return value[0] if factor == "range" and value is not None else value


def level_label(factor: str, value) -> str:
    """How a level is named in tables, charts and JSON: on/off for scaling (and any switch: qk-norm), lr as 3e-3
    (lab.formats, as the sidebar writes it; still a number to a CSV reader), the value otherwise."""
    if factor == "scaling" or isinstance(value, bool):
        return "on" if value else "off"
    if factor in ("range", "randomized") and value is None:
        return "fixed L" if factor == "range" else "off"
    if factor == "lr":
        return formats.learning_rate(float(value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def with_seed(run: RunConfig, seed: int) -> RunConfig:
    """The same run at another seed (every other field unchanged, so it is as valid as `run`)."""
    return dataclasses.replace(run, train=dataclasses.replace(run.train, seed=seed))


def comparison_runs(
    make: Callable[..., RunConfig], factor: str, levels: Sequence, seeds: Sequence[int], facet=None, facet_levels=()
) -> list[RunConfig]:
    """The runs of a comparison: every (facet level, level, seed), each make(**{arg: value, "seed": seed}).

    `make` is ui.sidebar.make or make_run-like; it raises ConfigError for an invalid combination. A d_k level
    keeps the head count (the facet's when the panels are by heads, else make()'s) and sets d_model = heads × d_k.
    Duplicates are dropped (order kept).
    """
    facets = [(facet, v) for v in facet_levels] if facet else [(None, None)]
    runs = []
    for facet_name, facet_value in facets:
        extra = {facet_name: facet_value} if facet_name else {}
        for value in levels:
            try:
                kw = make_arguments(make, extra | {factor: value})
                runs += [make(**kw, seed=seed) for seed in seeds]
            except ConfigError as e:
                where = f"{factor} {level_label(factor, value)}"
                where += f", {facet_name} {level_label(facet_name, facet_value)}" if facet_name else ""
                raise ConfigError(e.field, f"{e.message} (asked for by {where})") from None
    return list(dict.fromkeys(runs))


def make_arguments(make: Callable[..., RunConfig], levels: dict) -> dict:
    """make's keywords for {factor: value}: each factor's make_run argument; d_k is d_model = heads × d_k, with
    the heads of `levels` or else of make() (no other factor changes the head count)."""
    kw = {FACTORS[name].arg: value for name, value in levels.items() if name != "d_k"}
    if "d_k" in levels:
        if "d_model" in kw:
            raise ConfigError("d_model", "vary d or d_k, not both (d = heads × d_k)")
        heads = kw["n_heads"] if "n_heads" in kw else make().model.n_heads
        kw["d_model"] = levels["d_k"] * heads
    return kw


def varied_besides(records: Iterable, factor: str) -> list[str]:
    """What differs between the records besides the factor and the seed: factor names, else section.key. A d_k
    level sets d, so d is not reported for d_k; nor d_ff for d or d_k when it is 4d in every record (make_run's
    default follows d)."""
    configs = [_config(record) for record in records]
    f = FACTORS[factor]
    names = {(g.section, g.key): g.name for g in FACTORS.values() if g.name != "d_k"}
    implied = {(f.section, f.key), ("train", "seed")}
    if factor in ("d", "d_k") and all(c["model"]["d_ff"] == 4 * c["model"]["d_model"] for c in configs):
        implied.add(("model", "d_ff"))
    seen: dict[str, set] = {}
    for config in configs:
        for section, fields in config.items():
            for key, value in fields.items():
                if (section, key) not in implied:
                    seen.setdefault(names.get((section, key), f"{section}.{key}"), set()).add(repr(value))
    return [name for name, values in seen.items() if len(values) > 1]


def group_by(records: Iterable, factor: str, levels: Sequence | None = None) -> dict[str, list]:
    """{level label: records} in the order of `levels` (default: first appearance); the first is the baseline."""
    records = list(records)
    order = list(levels) if levels is not None else list(dict.fromkeys(value_of(r, factor) for r in records))
    groups = {level_label(factor, v): [] for v in order}
    for record in records:
        label = level_label(factor, value_of(record, factor))
        if label in groups:
            groups[label].append(record)
    return groups


def faceted(records: Iterable, factor: str, levels: Sequence, facet: str | None, facet_levels: Sequence = ()):
    """[(facet label or None, groups)]: one group_by per facet level (or one for all records)."""
    records = list(records)
    if not facet:
        return [(None, group_by(records, factor, levels))]
    return [
        (level_label(facet, v), group_by([r for r in records if value_of(r, facet) == v], factor, levels))
        for v in facet_levels
    ]


def snapshot_tables(parts, metric: str = "sequence_accuracy") -> pd.DataFrame:
    """compare.snapshot_bands over every facet of faceted(); a `facet` column when faceted."""
    frames = []
    for facet, groups in parts:
        frame = compare.snapshot_bands(groups, metric)
        if facet is not None:
            frame.insert(0, "facet", facet)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=compare.CURVE_COLUMNS)


def tables(
    parts, smooth: int = 1, curves: bool = True, metrics: tuple[str, ...] = compare.METRICS
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(groups, comparisons of `metrics`, curve bands) over every facet of faceted(); a `facet` column when
    faceted."""
    frames = ([], [], [])
    for facet, groups in parts:
        made = (compare.group_summary(groups), compare.paired_differences(groups, metrics=metrics))
        made += (compare.curve_bands(groups, smooth) if curves else pd.DataFrame(columns=compare.CURVE_COLUMNS),)
        for out, frame in zip(frames, made, strict=True):
            if facet is not None:
                frame.insert(0, "facet", facet)
            out.append(frame)
    return tuple(pd.concat(f, ignore_index=True) if f else pd.DataFrame() for f in frames)


def to_json(factor: str, groups: dict[str, list], table: pd.DataFrame, comparisons: pd.DataFrame) -> dict:
    """The CLI's --group-by --json object: `groups` (level, value, n, each metric's mean/min/max: test_loss,
    token_accuracy, sequence_accuracy) and `comparisons` (level, baseline, metric, n, n_nonzero, delta_mean/min/max,
    ci_low, ci_high and ci_level (the sign-flip interval, agreeing with the verdict), t_low, t_high (95 % t
    interval), p_value, p_floor, p_corrected, verdict: lab.compare.paired_differences), `seeds` (what they allow:
    lab.compare.seeds_text) and `method` (how they are computed: lab.stats.METHOD)."""
    values = {label: value_of(records[0], factor) for label, records in groups.items() if records}
    out_groups = [
        {"factor": factor, "level": row.level, "value": values.get(row.level), "n": int(row.n)}
        | {m: {s: _number(getattr(row, f"{m}_{s}")) for s in ("mean", "min", "max")} for m in compare.METRICS}
        for row in table.itertuples()
    ]
    keys = ("level", "baseline", "metric", "n", "n_nonzero", "delta_mean", "delta_min", "delta_max", "ci_low")
    keys += ("ci_high", "ci_level", "t_low", "t_high", "p_value", "p_floor", "p_corrected", "verdict")
    counts = {"n", "n_nonzero"}
    numeric = set(keys) - {"level", "baseline", "metric", "verdict"} - counts
    out_comparisons = [
        {k: _number(v) if k in numeric else int(v) if k in counts else v for k, v in zip(keys, row, strict=True)}
        for row in comparisons[list(keys)].itertuples(index=False)
    ]
    out = {"factor": factor, "groups": out_groups, "comparisons": out_comparisons}
    if len(comparisons):
        out["seeds"] = compare.seeds_text(comparisons)
    return out | {"method": compare.RULE}


def _number(value) -> float | str | None:
    value = float(value)
    if math.isinf(value):  # an interval no shift bounds (fewer than 6 seeds): JSON has no infinity
        return "inf" if value > 0 else "-inf"
    return value if value == value else None  # NaN (an empty group) is null in JSON
