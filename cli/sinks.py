"""`python -m attncore sinks`: the Bigram-Backcopy task over seeds, trained as one sweep (from the store where it
can), then per seed the sink share at the end of training and StreamingLLM's window test, the three comparisons by
the comparison rule, and the finding (lab.sinks)."""

from __future__ import annotations

import json

from attncore.config import DECAYS, POSITIONS, ConfigError
from attncore.tasks.bigram_backcopy import BB_RUN
from lab import formats, stats

MAX_SEEDS = 16
DEFAULT_SEEDS = 6  # lab.sinks's, repeated so that building the parser loads no pandas (tests check they agree)
DEFAULT_WINDOW = 8


def settings_of(a) -> dict:
    """make_run arguments every run shares (the task's defaults for the flags not given)."""
    out = {"steps": a.steps, "lr": a.lr, "decay": a.decay, "warmup": a.warmup, "length": a.N, "n_layers": a.layers,
           "n_heads": a.heads, "position": a.position}  # fmt: skip
    return out | {"bigram_vocab": a.bigram_vocab, "triggers": a.triggers}


def cmd_sinks(a) -> int:
    from cli.regimes import plan
    from cli.sweep import ProgressBar
    from lab import sinks
    from lab.sweep import run_sweep

    seeds = list(dict.fromkeys(a.seeds))
    if len(seeds) > MAX_SEEDS:
        raise ConfigError("seeds", f"at most {MAX_SEEDS} seeds, got {len(seeds)}")
    settings = settings_of(a)
    runs = sinks.runs_of(seeds, **settings)
    sinks.check_window(runs[0], a.window)
    cost = plan(a, "sinks", runs)
    if cost is None:
        return 0
    records = run_sweep(runs, n_jobs=a.jobs, progress=ProgressBar(estimate=cost["wall_seconds"]), cost=cost["model"])
    per_seed = [sinks.seed_figures(r, sinks.bb.window_losses(r.params, r.config, a.window)) for r in records]
    rows = sinks.comparisons(per_seed)
    out = sinks.to_json(per_seed, rows, sinks.finding(per_seed, rows), settings | {"window": a.window})
    if a.json:
        print(json.dumps(out))
        return 0
    uniform, best = formats.share(per_seed[0]["uniform_share"]), formats.loss(per_seed[0]["bayes_loss"])
    print(
        "per seed, at the end of training: the share of the bigram queries' attention on position 0, mean over heads "
        f"and the sink head's (a uniform head's: {uniform}), and the held-out loss over the queries whose window of "
        f"{a.window} keys drops position 0 (best possible {best})"
    )
    print(f"  {'seed':>4} {'share':>6} {'head':>5} {'sink':>6} {'copy':>6} {'|v0|':>6} {'|v|':>6} {'full':>7} "
          f"{'window':>7} {'w+sink':>7} {'test':>7} {'bigram':>7} {'copy':>7}")  # fmt: skip
    for r in per_seed:
        head = f"L{r['sink_head'][0]}H{r['sink_head'][1]}"
        print(f"  {r['seed']:>4} {formats.share(r['first_token_attention']):>6} {head:>5} "
              f"{formats.share(r['sink_head_share']):>6} {formats.share(r['copy_attention']):>6} "
              f"{r['value_norm_first']:>6.2f} {r['value_norm_rest']:>6.2f} "
              f"{formats.loss(r['full_loss']):>7} {formats.loss(r['window_loss']):>7} "
              f"{formats.loss(r['window_sink_loss']):>7} {formats.loss(r['test_loss']):>7} "
              f"{formats.loss(r['bigram_loss']):>7} {formats.loss(r['copy_loss']):>7}")  # fmt: skip
    print(f"comparisons, paired over {formats.count(len(seeds), 'seed')} (each cell its own comparison)")
    for _, r in rows.iterrows():
        interval = stats.format_interval(r["ci_low"], r["ci_high"])
        print(f"  {r['facet']:<30} {r['baseline_mean']:>8.4f} {r['variant_mean']:>8.4f} "
              f"Δ {stats.format_delta(r['delta_mean']):>8} {interval:>22} p {stats.format_p(r['p_value']):>7}  "
              f"{r['verdict']}")  # fmt: skip
    print(out["finding"])
    return 0


def register(sub) -> None:
    from cli.flags import add_task_args, integer, integer_in, number
    from cli.regimes import add_sweep_flags

    p = sub.add_parser("sinks", help="attention sinks: the first token's share over training and StreamingLLM's "
                       "window test, over seeds, with verdicts")  # fmt: skip
    p.add_argument("--seeds", type=integer_in(0, 2**32 - 1, "from 0 to 4,294,967,295 (a seed)"), nargs="+",
                   default=list(range(DEFAULT_SEEDS)), help="default 0-5")  # fmt: skip
    p.add_argument("--window", type=integer, default=DEFAULT_WINDOW,
                   help=f"W: keys of the sliding window, 1 to N - 2 (default {DEFAULT_WINDOW})")  # fmt: skip
    p.add_argument("--steps", type=integer, default=BB_RUN["steps"])
    p.add_argument("--lr", type=number, default=BB_RUN["lr"], help=f"learning rate (default {BB_RUN['lr']:g})")
    p.add_argument("--decay", choices=DECAYS, default="none", help="after warm-up: constant (none), linear, cosine")
    p.add_argument("--warmup", type=integer, default=0, help="steps of linear warm-up (0: none)")
    p.add_argument("--layers", type=integer, default=BB_RUN["n_layers"], help="blocks")
    p.add_argument("--heads", type=integer, default=BB_RUN["n_heads"], help="heads per block")
    p.add_argument("--position", choices=POSITIONS, default=BB_RUN["position"], help="position encoding")
    add_task_args(p, only="bigram_backcopy")
    add_sweep_flags(p)
    p.set_defaults(func=cmd_sinks)
