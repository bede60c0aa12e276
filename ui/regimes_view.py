"""The Regimes page's parts: each experiment's controls (URL-bound, within the hosted caps), the
figures it draws from its runs, and the sources it is read against. The experiments themselves are experiments.regimes'.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from attncore.interpret import norms
from attncore.train import initial_params
from lab import compare, formats
from lab.experiments import regimes, stability
from lab.jobs.limits import Limits
from ui import compare_view, metered, tables
from ui.charts import regimes as charts
from ui.figure import show_chart
from ui.params import url_multiselect, url_number, url_select
from ui.plain import plain
from ui.sidebar import LEARNING_RATES

NAMES = {"depth": "Depth: pre-LN vs post-LN", "heads": "Wide heads: √d_k scaling", "lr": "Learning-rate sensitivity"}
PAIR_NAMES = {"norm": "pre-LN vs post-LN", "scaling": "scaling on vs off", "warmup": "no warm-up vs warm-up"}
PAIR_NAMES |= {"depth": "2 vs 8 blocks", regimes.QK_NORM: "qk-norm off vs on (and a z-loss)"}
Z_LOSSES = (0.0, 1e-4, 1e-3, 1e-2)  # the z-loss variant's coefficients the page offers (0: no z-loss variant)
Z_LOSS_HELP = (
    "A third variant: qk-norm off with c · (log Z)² added per predicted token (Wortsman et al. use c = 1e-4). Two "
    "variants against one baseline are two comparisons, corrected by Holm: with 6 seeds neither can show a "
    "difference (2 × 2/2⁶ > 0.05); 7 seeds can."
)
WARMUP_HELP = (
    "The qk-norm comparison trains on Wortsman et al.'s schedule: the learning rate rises linearly over these steps "
    "(their 5e3 of 1e5, 5 %: 75 of 1,500), then falls along a cosine to 0 at the last step (theirs to 1e-5)."
)
SOURCES = {  # experiment -> (the papers, the docs section that says what they found)
    "depth": ("Xiong et al. 2020 and Liu et al. 2020.", "depth-pre-ln-against-post-ln"),
    "heads": ("Vaswani et al. 2017, footnote 4.", "wide-heads-the-d_k-scaling"),
    "lr": ("Wortsman et al. 2023.", "learning-rate-sensitivity"),
    "qk_norm": (
        "Wortsman et al. 2023 and Dehghani et al. 2023 (qk-norm, the z-loss).",
        "qk-norm-at-high-learning-rates",
    ),
}


def controls(experiment: str, lim: Limits) -> dict:
    """lab.experiments.regimes options from the experiment's widgets (URL keys reg_*), within the hosted caps."""
    c0, c00 = st.columns(2)
    with c0:
        task = url_select("Task (L = 6)", "reg_task", ["copy", "sort", "reverse"], "sort")
    with c00:
        steps = url_select(
            "Steps per run", "reg_steps", [s for s in (100, 500, 1500, 3000) if s <= lim.max_steps], 1500
        )
    out = {"task": task, "steps": steps}
    c1, c2 = st.columns(2)
    if experiment == "depth":
        with c1:
            depths = [d for d in (1, 2, 4, 6, 8, 12) if d <= lim.max_layers]
            out["depths"] = tuple(url_multiselect("Blocks", "reg_depths", depths, list(regimes.DEPTHS)))
        with c2:
            out["lrs"] = tuple(url_multiselect("Learning rates", "reg_lrs", LEARNING_RATES, list(regimes.DEPTH_LRS),
                                               format_func=formats.learning_rate))  # fmt: skip
    elif experiment == "heads":
        with c1:
            heads = url_select("Heads", "reg_heads", [1, 4], 1, format_func=lambda h: f"{h} (d = {h}·d_k)")
        with c2:
            sizes = [s for s in regimes.HEAD_SIZES if heads * s <= lim.max_d_model]
            out["sizes"] = tuple(url_multiselect("Head sizes d_k", "reg_sizes", sizes, sizes))
        out["heads"] = heads
    else:
        with c1:
            pairs = [*regimes.PAIRS, regimes.QK_NORM]
            pair = url_select("Variants", "reg_pair", pairs, "norm", format_func=PAIR_NAMES.get)
        qk = pair == regimes.QK_NORM
        out |= {"qk_norm": "both"} if qk else {"pair": pair}
        layers = None
        with c2:
            if qk:
                z_loss = url_select("z-loss variant (qk-norm off with a z-loss c)", "reg_zloss", Z_LOSSES, 0.0,
                                    format_func=z_loss_text, help=Z_LOSS_HELP)  # fmt: skip
                out["z_loss"] = z_loss or None
            elif pair != "depth":
                layers = url_number("Blocks (both variants)", "reg_layers", 2, 1, lim.max_layers)
        # the full width, so that every chosen rate shows whole; the qk-norm comparison has its own grid, to 3e-1:
        # its effect is at the high rates
        key, grid = ("reg_qklrs", regimes.QK_LR_GRID) if qk else ("reg_lrgrid", regimes.LR_GRID)
        out["lrs"] = tuple(url_multiselect("Learning rates", key, list(regimes.LR_CHOICES), list(grid),
                                           format_func=formats.learning_rate))  # fmt: skip
        if layers is not None:  # after the rates, in the order of the command line's flags
            out["n_layers"] = layers
        if qk:
            c3, c4 = st.columns(2)
            with c3:
                out["warmup"] = url_number("Warm-up steps (then a cosine decay to 0)", "reg_warmup",
                                           regimes.qk_warmup(steps), 0, steps, help=WARMUP_HELP)  # fmt: skip
            with c4:
                out["n_layers"] = url_number("Blocks (every variant)", "reg_layers", 2, 1, lim.max_layers)
    return out


def z_loss_text(c: float) -> str:
    return f"c = {formats.learning_rate(c)}" if c else "none"


def finding(rows: pd.DataFrame) -> None:
    st.markdown(f"**What the lab found.** {plain(regimes.finding(rows))}")
    st.caption(plain(regimes.finding(rows, "sequence_accuracy")))


def verdicts(rows: pd.DataFrame, experiment: str) -> None:
    """The verdict grid of the test loss and the cell table of both metrics."""
    loss = rows[rows["metric"] == regimes.LOSS]
    if experiment == "depth":
        loss = loss.assign(schedule=[f"lr {formats.learning_rate(lr)}, " + (f"warm-up {w}" if w else "no warm-up")
                                     for lr, w in zip(loss["lr"], loss["warmup"], strict=True)])  # fmt: skip
        chart = charts.verdict_grid(loss, "layers", "schedule", "blocks", "learning rate and warm-up")
    elif experiment == "heads":
        layout = formats.count(int(loss["heads"].iloc[0]), "head")
        chart = charts.verdict_grid(loss.assign(layout=layout), "d_k", "layout", "d_k", "")
    elif loss["level"].nunique() > 1:  # several variants against the baseline: a row each
        rows = loss.assign(pair=[f"{v} − {b}" for v, b in zip(loss["level"], loss["baseline"], strict=True)])
        chart = charts.verdict_grid(rows, "lr", "pair", "learning rate", "test loss")
    else:
        chart = charts.verdict_grid(loss.assign(pair="test loss"), "lr", "pair", "learning rate", "")
    show_chart(chart, "verdicts", width="content")
    variants, baseline = " or ".join(map(plain, dict.fromkeys(loss["level"]))), plain(loss["baseline"].iloc[0])
    several = loss["level"].nunique() > 1
    st.caption(
        f"Each cell: the mean paired Δ of the test loss, {variants} minus {baseline} (orange: {variants} worse), "
        "and the verdict of the exact sign-flip test over the seeds. Each cell is its own comparison, as Compare's "
        "panels: no correction across cells" + (" (Holm across the variants of a cell)." if several else ".")
    )


def cell_table(
    rows: pd.DataFrame, runs_per_seed: int, seeds_key: str = "reg_seeds", named_by_cell: bool = False
) -> pd.DataFrame:
    """The cells' comparisons as Compare shows its panels' (interval, p, floor, verdict; the seeds a verdict
    needs and a button adding them, to the URL key `seeds_key`); returns them for the CSV. named_by_cell: each
    cell's words name its two groups, so the level and baseline columns are left out (the table fits 1,280 px)."""
    comparisons = rows[["facet", *compare.COMPARISON_COLUMNS]]
    hide = ("level", "baseline") if named_by_cell else ()
    compare_view.comparison_tables_by_metric(comparisons, each=True, hide=hide, facet="cell")  # as the CLI writes
    compare_view.seeds_advice(comparisons, seeds_key, runs_per_seed)
    st.caption(compare.RULE)
    return comparisons


def norms_at_init(cells, what: str) -> pd.DataFrame:
    """Gradient norms by block at initialisation for each (norm, depth) of a depth experiment's cells (seed of the
    first run), metered like any heavy page work."""
    by_setting = {}
    for cell in cells:
        for runs in cell.groups.values():
            run = runs[0]
            key = (run.model.norm, run.model.n_layers)
            if key not in by_setting:
                by_setting[key] = metered.metered("norms-init", run, lambda r=run: norms.at_init(r), what)
    return charts.norms_frame(by_setting)


def attention_after(cells, by_run, what: str) -> pd.DataFrame:
    """The heads experiment's attention entropy and saturated share (means over the layers) at initialisation
    and after training, per variant and d_k, for the first seed."""
    rows = []
    for cell in cells:
        for label, runs in cell.groups.items():
            run = runs[0]
            for when, params in (("at initialisation", initial_params(run)), ("after training", by_run[run].params)):
                key = (run, when)
                figures = metered.metered(
                    "norms-attention", key, lambda r=run, p=params: norms.attention_figures(p, r), what
                )
                means = {k: float(sum(v) / len(v)) for k, v in figures.items()}  # over the layers
                rows.append({"d_k": cell.key["d_k"], "variant": label, "when": when} | means)
    return pd.DataFrame(rows)


def entropy_rows(length: int) -> str:
    """Which query rows the attention entropy and the saturated share cover (attncore.interpret.norms), for L."""
    rows = norms.measured_rows(length)
    return (
        f"over the query rows {rows[0]} to {rows[-1]} of the {2 * length} input positions, the prompt's and the "
        f"answer's alike (row 0 sees one key only; the rows that predict the answer are {length} to {2 * length - 1})"
    )


def logits_over_training(cells, by_run) -> tuple[pd.DataFrame, int]:
    """(rows variant, d_k, step, max_logit: the largest attention logit over the layers at each snapshot of the
    heads experiment's first-seed runs, read from their records; how many records hold no norms (stored before
    records carried them) and are left out)."""
    rows, missing = [], 0
    for cell in cells:
        for label, runs in cell.groups.items():
            snapshots = by_run[runs[0]].norms
            if snapshots is None:
                missing += 1
                continue
            rows += [{"variant": label, "d_k": cell.key["d_k"], "step": s["step"], "max_logit": max(s["max_logit"])}
                     for s in snapshots]  # fmt: skip
    return pd.DataFrame(rows, columns=["variant", "d_k", "step", "max_logit"]), missing


def initial_loss(cells) -> dict[str, dict[int, float]]:
    """regimes.initial_loss (each variant's ℓ₀ by seed) with each run's initial test loss metered (server-wide
    memo, else a slot)."""
    from attncore.evaluate import test_loss

    def metered_loss(run):
        return metered.metered("test-loss-init", run, lambda: test_loss(initial_params(run), run), "Initial loss")

    return regimes.initial_loss(cells, metered_loss)


def lr_tables(best: pd.DataFrame, fair: pd.DataFrame) -> None:
    """Each variant's best learning rate and LR sensitivity (regimes.lr_summary), then the pair compared each
    at its best."""
    shown = best.assign(
        initial_loss=[formats.loss(x) for x in best["initial_loss"]],
        best_lr=[formats.learning_rate(x) for x in best["best_lr"]],
        best_loss=[formats.loss(x) for x in best["best_loss"]],
        sensitivity=[formats.significant(x, 3) for x in best["sensitivity"]],
    ).rename(columns={"initial_loss": "ℓ₀ (mean over seeds)", "best_lr": "best lr", "best_loss": "ℓ at its best lr",
                      "sensitivity": "LR sensitivity"})  # fmt: skip
    tables.show(shown)
    st.caption(
        "LR sensitivity (Wortsman et al. 2023): the mean over the grid of ℓ(lr) − the best ℓ, each ℓ(lr) the mean "
        "over the seeds of each run's test loss clipped at its own ℓ₀, the test loss of its initial weights (a "
        "diverged seed counts as ℓ₀, the other seeds of its learning rate as measured). Lower is less sensitive; "
        "the best lr is the one of the lowest ℓ(lr)."
    )
    st.markdown("**The pair each at its own best learning rate**, paired by seed (the table below compares them "
                "at each shared learning rate):")  # fmt: skip
    compare_view.comparison_table(fair, each=True)


def qk_norm_sections(cells, by_run, summaries, initial) -> None:
    """The qk-norm comparison: each variant's LR sensitivity with its interval over the seeds, the largest
    attention logit and the lowest attention entropy over training at every learning rate, and the variants each
    at its own best learning rate."""
    sensitivity = stability.sensitivity_table(cells, summaries, initial)
    st.subheader("LR sensitivity per variant")
    show_chart(charts.sensitivity_intervals(sensitivity), "lr-sensitivity", width="content")
    shown = pd.DataFrame({
        "variant": sensitivity["variant"],
        "LR sensitivity": [stability.figure(x) for x in sensitivity["sensitivity"]],
        "each seed's own: mean": [stability.figure(x) for x in sensitivity["seeds_mean"]],
        "interval (95 %)": [f"[{stability.figure(a)}, {stability.figure(b)}]"
                            for a, b in zip(sensitivity["seeds_low"], sensitivity["seeds_high"], strict=True)],
        "best lr": [formats.learning_rate(x) for x in sensitivity["best_lr"]],
        "Δ per seed vs the baseline": [stats_text(r) for _, r in sensitivity.iterrows()],
    })  # fmt: skip
    tables.show(shown)
    st.caption(
        "LR sensitivity (Wortsman et al. 2023): the mean over the grid of ℓ(lr) − the best ℓ, each ℓ(lr) the mean "
        "over the seeds of each run's test loss clipped at its own loss at initialisation (the tick). Each seed's "
        "own: the same over one seed's runs (the small dots), their mean (the large dot) with the interval that "
        "inverts the sign-flip test on them, as the paired comparisons do (lab.stats: at 6 seeds and 95 % their "
        "smallest and largest; it is about the seeds' own sensitivities, which average at or above the tick). "
        "Δ: each seed's own sensitivity minus the baseline's on the same seed, with its interval, exact p and "
        "verdict (Holm across the variants)."
    )
    frame, missing = stability.over_training(cells, by_run)
    for figure, title in (("max_logit", "The largest attention logit over training"),
                          ("entropy", "The lowest attention entropy over training")):  # fmt: skip
        st.subheader(title)
        if len(frame):
            show_chart(charts.attention_over_training(frame, figure), f"{figure}-over-training", width="content")
    first = next(iter(cells[0].groups.values()))[0]
    st.caption(
        f"At each training snapshot, on {norms.snapshot_sequences(first)} "
        "fixed sequences of the task (stored with each run): the largest |q·k|/scale over the layers and causal "
        "pairs, and the attention entropy of the layer with the lowest (each layer's the mean over its heads and "
        f"query rows, {entropy_rows(first.task.length)}); the mean over "
        "the seeds, a diverged run's NaN left out; a collapsed entropy is attention on one key."
        + (f" {missing} of the runs were stored before their norms were and are left out." if missing else "")
    )
    st.markdown("**The variants each at its own best learning rate**, paired by seed with the baseline:")
    compare_view.comparison_table(regimes.at_best(cells, summaries, initial), each=True, caption=False)
    st.caption("Read as the tables of every cell below (interval, p, floor), which say how once.")


def schedule_text(cells) -> str:
    """The qk-norm comparison's schedule in words, read from its runs: 'Every run warms up linearly over 75 steps,
    then decays along a cosine to 0 at step 1,500 (Wortsman et al.'s schedule: theirs 5e3 of 1e5 steps, to 1e-5).'"""
    train = next(iter(cells[0].groups.values()))[0].train
    end = "0" if train.min_lr_ratio == 0 else f"{formats.significant(train.min_lr_ratio, 3)} × lr"
    decay = {"cosine": "along a cosine", "linear": "linearly"}.get(train.decay)
    then = f"then decays {decay} to {end} at step {train.steps:,}" if decay else "then stays constant"
    warm = f"warms up linearly over {formats.count(train.warmup, 'step')}" if train.warmup else "starts at lr"
    return (
        f"Every run of this comparison {warm}, {then}: Wortsman et al.'s schedule (their warm-up 5e3 of 1e5 steps, "
        "their decay to 1e-5). The other variant pairs train at a constant learning rate."
    )


def stats_text(r) -> str:
    """A variant's paired comparison of the seeds' own sensitivities with the baseline's (lab.experiments.stability)."""
    return stability.paired_text(r) if isinstance(r["verdict"], str) else "(the baseline)"
