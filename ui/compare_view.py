"""What the Ablations and Compare pages share: seeds as replicates, the levels a factor may take, training the
missing runs as one metered sweep, and the grouped results (tables with verdicts, CSV downloads).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
import streamlit as st

from attncore import ConfigError, RunConfig, settings
from attncore import task as tasks
from lab import compare, stats
from lab.compare import RULE
from lab.factors import FACTORS, level_label, with_seed
from lab.jobs.limits import Limits
from lab.store import RunRecord
from ui import runs, sweeps, tables
from ui.charts import compare as compare_charts
from ui.figure import show_chart
from ui.limits import limits
from ui.params import url_multiselect, url_number, url_toggle
from ui.plain import plain
from ui.sidebar import FIELD_LABELS

FIELD_LABELS = FIELD_LABELS | {"scaling": "Scaling"}


def compared_tasks() -> list[str]:
    """The task factor's levels: the registered tasks but those with a page of their own (Task.has_page)."""
    return [name for name in tasks.names() if not tasks.get(name).has_page]


def level_options(factor: str, lim: Limits, heads: int = 1) -> tuple[list, list]:
    """(the levels offered for a factor within the hosted caps, the default levels); the first is the baseline.
    d_k levels are those with heads × d_k within the width cap (`heads`: the count a d_k level keeps)."""

    table = {"d_k": ([4, 8, 16, 32, 64, 128], [8, 32])}  # the article's 8; a wide head
    caps = {"d_k": lim.max_d_model // heads}
    for s in settings.factors().values():
        levels = s.levels or (list(range(1, getattr(lim, s.cap) + 1)) if s.cap else ())
        table[s.factor] = (list(levels), list(s.preselected))
        caps.setdefault(s.factor, getattr(lim, s.cap) if s.cap and s.levels else None)
    table["task"] = (compared_tasks(), table["task"][1])  # not a task of its own page (Task.has_page: induction)
    options, default = table[factor]
    cap = caps[factor]
    options = [v for v in options if cap is None or v <= cap]
    return options, [v for v in default if v in options]


LEVEL_HELP = {"d_k": "A d_k level keeps the head count and sets the width: d = heads × d_k (and d_ff = 4d)."}


def level_picker(factor: str, title: str, key: str, lim: Limits, heads: int = 1) -> list:
    """A URL-bound multiselect of a factor's levels (within the hosted caps), its default levels preselected."""
    options, default = level_options(factor, lim, heads)
    format_func = format_level(factor)
    return url_multiselect(title, key, options, default, format_func=format_func, help=LEVEL_HELP.get(factor))


def capped(make: Callable[..., RunConfig], lim: Limits) -> Callable[..., RunConfig]:
    """`make`, refusing a run whose shape is over the hosted caps with a ConfigError naming the field (a d_k level
    times the heads, or a variant's depth or width, may be; the sidebar caps only its own fields)."""

    def make_capped(**overrides) -> RunConfig:
        run = make(**overrides)
        m = run.model
        for field, value, cap in (
            ("d_model", m.d_model, lim.max_d_model),
            ("n_heads", m.n_heads, lim.max_heads),
            ("n_layers", m.n_layers, lim.max_layers),
        ):
            if value > cap:
                raise ConfigError(field, f"at most {cap:,} on this server, got {value:,}")
        return run

    return make_capped


def seeds_input(key: str, default: int = 3) -> list[int]:
    """Seeds as replicates: N (at most the hosted max_seeds) from the sidebar's seed on."""
    lim = limits()
    n = url_number(
        "Seeds",
        key,
        default,
        1,
        lim.max_seeds,
        help=f"Replicates per setting (at most {lim.max_seeds} here). A difference can be shown from "
        f"{stats.seeds_needed(1)} seeds on (more when several levels share one baseline: Holm's correction).",
    )
    first = int(st.session_state.get("seed", 0))
    return list(range(first, first + n))


def seeds_text(seeds: Sequence[int]) -> str:
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}-{seeds[-1]}"


def show_invalid_combination(e: ConfigError) -> None:
    """One message naming the field, its allowed values and the level that asked for it (lab.factors says which)."""
    label = FIELD_LABELS.get(e.field, e.field)
    st.error(f"**This comparison is not valid.** {label}: {e.message}.", icon=":material/error:")


def ensure_trained(
    wanted: Sequence[RunConfig], what: str, key: str, command: str | None = None
) -> dict[RunConfig, RunRecord] | None:
    """{run: record} once every run is in the store; else the count of what is cached, a button that trains the
    missing ones as one sweep (ui.sweeps.train_button: its cost, or on a hosted server why it is refused, naming
    `command`, the command line that does the same work), and None. A view of more than max_compare_runs runs is
    refused with a message before anything is loaded (hosted mode)."""
    if refused := sweeps.view_cap_error(len(wanted), "levels, panels, variants or seeds", command):
        st.warning(refused, icon=":material/block:")
        return None
    records, missing = runs.cached_many(wanted)
    if missing:
        notice = st.empty()
        notice.info(
            f"**{len(wanted) - len(missing)} of {tables.count(len(wanted), 'run')} cached**; "
            f"{tables.count(len(missing), 'run')} still to train. The results appear once all are trained.",
            icon=":material/science:",
        )
        button = st.empty()
        if not sweeps.train_button("Train the missing: ", missing, key, command, place=button):
            return None
        notice.empty()  # from here the sweep's own line counts the runs cached and trained: this count goes stale
        if runs.sweep(missing, what, cached_before=len(records)) is None:
            return None
        records, missing = runs.cached_many(wanted)
        if missing:
            return None
        button.empty()  # it said what was missing: no longer true
    return {r.config: r for r in records}


def grouped(by_run: dict[RunConfig, RunRecord], labelled: dict[str, RunConfig], seeds: Sequence[int]):
    """{label: [records over the seeds]} for {label: run at any seed}."""
    return {label: [by_run[with_seed(run, s)] for s in seeds] for label, run in labelled.items()}


DISPLAY_NAMES = {
    "delta_mean": "Δ mean",
    "delta_min": "Δ min",
    "delta_max": "Δ max",
    "interval": "interval",
    "t_interval": "t interval",
    "differ": "seeds differing",
    "p_value": "p",
    "p_floor": "p floor",
    "p_corrected": "p (Holm)",
    "n": "seeds",
}


def comparison_table(
    comparisons: pd.DataFrame, each: bool = False, hide: Sequence[str] = (), caption: bool = True, **names
) -> list[str]:
    """The paired differences as text with magnitudes that fit (lab.compare.display), metrics by their short names;
    each=True: every number as the command line prints it (3 significant digits, p 0.03125); `hide`: columns the
    rows' facet already names (the level and baseline of a cell written out in words). Returns the sentences of
    the caption that reads it; caption=False: the caller says them (once under several tables)."""
    shown = compare.display(comparisons, each=each).rename(columns=names | DISPLAY_NAMES)
    baselines, floors = list(dict.fromkeys(comparisons["baseline"])), list(dict.fromkeys(shown["p floor"]))
    every_seed = bool((comparisons["n_nonzero"] == comparisons["n"]).all())
    # every pair differed on every seed or on none ('identical on every seed' says the none): the column says nothing
    all_or_none = bool(((comparisons["n_nonzero"] == comparisons["n"]) | (comparisons["n_nonzero"] == 0)).all())
    # So that the table fits 1,280 px: a baseline or a floor shared by every row is said once below it, not
    # repeated in a column, and each pair's smallest and largest Δ and the t interval are left to the CSV.
    levels = list(dict.fromkeys(comparisons["level"]))
    once = {"baseline"} if len(baselines) == 1 else set()
    once |= {names.get("level", "level")} if len(levels) == 1 and len(baselines) == 1 else set()
    once |= {"p floor"} if len(floors) == 1 else set()
    metrics = list(dict.fromkeys(comparisons["metric"]))
    once |= {"metric"} if len(metrics) == 1 else set()
    uncorrected = bool((comparisons["p_corrected"] == comparisons["p_value"]).all())  # one level per baseline
    once |= {"p (Holm)"} if uncorrected else {"p"}  # corrected: Holm's p decides; the uncorrected one is in the CSV
    once |= {"seeds differing"} if all_or_none else set()
    once |= set() if every_seed else {"seeds"}  # '3 of 3' names the seeds too: one column fewer, so it fits 1,280 px
    order = [c for c in shown.columns if c not in once | {"Δ min", "Δ max", "t interval"} | set(hide)]
    height = min(35 * (len(shown) + 1) + 3, 800)
    tables.show(shown.replace({"metric": metric_names()}), height=height, column_order=order)
    said = [
        "Interval: the shifts the sign-flip test does not reject, at 95 % unless the cell names a Holm level; it "
        "holds 0 exactly when no difference is shown. The t interval (95 %), Δ min and Δ max of each pair are in "
        "the comparisons CSV."
    ]
    if len(baselines) == 1:
        level = f"**{plain(str(levels[0]))}** " if len(levels) == 1 else ""
        said.append(f"Every row is {level}against the baseline **{plain(str(baselines[0]))}**, paired by seed.")
    if len(metrics) == 1:
        name = metric_names().get(metrics[0], metrics[0])
        said.append(f"Every row compares the {name}{' accuracy' if 'accuracy' in metrics[0] else ''}.")
    if uncorrected:
        said.append("Holm's correction leaves every p as it is here (one comparison per baseline and metric).")
    else:
        said.append("p (Holm): Holm's corrected p, which the verdict reads; the uncorrected p is in the CSV.")
    if every_seed:
        said.append("Every pair differed on every seed.")
    elif all_or_none:
        said.append("Every pair differed on every seed, or on none (identical on every seed).")
    if len(floors) == 1:
        k = tables.count(int(comparisons["n_nonzero"].iloc[0]), "seed")
        said.append(
            f"With {k} that differ no p can be below **{floors[0]}** (p floor: 2/2ᵐ over the m seeds that differ; "
            "a seed where both score exactly the same carries no sign)."
        )
    if caption:
        st.caption(" ".join(said))
    return said


TABLE_TITLES = {
    "test_loss": "Test loss",
    "token_accuracy": "Per-token accuracy",
    "sequence_accuracy": "Per-sequence accuracy",
    "max_attn_logit": "Largest attention logit over training",
    "min_attn_entropy": "Lowest attention entropy over training (nats)",
}  # and each task's own metrics' titles (Task.metric_labels): table_titles()


def table_titles() -> dict[str, str]:
    """{metric: title over its table}: the lab's own, and every registered task's metrics (Task.metric_labels)."""
    own = {m: title for t in map(tasks.get, tasks.names()) for m, (_, title) in t.metric_labels.items()}
    return own | TABLE_TITLES


def metric_names() -> dict[str, str]:
    """{metric: its short name in a sentence}: the lab's own, and every registered task's (Task.metric_labels)."""
    own = {m: name for t in map(tasks.get, tasks.names()) for m, (name, _) in t.metric_labels.items()}
    return own | METRIC_NAMES


def comparison_tables_by_metric(
    comparisons: pd.DataFrame, each: bool = False, hide: Sequence[str] = (), **names
) -> None:
    """comparison_table once per metric under its title: without the metric column, a wide comparison (many
    levels, cells or test lengths) fits the main area. How to read them is said once, under the last table: what
    holds for every table as it is, what holds for some with the tables it holds for; the sentence naming the
    metric is left to the titles."""
    said = {}
    for metric in dict.fromkeys(comparisons["metric"]):
        title = table_titles().get(metric, metric)
        st.markdown(f"**{title}**")
        part = comparisons[comparisons["metric"] == metric]
        sentences = comparison_table(part, each=each, hide=hide, caption=False, **names)
        said[title] = [s for s in sentences if not s.startswith("Every row compares the")]
    common = [s for s in next(iter(said.values()), []) if all(s in other for other in said.values())]
    some = {}  # a sentence that holds for some tables only: {sentence: the titles of those tables}
    for title, sentences in said.items():
        for sentence in sentences:
            if sentence not in common:
                some.setdefault(sentence, []).append(title.lower())
    by_tables = {}  # the sentences of the same tables together, their titles said once
    for sentence, titles in some.items():
        by_tables.setdefault(tuple(titles), []).append(sentence)
    tables_of = [f"{_listed(titles).capitalize()}: {_uncapitalized(' '.join(sentences))}"
                 for titles, sentences in by_tables.items()]  # fmt: skip
    st.caption(" ".join(common + tables_of))


def _uncapitalized(text: str) -> str:
    return text[:1].lower() + text[1:]


def _listed(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def show_tables(
    summary: pd.DataFrame,
    comparisons: pd.DataFrame,
    level: str = "level",
    facet: str = "facet",
    *,
    seeds_key: str | None = None,
    runs_per_seed: int = 0,
) -> None:
    """The grouped table, the paired differences with interval, p, floor and verdict, how they are computed and
    corrected, and how many seeds the view needs; when a verdict is 'too few seeds', a button (URL key
    `seeds_key`) that adds seeds up to that number, costing `runs_per_seed` runs per added seed."""
    names = {"level": level, "facet": facet}
    shown = summary.rename(columns=names)
    tables.show(shown, column_order=tables.worst_seed_columns(shown))  # fits 1,280 px: no sideways scrolling
    st.caption(
        "Mean over the seeds of each setting, and its worst seed (the highest test loss, the lowest accuracy); the CSV "
        "download has min and max of every metric."
    )
    if len(comparisons):
        comparison_table(comparisons, **names)
        said = compare.differences_text(comparisons, summary=summary)
        st.markdown(f"**What differs, computed from these runs.** {plain(said)}")
        seeds_advice(comparisons, seeds_key, runs_per_seed)
    st.caption(RULE)


def seeds_advice(
    comparisons: pd.DataFrame, seeds_key: str | None, runs_per_seed: int, max_seeds: int | None = None
) -> None:
    """What the seeds allow (lab.compare.seeds_text: how many must differ, how many did), and the button that adds
    seeds (up to `max_seeds`, default the hosted max_seeds) when a verdict is 'too few seeds'."""
    n = int(comparisons["n"].min())
    needed = compare.seeds_to_ask(comparisons)  # seeds_needed, or more where seeds tie at this rate
    st.markdown(f"**Correction and seeds.** {plain(compare.seeds_text(comparisons))}")
    if seeds_key is None or n >= needed or stats.TOO_FEW not in set(comparisons["verdict"]):
        return
    lim = limits()
    added, cap = runs_per_seed * (needed - n), lim.max_seeds if max_seeds is None else max_seeds
    if needed > cap:
        st.info(
            f"{needed} seeds is more than this server allows ({cap}): compare fewer levels to need fewer.",
            icon=":material/block:",
        )
    elif runs_per_seed * needed > lim.max_compare_runs or added > lim.max_sweep_runs:
        st.info(
            f"{needed} seeds would take {tables.count(runs_per_seed * needed, 'run')} in this view "
            f"({tables.count(added, 'more run')}): more than this server shows ({lim.max_compare_runs}) or trains "
            f"at once ({lim.max_sweep_runs}). Compare fewer levels.",
            icon=":material/block:",
        )
    else:
        st.button(
            f"Add seeds up to {needed} ({tables.count(added, 'more run')} to train)",
            key=f"{seeds_key}_more",
            type="primary",
            on_click=lambda: st.session_state.update({seeds_key: needed}),
            help="A verdict here is 'too few seeds': this many seeds let a difference be shown, if as many of the "
            "new seeds differ as of these.",
        )


METRIC_NAMES = {"test_loss": "test loss", "token_accuracy": "per-token", "sequence_accuracy": "per-sequence"}
METRIC_NAMES |= {"max_attn_logit": "largest attention logit", "min_attn_entropy": "lowest attention entropy"}


def downloads(summary: pd.DataFrame, comparisons: pd.DataFrame, stem: str) -> None:
    c1, c2 = st.columns(2)
    # the CSV written on the click (st.download_button's deferred data), not on every view; no rerun
    c1.download_button(
        "Download the grouped table (CSV)", lambda: summary.to_csv(index=False), f"{stem}-groups.csv", "text/csv",
        on_click="ignore",
    )  # fmt: skip
    c2.download_button(
        "Download the comparisons (CSV)", lambda: comparisons.to_csv(index=False), f"{stem}-comparisons.csv",
        "text/csv", on_click="ignore",
    )  # fmt: skip


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
        show_chart(compare_charts.band_curves(bands_of(smooth), log=log), "training-loss", width="stretch")
    st.caption(caption)


def breakdown_over_seeds(per_seed: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """ui.frames.breakdown_frame of each seed -> one row per variant and kind of sequence: the mean accuracy over
    the seeds and n, the test sequences of that kind (the same fixed sequences serve every seed: never a sum)."""
    frame = pd.concat(per_seed)
    counts = frame.groupby(["variant", "symbols"], sort=False)["n"]
    if (counts.nunique() > 1).any():
        raise ValueError("the seeds were scored on different test sets")
    grouped = frame.groupby(["variant", "symbols"], sort=False, as_index=False)
    return grouped.agg(accuracy=("accuracy", "mean"), n=("n", "first"))
