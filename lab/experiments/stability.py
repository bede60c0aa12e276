"""The lr experiment's qk-norm comparison (Wortsman et al. 2023, arXiv:2309.14322; Dehghani et al. 2023): per run
the largest attention logit and the lowest attention entropy over training, read from the snapshot norms stored
with it; each variant's LR sensitivity, also per seed with an interval and a paired test against the baseline;
the learning rates that train; and a finding in words. Pure functions: records and summaries in, DataFrames and
sentences out (the cells are lab.experiments.regimes.lr_cells(qk_norm="both")'s).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from attncore.config import RunConfig
from lab import formats, stats
from lab.experiments import regimes
from lab.store import RunRecord

ATTENTION_METRICS = ("max_attn_logit", "min_attn_entropy")
METRICS = (*regimes.METRICS, *ATTENTION_METRICS)  # what the qk-norm comparison pairs in each cell
METRIC_WORDS = {"max_attn_logit": "largest attention logit", "min_attn_entropy": "lowest attention entropy"}
TRAINED_LOSS = 0.1 * regimes.CHANCE_LOSS  # a learning rate "trains" below this mean test loss: ln 20 / 10 = 0.300
GROWTH = 10.0  # the logits "grow" when the highest learning rate's are at least this many times the lowest's
COLLAPSE = 0.1  # the entropy "collapses" when the highest learning rate's is at most this share of the lowest's


def attention_extremes(snapshots: list[dict] | None) -> dict[str, float | None]:
    """{"max_attn_logit": the largest attention logit |q·k|/scale over the snapshots and layers, "min_attn_entropy":
    the lowest attention entropy (nats; each layer's is its mean over the measured rows) over the snapshots and
    layers} of one run's stored norms (attncore.interpret.norms); a diverged snapshot's NaN is left out; None
    where the record holds no norms (stored before records carried them) or no finite figure."""
    if not snapshots:
        return dict.fromkeys(ATTENTION_METRICS)
    logits = np.array([s["max_logit"] for s in snapshots], dtype=float)
    entropies = np.array([s["entropy"] for s in snapshots], dtype=float)
    finite_logits, finite_entropies = logits[np.isfinite(logits)], entropies[np.isfinite(entropies)]
    return {
        "max_attn_logit": float(finite_logits.max()) if finite_logits.size else None,
        "min_attn_entropy": float(finite_entropies.min()) if finite_entropies.size else None,
    }


def summaries_of(by_run: Mapping[RunConfig, RunRecord]) -> dict[RunConfig, dict]:
    """Each record's summary with its attention_extremes: what the qk-norm comparison's tables pair."""
    return {run: record.summary() | attention_extremes(record.norms) for run, record in by_run.items()}


def over_training(cells: Sequence[regimes.Cell], by_run: Mapping[RunConfig, RunRecord]) -> tuple[pd.DataFrame, int]:
    """(rows variant, lr, step, seeds, max_logit, entropy: at each snapshot the mean over the seeds of the largest
    attention logit over the layers and of the lowest layer's attention entropy, NaN of a diverged run left out;
    how many records hold no norms and are left out)."""
    rows, missing = [], 0
    for cell in cells:
        for label, runs in cell.groups.items():
            for run in runs:
                snapshots = by_run[run].norms
                if snapshots is None:
                    missing += 1
                    continue
                rows += [{"variant": label, "lr": cell.key["lr"], "step": s["step"],  # NaN if a layer's is
                          "max_logit": float(np.max(s["max_logit"])), "entropy": float(np.min(s["entropy"]))}
                         for s in snapshots]  # fmt: skip
    columns = ["variant", "lr", "step", "seeds", "max_logit", "entropy"]
    if not rows:
        return pd.DataFrame(columns=columns), missing
    frame = pd.DataFrame(rows)
    keys = ["variant", "lr", "step"]
    means = frame.groupby(keys, sort=False).agg(
        seeds=("max_logit", "size"), max_logit=("max_logit", "mean"), entropy=("entropy", "mean")
    )
    return means.reset_index()[columns], missing


def seed_sensitivities(cells: Sequence[regimes.Cell], summaries, initial) -> dict[str, dict[int, float]]:
    """{variant: {seed: that seed's own LR sensitivity}}: experiments.regimes.lr_sensitivity over the grid of one seed's
    test losses, clipped at its ℓ₀ (`initial`: lab.experiments.regimes.initial_loss's {label: {seed: ℓ₀}})."""
    out = {}
    for label, runs in cells[0].groups.items():
        seeds = [r.train.seed for r in runs]
        l0 = regimes.initials_of(initial, label, seeds)
        losses = regimes.seed_losses(cells, summaries, label)
        out[label] = {
            seed: regimes.lr_sensitivity({lr: [by_seed[i]] for lr, by_seed in losses.items()}, l0[i])
            for i, seed in enumerate(seeds)
        }
    return out


def _setting(run: RunConfig, section: str, name: str, default):
    return getattr(getattr(run, section), name, default)


def sensitivity_table(cells: Sequence[regimes.Cell], summaries, initial) -> pd.DataFrame:
    """One row per variant: variant, qk_norm, z_loss, experiments.regimes.lr_summary's columns (initial_loss, best_lr,
    best_loss, sensitivity: Wortsman et al.'s LR sensitivity of the seeds' clipped mean), then over the seeds' own
    sensitivities (seed_sensitivities) their mean `seeds_mean` and its interval seeds_low, seeds_high (the
    sign-flip interval of lab.stats at 95 %, over 6 seeds their smallest and largest) and the t interval
    (t_low, t_high); and for each variant after the first, its seeds' sensitivities paired with the baseline's by
    seed (lab.stats.compare_paired, Holm across the variants): delta_mean, ci_low, ci_high, p_value, verdict."""
    summary = regimes.lr_summary(cells, summaries, initial)
    per_seed = seed_sensitivities(cells, summaries, initial)
    baseline = next(iter(per_seed))
    deltas = {
        label: [v - per_seed[baseline][s] for s, v in values.items()]
        for label, values in per_seed.items()
        if label != baseline
    }
    paired = stats.compare_paired(deltas)
    rows = []
    for (_, r), (label, runs) in zip(summary.iterrows(), cells[0].groups.items(), strict=True):
        values = list(per_seed[label].values())
        low, high = stats.sign_flip_interval(values)
        t_low, t_high = stats.t_interval(values)
        row = {"variant": label, "qk_norm": bool(_setting(runs[0], "model", "qk_norm", False))}
        row |= {"z_loss": float(_setting(runs[0], "train", "z_loss", 0.0))} | r.drop("variant").to_dict()
        row |= {"seeds_mean": float(np.mean(values)), "seeds_low": low, "seeds_high": high, "t_low": t_low}
        row |= {"t_high": t_high, "seeds": per_seed[label]}
        c = paired.get(label, {})
        row |= {k: c.get(k, math.nan) for k in ("delta_mean", "ci_low", "ci_high", "p_value")}
        rows.append(row | {"verdict": c.get("verdict")})
    return pd.DataFrame(rows)


def trained_lrs(cells: Sequence[regimes.Cell], summaries, initial) -> dict[str, list[float]]:
    """{variant: the learning rates at which it trains}: the mean over the seeds of the test loss, each run
    clipped at its ℓ₀, below TRAINED_LOSS (a diverged seed counts as its ℓ₀)."""
    return {
        label: [lr for lr, x in regimes.clipped_by_lr(cells, summaries, label, initial).items() if x < TRAINED_LOSS]
        for label in cells[0].groups
    }


def per_seed(cells: Sequence[regimes.Cell], summaries) -> pd.DataFrame:
    """Long rows variant, lr, seed, test_loss, max_attn_logit, min_attn_entropy: every run of the grid."""
    rows = []
    for cell in cells:
        for label, runs in cell.groups.items():
            for run in runs:
                s = summaries[run]
                rows.append({"variant": label, "lr": cell.key["lr"], "seed": run.train.seed}
                            | {m: s.get(m) for m in (regimes.LOSS, *ATTENTION_METRICS)})  # fmt: skip
    return pd.DataFrame(rows)


# --- the finding -------------------------------------------------------------------------------------------------


def figure(x: float | None) -> str:
    """An attention figure in words: 3 significant digits, powers of ten past 10⁴ (4.51e+07); '–' for none."""
    if x is None or not math.isfinite(x):
        return "–"
    return f"{x:.3g}" if abs(x) >= 1e4 or abs(x) < 1e-3 else formats.significant(x, 3)


def lr_range(lrs: Sequence[float], grid: Sequence[float]) -> str:
    """'1e-3 to 3e-2' for a run of neighbouring rates of the grid, else the rates listed; 'none' for none."""
    if not lrs:
        return "none"
    grid = sorted(grid)
    at = sorted(grid.index(lr) for lr in lrs)
    if len(at) > 1 and at[-1] - at[0] == len(at) - 1:
        return f"{formats.learning_rate(grid[at[0]])} to {formats.learning_rate(grid[at[-1]])}"
    return ", ".join(formats.learning_rate(grid[i]) for i in at)


def _means(cells, summaries, label: str, metric: str) -> dict[float, float]:
    """{lr: the mean over the seeds of a metric of the variant, those with a number; NaN where none has one}."""
    out = {}
    for cell in cells:
        values = [summaries[r].get(metric) for r in cell.groups[label]]
        values = [v for v in values if v is not None and math.isfinite(v)]
        out[cell.key["lr"]] = float(np.mean(values)) if values else math.nan
    return out


def _paired(rows: pd.DataFrame, lr: float, level: str, metric: str):
    part = rows[(rows["lr"] == lr) & (rows["level"] == level) & (rows["metric"] == metric)]
    return None if part.empty else part.iloc[0]


def _lower(r) -> bool:
    """Shown lower than the baseline (the paired verdict, the mean Δ below 0)."""
    return r is not None and r["verdict"] == stats.SHOWN and r["delta_mean"] < 0


def _how(r) -> str:
    """A paired comparison in words: 'lower on every seed', 'higher on average (shown)', 'no difference shown'."""
    if r is None:
        return "not compared"
    if r["verdict"] != stats.SHOWN:
        return r["verdict"]
    way = "lower" if r["delta_mean"] < 0 else "higher"
    every = r["delta_max"] < 0 or r["delta_min"] > 0
    return f"{way} on every seed" if every else f"{way} on average (difference shown)"


def _sensitivity_text(row, baseline: str) -> str:
    """'LR sensitivity 0.611 (each seed's own: 0.64 [0.52, 0.80]; minus pre-LN's, paired: Δ …, p …, verdict)'."""
    own = f"{figure(row['seeds_mean'])} [{figure(row['seeds_low'])}, {figure(row['seeds_high'])}]"
    text = f"LR sensitivity {figure(row['sensitivity'])} (each seed's own: {own}"
    if not isinstance(row["verdict"], str):  # the baseline
        return text + ")"
    return f"{text}; minus {baseline}'s, paired: {paired_text(row)})"


def paired_text(row) -> str:
    """A sensitivity_table row's paired comparison: 'Δ −0.210 [−0.400, −0.0500], p 0.03125, difference shown'."""
    delta, interval = stats.format_delta(row["delta_mean"]), stats.format_interval(row["ci_low"], row["ci_high"])
    return f"Δ {delta} {interval}, p {stats.format_p(row['p_value'])}, {row['verdict']}"


def finding(cells: Sequence[regimes.Cell], summaries, initial, rows: pd.DataFrame) -> str:
    """What the qk-norm comparison's runs show, in words: the baseline's largest attention logit and lowest entropy
    at the lowest and the highest learning rate; the other variants' at the highest, compared by seed (`rows`:
    regimes.table(cells, summaries, METRICS)); the learning rates each trains at; each LR sensitivity with the
    paired comparison of the seeds' own; then whether the runs agree with the paper's claim (the logits grow at
    least GROWTH-fold and the entropy falls to COLLAPSE of its value without qk-norm; with it the logit at the
    highest rate is lower on the seeds, and it trains at more rates or its sensitivity is shown lower)."""
    labels = list(cells[0].groups)
    base, others = labels[0], labels[1:]
    lrs = [c.key["lr"] for c in cells]
    lo, hi = min(lrs), max(lrs)
    lr = formats.learning_rate
    logit = {label: _means(cells, summaries, label, "max_attn_logit") for label in labels}
    entropy = {label: _means(cells, summaries, label, "min_attn_entropy") for label in labels}
    if all(math.isnan(x) for x in logit[base].values()):
        return "The runs hold no attention figures over training (stored before records carried them)."
    grows = logit[base][hi] >= GROWTH * logit[base][lo]
    collapses = entropy[base][hi] <= COLLAPSE * entropy[base][lo]
    ratio = logit[base][hi] / logit[base][lo]
    parts = [
        f"{base}: the largest attention logit over training went from {figure(logit[base][lo])} at lr {lr(lo)} to "
        f"{figure(logit[base][hi])} at lr {lr(hi)} (×{figure(ratio)}: {'grew' if grows else 'did not grow'} "
        f"{GROWTH:g}-fold or more) and the lowest attention entropy from {figure(entropy[base][lo])} to "
        f"{figure(entropy[base][hi])} nats ({'collapsed' if collapses else 'did not collapse'} to a tenth or less)."
    ]
    for label in others:
        r_logit = _paired(rows, hi, label, "max_attn_logit")
        r_entropy = _paired(rows, hi, label, "min_attn_entropy")
        parts.append(
            f"{label}: at lr {lr(hi)} the logit reached {figure(logit[label][hi])} ({_how(r_logit)}, paired with "
            f"{base}'s), the entropy {figure(entropy[label][hi])} nats ({_how(r_entropy)})."
        )
    trained = trained_lrs(cells, summaries, initial)
    ranges = "; ".join(f"{label} {lr_range(trained[label], lrs)}" for label in labels)
    parts.append(
        f"Learning rates that train (a mean test loss over the seeds below {formats.loss(TRAINED_LOSS)}, each run "
        f"clipped at its loss at initialisation): {ranges}."
    )
    sensitivity = sensitivity_table(cells, summaries, initial).set_index("variant")
    parts.append("; ".join(f"{label}: {_sensitivity_text(sensitivity.loc[label], base)}" for label in labels) + ".")
    qk = others[0] if others else None
    if qk is not None:
        tamed = _lower(_paired(rows, hi, qk, "max_attn_logit"))
        wider = len(trained[qk]) > len(trained[base])
        calmer = sensitivity.loc[qk, "verdict"] == stats.SHOWN and sensitivity.loc[qk, "delta_mean"] < 0
        if grows and collapses and tamed and (wider or calmer):
            gain = f"trains at {len(trained[qk]) - len(trained[base])} more" if wider else "is less sensitive"
            parts.append(
                f"The runs agree with Wortsman et al.: with {base} the attention logits grow and the entropy "
                f"collapses at high learning rates, and {qk} keeps them down and {gain}"
                + (" learning rates of the grid." if wider else " to the learning rate (shown over the seeds).")
            )
        else:
            missing = [
                f"{base}'s logits did not grow {GROWTH:g}-fold" if not grows else "",
                f"{base}'s entropy did not collapse" if not collapses else "",
                f"{qk}'s logit at lr {lr(hi)} was not shown lower" if not tamed else "",
                f"{qk} neither trained at more learning rates nor was shown less sensitive"
                if not (wider or calmer)
                else "",
            ]
            parts.append(
                "The runs do not bear out Wortsman et al.'s claim in full: " + "; ".join(m for m in missing if m) + "."
            )
    for label in others[1:]:
        wider = len(trained[label]) > len(trained[base])
        calmer = sensitivity.loc[label, "verdict"] == stats.SHOWN and sensitivity.loc[label, "delta_mean"] < 0
        helps = "helps" if wider or calmer else "does not help"
        how = "trains at more learning rates" if wider else "is shown less sensitive" if calmer else ""
        how = how or "neither trains at more rates nor is shown less sensitive"
        parts.append(f"At this size {label} {helps} against {base}: it {how}.")
    return " ".join(parts)
