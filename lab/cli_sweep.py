"""The `sweep` and `cache` commands: run a preset or a grid through the store, print the article's tables.

joblib and pandas are imported inside the handlers, so other commands start without them.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from attncore.cli import SETTING_FLAGS, add_model_args, run_settings
from attncore.config import ConfigError


def register(sub) -> None:
    p = sub.add_parser("sweep", help="train a grid or a preset of runs in parallel (served from cache/ when known)")
    add_model_args(p, many=True)
    p.add_argument("--preset", help="a named set of runs instead of the grid: article, accuracy, ablations, smoke")
    p.add_argument("--jobs", type=int, default=-1, help="parallel workers (default: all cores)")
    p.add_argument("--backend", choices=("loky", "dask"), default="loky")
    p.add_argument("--scheduler", help="dask scheduler address, e.g. tcp://127.0.0.1:8786 (with --backend dask)")
    p.add_argument("--csv", metavar="DIR", help="also write runs.csv, accuracy.csv and ablations.csv to DIR")
    p.set_defaults(func=cmd_sweep, parser=p)

    from .cli_cache import register as register_cache

    register_cache(sub)


def sweep_runs(a) -> list:
    """The runs a parsed `sweep` command asks for: the preset (with overridden flags) or the grid."""
    from .sweep import grid, preset, with_settings

    if a.preset:
        grid_flags = ("task", "length", "seed", "position", "norm", "lr", "no_scaling")
        given = [f"--{flag.replace('_', '-')}" for flag in grid_flags if getattr(a, flag) != a.parser.get_default(flag)]
        if given:
            raise ConfigError("preset", f"a preset fixes its runs; drop {', '.join(given)} or drop --preset")
        # the shared flags given with a non-default value apply to every run of the preset
        changed = {
            key: getattr(a, flag)
            for flag, key in SETTING_FLAGS.items()
            if getattr(a, flag) != a.parser.get_default(flag)
        }
        return [with_settings(run, **changed) for run in preset(a.preset)]
    return grid(a.task, a.length, a.seed, a.position, a.norm, a.lr, **run_settings(a))


class ProgressBar:
    """done/total runs and elapsed time on stderr: redrawn in place on a terminal, else a line a second at most."""

    def __init__(self, stream=None, width: int = 30):
        self.stream = stream or sys.stderr
        self.width, self.start, self.last = width, time.perf_counter(), -1.0
        self.tty = self.stream.isatty()

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter() - self.start
        if not self.tty and done < total and now - self.last < 1.0:
            return
        self.last = now
        filled = self.width * done // max(total, 1)
        line = f"[{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} runs  {now:.1f} s"
        end = "\n" if done == total or not self.tty else ""
        self.stream.write(("\r" if self.tty else "") + line + end)
        self.stream.flush()


def _formatters(columns) -> dict:
    """Losses to 4 decimals, accuracies to 3, differences signed."""
    out = {}
    for c in columns:
        digits = 4 if "loss" in c else 3
        sign = "+" if c.endswith("_diff") else ""
        if "loss" in c or "accuracy" in c:
            out[c] = f"{{:{sign}.{digits}f}}".format
    return out


def print_tables(records) -> None:
    from .tables import ablation_base, ablation_table, accuracy_table

    acc = accuracy_table(records)
    print("Accuracy by task and L over seeds (mean, min)")
    print(acc.to_string(index=False, formatters=_formatters(acc.columns)))
    base = ablation_base(records)
    abl = ablation_table(records, base)
    if len(abl) > 1:
        print(f"\nAblations of {base.task.name} L={base.task.length} seed={base.train.seed} (diff: to 'full')")
        print(abl.to_string(index=False, formatters=_formatters(abl.columns)))


def cmd_sweep(a) -> int:
    from .store import is_cached
    from .sweep import run_sweep

    if a.scheduler and a.backend != "dask":
        raise ConfigError("scheduler", "is only used with --backend dask")
    runs = sweep_runs(a)
    cached = [is_cached(run) for run in runs]
    start = time.perf_counter()
    records = run_sweep(runs, n_jobs=a.jobs, backend=a.backend, scheduler=a.scheduler, progress=ProgressBar())
    seconds = time.perf_counter() - start
    print(f"{len(runs)} runs ({sum(cached)} from the cache) in {seconds:.1f} s", file=sys.stderr)
    if a.csv:
        write_csv(records, Path(a.csv))
    if a.json:
        print(
            json.dumps(
                [
                    r.summary() | {"cached": c, "loss_history": r.loss_history.tolist()}
                    for r, c in zip(records, cached, strict=True)
                ]
            )
        )
    else:
        print_tables(records)
    return 0


def write_csv(records, directory: Path) -> None:
    from .tables import ablation_table, accuracy_table, runs_frame

    directory.mkdir(parents=True, exist_ok=True)
    runs_frame(records).to_csv(directory / "runs.csv", index=False)
    accuracy_table(records).to_csv(directory / "accuracy.csv", index=False)
    ablation_table(records).to_csv(directory / "ablations.csv", index=False)


def cmd_cache(a) -> int:
    from .cli_cache import cmd_cache

    return cmd_cache(a)
