"""Results as pandas DataFrames, one function per table: the runs, the accuracy table and the ablations
(docs/experiments.md).

Each function takes RunRecords or their summary() dicts (what list_cached returns), so the command
line and the dashboard share them; DataFrame.to_csv exports any of them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np
import pandas as pd

from attncore import settings as schema
from attncore.config import RunConfig
from attncore.settings import POSITIONAL, table_columns, value_of
from lab import phrases
from lab.store import RunRecord

# The config columns that make two runs of one task, L and seed differ (max_len follows from L), as declared when
# imported; the functions read the records each time (attncore.settings.table_columns).
SETTINGS = table_columns()
RUN_COLUMNS = list(POSITIONAL) + SETTINGS
RESULT_COLUMNS = ["test_loss", "final_loss", "token_accuracy", "sequence_accuracy", "distinct_accuracy"]
RESULT_COLUMNS += ["n_distinct"]
RESULT_COLUMNS += ["repeated_accuracy", "n_repeated", "n_params", "train_seconds", "eval_seconds"]


def _summary(record) -> dict:
    return record.summary() if isinstance(record, RunRecord) else record


def _config(record) -> RunConfig:
    if isinstance(record, RunConfig):
        return record
    if isinstance(record, RunRecord):
        return record.config
    return RunConfig.from_dict(record["config"])


def _flat_config(run: RunConfig) -> dict:
    return {name: value_of(run, schema.SETTINGS[name]) for name in POSITIONAL + tuple(table_columns())}


def runs_frame(records: Iterable) -> pd.DataFrame:
    """One row per run: its config flattened (task, length, seed, position, ...) and its results."""
    rows = []
    for record in records:
        s = _summary(record)
        rows.append(_flat_config(_config(record)) | {k: s.get(k) for k in RESULT_COLUMNS})  # no test_loss: None
    return pd.DataFrame(rows, columns=list(POSITIONAL) + table_columns() + RESULT_COLUMNS)


def _settings(frame: pd.DataFrame) -> list[tuple]:
    return list(frame[table_columns()].itertuples(index=False, name=None))


def _main_settings(frame: pd.DataFrame) -> tuple:
    """The settings most runs share (the first such on a tie): the baseline of a sweep."""
    return Counter(_settings(frame)).most_common(1)[0][0]


def accuracy_table(records: Iterable, base: RunConfig | None = None) -> pd.DataFrame:
    """Per task and L: mean and min over seeds of the per-token and per-sequence accuracy, and the mean test loss.

    Only runs with the settings of `base` count (default: the settings most runs share), so the
    ablations of a sweep stay out of it; they are ablation_table's.
    """
    frame = _accuracy_runs(records, base)
    columns = ["task", "length", "seeds", "token_accuracy_mean", "token_accuracy_min"]
    columns += ["sequence_accuracy_mean", "sequence_accuracy_min", "test_loss_mean"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    table = (
        frame.groupby(["task", "length"], sort=False)
        .agg(
            seeds=("seed", "nunique"),
            token_accuracy_mean=("token_accuracy", "mean"),
            token_accuracy_min=("token_accuracy", "min"),
            sequence_accuracy_mean=("sequence_accuracy", "mean"),
            sequence_accuracy_min=("sequence_accuracy", "min"),
            test_loss_mean=("test_loss", lambda x: x.astype(float).mean(skipna=False)),  # a missing one: NaN
        )
        .reset_index()
    )
    return table[columns]


def _accuracy_runs(records: Iterable, base: RunConfig | None) -> pd.DataFrame:
    """runs_frame of the runs accuracy_table counts: those with the settings of `base` (default: the most common)."""
    frame = runs_frame(records)
    if frame.empty:
        return frame
    settings = _main_settings(frame) if base is None else tuple(_flat_config(base)[k] for k in table_columns())
    return frame[[s == settings for s in _settings(frame)]]


def seeds_text(records: Iterable, base: RunConfig | None = None) -> str:
    """Which seeds accuracy_table's rows are over, for its caption: 'seeds 0, 1, 2' when every row has the same
    ones, else each row's that differs from the most common set: 'seeds 0, 1, 2 (copy L = 8: seed 0)'."""
    frame = _accuracy_runs(records, base)
    if frame.empty:
        return "no seeds"
    by_row = {key: tuple(sorted(set(g["seed"]))) for key, g in frame.groupby(["task", "length"], sort=False)}
    common = Counter(by_row.values()).most_common(1)[0][0]

    def named(seeds: tuple) -> str:
        return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))

    text = named(common)
    others = [f"{task} L = {length}: {named(seeds)}" for (task, length), seeds in by_row.items() if seeds != common]
    return text + (f" ({'; '.join(others)})" if others else "")


def ablation_base(records: Iterable) -> RunConfig:
    """The reference run of a sweep's ablations: the run of the most common settings in the (task, L, seed)
    with the most runs (copy, L = 6, seed 0 in the article sweep)."""
    records = list(records)
    frame = runs_frame(records)
    sizes = frame.groupby(["task", "length", "seed"], sort=False).size()
    task, length, seed = sizes.idxmax()
    main, settings = _main_settings(frame), _settings(frame)
    same = (frame["task"] == task) & (frame["length"] == length) & (frame["seed"] == seed)
    rows = np.flatnonzero(same.to_numpy())
    return _config(records[next((i for i in rows if settings[i] == main), rows[0])])


def ablation_table(records: Iterable, base: RunConfig | None = None) -> pd.DataFrame:
    """The runs of base's task, L and seed: variant name, test loss, accuracies and their difference to base.

    base defaults to ablation_base(records). Base comes first, then the others in input order. The loss is the
    test loss (held out, the same sequences for every variant), not the last training batch's (final_loss).
    """
    records = list(records)
    frame = runs_frame(records)
    metrics = ["test_loss", "token_accuracy", "sequence_accuracy", "distinct_accuracy", "repeated_accuracy"]
    compared = ("test_loss", "token_accuracy", "sequence_accuracy")
    columns = ["variant"] + metrics + [f"{m}_diff" for m in compared]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    configs = [_config(r) for r in records]
    base = ablation_base(records) if base is None else base
    same = [(c.task, c.train.seed) == (base.task, base.train.seed) for c in configs]
    order = sorted(np.flatnonzero(same), key=lambda i: configs[i] != base)  # stable: base first
    table = frame.iloc[order][metrics].reset_index(drop=True)
    table.insert(0, "variant", [variant_name(configs[i], base) for i in order])
    base_rows = [i for i in order if configs[i] == base]
    if base_rows:
        reference = frame.iloc[base_rows[0]]
        for m in compared:
            table[f"{m}_diff"] = table[m].astype(float) - float("nan" if reference[m] is None else reference[m])
    else:  # base itself was not run: differences are unknown
        for m in compared:
            table[f"{m}_diff"] = np.nan
    return table[columns]


def variant_name(run: RunConfig, base: RunConfig) -> str:
    """How `run` differs from `base`, in the article's words: 'no position', 'pre-LN, lr 1e-2', 'full' if not
    (lab.phrases, from the settings' records)."""
    return phrases.variant_name(_config(run), _config(base))
