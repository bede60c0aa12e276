"""`python -m attncore regimes depth|heads|lr`: a Regimes experiment at the page's defaults (flags
override them), trained as one sweep, then its table, its verdicts and its finding (lab.experiments.regimes)."""

from __future__ import annotations

import argparse
import json
import math
import sys

from attncore.config import ConfigError
from cli import confirm, text
from lab import formats, stats

MAX_SEEDS = 16
# regimes' names, repeated so that building the parser loads no pandas (tests/test_regimes.py checks they agree)
EXPERIMENTS = ("depth", "heads", "lr")
PAIRS = ("norm", "scaling", "warmup", "depth")
DEFAULT_SEEDS = 6
DEPTHS = (2, 4, 8)
DEPTH_LRS = (3e-3, 1e-2)
HEAD_SIZES = (8, 16, 32, 64, 128)
LR_GRID = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
DESCRIPTION = (
    "A Regimes experiment: a grid of cells, each two variants paired over the same seeds and judged by the "
    "comparison rule on the held-out test loss and the per-sequence accuracy. "
    "depth: pre-LN (the baseline) against post-LN at several depths and learning rates, without and with a linear "
    "warm-up over a fifth of the steps (Xiong et al. 2020). "
    "heads: the 1/√d_k scaling on (the baseline) against off at several head sizes d_k (Vaswani et al. 2017). "
    "lr: a variant pair (--pair) over a log grid of learning rates, with each variant's LR sensitivity, and the "
    "pair compared each at its own best (Wortsman et al. 2023); with --qk-norm both, qk-norm off (the baseline) "
    "against on (and with --z-loss C qk-norm off with a z-loss C) up to lr 3e-1, on the sources' schedule (a "
    "linear warm-up over 5 % of the steps, --warmup, then a cosine decay to 0), with each run's largest attention "
    "logit and lowest attention entropy over training and each variant's LR sensitivity with its interval over the "
    "seeds (Wortsman et al. 2023; Dehghani et al. 2023)."
)
QK_LR_GRID = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1)
QK_NORM_CHOICES = ("off", "on", "both")


# the flags of one experiment only (the others: --seeds, --task, --length, --steps, --jobs, --max-memory, --json)
OWN_FLAGS = {
    "depths": ("depth",),
    "lrs": ("depth", "lr"),
    "sizes": ("heads",),
    "heads": ("heads",),
    "pair": ("lr",),
    "layers": ("lr",),
    "qk_norm": ("lr",),
    "z_loss": ("lr",),
    "warmup": ("lr",),
}


def options(a) -> dict:
    """regimes' options of the flags given (the rest at the experiment's defaults); ConfigError for a flag the
    chosen experiment does not take (it would be ignored). regimes refuses a level given twice and a flag the
    --pair sets itself."""
    for dest, experiments in OWN_FLAGS.items():
        if getattr(a, dest) is not None and a.experiment not in experiments:
            takes = " and ".join(experiments)
            raise ConfigError(
                dest,
                f"is a setting of the {takes} experiment{'s' * (len(experiments) > 1)}, which `regimes "
                f"{a.experiment}` does not use; drop it",
            )
    out = {"task": a.task, "length": a.length, "steps": a.steps}
    for dest in ("depths", "lrs", "sizes"):
        if getattr(a, dest):
            out[dest] = tuple(getattr(a, dest))
    if a.experiment == "heads":
        out["heads"] = 1 if a.heads is None else a.heads
    if a.experiment == "lr":
        if a.qk_norm == "both":  # qk-norm off against on: no pair (lab.experiments.regimes refuses one given)
            out["qk_norm"] = "both"
            if a.pair is not None:
                out["pair"] = a.pair
        else:
            out["pair"] = "norm" if a.pair is None else a.pair
            if a.qk_norm is not None:
                out["qk_norm"] = a.qk_norm == "on"
        if a.z_loss is not None:
            out["z_loss"] = a.z_loss
        if a.warmup is not None:  # lab.experiments.regimes refuses it without --qk-norm both
            out["warmup"] = a.warmup
        if a.layers is not None:
            out["n_layers"] = a.layers
    return out


def _row_text(r, value=None) -> str:
    keys = r["facet"]
    low, high = r["ci_low"], r["ci_high"]
    if value is None:
        value = formats.loss if r["metric"] == "test_loss" else formats.accuracy
    return (
        f"  {keys:<28} {value(r['baseline_mean']):>10} {value(r['variant_mean']):>10} "
        f"{stats.format_delta(r['delta_mean']):>10} {stats.format_interval(low, high):>24} "
        f"{stats.format_p(r['p_value']):>8}  {r['verdict']}"
    )


def estimate(experiment: str, cells, runs, n_jobs: int) -> dict:
    """What training the experiment's missing runs costs here: {"experiment", "runs", "missing", "cpu_seconds",
    "wall_seconds", "wall_low_seconds", "wall_high_seconds", "workers", "model"} (lab.cost_model: computing from
    this machine's CPU time; lab.wall: the likely wall time and its range from the workers and the load over the
    last minutes, as the dashboard's buttons say it; --json prints the likely one)."""
    from lab import cost_model, wall
    from lab.store import cache_dir, is_cached
    from lab.sweep import loky_workers

    missing = [run for run in runs if not is_cached(run)]
    workers = loky_workers(n_jobs, len(missing)) if missing else loky_workers(n_jobs, len(runs))
    model = cost_model.model(workers, cache_dir())  # the probe costs kept in the store for this machine
    here = wall.estimate(model, missing, workers, cache_dir())
    return {
        "experiment": experiment,
        "runs": len(runs),
        "missing": len(missing),
        "cpu_seconds": round(model.work_seconds(missing), 1),
        "wall_seconds": round(here.likely, 1),
        "wall_low_seconds": round(here.low, 1),
        "wall_high_seconds": round(here.high, 1),
        "workers": workers,
        "cells": None if cells is None else len(cells),
        "model": model,
        "wall": here,  # the line's figures, not rounded twice
    }


def estimate_line(e: dict) -> str:
    """'depth: 96 runs in 8 cells, 96 to train: about 6 min here, 12 min of computing, on 2 workers' (without 'in N
    cells' for an experiment whose estimate has none: sinks, grokking)."""
    head = f"{e['experiment']}: {formats.count(e['runs'], 'run')}"
    if e.get("cells") is not None:
        head += f" in {formats.count(e['cells'], 'cell')}"
    if not e["missing"]:
        return f"{head}, all stored"
    from lab import wall

    return (
        f"{head}, {e['missing']:,} to train: {wall.about(e['wall'])} here, "
        f"{formats.duration(e['cpu_seconds'])} of computing, on {formats.count(e['workers'], 'worker')}"
    )


def add_sweep_flags(p) -> None:
    """The flags of an experiment's sweep that plan() reads: --jobs, --max-memory, --json, --estimate and --yes."""
    from cli.flags import jobs, memory_size

    p.add_argument("--jobs", type=jobs, default=-1, help="parallel workers (-1: all cores)")
    p.add_argument("--max-memory", type=memory_size, metavar="SIZE", help="refuse runs estimated to need more")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--estimate",
        action="store_true",
        help="print what training it would cost here (runs, computing, wall time, workers) and train nothing",
    )
    confirm.add_yes(p)


def plan(a, experiment: str, runs, cells=None) -> dict | None:
    """Before an experiment's sweep (regimes, sinks, grokking): its runs checked against memory, and what training the
    missing ones costs here. With --estimate that is printed (a line, or --json's keys) and None returned: nothing
    trains. Else the line goes to stderr and work past cli.confirm's rule needs --yes; the estimate is returned."""
    from attncore.memory import check_fits

    check_fits(runs, workers=2 if a.jobs != 1 else 1, cap=a.max_memory)
    cost = estimate(experiment, cells, runs, a.jobs)
    if a.estimate:
        keys = ("experiment", "runs", "missing", "cpu_seconds", "wall_seconds", "workers")
        print(json.dumps({k: cost[k] for k in keys}) if a.json else estimate_line(cost))
        return None
    print(estimate_line(cost), file=sys.stderr)
    confirm.check(a, experiment, len(runs), cost["cpu_seconds"])
    return cost


def cmd_regimes(a) -> int:
    from lab.experiments import regimes
    from lab.sweep import run_sweep

    cells = regimes.cells_of(a.experiment, range(a.seeds), **options(a))
    runs = regimes.all_runs(cells)
    cost = plan(a, a.experiment, runs, cells)
    if cost is None:
        return 0
    from cli.sweep import ProgressBar

    model = cost["model"]
    bar = ProgressBar(estimate=cost["wall_seconds"], costs=sorted(map(model.run_seconds, runs), reverse=True))
    records = run_sweep(runs, n_jobs=a.jobs, progress=bar, cost=cost["model"])
    if a.experiment == "lr" and a.qk_norm == "both":
        return _qk_norm_comparison(a, cells, records, runs)
    summaries = {run: record.summary() for run, record in zip(runs, records, strict=True)}
    rows = regimes.table(cells, summaries)
    out = {"experiment": a.experiment, "seeds": a.seeds, "cells": json.loads(rows.to_json(orient="records"))}
    out["finding"] = regimes.finding(rows)
    if a.experiment == "lr":
        initial = regimes.initial_loss(cells)
        best = regimes.lr_summary(cells, summaries, initial)
        fair = regimes.at_best(cells, summaries, initial)
        out["variants"] = json.loads(best.to_json(orient="records"))
        out["at_best"] = json.loads(fair.to_json(orient="records"))
    if a.json:
        print(json.dumps(out))
        return 0
    for metric in regimes.METRICS:
        part = rows[rows["metric"] == metric]
        if part.empty:
            continue
        first = part.iloc[0]
        print(f"{metric.replace('_', ' ')}: {first['level']} minus {first['baseline']}, paired over {a.seeds} seeds")
        head = f"{first['baseline']:>10} {first['level']:>10} {'Δ':>10} {'interval':>24} {'p':>8}"
        print(f"  {'cell':<28} {head}  verdict")
        for _, r in part.iterrows():
            print(_row_text(r))
    if a.experiment == "lr":
        for v in out["variants"]:
            print(
                f"{v['variant']}: best lr {formats.learning_rate(v['best_lr'])} (test loss "
                f"{formats.loss(v['best_loss'])}), LR sensitivity {formats.significant(v['sensitivity'], 3)} "
                f"(ℓ₀ {formats.loss(v['initial_loss'])})"
            )
        for r in out["at_best"]:
            if r["metric"] == regimes.LOSS:
                delta, p = stats.format_delta(r["delta_mean"]), stats.format_p(r["p_value"])
                print(f"each at its best lr: Δ {delta}, p {p}, {r['verdict']}")
    print(text.paragraph(out["finding"]))
    return 0


def _print_rows(rows, seeds: int) -> None:
    from lab.experiments import regimes, stability

    for metric in dict.fromkeys(rows["metric"]):
        part = rows[rows["metric"] == metric]
        for level in dict.fromkeys(part["level"]):
            first = part[part["level"] == level].iloc[0]
            print(f"{metric.replace('_', ' ')}: {level} minus {first['baseline']}, paired over {seeds} seeds")
            head = f"{first['baseline']:>10} {level:>10} {'Δ':>10} {'interval':>24} {'p':>8}"
            print(f"  {'cell':<28} {head}  verdict")
            for _, r in part[part["level"] == level].iterrows():
                print(_row_text(r) if metric in regimes.METRICS else _row_text(r, stability.figure))


def _qk_norm_comparison(a, cells, records, runs) -> int:
    """The lr experiment's qk-norm comparison: per variant its settings, LR sensitivity with the interval over the
    seeds and the paired comparison of the seeds' own, and per learning rate and seed the test loss, the largest
    attention logit and the lowest attention entropy over training (stability); then the cells, the finding."""
    from lab.experiments import regimes, stability

    summaries = stability.summaries_of(dict(zip(runs, records, strict=True)))
    rows = regimes.table(cells, summaries, stability.METRICS)
    initial = regimes.initial_loss(cells)
    sensitivity = stability.sensitivity_table(cells, summaries, initial)
    by_seed = stability.per_seed(cells, summaries)
    variants = []
    for _, v in sensitivity.iterrows():
        mine = by_seed[by_seed["variant"] == v["variant"]]
        lrs = [
            {
                "lr": float(lr),
                "seeds": [{"seed": int(r["seed"])} | {k: _number(r[k]) for k in FIGURES} for _, r in part.iterrows()],
            }
            for lr, part in mine.groupby("lr", sort=False)
        ]  # fmt: skip  (every digit: to_json keeps 10 decimals)
        paired = None
        if isinstance(v["verdict"], str):
            paired = {k: v[k] for k in ("delta_mean", "ci_low", "ci_high", "p_value", "verdict")}
        variants.append({
            "variant": v["variant"], "qk_norm": bool(v["qk_norm"]), "z_loss": float(v["z_loss"]),
            "lr_sensitivity": v["sensitivity"], "initial_loss": v["initial_loss"], "best_lr": v["best_lr"],
            "best_loss": v["best_loss"],
            "lr_sensitivity_seeds": {"mean": v["seeds_mean"], "ci_low": v["seeds_low"], "ci_high": v["seeds_high"],
                                     "t_low": v["t_low"], "t_high": v["t_high"],
                                     "by_seed": [{"seed": s, "lr_sensitivity": x} for s, x in v["seeds"].items()]},
            "against_baseline": paired,
            "lrs": lrs,
        })  # fmt: skip
    out = {"experiment": "lr", "seeds": a.seeds, "qk_norm": "both", "z_loss": a.z_loss, "variants": variants}
    out["cells"] = json.loads(rows.to_json(orient="records"))
    out["at_best"] = json.loads(regimes.at_best(cells, summaries, initial).to_json(orient="records"))
    out["finding"] = stability.finding(cells, summaries, initial, rows)
    if a.json:
        print(json.dumps(_finite(out)))
        return 0
    _print_rows(rows, a.seeds)
    for v in variants:
        own = v["lr_sensitivity_seeds"]
        print(
            f"{v['variant']}: best lr {formats.learning_rate(v['best_lr'])} "
            f"(test loss {formats.loss(v['best_loss'])}), "
            f"LR sensitivity {stability.figure(v['lr_sensitivity'])}; each seed's own {stability.figure(own['mean'])} "
            f"[{stability.figure(own['ci_low'])}, {stability.figure(own['ci_high'])}]"
        )
    print(text.paragraph(out["finding"]))
    return 0


FIGURES = ("test_loss", "max_attn_logit", "min_attn_entropy")  # per seed in the qk-norm comparison's JSON


def _number(x) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def _finite(value):
    """NaN and ±inf as null: JSON has no such numbers."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


MIN_LR = 1e-6  # --lrs: from here to below 1 (a learning rate of 1 or more is refused by attncore.config)


def _lr(text: str) -> float:
    from cli.flags import number

    try:
        value = number(text)
    except argparse.ArgumentTypeError:
        value = None
    if value is None or not MIN_LR <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be a learning rate from 1e-6 to below 1, got {text[:20]!r}")
    return value


def _z_loss(text: str) -> float:
    from cli.flags import number

    try:
        value = number(text)
    except argparse.ArgumentTypeError:
        value = None
    if value is None or not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a z-loss coefficient above 0 and below 1, got {text[:20]!r}")
    return value


def _listed(values) -> str:
    return " ".join(formats.learning_rate(v) if isinstance(v, float) else str(v) for v in values)


def register(sub) -> None:
    from cli.flags import integer, integer_in

    p = sub.add_parser(
        "regimes", help="a Regimes experiment (depth, heads or lr) over seeds, with verdicts", description=DESCRIPTION
    )
    p.add_argument("experiment", choices=EXPERIMENTS, help="depth, heads or lr (above)")
    p.add_argument(
        "--seeds", type=integer_in(1, MAX_SEEDS), default=DEFAULT_SEEDS, help=f"seeds 0..N-1 (1-{MAX_SEEDS})"
    )
    p.add_argument("--task", choices=("copy", "sort", "reverse"), default="sort")
    p.add_argument("--length", type=integer, default=6)
    p.add_argument("--steps", type=integer, default=1500)
    p.add_argument("--depths", type=integer, nargs="+", help=f"depth: blocks (default {_listed(DEPTHS)})")
    p.add_argument("--lrs", type=_lr, nargs="+", help=f"depth: learning rates (default {_listed(DEPTH_LRS)}); lr: "
                   f"the grid (default {_listed(LR_GRID)}); 1e-6 to below 1")  # fmt: skip
    p.add_argument("--sizes", type=integer, nargs="+", help=f"heads: d_k values (default {_listed(HEAD_SIZES)})")
    p.add_argument("--heads", type=integer, choices=(1, 4), help="heads: 1 head of d = d_k (default) or 4 of d = 4 d_k")
    p.add_argument("--pair", choices=PAIRS, help="lr: the variant pair (default norm)")
    p.add_argument("--layers", type=integer, help="lr: the blocks of both variants (default 2)")
    p.add_argument("--qk-norm", choices=QK_NORM_CHOICES, help="lr: both: qk-norm off (the baseline) against on, in "
                   f"place of --pair, over the grid {_listed(QK_LR_GRID)} unless --lrs; off or on: for both variants "
                   "of the pair")  # fmt: skip
    p.add_argument("--z-loss", type=_z_loss, metavar="C", help="lr, with --qk-norm both: a third variant, qk-norm "
                   "off with a z-loss of coefficient C (Wortsman et al.: 1e-4), above 0 and below 1")  # fmt: skip
    p.add_argument("--warmup", type=integer, metavar="N", help="lr, with --qk-norm both: steps of linear warm-up "
                   "before the cosine decay, 0 to --steps (default 5 %% of the steps, 75 of 1,500)")  # fmt: skip
    add_sweep_flags(p)
    p.set_defaults(func=cmd_regimes)
