"""`python -m attncore regimes depth|heads|lr` (issue 30.4): a Regimes experiment at the page's defaults (flags
override them), trained as one sweep, then its table, its verdicts and its finding (lab.regimes)."""

from __future__ import annotations

import argparse
import json
import math
import sys

from attncore.config import ConfigError
from cli import text
from lab import formats, stats

MAX_SEEDS = 16
# lab.regimes' names, repeated so that building the parser loads no pandas (tests/test_regimes.py checks they agree)
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
    "pair compared each at its own best (Wortsman et al. 2023)."
)


def _seeds(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_SEEDS:
        raise argparse.ArgumentTypeError(f"must be an integer from 1 to {MAX_SEEDS}, got {text[:20]!r}")
    return n


def options(a) -> dict:
    """lab.regimes' options of the flags given (the rest at the experiment's defaults)."""
    out = {"task": a.task, "length": a.length, "steps": a.steps}
    if a.experiment == "depth" and a.depths:
        out["depths"] = tuple(a.depths)
    if a.experiment in ("depth", "lr") and a.lrs:
        out["lrs"] = tuple(a.lrs)
    if a.experiment == "heads":
        out["heads"] = a.heads
        if a.sizes:
            out["sizes"] = tuple(a.sizes)
    if a.experiment == "lr":
        out["pair"] = a.pair
        if a.layers is not None:
            out["n_layers"] = a.layers
    elif a.layers is not None:
        raise ConfigError("layers", "--layers sets the lr experiment's depth; the depth experiment takes --depths")
    return out


def _row_text(r) -> str:
    keys = r["facet"]
    low, high = r["ci_low"], r["ci_high"]
    value = formats.loss if r["metric"] == "test_loss" else formats.accuracy
    return (
        f"  {keys:<28} {value(r['baseline_mean']):>10} {value(r['variant_mean']):>10} "
        f"{stats.format_delta(r['delta_mean']):>10} {stats.format_interval(low, high):>24} "
        f"{stats.format_p(r['p_value']):>8}  {r['verdict']}"
    )


def cmd_regimes(a) -> int:
    from attncore.memory import check_fits
    from lab import regimes
    from lab.sweep import run_sweep

    cells = regimes.cells_of(a.experiment, range(a.seeds), **options(a))
    runs = regimes.all_runs(cells)
    check_fits(runs, workers=2 if a.jobs != 1 else 1, cap=a.max_memory)
    print(f"{a.experiment}: {formats.count(len(runs), 'run')} in {formats.count(len(cells), 'cell')}", file=sys.stderr)
    from cli.sweep import ProgressBar

    records = run_sweep(runs, n_jobs=a.jobs, progress=ProgressBar())
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


def _lr(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (1e-6 <= value <= 1.0):
        raise argparse.ArgumentTypeError(f"must be a learning rate from 1e-6 to 1, got {text[:20]!r}")
    return value


def _listed(values) -> str:
    return " ".join(formats.learning_rate(v) if isinstance(v, float) else str(v) for v in values)


def register(sub) -> None:
    from cli.flags import jobs, memory_size

    p = sub.add_parser(
        "regimes", help="a Regimes experiment (depth, heads or lr) over seeds, with verdicts", description=DESCRIPTION
    )
    p.add_argument("experiment", choices=EXPERIMENTS, help="depth, heads or lr (above)")
    p.add_argument("--seeds", type=_seeds, default=DEFAULT_SEEDS, help=f"seeds 0..N-1 (1-{MAX_SEEDS})")
    p.add_argument("--task", choices=("copy", "sort", "reverse"), default="sort")
    p.add_argument("--length", type=int, default=6)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--depths", type=int, nargs="+", help=f"depth: blocks (default {_listed(DEPTHS)})")
    p.add_argument("--lrs", type=_lr, nargs="+", help=f"depth: learning rates (default {_listed(DEPTH_LRS)}); lr: "
                   f"the grid (default {_listed(LR_GRID)})")  # fmt: skip
    p.add_argument("--sizes", type=int, nargs="+", help=f"heads: d_k values (default {_listed(HEAD_SIZES)})")
    p.add_argument("--heads", type=int, choices=(1, 4), default=1, help="heads: 1 head of d = d_k or 4 of d = 4 d_k")
    p.add_argument("--pair", choices=PAIRS, default="norm", help="lr: the variant pair")
    p.add_argument("--layers", type=int, help="lr: the blocks of both variants (default 2)")
    p.add_argument("--jobs", type=jobs, default=-1, help="parallel workers (-1: all cores)")
    p.add_argument("--max-memory", type=memory_size, metavar="SIZE", help="refuse runs estimated to need more")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_regimes)
