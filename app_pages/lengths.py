"""Length generalisation: the literature's protocol (trained on 1..8, tested to 16, five encodings, with and without
randomized positions), then the sidebar's run tested at other lengths and the encodings side by side."""

import pandas as pd
import streamlit as st

from attncore import ConfigError
from attncore.config import POSITIONS
from attncore.evaluate import MAX_TEST_LENGTHS
from attncore.task import task_of
from attncore.tasks import N_TEST
from lab.compare import RULE, before_text, length_comparisons
from ui import compare_view, docs, frames, length_view, runs, sidebar, sweeps, tables
from ui.charts import runs as charts
from ui.figure import show_chart
from ui.limits import limits
from ui.params import show_invalid, url_multiselect, url_number

st.title("Length generalisation")
lim = limits()
range_tab, run_tab = st.tabs(["Trained on lengths 1-8, as the literature measures", "The sidebar's run"])
with range_tab:
    length_view.literature_protocol()
with run_tab:
    run = sidebar.selected_run()
    st.caption(sidebar.describe(run))
    kind = task_of(run.task)
    if not kind.lengths_vary:  # one length with its own test set (induction's T, modular's p): nothing to vary
        varying = ", ".join(length_view.lengths_vary())
        st.info(f"The {kind.shown_name()} task is tested at its own {kind.length_name} only; pick {varying} in the "
                "sidebar to test a run at other lengths.", icon=":material/straighten:")  # fmt: skip
        st.stop()
    record = runs.require(run, sidebar.describe(run))
    L = run.task.length
    longest = min(lim.max_test_length, 64)
    lengths = url_multiselect(
        "Test lengths L′",
        "len_L",
        list(range(1, longest + 1)),
        list(range(1, min(2 * L, longest, MAX_TEST_LENGTHS) + 1)),
        max_selections=MAX_TEST_LENGTHS,
        help=f"Up to {MAX_TEST_LENGTHS} lengths from 1 to {longest}; each has its own fixed {N_TEST} test sequences.",
    )
    if not lengths:
        st.info("Pick at least one test length.", icon=":material/straighten:")
        st.stop()
    lengths = sorted(lengths)
    results = runs.length_results([record], lengths)
    if results is None:
        st.stop()
    label = sidebar.POSITION_LABELS[run.model.position]
    show_chart(
        charts.length_curves(frames.length_frame({f"{label} position": results}), L, lengths[-1]), "length-curves"
    )
    table = pd.DataFrame([r.to_dict() for r in results[0]]).rename(columns={"length": "test L′"}).drop(columns="note")
    for column in ("token_accuracy", "sequence_accuracy"):  # out of reach: a dash (the note says why), never "None"
        table[column] = [f"{v:.3f}" if v is not None and v == v else "–" for v in table[column]]
    text = st.column_config.TextColumn
    columns = {"token_accuracy": text("per-token"), "sequence_accuracy": text("per-seq")}
    st.dataframe(table, hide_index=True, column_config=columns)
    for line in frames.length_notes(results[0]):  # in full below the table, not cut off in a column
        st.caption(line)
    st.caption(
        f"Blue: per-token accuracy, orange: per-sequence. Trained at L = {L} (dashed line), then evaluated by greedy "
        f"generation at each test length L′ on that length's own {N_TEST} test sequences; at L′ = {L} the numbers are "
        "the run's own evaluation. A length without a number is a gap; the note below the table says why."
    )

    st.markdown(
        "Trained at one length, no encoding is asked to generalise: a learned table has trained rows for that "
        "length's positions only (a gap past it); the others are defined at every length, which is not the same as "
        "generalised. Compare them below, or see the first tab, trained on a range of lengths."
    )

    st.subheader("The position encodings side by side at the sidebar's length")
    positions = length_view.encodings_picker("len_enc", POSITIONS)
    n_seeds = url_number("Seeds per encoding", "len_seeds", 3, 1, lim.max_seeds)  # the one seed cap of every page
    if len(positions) < 2:
        st.info("Pick at least two encodings to compare.", icon=":material/touch_app:")
        st.stop()
    try:
        compare = [sidebar.make(position=p, seed=s) for p in positions for s in range(n_seeds)]
    except ConfigError as e:
        show_invalid(e, "configuration for this comparison")
        st.stop()
    wanted = tuple(runs.run_key(r) for r in compare)
    if st.session_state.get("_len_compared") != wanted:
        # each encoding against the first, Holm per test length: inside the trained length all of them have a number
        st.markdown(before_text(n_seeds, len(positions) - 1, noun="encoding", base="the first encoding"))
        _, to_train = runs.cached_many(compare)
        st.caption(
            f"The sidebar's configuration with each position encoding, seeds 0 to {n_seeds - 1}: "
            f"{len(compare)} runs, trained first where missing "
            f"({f'{sweeps.cost(to_train)} to train' if to_train else 'all cached'}), "
            "then evaluated at the lengths above."
        )
        if not st.button(f"Compare the encodings over {tables.count(n_seeds, 'seed')}", key="len_compare",
                         type="primary"):  # fmt: skip
            st.stop()
        st.session_state["_len_compared"] = wanted
    found, missing = runs.cached_many(compare)
    if missing:
        if runs.sweep(missing, "Training the position encodings") is None:
            st.stop()
        st.rerun()  # all trained: the page again, without the caption and the button above the results
    per_run = runs.length_results(found, lengths)
    if per_run is None:
        st.stop()
    by_encoding = {sidebar.POSITION_LABELS[p]: [] for p in positions}
    for r, res in zip(found, per_run, strict=True):
        by_encoding[sidebar.POSITION_LABELS[r.config.model.position]].append(res)
    show_chart(charts.length_curves(frames.length_frame(by_encoding), L, lengths[-1]), "length-curves-by-encoding")
    st.caption(
        f"Blue: per-token, orange: per-sequence. Mean over seeds 0 to {n_seeds - 1} (line) and the range from the "
        f"worst to the best seed (band); the dashed line marks the trained length L = {L}."
    )
    by_seed = {label: {} for label in by_encoding}
    for r, res in zip(found, per_run, strict=True):
        by_seed[sidebar.POSITION_LABELS[r.config.model.position]][r.config.train.seed] = res
    comparisons = length_comparisons(by_seed)
    if len(comparisons):
        compare_view.comparison_tables_by_metric(comparisons, level="encoding", test_length="test L′")
        st.caption(
            "Each encoding against the first with a number at that test length (learned, or sinusoidal past the "
            "learned table), paired by seed; Holm's correction across the encodings, per test length and metric."
        )
        compare_view.seeds_advice(comparisons, "len_seeds", len(positions))  # the cap of every page: max_seeds
        st.caption(RULE)
    docs.link("length-generalisation", "Length generalisation: what each encoding can and cannot reach")
