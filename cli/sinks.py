"""`python -m attncore sinks`: the Bigram-Backcopy task over seeds, trained as one sweep (from the store where it
can), then per seed the sink share at the end of training and StreamingLLM's window test, the three comparisons by
the comparison rule, and the finding (lab.experiments.sinks)."""

from __future__ import annotations

import json

from attncore.config import DECAYS, POSITIONS, ConfigError
from attncore.tasks.bigram_backcopy import BB_RUN
from lab import formats, stats

MAX_SEEDS = 16
DEFAULT_SEEDS = (
    6  # lab.experiments.sinks's, repeated so that building the parser loads no pandas (tests check they agree)
)
DEFAULT_WINDOW = 8


def settings_of(a) -> dict:
    """make_run arguments every run shares (the task's defaults for the flags not given)."""
    out = {"steps": a.steps, "lr": a.lr, "decay": a.decay, "warmup": a.warmup, "length": a.N, "n_layers": a.layers,
           "n_heads": a.heads, "position": a.position, "embed_std": a.embed_std}  # fmt: skip
    return out | {"bigram_vocab": a.bigram_vocab, "triggers": a.triggers}


def cmd_sinks(a) -> int:
    from cli.regimes import plan
    from cli.sweep import ProgressBar
    from lab.experiments import sinks, sinks_text
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
    per_seed = [sinks.seed_figures(r, sinks.final_test(r, a.window)) for r in records]
    rows = sinks.comparisons(per_seed)
    out = sinks.to_json(per_seed, rows, sinks_text.finding(per_seed, rows), settings | {"window": a.window})
    if a.json:
        print(json.dumps(out))
        return 0
    print_seeds(per_seed, a.window)
    print(f"comparisons, paired over {formats.count(len(seeds), 'seed')} (each cell its own comparison)")
    for _, r in rows.iterrows():
        interval = stats.format_interval(r["ci_low"], r["ci_high"])
        print(f"  {r['facet']:<36} {r['baseline_mean']:>8.4f} {r['variant_mean']:>8.4f} "
              f"Δ {stats.format_delta(r['delta_mean']):>8} {interval:>22} p {stats.format_p(r['p_value']):>7}  "
              f"{r['verdict']}")  # fmt: skip
    print(out["finding"])
    return 0


def print_seeds(per_seed: list[dict], window: int) -> None:
    """Per seed the sink head's figures and the window test; per head its share, Gu importance and copy attention."""
    uniform, best = formats.share(per_seed[0]["uniform_share"]), formats.loss(per_seed[0]["bayes_loss"])
    print(
        "per seed, at the end of training: the sink head (the largest share of the bigram queries' attention on "
        f"position 0; a uniform head's: {uniform}), its Gu importance (mean attention on key 0 over every query), "
        f"its value norm at 0 and elsewhere, the held-out loss over the queries whose window of {window + 1} keys "
        f"drops position 0 (best possible {best}): full attention, {window} keys, {window + 1} keys, {window} keys "
        "and key 0, 1 or 2"
    )
    losses = ("full_loss", "window_loss", "window_wide_loss", "window_sink_loss", "window_key1_loss",
              "window_key2_loss")  # fmt: skip
    print(
        f"  {'seed':>4} {'head':>5} {'share':>6} {'Gu':>5} {'|v0|':>5} {'|v|':>5} "
        + " ".join(f"{c:>7}" for c in ("full", f"{window}", f"{window + 1}", "+key 0", "+key 1", "+key 2"))
    )
    for r in per_seed:
        head = "L{}H{}".format(*r["sink_head"])
        print(f"  {r['seed']:>4} {head:>5} {formats.share(r['first_token_attention']):>6} {r['gu_importance']:>5.2f} "
              f"{r['value_norm_first']:>5.2f} {r['value_norm_rest']:>5.2f} "
              + " ".join(f"{formats.loss(r[k]):>7}" for k in losses))  # fmt: skip
    print("per head: share on position 0 / Gu importance / copy attention")
    for r in per_seed:
        heads = "   ".join(f"{h['head']} {formats.share(h['share'])} / {h['gu_importance']:.2f} / "
                           f"{formats.share(h['copy_attention'])}" for h in r["heads"])  # fmt: skip
        print(f"  {r['seed']:>4} {heads}   ({r['roles']})")


def register(sub) -> None:
    from cli.flags import add_task_args, integer, integer_in, number
    from cli.regimes import add_sweep_flags

    p = sub.add_parser("sinks", help="attention sinks: the first token's share over training and StreamingLLM's "
                       "window test, over seeds, with verdicts")  # fmt: skip
    p.add_argument("--seeds", type=integer_in(0, 2**32 - 1, "from 0 to 4,294,967,295 (a seed)"), nargs="+",
                   default=list(range(DEFAULT_SEEDS)), help="default 0-5")  # fmt: skip
    p.add_argument("--window", type=integer, default=DEFAULT_WINDOW,
                   help=f"W: keys of the sliding window, 1 to N - 3 (default {DEFAULT_WINDOW})")  # fmt: skip
    p.add_argument("--steps", type=integer, default=BB_RUN["steps"])
    p.add_argument("--lr", type=number, default=BB_RUN["lr"], help=f"learning rate (default {BB_RUN['lr']:g})")
    p.add_argument("--decay", choices=DECAYS, default="none", help="after warm-up: constant (none), linear, cosine")
    p.add_argument("--warmup", type=integer, default=0, help="steps of linear warm-up (0: none)")
    p.add_argument("--layers", type=integer, default=BB_RUN["n_layers"], help="blocks")
    p.add_argument("--heads", type=integer, default=BB_RUN["n_heads"], help="heads per block")
    p.add_argument(
        "--embed-std",
        type=number,
        default=BB_RUN["embed_std"],
        help=f"the token and position embeddings' initial std (default {BB_RUN['embed_std']:g})",
    )
    p.add_argument("--position", choices=POSITIONS, default=BB_RUN["position"], help="position encoding")
    add_task_args(p, only="bigram_backcopy")
    add_sweep_flags(p)
    p.set_defaults(func=cmd_sinks)
