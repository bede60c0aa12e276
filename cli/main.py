"""The command line: `python -m attncore train|evaluate|sweep|cache|params|kv-cache|patch|lens|heads|explain|
regimes|induction|sinks|grokking|lessons ...`.

Bad or dangerous input (a value out of range, a run too big for memory) exits with code 2 and one line
on stderr, never a traceback; output into a closed pipe exits 141 quietly. The flags live in flags.py;
lab/ (the run store: joblib, pandas) is imported only inside the commands that use it.
"""

from __future__ import annotations

import json
import os
import sys

from attncore.config import MAX_LENGTH, ConfigError, RunConfig
from cli import confirm, text
from cli.flags import ArgumentError, Parser, add_model_args, flag_of, integer_in, run_of, store_place
from lab import formats, phrases

# every command but sweep and cache (they load lab's sweep module)
OWN_COMMANDS = ("train", "evaluate", "params", "kv-cache", "patch", "lens", "heads", "explain", "norms")
BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a writer whose reader went away


def run_from_args(a):
    """A RunConfig from parsed `train` flags (cli.flags.run_of)."""
    return run_of(a)


def print_summary(s: dict) -> None:
    """A run's summary: the run in one line as the pages name it (lab.phrases), then its figures."""
    print(phrases.describe(RunConfig.from_dict(s["config"])))
    print(
        f"  test loss {formats.loss(s['test_loss']) if s.get('test_loss') is not None else '-'}   "
        f"last-batch loss {formats.loss(s['final_loss'])}   per-token {s['token_accuracy']:.3f}   "
        f"per-sequence {s['sequence_accuracy']:.3f}   params {s['n_params']:,}   "
        f"train {s['train_seconds']:.1f} s{'  (cached)' if s.get('cached') else ''}"
    )


def cmd_train(a) -> int:
    from attncore.memory import check_fits

    run = run_from_args(a)
    from lab.store import get_run, is_cached  # the run store (joblib) loads only for this command

    cached = is_cached(run)
    if not cached:
        check_fits([run], cap=a.max_memory)
        confirm.ask(a, "train", [run])
    from cli.sweep import StepProgress

    record = get_run(run, StepProgress(run.train.steps))  # called only while it trains: steps, loss, time left
    summary = record.summary() | {"cached": cached}
    if a.json:
        snapshots = [s.summary() for s in record.snapshots]  # in step order
        print(json.dumps(summary | {"snapshots": snapshots, "loss_history": record.loss_history.tolist()}))
    else:
        print_summary(summary)
    return 0


def cmd_evaluate(a) -> int:
    """The run of the flags (from the store, trained first if needed) evaluated at each --test-lengths."""
    from attncore.evaluate import check_test_lengths, evaluate_lengths
    from attncore.memory import check_fits

    lengths = check_test_lengths(a.test_lengths)
    run = run_from_args(a)
    from lab.store import get_run, is_cached  # the run store (joblib) loads only for this command

    if not is_cached(run):
        check_fits([run], cap=a.max_memory)
        confirm.ask(a, "evaluate", [run])
    results = evaluate_lengths(get_run(run).params, run, lengths, randomized=a.eval_positions == "randomized")
    if a.json:
        out = {"config": run.to_dict(), "eval_positions": a.eval_positions, "lengths": [r.to_dict() for r in results]}
        print(json.dumps(out))
        return 0
    print(f"trained: {phrases.describe(run)}")
    noted = any(r.note for r in results)  # a note column only when some length has one
    print(f"{'test L':>6}  {'per-token':>9}  {'per-sequence':>12}" + ("  note" if noted else ""))
    for r in results:
        tok, seq = (f"{x:.3f}" if x is not None else "-" for x in (r.token_accuracy, r.sequence_accuracy))
        print(f"{r.length:>6}  {tok:>9}  {seq:>12}  {r.note or ''}".rstrip())
    return 0


def build_parser(argv=None) -> Parser:
    """The parser of every command; lab's sweep and cache commands are imported only when argv may need them, and
    for train and evaluate only their own."""
    parser = Parser(prog="python -m attncore", description="Attention Lab: train and inspect a tiny decoder.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    p = sub.add_parser(
        "train", help=f"train one configuration (served from the run store in {store_place()} when known)"
    )
    add_model_args(p)
    confirm.add_yes(p)
    p.set_defaults(func=cmd_train)
    p = sub.add_parser("evaluate", help="evaluate one configuration's trained run at other test lengths")
    add_model_args(p)
    confirm.add_yes(p)
    p.add_argument("--test-lengths", type=integer_in(1, MAX_LENGTH), nargs="+", required=True, metavar="L")
    p.add_argument(
        "--eval-positions",
        choices=("ordered", "randomized"),
        default="ordered",
        help="positions 0..n-1 (default), or drawn from [0, N_MAX) as in training (needs --randomized-positions)",
    )
    p.set_defaults(func=cmd_evaluate)
    command = next((word for word in argv if not word.startswith("-")), None) if argv is not None else None
    if command in ("train", "evaluate"):  # a cached run answers in a few ms: the other commands' imports (the
        return parser  # serving calculators, interventions, norms) were most of its time
    from cli import calc as cli_calc

    cli_calc.register(sub)
    from cli import interpret as cli_interpret

    cli_interpret.register(sub)
    from cli import norms as cli_norms

    cli_norms.register(sub)
    from cli import lessons as cli_lessons

    cli_lessons.register(sub)
    if command not in OWN_COMMANDS:  # sweep, cache, a typo (its error lists every command) or --help
        from cli import sweep as cli_sweep

        cli_sweep.register(sub)
        from cli import regimes as cli_regimes

        cli_regimes.register(sub)
        from cli import induction as cli_induction

        cli_induction.register(sub)
        from cli import sinks as cli_sinks

        cli_sinks.register(sub)
        from cli import grokking as cli_grokking

        cli_grokking.register(sub)
    return parser


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush does not raise again into a closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout without a file descriptor (a test's capture)
        pass


def main(argv=None) -> int:
    """Run a command; 0 on success, 2 with one line on stderr for bad input, 141 if stdout's reader left. Whatever it
    prints, a terminal's control sequences (from a config.json's keys, a file's name) are shown escaped."""
    with text.terminal_safe():
        return _main(argv)


def _main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser(argv)
        if not argv:
            parser.print_help(sys.stderr)
            return 2
        args = parser.parse_args(argv)
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the try, not at interpreter exit
        return code
    except ConfigError as e:
        print(f"error: {flag_of(e.field)}: {e.message}", file=sys.stderr)
        return 2
    except ArgumentError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # the store refusing to delete a folder of runs says so in its one line
        backend = sys.modules.get("lab.store.backend")
        if backend is None or not isinstance(e, backend.ClearRefused):
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `... | head -1`: the reader has what it wanted
        _quiet_stdout()
        return BROKEN_PIPE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
