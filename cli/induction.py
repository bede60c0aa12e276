"""`python -m attncore induction`: the induction task at each depth and position encoding over the same
seeds, trained as one sweep (from the store where it can), then per run its phase change, final losses, head
scores and causal check, the comparisons by the comparison rule, and the finding (lab.experiments.induction)."""

from __future__ import annotations

import json
import sys

from attncore.config import NORMS, POSITIONS, ConfigError
from attncore.tasks.induction import INDUCTION_RUN
from cli import confirm
from lab import formats, stats

MAX_SEEDS = 16
DEFAULT_SEEDS = (
    6  # lab.experiments.induction's, repeated so that building the parser loads no pandas (tests check they agree)
)


def settings_of(a) -> dict:
    """make_run arguments every run shares (the induction defaults for the flags not given)."""
    out = {"steps": a.steps, "length": a.T, "vocab": a.vocab, "k_min": a.k_min, "norm": a.norm}
    return out | ({"embed_std": a.embed_std} if a.embed_std is not None else {})


def _run_line(r: dict) -> str:
    from lab.experiments import induction

    step = "none" if r["phase_step"] is None else f"{r['phase_step']:,}"
    ind = max(max(row) for row in r["induction_score"]["final"][1:] or r["induction_score"]["final"])
    prev = max(max(row) for row in r["previous_token_score"]["final"][:1])
    zeroed = " ".join(f"{kind.split()[0]} L{z['head'][0]}H{z['head'][1]} {formats.loss(z['repeat_loss'])}"
                      for kind, z in induction.zeroed_heads(r))  # fmt: skip
    return (
        f"  {r['layers']:>6} {r['position']:<10} {r['seed']:>4} {step:>7} {formats.loss(r['largest_drop']):>8} "
        f"{formats.loss(r['repeat_loss']['before_drop']):>7} {formats.loss(r['repeat_loss']['final']):>7} "
        f"{formats.loss(r['first_loss_final']):>7} {formats.loss(r['icl_score_final']):>7} "
        f"{formats.accuracy(ind):>6} {formats.accuracy(prev):>6}  {zeroed}"
    )


def cmd_induction(a) -> int:
    from attncore.memory import check_fits
    from cli.sweep import ProgressBar
    from lab.experiments import induction
    from lab.sweep import run_sweep

    seeds = list(dict.fromkeys(a.seeds))
    if len(seeds) > MAX_SEEDS:
        raise ConfigError("seeds", f"at most {MAX_SEEDS} seeds, got {len(seeds)}")
    chosen = induction.variants(a.layers, a.position)
    by_variant = induction.runs_of(chosen, seeds, **settings_of(a))
    runs = induction.all_runs(by_variant)
    check_fits(runs, workers=2 if a.jobs != 1 else 1, cap=a.max_memory)
    print(f"induction: {formats.count(len(runs), 'run')} in {formats.count(len(chosen), 'variant')}", file=sys.stderr)
    confirm.ask(a, "induction", runs, a.jobs)
    records = dict(zip(runs, run_sweep(runs, n_jobs=a.jobs, progress=ProgressBar()), strict=True))
    zeroed = {run: induction.ablations(records[run]) for run in runs}
    per_run = [induction.run_figures(records[run], zeroed[run]) for run in runs]
    found = induction.cells({v: [records[r] for r in rs] for v, rs in by_variant.items()}, zeroed)
    rows, table = induction.comparisons(found), induction.phase_table(per_run)
    out = induction.to_json(per_run, rows, table, induction.finding(table, rows, a.vocab))
    if a.json:
        print(json.dumps(out))
        return 0
    print("per run: the phase step (half of the largest 200-step drop of the held-out repeat loss, 'none' when it "
          f"is at most {formats.loss(induction.figures.PHASE_THRESHOLD)} nats), that drop, the repeat loss before it "
          "and at the end, the first copy's, the in-context score; the best induction and previous-token scores; "
          "the repeat loss with each head zeroed")  # fmt: skip
    print(f"  {'layers':>6} {'position':<10} {'seed':>4} {'phase':>7} {'drop':>8} {'before':>7} {'repeat':>7} "
          f"{'first':>7} {'icl':>7} {'induct':>6} {'prev':>6}  zeroed: repeat loss")  # fmt: skip
    for r in per_run:
        print(_run_line(r))
    print("variants: seeds with a phase change, its step (mean, range)")
    for _, v in table.iterrows():
        steps = "-" if not v["changed"] else f"{v['step_mean']:,.0f} ({v['step_min']:,.0f}-{v['step_max']:,.0f})"
        print(f"  {v['variant']:<24} {int(v['changed'])} of {int(v['seeds'])}  {steps}")
    if len(rows):
        print(f"comparisons, paired over {formats.count(len(seeds), 'seed')} (each cell its own comparison)")
        for _, r in rows.iterrows():
            interval = stats.format_interval(r["ci_low"], r["ci_high"])
            print(f"  {r['facet']:<52} {r['metric']:<12} {formats.loss(r['baseline_mean']):>7} "
                  f"{formats.loss(r['variant_mean']):>7} Δ {stats.format_delta(r['delta_mean']):>8} {interval:>22} "
                  f"p {stats.format_p(r['p_value']):>7}  {r['verdict']}")  # fmt: skip
    print(out["finding"])
    return 0


def register(sub) -> None:
    from cli.flags import add_task_args, integer, integer_in, jobs, memory_size, number

    p = sub.add_parser(
        "induction", help="induction heads: the phase change over seeds, 2 layers against 1, with verdicts"
    )
    p.add_argument(
        "--layers",
        type=integer_in(1, 64, "from 1 to 64 (blocks)"),
        nargs="+",
        default=[2, 1],
        help="blocks of each variant (the first: baseline)",
    )
    p.add_argument(
        "--seeds",
        type=integer_in(0, 2**32 - 1, "from 0 to 4,294,967,295 (a seed)"),
        nargs="+",
        default=list(range(DEFAULT_SEEDS)),
        help="default 0-5",
    )
    p.add_argument("--position", choices=POSITIONS, nargs="+", default=["rope"], help="position encodings")
    p.add_argument("--steps", type=integer, default=INDUCTION_RUN["steps"])
    p.add_argument("--norm", choices=NORMS, default=INDUCTION_RUN["norm"], help="every run's LayerNorm place")
    add_task_args(p, only="induction")
    p.add_argument(
        "--embed-std",
        type=number,
        help=f"the token embedding's initial std (default {INDUCTION_RUN['embed_std']:g}, the induction default)",
    )
    p.add_argument("--jobs", type=jobs, default=-1, help="parallel workers (-1: all cores)")
    p.add_argument("--max-memory", type=memory_size, metavar="SIZE", help="refuse runs estimated to need more")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    confirm.add_yes(p)
    p.set_defaults(func=cmd_induction)
