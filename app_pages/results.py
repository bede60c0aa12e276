"""Results: accuracy by task and length over seeds, loss curves of every seed, CSV export."""

import streamlit as st

from attncore import ConfigError
from attncore.tasks import N_TEST
from lab import formats
from lab.tables import accuracy_table, runs_frame
from ui import docs, frames, runs, sidebar, sweeps, tables
from ui.charts import runs as charts
from ui.figure import show_chart
from ui.length_view import lengths_vary
from ui.limits import limits
from ui.params import url_multiselect, url_number

# the sidebar settings Results applies (all but task, L and seed), at the article's values (the defaults)
ARTICLE = {
    key: default
    for key, (_, default) in sidebar.DEFAULTS.items()
    if key not in ("task", "L", "seed", *sidebar.TASK_KEYS)
}


def applied_settings() -> tuple[str, list[str]]:
    """The sidebar's settings that Results applies, as one line, and the names of those not at the article's."""
    now = {key: sidebar.settings()[arg] for key, (arg, _) in sidebar.DEFAULTS.items() if key in ARTICLE}
    names = {"pos": "position", "norm": "LayerNorm", "scaling": "scaling", "lr": "learning rate", "steps": "steps"}
    names |= {"d": "width d", "heads": "heads", "layers": "layers", "batch": "batch", "emb": "embedding std"}
    line = (
        f"{sidebar.POSITION_LABELS.get(now['pos'], now['pos'])} position · {sidebar.NORM_LABELS.get(now['norm'])} · "
        f"scaling {'on' if now['scaling'] else 'off'} · lr {formats.learning_rate(now['lr'])} · "
        f"{now['steps']:,} steps · d = {now['d']}, {formats.count(now['heads'], 'head')}, "
        f"{formats.count(now['layers'], 'layer')} · batch {now['batch']}"
    )
    return line, [names.get(k, k) for k, v in now.items() if v != ARTICLE[k]]


st.title("Results")
line, differs = applied_settings()
st.caption(
    f"Every run below uses the sidebar's settings except task, length and seed, which are chosen here: **{line}**"
    + ("." if differs else " (the article's settings).")
)
if differs:
    left, right = st.columns([3, 1], vertical_alignment="center")
    left.info(f"The sidebar differs from the article's settings in: {', '.join(differs)}.", icon=":material/tune:")
    right.button(
        "Use the article's settings",
        on_click=sidebar.set_values,
        kwargs=ARTICLE,
        icon=":material/restart_alt:",
        key="use_article",
    )
docs.link("accuracy-by-task-and-length", "What this experiment measures, and what the article reported")
c1, c2, c3 = st.columns(3)
with c1:
    varying = lengths_vary()
    tasks = url_multiselect("Tasks", "res_tasks", varying, varying, placeholder="Pick copy, sort or both")
with c2:
    lengths = url_multiselect(
        "Lengths L", "res_L", range(1, limits().max_length + 1), [4, 6, 8], placeholder="Pick lengths"
    )
with c3:
    seeds = url_multiselect("Seeds", "res_seeds", range(10), [0, 1, 2], placeholder="Pick seeds")
try:
    grid = [sidebar.make(task=t, length=L, seed=s) for t in tasks for L in sorted(lengths) for s in sorted(seeds)]
except ConfigError as e:
    sidebar.show_config_error(e)
    st.stop()
if not grid:
    st.info("Choose at least one task, one length and one seed.")
    st.stop()
command = " ".join(["python -m attncore sweep --task", *tasks, "--length", *map(str, sorted(lengths)), "--seed",
                    *map(str, sorted(seeds)), "(and the sidebar's other settings as flags)"])  # fmt: skip
if refused := sweeps.view_cap_error(len(grid), "tasks, lengths or seeds", command):  # as Ablations and Compare
    st.warning(refused, icon=":material/block:")
    st.stop()

records, missing = runs.cached_many(grid)
if missing:
    notice = st.empty()
    shown = "the table and charts below show the cached ones" if records else "nothing is shown until some are"
    notice.info(
        f"**{len(missing)} of {tables.count(len(grid), 'run')} {'is' if len(missing) == 1 else 'are'} not trained "
        f"yet**; {shown}."
    )
    button = st.empty()
    if sweeps.train_button("Train the missing: ", missing, "train_missing", place=button):
        if runs.sweep(missing, "Training the missing runs", cached_before=len(records)) is not None:
            records, missing = runs.cached_many(grid)
            if not missing:  # the notice and the button said what was missing: no longer true
                notice.empty()
                button.empty()
if not records:
    st.stop()

table = accuracy_table(records, base=grid[0])
st.subheader("Accuracy over seeds")
tables.show(table)
st.caption(
    "Mean and minimum over the seeds of the per-token and the per-sequence accuracy (every symbol right), by greedy "
    f"generation on {N_TEST} test sequences; the test loss is teacher-forced on the same sequences ('–' if a run "
    "has none)."
)
st.subheader("Accuracy against L")
show_chart(charts.accuracy_vs_length(frames.accuracy_long(table)), "accuracy-vs-length", width="stretch")
st.caption(
    "Lines: mean over seeds (dashed: sort); ▼: the worst seed; the wide pale line is per-token, so it stays "
    "visible where per-sequence lies on it: one wrong symbol spoils a sequence, so per-sequence sits at or below."
)

st.subheader("Training loss curves of every seed")
smooth = url_number("Smoothing (steps)", "res_smooth", 25, 1, 500, help="Trailing moving average.", width=200)
show_chart(charts.seed_curves(frames.seed_loss_frame(records, smooth)), "seed-curves")
st.caption(
    "Training loss: each step's loss on its own fresh batch (not the test loss above). Thin lines: one seed each; "
    "dashed black: their mean; shaded: the band between the best and the worst seed."
)

d1, d2 = st.columns(2)
d1.download_button("Download the accuracy table (CSV)", table.to_csv(index=False), "accuracy.csv", "text/csv")
d2.download_button("Download every run (CSV)", runs_frame(records).to_csv(index=False), "runs.csv", "text/csv")
