"""`python -m attncore grokking`: modular addition with weight decay and without over the same seeds, trained as one
sweep (from the store where it can), then per run the steps to 99 % training and held-out accuracy and the delay, the
accuracies over the final window, whether it ended grokked, its spikes, the variants' table, the paired comparisons by
the comparison rule and the finding (lab.experiments.grokking)."""

from __future__ import annotations

import json

from attncore.config import ConfigError
from attncore.settings import SETTINGS
from attncore.tasks.modular import MODULAR_RUN
from lab import formats, stats

MAX_SEEDS = 16
DEFAULT_SEEDS = (
    6  # lab.experiments.grokking's, repeated so that building the parser loads no pandas (tests check they agree)
)


def settings_of(a) -> dict:
    """make_run arguments every run shares (the grokking defaults for the flags not given)."""
    return {"length": a.p, "fraction": a.fraction, "lr": a.lr, "steps": a.steps, "d_model": a.d}


def check(a) -> None:
    """The flags' values in range before anything is built: ConfigError naming the flag."""
    SETTINGS["weight_decay"].check(a.weight_decay)
    seeds = list(dict.fromkeys(a.seeds))
    if len(seeds) > MAX_SEEDS:
        raise ConfigError("seeds", f"at most {MAX_SEEDS} seeds, got {len(seeds)}")


def _step(x) -> str:
    return "-" if x is None else f"{x:,}"


def cmd_grokking(a) -> int:
    from cli.regimes import plan
    from cli.sweep import ProgressBar
    from lab.experiments import grokking
    from lab.sweep import run_sweep

    check(a)
    seeds = list(dict.fromkeys(a.seeds))
    by_variant = grokking.runs_of(seeds, a.weight_decay, **settings_of(a))
    runs = grokking.all_runs(by_variant)
    cost = plan(a, "grokking", runs)
    if cost is None:
        return 0
    records = dict(
        zip(
            runs,
            run_sweep(runs, n_jobs=a.jobs, progress=ProgressBar(estimate=cost["wall_seconds"]), cost=cost["model"]),
            strict=True,
        )
    )
    by_records = {name: [records[r] for r in rs] for name, rs in by_variant.items()}
    per_run = [grokking.run_figures(records[run]) for run in runs]
    rows, table = grokking.comparisons(by_records), grokking.variant_table(per_run)
    out = grokking.to_json(per_run, rows, table, grokking.finding(table, rows, runs[0].train.steps))
    if a.json:
        print(json.dumps(out))
        return 0
    window = grokking.window_words(table.iloc[0])
    print(
        "per run: the first snapshot step at which the training and the held-out accuracy reach 99 % ('-': never), "
        f"the delay between them, the accuracies averaged over {window}, whether it ended grokked (both at least "
        f"{grokking.GROKKED:g}), its spikes (falls of the training accuracy under {grokking.SPIKE_BELOW:g} after "
        "reaching 0.99), the weight norm at the start and the end, and how many frequencies the embedding's power is "
        "spread over at the start and the end"
    )
    print(
        f"  {'λ':>5} {'seed':>4} {'train99':>8} {'test99':>8} {'delay':>8} {'train':>7} {'test':>7} {'grokked':>7} "
        f"{'spikes':>6} {'‖θ‖ start':>10} {'end':>7} {'freq start':>10} {'end':>6}"
    )
    for r in per_run:
        print(
            f"  {r['weight_decay']:>5g} {r['seed']:>4} {_step(r['train_step_99']):>8} {_step(r['test_step_99']):>8} "
            f"{_step(r['delay']):>8} {formats.accuracy(r['final_train_accuracy']):>7} "
            f"{formats.accuracy(r['final_test_accuracy']):>7} {'yes' if r['grokked'] else 'no':>7} "
            f"{r['spikes']:>6} {r['weight_norm_start']:>10.1f} {r['weight_norm_final']:>7.1f} "
            f"{r['fourier_frequencies_start']:>10.1f} {r['fourier_frequencies_final']:>6.1f}"
        )
    if len(rows):
        first = rows.iloc[0]
        print(f"{first['level']} minus {first['baseline']}, paired over {formats.count(len(seeds), 'seed')}")
        for _, r in rows.iterrows():
            interval = stats.format_interval(r["ci_low"], r["ci_high"])
            print(
                f"  {grokking.METRIC_WORDS[r['metric']]:<18} {r['baseline_mean']:>9.4g} {r['variant_mean']:>9.4g} "
                f"Δ {stats.format_delta(r['delta_mean']):>9} {interval:>24} p {stats.format_p(r['p_value']):>7}  "
                f"{r['verdict']}"
            )
    from cli import text

    print(text.paragraph(out["finding"]))
    return 0


def register(sub) -> None:
    from cli.flags import integer, integer_in, number
    from cli.regimes import add_sweep_flags

    p = sub.add_parser(
        "grokking",
        help="grokking: modular addition with and without weight decay over seeds, the delay, with verdicts",
        description="(a + b) mod p trained on a fixed fraction of the p² pairs with AdamW (Nanda et al. 2023's "
        "recipe), with weight decay and without, over the same seeds: when the training and the held-out accuracy "
        "each first reach 99 %, the delay between them, and the two variants paired by seed.",
    )
    p.add_argument(
        "--seeds",
        type=integer_in(0, 2**32 - 1, "from 0 to 4,294,967,295 (a seed)"),
        nargs="+",
        default=list(range(DEFAULT_SEEDS)),
        help=f"default 0-{DEFAULT_SEEDS - 1}",
    )
    p.add_argument(
        "--weight-decay",
        type=number,
        default=MODULAR_RUN["weight_decay"],
        metavar="W",
        help="λ of the variant with weight decay, compared with 0 (AdamW; from 0 to below 10)",
    )
    p.add_argument("--p", type=integer, default=MODULAR_RUN["length"], help="the modulus (3 to 256)")
    p.add_argument(
        "--fraction",
        type=number,
        default=MODULAR_RUN["fraction"],
        metavar="F",
        help="the share of the p² pairs that trains (above 0, below 1)",
    )
    p.add_argument("--lr", type=number, default=MODULAR_RUN["lr"])
    p.add_argument("--steps", type=integer, default=MODULAR_RUN["steps"])
    p.add_argument("--d", type=integer, default=MODULAR_RUN["d_model"], help="the model width (4 heads)")
    add_sweep_flags(p)
    p.set_defaults(func=cmd_grokking)
