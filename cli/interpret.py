"""The interventions on the command line: `patch`, `lens`, `heads` and `explain` on a trained run.

Each takes the run flags of `train` (the run is served from the store, or trained first after the memory
check) and `--input` (L symbols; default the probe). Bad values raise ConfigError naming the flag, which
cli.main turns into one line and exit code 2. lab (the store) is imported only inside the commands.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from attncore.config import SEP, ConfigError, check_int
from attncore.inspect import parse_sequence
from attncore.interpret import explain as ex
from attncore.interpret import heads as hd
from attncore.interpret import lens as ln
from attncore.interpret import patching as pt
from attncore.task import task_of
from cli import confirm
from cli.flags import add_model_args, integer, integer_in, run_of
from lab import formats

COMMANDS = ("patch", "lens", "heads", "explain")
MAX_TEST = 500  # --n-test: the fixed test set's size
# explain's ranges: about 16x the defaults at most, so a typo is refused rather than run for an hour
MAX_PERMUTATIONS, MAX_RESTARTS, MAX_SEARCH_STEPS, MAX_BASELINE_SEEDS = 10_000, 20, 2_000, 10
# and its work (attncore.interpret.explain.work: multiply-adds, from the shapes and those flags): more needs --yes.
# The defaults on the default model are 2.4e9; every range at its maximum there 4.2e10; --d 256 --layers 4 at the
# defaults 2.9e11. Measured on one core of a 2-core AMD EPYC, a wide model's passes ran at about 1e10 a second
# (small ones slower, their Python overhead uncounted): the limit is a minute or so there, never an hour.
MAX_EXPLAIN_WORK = 3 * 10**11


def run_from_args(a):
    """The RunConfig of the `train` flags (cli.flags.run_of, as cli.main's)."""
    return run_of(a)


def _check_training(runs, cap) -> list:
    """The runs not stored yet, after the memory check of training them (raises before anything is trained)."""
    from attncore.memory import check_fits
    from lab.store import is_cached  # the run store (joblib) loads only here

    missing = [run for run in runs if not is_cached(run)]
    for run in missing:
        check_fits([run], cap=cap)
    return missing


def stored_record(run, cap, a=None):
    """The run's record from the store, trained first (saying so on stderr) if it is not stored yet; with the
    command's flags `a`, long training is estimated and asked about first (cli.confirm)."""
    from lab.store import describe, get_run

    if a is not None:
        confirm.ask(a, a.command, [run])
    if _check_training([run], cap):
        print(f"training {describe(run)} (not in the store yet) ...", file=sys.stderr, flush=True)
    return get_run(run)


def _tokens(a, run) -> np.ndarray:
    if a.input is None:
        return task_of(run.task).probe(run.task)
    try:
        return parse_sequence(a.input, run)
    except ConfigError as e:
        raise ConfigError("--input", e.message) from None


def _fmt(row) -> str:
    """Figures to 3 decimals in columns of 6; one that rounds to 0 is '0.000', never '−0.000'."""
    return " ".join("   nan" if x is None or np.isnan(x) else f"{_three(x):>6}" for x in row)


def _three(x: float) -> str:
    return formats.with_spec(0.0 if round(float(x), 3) == 0 else x, ".3f")


def _header(prefix: str, n: int) -> str:
    """Column labels over a _fmt row of n figures, after the rows' 'L0' labels: '       H0     H1 …'."""
    return "      " + " ".join(f"{prefix}{i}".rjust(6) for i in range(n))


def _tokens_text(tokens, sep: bool = True) -> str:
    return " ".join("SEP" if sep and int(t) == SEP else str(int(t)) for t in tokens)


def cmd_patch(a) -> int:
    run = run_from_args(a)
    tokens = _tokens(a, run)
    allowed = pt.positions(run)
    first = task_of(run.task).input_count(run.task)  # the symbols a change may hit
    if a.at not in allowed:
        raise ConfigError("--at", f"must be an input position from {allowed.start} to {allowed.stop - 1}, got {a.at}")
    symbol = pt.default_symbol(tokens, first, a.at, len(pt.symbols(run))) if a.symbol is None else a.symbol
    try:
        c = pt.contrast(run, tokens, a.at, symbol)
    except ConfigError as e:
        raise ConfigError("--" + e.field.replace("position", "at"), e.message) from None
    result = pt.patch(stored_record(run, a.max_memory, a).params, run, c, direction=a.direction)
    if a.json:
        print(json.dumps({"config": run.to_dict()} | result.to_dict()))
        return 0
    sep = task_of(run.task).has_sep
    print(f"clean {_tokens_text(c.clean, sep)}  ->  corrupted {_tokens_text(c.corrupted, sep)}")
    print(
        f"metric at query {c.query}: logit[{c.clean_token}] - logit[{c.corrupted_token}] "
        f"(clean answer prefix): clean {formats.with_spec(result.clean_metric, '.3f')}, "
        f"corrupted {formats.with_spec(result.corrupted_metric, '.3f')}; "
        f"p(clean answer) {result.clean_prob:.3f} -> {result.corrupted_prob:.3f}"
    )
    what = "restored" if a.direction == "denoise" else "destroyed"
    print(f"{a.direction}: {pt.DIRECTIONS[a.direction]}; 1 = the component alone carries the whole difference")
    print(f"fraction {what}, each head's output at every position (rows: layers, columns: heads)")
    print(_header("H", len(result.head[0])))
    for layer, row in enumerate(result.head):
        print(f"  L{layer}  {_fmt(row)}")
    print(f"fraction {what}, residual stream entering each block, by position")
    print(_header("", len(result.resid_by_position[0])))
    for layer, row in enumerate(result.resid_by_position):
        print(f"  L{layer}  {_fmt(row)}")
    mlps = "   ".join(f"L{layer} {_three(x)}" for layer, x in enumerate(result.mlp))
    print(f"fraction {what}, each block's MLP output at every position: {mlps}")
    return 0


def cmd_lens(a) -> int:
    run = run_from_args(a)
    tokens = _tokens(a, run)
    found = ln.logit_lens(stored_record(run, a.max_memory, a).params, run, tokens, a.n_test)
    names = ["embed"] + [f"block {i}" for i in range(run.model.n_layers)]
    if a.json:
        print(json.dumps({"config": run.to_dict(), "layers": names} | {k: v.tolist() for k, v in found.items()}))
        return 0
    queries = task_of(run.task).answer_queries(run.task)
    print(f"probability of the correct token at answer queries {queries[0]}..{queries[-1]}")
    for key, title in (("probe", "this input"), ("test", f"mean over {a.n_test} test sequences")):
        print(title)
        for name, row in zip(names, found[key], strict=True):
            print(f"  {name:>8}  {_fmt(row)}")
    return 0


def cmd_heads(a) -> int:
    run = run_from_args(a)
    tokens = _tokens(a, run)
    record = stored_record(run, a.max_memory, a)
    probe, test = hd.probe_scores(record.params, run, tokens), hd.test_scores(record.params, run, a.n_test)
    steps, over = hd.snapshot_scores(record.snapshots, record.probe_tokens, run.task)
    if a.json:
        out = {"config": run.to_dict(), "patterns": list(hd.patterns_of(run.task)), "steps": steps.tolist()}
        out |= {"probe": {k: v.tolist() for k, v in probe.items()}, "test": {k: v.tolist() for k, v in test.items()}}
        print(json.dumps(out | {"snapshots": {k: v.tolist() for k, v in over.items()}}))
        return 0
    names = list(hd.patterns_of(run.task))
    print(f"{'head':>6}  " + "  ".join(f"{name:>19}" for name in names) + "   (input / test mean)")
    for layer in range(run.model.n_layers):
        for h in range(run.model.n_heads):
            cells = [f"{probe[n][layer, h]:8.3f} / {test[n][layer, h]:.3f}" for n in names]
            print(f"  L{layer}H{h}  " + "  ".join(f"{c:>19}" for c in cells))
    return 0


def cmd_explain(a) -> int:
    run = run_from_args(a)
    tokens = _tokens(a, run)
    m = run.model
    if (a.layer is None) != (a.head is None):
        raise ConfigError("--head", "give --layer and --head together, or neither (the best-reading head)")
    if a.layer is not None:  # checked before anything is trained
        check_int("--layer", a.layer, 0, m.n_layers - 1)
        check_int("--head", a.head, 0, m.n_heads - 1)
    query = int(task_of(run.task).answer_queries(run.task)[-1]) if a.query is None else a.query
    ex.check_query(run, query)
    if len(set(a.baseline_seeds)) > MAX_BASELINE_SEEDS:
        raise ConfigError("--baseline-seeds", f"at most {MAX_BASELINE_SEEDS} seeds, got {len(set(a.baseline_seeds))}")
    seeds = [s for s in dict.fromkeys(a.baseline_seeds) if s != run.train.seed]
    others = [_replace_seed(run, s) for s in seeds]
    ex.check_fits(run, max(a.permutations, a.restarts), a.max_memory)
    check_work(run, a)
    _check_training([run, *others], a.max_memory)  # every run it needs, before the first is trained
    record = stored_record(run, a.max_memory, a)
    layer, head = hd.best_head(record.params, run, tokens) if a.layer is None else (a.layer, a.head)
    t = ex.target(record.params, run, tokens, layer, head, query)
    others = {other.train.seed: (stored_record(other, a.max_memory, a).params, other) for other in others}
    perm = ex.permutation_tvd(t, a.permutations)
    result = {
        "config": run.to_dict(),
        "layer": layer,
        "head": head,
        "query": query,
        "row": t.row.tolist(),
        "permutation_tvd": perm.tolist(),
        "adversarial": ex.adversarial(t, a.restarts, a.search_steps),
        "seed_jsd": ex.seed_jsd(t, others),
        "tvd_max": ex.TVD_MAX,
        "jsd_ceiling": ex.LN2,
    }
    result["finding"] = ex.finding(result, formats.loss)
    if a.json:
        print(json.dumps(result))
        return 0
    d = formats.loss  # divergences, as in the finding
    print(f"head L{layer}H{head}, answer query {query}: row {_fmt(t.row)}")
    median, top = d(float(np.median(perm))), d(float(perm.max()))
    print(f"permutation test ({formats.count(a.permutations, 'shuffle')}): TVD median {median}, max {top}")
    for k, r in enumerate(result["adversarial"], start=1):  # numbered 1..k, as on the Explanations page
        print(f"  restart {k}: JSD {d(r['jsd'])} at TVD {d(r['tvd'])}{'' if r['feasible'] else ' (not within)'}")
    for s in result["seed_jsd"]:
        print(f"  seed {s['seed']}: JSD {d(s['jsd'])} (closest head of the layer {d(s['closest_head_jsd'])})")
    print(result["finding"])
    return 0


def _sci(x: float) -> str:
    return f"{x:.1e}".replace(".0e", "e").replace("e+", "e")  # 6.7e11, 3e11


def check_work(run, a) -> None:
    """ConfigError (exit 2) when explaining is estimated to cost more than MAX_EXPLAIN_WORK and --yes is not given:
    checked before anything is trained, so a typo is one line, not an hour."""
    need = ex.work(run, a.permutations, a.restarts, a.search_steps)
    if need > MAX_EXPLAIN_WORK and not a.yes:
        raise ConfigError(
            "--yes",
            f"explaining would take about {_sci(need)} multiply-adds (estimated from the model's shapes, "
            f"--permutations, --restarts and --search-steps), more than the {_sci(MAX_EXPLAIN_WORK)} it runs without "
            "--yes; lower "
            "--permutations, --restarts or --search-steps (or --d, --d-ff, --layers, --length), or add --yes",
        )


def _replace_seed(run, seed):
    import dataclasses

    check_int("--baseline-seeds", seed, 0, 2**32 - 1)
    return dataclasses.replace(run, train=dataclasses.replace(run.train, seed=seed))


def register(sub) -> None:
    helps = {
        "patch": "activation patching: what each head, position, residual stream and MLP restores (or destroys)",
        "lens": "logit lens: the correct token's probability read after each block",
        "heads": "head detection scores (previous token, same symbol, L back, k-th smallest, mirrored), over training",
        "explain": "attention is not explanation: permutation test, adversarial rows, other seeds' maps",
    }
    parsers = {}
    for name in COMMANDS:
        p = sub.add_parser(name, help=helps[name])
        add_model_args(p)
        if name != "explain":  # explain's --yes also covers its own search (below)
            confirm.add_yes(p)
        p.add_argument("--input", metavar="SYMBOLS", help='L symbols 0..19, e.g. "17 3 0 12 7 9" (default: the probe)')
        p.set_defaults(func=globals()[f"cmd_{name}"])
        parsers[name] = p
    parsers["patch"].add_argument(
        "--at", type=integer, default=0, help="input position whose symbol changes (default 0)"
    )
    parsers["patch"].add_argument("--symbol", type=integer, help="the corrupted symbol (default: the smallest absent)")
    parsers["patch"].add_argument(
        "--direction",
        choices=tuple(pt.DIRECTIONS),
        default="denoise",
        help="denoise (default): clean activations into the corrupted run, is a component sufficient to restore "
        "the answer? noise: corrupted activations into the clean run, is it necessary? (Heimersheim & Nanda)",
    )
    for name in ("lens", "heads"):
        parsers[name].add_argument("--n-test", type=integer_in(1, MAX_TEST), default=100)
    e = parsers["explain"]
    e.add_argument("--layer", type=integer, help="default: the head whose map best matches the task's pattern")
    e.add_argument("--head", type=integer)
    e.add_argument("--query", type=integer, help="answer position L..2L-1 (default 2L-1)")
    e.add_argument(
        "--permutations",
        type=integer_in(1, MAX_PERMUTATIONS),
        default=100,
        help=f"shuffles of the row (1 to {MAX_PERMUTATIONS:,}; default 100)",
    )
    e.add_argument(
        "--restarts",
        type=integer_in(1, MAX_RESTARTS),
        default=5,
        help=f"restarts of the adversarial search (1 to {MAX_RESTARTS}; default 5)",
    )
    e.add_argument(
        "--search-steps",
        type=integer_in(1, MAX_SEARCH_STEPS),
        default=500,
        help=f"Adam steps of each restart (1 to {MAX_SEARCH_STEPS:,}; default 500)",
    )
    e.add_argument(
        "--baseline-seeds",
        type=integer,
        nargs="+",
        default=[0, 1, 2],
        metavar="SEED",
        help=f"other seeds' models to compare with (at most {MAX_BASELINE_SEEDS}; default 0 1 2)",
    )
    e.add_argument(
        "--yes",
        action="store_true",
        help=f"explain even when its work is estimated above {_sci(MAX_EXPLAIN_WORK)} multiply-adds (a minute or more)",
    )
