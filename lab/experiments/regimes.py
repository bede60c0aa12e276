"""The Regimes experiments (docs/regimes.md): where the LayerNorm's place and √d_k scaling matter. Each is a grid of
cells; a cell pairs two variants (or three) over the same seeds (the first the baseline) and is judged by the
comparison rule of lab.compare (interval, exact p, floor, verdict; Holm across a cell's comparisons only, as Compare's
panels). Pure functions: configs out, summaries in, DataFrames and sentences out.

- depth: pre-LN (baseline) vs post-LN at 2, 4 and 8 blocks, at two learning rates, without and with a linear
  warm-up over a fifth of the steps (Xiong et al. 2020).
- heads: √d_k scaling on (baseline) vs off at d_k = 8 … 128, one head with d = d_k (or four with d = 4·d_k), on
  sort (Vaswani et al. 2017, footnote 4).
- lr: a variant pair over a log grid of learning rates, with Wortsman et al. 2023's LR sensitivity
  E_lr[min(ℓ(lr), ℓ₀) − min_lr ℓ(lr)], and the pair compared at a shared learning rate and each at its own best;
  or qk-norm off (baseline) against on, and optionally qk-norm off with a z-loss, up to 3e-1, on the sources'
  schedule: a linear warm-up then a cosine decay (Wortsman et al. 2023; stability reads their attention logits
  and entropies over training).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from attncore.checks import check_int
from attncore.config import N_SYMBOLS, ConfigError, RunConfig, make_run
from attncore.evaluate import test_loss
from attncore.settings import SETTINGS
from attncore.train import initial_params
from lab import compare, formats, stats

EXPERIMENTS = ("depth", "heads", "lr")
LOSS = "test_loss"  # the held-out loss every comparison of final loss uses
METRICS = (LOSS, "sequence_accuracy")
DEFAULT_SEEDS = 6  # the fewest with which one comparison can show a difference (floor 2/2^6 < 0.05)
WARMUP_FRACTION = 0.2
CHANCE_LOSS = math.log(N_SYMBOLS)  # a uniform guess among the 20 symbols: ln 20 = 3.00 nats per answer token
FAILED_LOSS = 0.9 * CHANCE_LOSS  # a run "fails" at a test loss of at least this: it learned next to nothing

DEPTHS = (2, 4, 8)
DEPTH_LRS = (3e-3, 1e-2)
HEAD_SIZES = (8, 16, 32, 64, 128)
LR_GRID = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
PAIRS = {  # the lr experiment's variant pairs: (baseline label, settings), (other label, settings)
    "norm": (("pre-LN", {"norm": "pre"}), ("post-LN", {"norm": "post"})),
    "scaling": (("scaling on", {"scaling": True}), ("scaling off", {"scaling": False})),
    "warmup": (("no warm-up", {"warmup": 0}), ("warm-up", {"warmup": None})),  # None: WARMUP_FRACTION of steps
    "depth": (("2 blocks", {"n_layers": 2}), ("8 blocks", {"n_layers": 8})),
}
QK_NORM = "qk_norm"  # the lr experiment's qk-norm comparison (qk_norm="both"): QK_LR_GRID, qk_variants
QK_LR_GRID = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1)  # to 3e-1, where attention logits grow without it
LR_CHOICES = (*LR_GRID, 3e-1)  # the learning rates the page offers for the lr experiment
DEFAULT_Z_LOSS = 1e-4  # Wortsman et al.'s z-loss coefficient
# The qk-norm comparison trains on Wortsman et al.'s schedule: a linear warm-up over 5 % of the steps (their 5e3 of
# 1e5) then a cosine decay; they decay to lr 1e-5, the lab to 0 (attncore.optim's min_lr_ratio 0).
QK_WARMUP_FRACTION = 0.05
QK_SCHEDULE = {"decay": "cosine", "min_lr_ratio": 0.0}


def qk_warmup(steps: int) -> int:
    """The qk-norm comparison's default warm-up: QK_WARMUP_FRACTION of the steps, rounded (75 of 1,500)."""
    return round(QK_WARMUP_FRACTION * steps)


def z_loss_label(z_loss: float) -> str:
    return f"z-loss {formats.learning_rate(z_loss)}"


def qk_variants(z_loss: float | None = None) -> tuple[tuple[str, dict], ...]:
    """The qk-norm comparison's variants: qk-norm off (the baseline) and on, and with a z-loss coefficient c > 0 a
    third, qk-norm off with the z-loss c (Wortsman et al. 2023)."""
    out = (("qk-norm off", {"qk_norm": False}), ("qk-norm on", {"qk_norm": True}))
    return out + ((z_loss_label(z_loss), {"qk_norm": False, "z_loss": z_loss}),) if z_loss else out


@dataclass
class Cell:
    """One cell of an experiment: its coordinates and two variants' runs over the same seeds (baseline first)."""

    key: dict  # e.g. {"layers": 8, "lr": 0.01, "warmup": 300}
    groups: dict[str, list[RunConfig]]


def _base(task: str, length: int, steps: int, **settings) -> dict:
    return {"task": task, "length": length, "steps": steps} | settings


def check_steps(steps) -> None:
    """ConfigError (field steps, with the setting's range) unless `steps` is a run's step count."""
    check_int("steps", steps, SETTINGS["steps"].low, SETTINGS["steps"].high)


def warmup_steps(steps: int) -> int:
    """The warm-up variants' warm-up: WARMUP_FRACTION of the steps, rounded. ConfigError (field steps) when that
    rounds to 0: the warm-up cells would hold the same runs as the others, and a warm-up pair would compare each
    run with itself ('identical on every seed')."""
    check_steps(steps)
    warmup = round(WARMUP_FRACTION * steps)
    if warmup < 1:
        fewest = next(n for n in range(1, 100) if round(WARMUP_FRACTION * n) >= 1)
        raise ConfigError(
            "steps",
            f"the warm-up is {WARMUP_FRACTION:.0%} of the steps, which rounds to 0 at {steps} step"
            f"{'s' * (steps != 1)}, so the warm-up runs would be the runs without it: give {fewest} steps or more",
        )
    return warmup


def check_levels(field: str, levels: Sequence, shown: Callable = str) -> None:
    """ConfigError when a level is listed twice: its cells would be the same runs twice."""
    twice = next((level for i, level in enumerate(levels) if level in levels[:i]), None)
    if twice is not None:
        raise ConfigError(field, f"lists {shown(twice)} twice; give each level once")


def _runs(settings: dict, seeds: Sequence[int]) -> list[RunConfig]:
    s = dict(settings)
    task, length = s.pop("task"), s.pop("length")
    if s.get("warmup") is None and "warmup" in s:
        s["warmup"] = warmup_steps(s["steps"])
    return [make_run(task, length, seed, **s) for seed in seeds]


def _cell(key: dict, base: dict, pair: str | Sequence[tuple[str, dict]], seeds) -> Cell:
    """The variants of PAIRS[pair] (or the (label, settings) given, the baseline first) on the settings `base`."""
    variants = PAIRS[pair] if isinstance(pair, str) else pair
    return Cell(key, {label: _runs(base | settings, seeds) for label, settings in variants})


def depth_cells(seeds, *, task="sort", length=6, steps=1500, depths=DEPTHS, lrs=DEPTH_LRS, **settings) -> list[Cell]:
    check_steps(steps)
    check_levels("depths", depths)
    for n_layers in depths:  # named as the experiment's levels, not as the run setting they become
        check_int("depths", n_layers, SETTINGS["n_layers"].low, SETTINGS["n_layers"].high)
    check_levels("lrs", lrs, formats.learning_rate)
    cells = []
    for n_layers in depths:
        for lr in lrs:
            for warmup in (0, warmup_steps(steps)):
                base = _base(task, length, steps, n_layers=n_layers, lr=lr, warmup=warmup, **settings)
                cells.append(_cell({"layers": n_layers, "lr": lr, "warmup": warmup}, base, "norm", seeds))
    return cells


def head_cells(seeds, *, task="sort", length=6, steps=1500, sizes=HEAD_SIZES, heads=1, **settings) -> list[Cell]:
    """Scaling on vs off at each head size d_k, with `heads` heads of it (d = heads · d_k, d_ff = 4d)."""
    check_steps(steps)
    check_levels("sizes", sizes)
    for d_k in sizes:  # d = heads · d_k within the setting d_model's range
        check_int("sizes", d_k, 1, SETTINGS["d_model"].high // max(1, heads))
    cells = []
    for d_k in sizes:
        base = _base(task, length, steps, d_model=heads * d_k, n_heads=heads, **settings)
        cells.append(_cell({"d_k": d_k, "heads": heads}, base, "scaling", seeds))
    return cells


def lr_cells(
    seeds, *, pair=None, task="sort", length=6, steps=1500, lrs=None, qk_norm=None, z_loss=None, warmup=None, **settings
) -> list[Cell]:
    """The pair of PAIRS[pair] (default norm) at each learning rate of `lrs` (default LR_GRID; settings: the rest,
    e.g. n_layers=4), at a constant learning rate. qk_norm="both": in place of a pair, qk_variants(z_loss) (default
    grid QK_LR_GRID) on the sources' schedule, a linear warm-up of `warmup` steps (default qk_warmup(steps)) then
    QK_SCHEDULE's cosine decay; qk_norm True or False: that setting for both variants of the pair. A z_loss is the
    third variant of qk_norm="both"."""
    check_steps(steps)
    if qk_norm == "both":
        if pair is not None:
            raise ConfigError("pair", "qk-norm both compares qk-norm off and on itself; drop the pair")
        if z_loss is not None and not (isinstance(z_loss, int | float) and 0 < z_loss < 1):
            raise ConfigError("z_loss", f"must be a coefficient above 0 and below 1, got {z_loss!r}")
        warmup = qk_warmup(steps) if warmup is None else warmup
        check_int("warmup", warmup, 0, steps)  # at most the steps
        settings = {"warmup": warmup} | QK_SCHEDULE | settings
        variants, lrs = qk_variants(z_loss), QK_LR_GRID if lrs is None else lrs
    else:
        if z_loss is not None:
            raise ConfigError("z_loss", "adds the z-loss variant to the qk-norm comparison: give qk-norm both")
        if warmup is not None:
            raise ConfigError("warmup", "is the qk-norm comparison's warm-up (the pairs train at a constant rate, "
                              "the warm-up pair compares it): give qk-norm both")  # fmt: skip
        pair = "norm" if pair is None else pair
        if pair not in PAIRS:
            raise ValueError(f"pair must be one of {', '.join(PAIRS)}; got {pair!r}")
        if qk_norm is not None:
            settings["qk_norm"] = bool(qk_norm)
        variants, lrs = PAIRS[pair], LR_GRID if lrs is None else lrs
    check_levels("lrs", lrs, formats.learning_rate)
    for field in set(variants[0][1]) & set(settings):  # the variants set it themselves: it would be ignored
        values = " and ".join(str(variant[1][field]) for variant in variants)
        name = f"the {pair} pair" if qk_norm != "both" else "the qk-norm comparison"
        raise ConfigError(field, f"{name} sets it itself ({values}); drop it or choose another pair")
    return [_cell({"lr": lr}, _base(task, length, steps, lr=lr, **settings), variants, seeds) for lr in lrs]


def cells_of(experiment: str, seeds, **options) -> list[Cell]:
    makers = {"depth": depth_cells, "heads": head_cells, "lr": lr_cells}
    if experiment not in makers:
        raise ValueError(f"experiment must be one of {', '.join(EXPERIMENTS)}; got {experiment!r}")
    return makers[experiment](seeds, **options)


def command(experiment: str, n_seeds: int, options: Mapping) -> str:
    """The command line that trains the same grid (`python -m attncore regimes ...`, seeds 0..n_seeds-1) as the
    page's options: what a hosted page names when its caps refuse the grid."""
    flags = {"task": "--task", "length": "--length", "steps": "--steps", "depths": "--depths", "lrs": "--lrs"}
    flags |= {"sizes": "--sizes", "heads": "--heads", "pair": "--pair", "n_layers": "--layers"}
    flags |= {"qk_norm": "--qk-norm", "z_loss": "--z-loss", "warmup": "--warmup"}
    parts = ["python -m attncore regimes", experiment, f"--seeds {n_seeds}"]
    for name, value in options.items():
        if value is None:  # a setting left at its default (no z-loss variant)
            continue
        values = value if isinstance(value, (tuple, list)) else (value,)
        shown = [formats.learning_rate(v) if name in ("lrs", "z_loss") else str(v) for v in values]
        parts.append(f"{flags[name]} {' '.join(shown)}")
    return " ".join(parts)


def all_runs(cells: Sequence[Cell]) -> list[RunConfig]:
    """Every run of the cells once, in order: the one sweep that trains an experiment."""
    return list(dict.fromkeys(run for cell in cells for runs in cell.groups.values() for run in runs))


def table(cells: Sequence[Cell], summaries: Mapping[RunConfig, dict], metrics=METRICS) -> pd.DataFrame:
    """One row per cell, variant other than the baseline, and metric: the cell's coordinates, `facet` (the cell in
    words, so lab.compare.display and the seed advice treat each cell as its own panel), the baseline's and the
    variant's mean, how many of their seeds failed (baseline_failed, variant_failed: a test loss of FAILED_LOSS or
    more), and lab.compare.paired_differences' columns (level: the variant, against the baseline; Holm across
    the cell's variants)."""
    rows = []
    for cell in cells:
        groups = {label: [summaries[run] for run in runs] for label, runs in cell.groups.items()}
        comparisons = compare.paired_differences(groups, metrics=metrics)
        base = next(iter(groups.values()))
        for _, c in comparisons.iterrows():
            m, other = c["metric"], groups[c["level"]]
            means = {"baseline_mean": _mean(base, m), "variant_mean": _mean(other, m)}
            failed = {"baseline_failed": _failed(base), "variant_failed": _failed(other)}
            rows.append(cell.key | {"facet": cell_text(cell.key)} | means | failed | c.to_dict())
    return pd.DataFrame(rows)


def _failed(summaries: Sequence[dict]) -> int:
    """How many of the runs failed: a test loss of FAILED_LOSS or more (NaN, a diverged run, counts)."""
    losses = [s.get(LOSS) for s in summaries]
    return sum(1 for x in losses if x is not None and not x < FAILED_LOSS)


def _mean(summaries: Sequence[dict], metric: str) -> float:
    values = [s[metric] for s in summaries if s.get(metric) is not None]
    return float(np.mean(values)) if values else math.nan


def lr_sensitivity(losses: Mapping[float, Sequence[float]], initial: Sequence[float] | float) -> float:
    """Wortsman et al. 2023's LR sensitivity: E_lr[ℓ(lr)] − min_lr ℓ(lr), where ℓ(lr) is the mean over the seeds of each
    run's test loss clipped at its own ℓ₀, the loss of its initial weights (a diverged run, NaN or above ℓ₀, counts
    as ℓ₀ alone, not its whole learning rate). `losses`: {lr: the seeds' test losses}; `initial`: the seeds' ℓ₀ in
    the same order (or one ℓ₀ for all). NaN when no run has a finite loss."""
    if not any(math.isfinite(x) for seeds in losses.values() for x in seeds):
        return math.nan
    clipped = np.array([_clipped_mean(seeds, initial) for seeds in losses.values()])
    return float(np.mean(clipped - clipped.min()))


def _clipped_mean(losses: Sequence[float], initial: Sequence[float] | float) -> float:
    """The mean of min(ℓ, ℓ₀) over the seeds, a non-finite ℓ counting as its ℓ₀."""
    initials = [initial] * len(losses) if isinstance(initial, int | float) else list(initial)
    clipped = [min(x, l0) if math.isfinite(x) else l0 for x, l0 in zip(losses, initials, strict=True)]
    return float(np.mean(clipped))


def seed_losses(cells: Sequence[Cell], summaries: Mapping[RunConfig, dict], label: str) -> dict[float, list[float]]:
    """{lr: the variant's test loss on each seed, in the cell's seed order (NaN where none)} of an lr experiment."""

    def value(run):
        x = summaries[run].get(LOSS)
        return math.nan if x is None else float(x)

    return {cell.key["lr"]: [value(r) for r in cell.groups[label]] for cell in cells}


def clipped_by_lr(cells, summaries, label: str, initial) -> dict[float, float]:
    """{lr: the variant's mean over the seeds of each run's test loss clipped at its ℓ₀}."""
    seeds = [r.train.seed for r in cells[0].groups[label]]
    l0 = initials_of(initial, label, seeds)
    return {lr: _clipped_mean(losses, l0) for lr, losses in seed_losses(cells, summaries, label).items()}


def initials_of(initial, label: str, seeds: Sequence[int]) -> list[float]:
    """The ℓ₀ of each seed of a variant from initial_loss's {label: {seed: ℓ₀}} (or one number for every run)."""
    if isinstance(initial, int | float):
        return [float(initial)] * len(seeds)
    return [initial[label][s] for s in seeds]


def _best_lr(losses: Mapping[float, float]) -> float:
    """The learning rate of the lowest finite loss (a diverged, NaN loss is never best)."""
    return min(losses, key=lambda lr: losses[lr] if math.isfinite(losses[lr]) else math.inf)


def initial_loss(
    cells: Sequence[Cell], loss_at_init: Callable[[RunConfig], float] | None = None
) -> dict[str, dict[int, float]]:
    """ℓ₀ of the LR sensitivity, each variant's own: {label: {seed: the test loss of that run's initial weights}}.
    The initial weights depend on the model and the seed only, so the first cell's runs give every learning
    rate's. `loss_at_init(run)` computes one (the page passes a metered one); default attncore.evaluate.test_loss."""
    if loss_at_init is None:

        def loss_at_init(run: RunConfig) -> float:
            return test_loss(initial_params(run), run)

    return {label: {r.train.seed: float(loss_at_init(r)) for r in runs} for label, runs in cells[0].groups.items()}


def lr_summary(cells: Sequence[Cell], summaries: Mapping[RunConfig, dict], initial) -> pd.DataFrame:
    """Per variant of an lr experiment: its ℓ₀ (initial_loss, the mean over its seeds), the best learning rate
    (the lowest mean over the seeds of each run's test loss clipped at its ℓ₀), that loss and the LR sensitivity
    over the grid. `initial`: initial_loss's {label: {seed: ℓ₀}} (or one ℓ₀ for every run)."""
    rows = []
    for label, runs in cells[0].groups.items():
        seeds = [r.train.seed for r in runs]
        l0 = initials_of(initial, label, seeds)
        clipped = clipped_by_lr(cells, summaries, label, initial)
        best = _best_lr(clipped)
        sensitivity = lr_sensitivity(seed_losses(cells, summaries, label), l0)
        rows.append({"variant": label, "initial_loss": float(np.mean(l0)), "best_lr": best,
                     "best_loss": clipped[best], "sensitivity": sensitivity})  # fmt: skip
    return pd.DataFrame(rows)


def at_best(cells: Sequence[Cell], summaries: Mapping[RunConfig, dict], initial) -> pd.DataFrame:
    """The variants of an lr experiment compared each at its own best learning rate (lr_summary's, from the
    clipped means), paired by seed (the fair comparison of Wortsman et al.; the shared-lr ones are `table`'s)."""
    by_lr = {cell.key["lr"]: cell for cell in cells}
    groups = {}
    for label in cells[0].groups:
        lr = _best_lr(clipped_by_lr(cells, summaries, label, initial))
        groups[label] = [summaries[r] for r in by_lr[lr].groups[label]]
    return compare.paired_differences(groups, metrics=METRICS)


def cell_text(key: dict) -> str:
    """A cell's coordinates in words: '8 blocks, lr 1e-2, no warm-up'."""
    parts = []
    for name, value in key.items():
        if name == "lr":
            parts.append(f"lr {formats.learning_rate(value)}")
        elif name == "warmup":
            parts.append(f"warm-up {value}" if value else "no warm-up")
        elif name == "layers":
            parts.append(f"{value} blocks")
        elif name == "d_k":
            parts.append(f"d_k = {value}")
        elif name == "heads":
            parts.append(formats.count(value, "head"))
    return ", ".join(parts)


FAILED_TEXT = (
    f"Fails: a test loss of at least {formats.loss(FAILED_LOSS)} on each seed (90 % of a uniform guess's among the "
    f"{N_SYMBOLS} symbols, ln {N_SYMBOLS} = {formats.loss(CHANCE_LOSS)} nats), the baseline's below it on each."
)


def _how(r, metric: str) -> str:
    """How a shown difference holds over the seeds, from the paired deltas: the variant 'fails on every seed' (its
    test loss FAILED_LOSS or more on each, the baseline's not), is 'worse' or 'better on every seed' (every Δ on
    the side of the mean), or only 'on average'."""
    worse = (r["delta_mean"] > 0) == (metric == LOSS)  # a higher loss, a lower accuracy
    if metric == LOSS and worse and r["variant_failed"] == r["n"] and r["baseline_failed"] == 0:
        return "fails on every seed"
    every = r["delta_min"] > 0 or r["delta_max"] < 0
    return ("worse" if worse else "better") + (" on every seed" if every else " on average")


def finding(rows: pd.DataFrame, metric: str = LOSS) -> str:
    """One paragraph from the numbers: in which cells the variant differs from its baseline on `metric` (the
    verdict, the mean Δ and whether it fails, or is worse or better, on every seed), and in how many it was not
    shown."""
    rows = rows[rows["metric"] == metric]
    if rows.empty:
        return "No cell has runs to compare yet."
    if rows["level"].nunique() > 1:  # several variants against one baseline: a paragraph each
        return " ".join(finding(rows[rows["level"] == level], metric) for level in dict.fromkeys(rows["level"]))
    shown = rows[rows["verdict"] == stats.SHOWN]
    name = "test loss" if metric == LOSS else metric.replace("_", " ")
    variant, baseline = rows["level"].iloc[0], rows["baseline"].iloc[0]
    others = rows[rows["verdict"] != stats.SHOWN]["verdict"].value_counts()
    told = "; ".join(f"{formats.count(int(n), 'cell')}: {v}" for v, n in others.items())  # the other cells' verdicts
    if shown.empty:
        return f"{variant} against {baseline}, on the {name}: no cell shows a difference ({told})."
    hows = [_how(r, metric) for _, r in shown.iterrows()]
    parts = [f"{r['facet']} (Δ {stats.format_delta(r['delta_mean'])}: {variant} {how})"
             for (_, r), how in zip(shown.iterrows(), hows, strict=True)]  # fmt: skip
    head = f"{variant} against {baseline}, on the {name}: a difference is shown in {formats.count(len(shown), 'cell')}"
    text = f"{head} of {len(rows)}: " + "; ".join(parts) + (f". The others: {told}." if told else ".")
    return text + (" " + FAILED_TEXT if any(h.startswith("fails") for h in hows) else "")


def by_variant(cells: Sequence[Cell], summaries: Mapping[RunConfig, dict], metrics=METRICS) -> pd.DataFrame:
    """Long form for charts: one row per cell, variant and metric with the cell's coordinates, the mean, min and
    max over the seeds, and n (the seeds with a number)."""
    rows = []
    for cell in cells:
        for label, runs in cell.groups.items():
            for metric in metrics:
                values = [summaries[r][metric] for r in runs if summaries[r].get(metric) is not None]
                spread = (np.mean(values), np.min(values), np.max(values)) if values else (math.nan,) * 3
                stat = dict(zip(("mean", "min", "max"), map(float, spread), strict=True))
                rows.append(cell.key | {"variant": label, "metric": metric, "n": len(values)} | stat)
    return pd.DataFrame(rows)


NORM_NAMES = {"pre": "pre-LN", "post": "post-LN"}
MATRIX_WORDS = {"attn_in": "attention input matrix", "attn_out": "attention output matrix"}
MATRIX_WORDS |= {"ffn_in": "FFN input matrix", "ffn_out": "FFN output matrix"}


def gradient_finding(frame: pd.DataFrame, matrix: str = "ffn_out") -> str:
    """How the last block's gradient at initialisation changes with the total depth, per LayerNorm place, from the
    rows of ui.charts.regimes.norms_frame (norm, depth, block 1-based, matrix, grad_norm), beside Xiong et al.'s
    Theorem 1 (pre-LN: the last layer's gradient scales as 1/√L with the depth L; post-LN: it does not shrink)."""
    last = frame[(frame["matrix"] == matrix) & (frame["block"] == frame["depth"])]
    depths = sorted(last["depth"].unique())
    if len(depths) < 2:
        return "With one depth the panel cannot show how the last block's gradient changes with the depth."
    low, high = depths[0], depths[-1]
    parts = []
    for norm, name in NORM_NAMES.items():
        by_depth = last[last["norm"] == norm].set_index("depth")["grad_norm"]
        if not {low, high} <= set(by_depth.index):
            continue
        ratio = by_depth[high] / by_depth[low]
        values = _and([formats.significant(by_depth[d], 3) for d in depths if d in by_depth.index])
        at = _and([str(d) for d in depths if d in by_depth.index])
        way = "lower" if ratio < 1 else "higher"
        parts.append(f"{name}'s is {way} at {high} blocks than at {low} (×{ratio:.2f}: {values} at {at} blocks)")
    if not parts:
        return ""
    theory = formats.significant(math.sqrt(low / high), 2)
    return (
        f"The gradient of the last block's {MATRIX_WORDS.get(matrix, matrix)} at initialisation: "
        + "; ".join(parts)
        + ". Xiong et al.'s "
        f"Theorem 1 is about the total depth L: in pre-LN the last layer's gradient scales as 1/√L (×{theory} from "
        f"{low} to {high} blocks), in post-LN it does not shrink."
    )


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
