"""The command line: `python -m attncore train|sweep|cache|params|kv-cache ...`.

Bad arguments exit with code 2 and one line on stderr, never a traceback. The
sweep and cache commands load the run store in lab/ (joblib, pandas) lazily, so
the core stays numpy-only.
"""

from __future__ import annotations

import argparse
import json
import sys

from .config import NORMS, POSITIONS, TASKS, ConfigError

# config field -> the train/sweep flag that sets it, so errors name what the user typed
FLAGS = {
    "d_model": "--d",
    "n_heads": "--heads",
    "n_layers": "--layers",
    "d_ff": "--d-ff",
    "batch_size": "--batch",
    "name": "--task",
    "task": "--task",
}


class ArgumentError(Exception):
    pass


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage, so every error is one line."""

    def error(self, message):
        raise ArgumentError(message)


def add_model_args(p: argparse.ArgumentParser, many: bool = False) -> None:
    """The flags of `train`; with many=True the sweepable ones take several values."""
    nargs = "+" if many else None

    def listed(v):  # a default that is a list when several values are allowed
        return [v] if many else v

    p.add_argument("--task", choices=TASKS, default=listed("copy"), nargs=nargs)
    p.add_argument("--length", type=int, default=listed(6), nargs=nargs, metavar="L")
    p.add_argument("--seed", type=int, default=listed(0), nargs=nargs)
    p.add_argument("--position", choices=POSITIONS, default=listed("learned"), nargs=nargs)
    p.add_argument("--norm", choices=NORMS, default=listed("pre"), nargs=nargs)
    p.add_argument("--lr", type=float, default=listed(3e-3), nargs=nargs)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--d", type=int, default=32, dest="d_model")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--d-ff", type=int, default=None, help="default 4d")
    p.add_argument("--no-scaling", action="store_true", help="do not divide scores by sqrt(d_head)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


# flags that set the same value for every run of a sweep (argparse dest -> make_run keyword)
SETTING_FLAGS = {
    "steps": "steps",
    "batch": "batch_size",
    "d_model": "d_model",
    "heads": "n_heads",
    "layers": "n_layers",
    "d_ff": "d_ff",
}


def run_settings(a) -> dict:
    """make_run keywords from the parsed flags that every run of a sweep shares."""
    return {key: getattr(a, flag) for flag, key in SETTING_FLAGS.items()} | {"scaling": not a.no_scaling}


def run_from_args(a):
    """A RunConfig from parsed `train` flags."""
    from .config import make_run

    return make_run(a.task, a.length, a.seed, lr=a.lr, position=a.position, norm=a.norm, **run_settings(a))


def print_summary(s: dict) -> None:
    c = s["config"]
    m, t, k = c["model"], c["train"], c["task"]
    print(
        f"{k['name']} L={k['length']} seed={t['seed']}  position={m['position']} norm={m['norm']}-LN "
        f"scaling={'on' if m['scaling'] else 'off'} lr={t['lr']:g}  "
        f"d={m['d_model']} heads={m['n_heads']} layers={m['n_layers']} steps={t['steps']}"
    )
    print(
        f"  final loss {s['final_loss']:.4f}   per-token {s['token_accuracy']:.3f}   "
        f"per-sequence {s['sequence_accuracy']:.3f}   params {s['n_params']:,}   "
        f"train {s['train_seconds']:.1f} s{'  (cached)' if s.get('cached') else ''}"
    )


def cmd_train(a) -> int:
    run = run_from_args(a)
    from lab.store import get_run, is_cached

    cached = is_cached(run)
    record = get_run(run)
    summary = record.summary() | {"cached": cached}
    if a.json:
        print(json.dumps(summary | {"loss_history": record.loss_history.tolist()}))
    else:
        print_summary(summary)
    return 0


def build_parser() -> Parser:
    parser = Parser(prog="python -m attncore", description="Attention Lab: train and inspect a tiny decoder.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    p = sub.add_parser("train", help="train one configuration (served from cache/ when known)")
    add_model_args(p)
    p.set_defaults(func=cmd_train)
    from . import cli_calc

    cli_calc.register(sub)
    from lab import cli_sweep

    cli_sweep.register(sub)
    return parser


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return args.func(args)
    except ConfigError as e:
        flag = e.field if e.field.startswith("-") else FLAGS.get(e.field, "--" + e.field.replace("_", "-"))
        print(f"error: {flag}: {e.message}", file=sys.stderr)
        return 2
    except ArgumentError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
