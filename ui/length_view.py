"""The Length generalisation page's first view: the literature's protocol. Five encodings trained on
lengths 1 to 8 (one length per batch), tested by greedy generation at 1 to 16, over seeds, with and without
randomized positions; what the lab found (computed from the runs) beside what the papers found.

A section, not a page: it returns instead of stopping, so the page's other view still renders.
"""

from __future__ import annotations

import streamlit as st

from attncore import ConfigError
from attncore import task as tasks
from lab.compare import RULE, before_text, beyond_range_comparisons
from lab.experiments.lengths import (
    LIT_L,
    LIT_NMAX,
    LIT_POSITIONS,
    LIT_SEEDS,
    LIT_STEPS,
    LIT_TASK,
    literature_runs,
    test_lengths,
)
from lab.stats import IDENTICAL, format_delta, format_interval
from ui import compare_view, docs, frames, runs, sidebar, tables
from ui.charts import runs as charts
from ui.figure import show_chart
from ui.limits import limits
from ui.params import show_invalid, url_multiselect, url_number, url_radio, url_toggle

PAPERS = (
    "**The papers.** Kazemnejad et al. 2023 and Ruoss et al. 2023 rank the encodings past the trained range; a "
    "2-block, d = 32 model trained for a few thousand steps is not their model: compare orderings, not numbers."
)
PAPERS_SECTION = "what-the-length-generalisation-papers-found"  # docs/experiments.md: what they found


def lengths_vary() -> list[str]:
    """The registered tasks trained on a range of lengths and evaluated at others (Task.lengths_vary)."""
    return [name for name in tasks.names() if tasks.get(name).lengths_vary]


def lit_runs(task: str, randomized: bool, seeds, steps: int, positions=LIT_POSITIONS) -> list:
    """The sidebar's settings with each encoding, trained on 1..LIT_L (lab.experiments.lengths)."""
    return literature_runs(task, randomized, seeds, steps, positions, make=sidebar.make)


def encodings_picker(key: str, options) -> list[str]:
    """Which encodings to train and compare (the first chosen is the baseline): fewer encodings are fewer runs,
    and fewer comparisons under Holm's correction need fewer seeds, so the seed advice can be acted on."""
    chosen = url_multiselect(
        "Encodings",
        key,
        list(options),
        list(options),
        format_func=sidebar.POSITION_LABELS.get,
        help="Fewer encodings: fewer runs to train, and fewer comparisons, so a difference needs fewer seeds.",
    )
    return [p for p in options if p in chosen]


def _score(x: float) -> str:
    return "no number" if x != x else f"{x:.2f}"


def findings_text(frame, task: str, n_seeds: int, last: int, randomized: bool) -> str:
    found = frames.length_findings(frame, (1, LIT_L))
    past = f"past the trained lengths (test lengths {LIT_L + 1} to {last}, mean)"
    if (found["beyond"].fillna(0) < 0.005).all():
        seq = f"No encoding gets a sequence right {past}: per sequence all are 0.00 there"
    else:
        seq = (
            "Per sequence "
            + past
            + " they rank "
            + ", ".join(f"{r.encoding} {_score(r.beyond)}" for r in found.itertuples())
        )
    by_token = found.sort_values(["token_rank", "encoding"])
    tok = ", ".join(f"{r.encoding} {_score(r.token_beyond)}" for r in by_token.itertuples())
    inside = ", ".join(f"{r.encoding} {_score(r.inside)}" for r in found.itertuples())
    widest = found.sort_values("token_spread", ascending=False).iloc[0]
    return (
        f"**What the lab found here** ({task}, {tables.count(n_seeds, 'seed')}). {seq}; per token (chance 0.05) "
        f"the order is {tok}. Inside the range per sequence: {inside}. The widest band between seeds past the "
        f"range is {widest.token_spread:.2f} per token ({widest.encoding})."
        + ("" if randomized else f" Learned positions have no number past their {2 * LIT_L + 1} trained rows (a gap).")
    )


def _delta_text(r) -> str:
    """'Δ −0.120 [−0.31, −0.02]', and how many seeds differed when some tie exactly."""
    if r.verdict == IDENTICAL:
        return "Δ 0"
    text = f"Δ {format_delta(r.delta_mean)} {format_interval(r.ci_low, r.ci_high)}"
    return text + (f", {r.n_nonzero} of {r.n} seeds differ" if r.n_nonzero < r.n else "")


def verdicts_text(comparisons, last: int) -> str:
    """One sentence per metric: each encoding's verdict against no position past the range, from the table."""
    parts = []
    for metric, name in (("sequence_accuracy", "per sequence"), ("token_accuracy", "per token")):
        rows = comparisons[comparisons["metric"] == metric]
        listed = "; ".join(f"{r.level} {r.verdict} ({_delta_text(r)})" for r in rows.itertuples())
        parts.append(f"{name}, {listed}")
    base = comparisons["baseline"].iloc[0]
    n = int(comparisons["n"].min())
    return (
        f"**Against {base}, on the mean accuracy at test lengths {LIT_L + 1} to {last}** "
        f"(paired by seed, {tables.count(n, 'seed')}): "
        + ". ".join(p[:1].upper() + p[1:] if i else p for i, p in enumerate(parts))  # each later one a sentence
        + "."
    )


def lit_steps() -> int:
    steps = sidebar.settings()["steps"]
    return min(LIT_STEPS, limits().max_steps) if steps == sidebar.DEFAULTS["steps"][1] else steps


def literature_protocol() -> None:
    lim = limits()
    st.caption(
        f"Trained for {lit_steps():,} steps on every length from 1 to 8 (one length per batch, "
        "drawn each step, as Ruoss et al., so each length weighs the same; mixed in padded batches a long sequence "
        "would count more; the sidebar's other settings), then tested by greedy generation at "
        "each length from 1 to 16 on that length's own 500 sequences."
    )
    task = url_radio("Task", "lit_task", lengths_vary(), LIT_TASK)
    randomized = url_toggle(f"Randomized positions (N_MAX = {LIT_NMAX})", "lit_rand", False)
    at_random = randomized and url_toggle(
        "Evaluate on randomized positions too",
        "lit_rand_eval",
        False,
        help="As Ruoss et al.'s code: each test length on positions drawn from [0, N_MAX), one fixed draw per length.",
    )
    positions = encodings_picker("lit_enc", LIT_POSITIONS)
    n_seeds = url_number("Seeds", "lit_seeds", LIT_SEEDS, 1, lim.max_seeds)  # the one seed cap of every page
    if len(positions) < 2:
        st.info("Pick at least two encodings to compare.", icon=":material/touch_app:")
        return
    # said before the click: each encoding with a number past the range (a learned table has none) against the first
    past = sum(p != "learned" for p in positions) - 1
    st.markdown(before_text(n_seeds, past, noun="encoding", base="the first encoding with a number past the range"))
    seeds = list(range(n_seeds))
    last = test_lengths(lim.max_test_length)[-1]
    try:
        wanted = lit_runs(task, randomized, seeds, lit_steps(), positions)
    except ConfigError as e:
        show_invalid(e, "configuration for this comparison")
        return
    # the notice, the button and the caps of every page that trains what it is missing (this one was a caption
    # and a plain button)
    by_run = compare_view.ensure_trained(wanted, "Training the encodings on lengths 1 to 8", "lit_train")
    if by_run is None:
        return
    found = [by_run[run] for run in wanted]
    per_run = runs.length_results(found, test_lengths(lim.max_test_length), randomized=at_random)
    if per_run is None:
        return
    curves = {sidebar.POSITION_LABELS[p]: [] for p in positions}
    by_seed = {label: {} for label in curves}
    for record, results in zip(found, per_run, strict=True):
        label = sidebar.POSITION_LABELS[record.config.model.position]
        curves[label].append(results)
        by_seed[label][record.config.train.seed] = results
    frame = frames.length_frame(curves)
    show_chart(charts.length_curves(frame, LIT_L, last, columns=5, trained_range=(1, LIT_L)), "literature-lengths")
    how = "positions 0..n−1"
    if randomized:
        how = "randomized positions in training and " + ("at evaluation" if at_random else "0..n−1 at evaluation")
    st.caption(
        f"Blue: per-token, orange: per-sequence accuracy; mean over {tables.count(n_seeds, 'seed')} (line) and "
        f"the range from the worst to the best seed (band). Grey: the lengths trained on; {how}."
    )
    st.markdown(findings_text(frame, task, n_seeds, last, randomized))
    comparisons = beyond_range_comparisons(by_seed, LIT_L)
    if len(comparisons):
        st.markdown(verdicts_text(comparisons, last))
        compare_view.comparison_table(comparisons, level="encoding")
        compare_view.seeds_advice(comparisons, "lit_seeds", len(positions))  # the cap of every page: max_seeds
        st.caption(RULE)
    st.markdown(PAPERS)
    docs.link(PAPERS_SECTION, "Length generalisation: what the papers found")
