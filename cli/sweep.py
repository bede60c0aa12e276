"""The `sweep` and `cache` commands: run a preset or a grid through the store, print the article's tables.

joblib and pandas are imported inside the handlers, so other commands start without them. Every check
(jobs, grid size, --csv, memory, the dask scheduler) runs before the first run is trained.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from attncore import task as tasks
from attncore.config import ConfigError
from cli import confirm, text
from cli.flags import (
    GRID_FACTORS,
    MAX_GRID,
    MAX_JOBS,
    SETTING_FLAGS,
    add_model_args,
    check_length_flags,
    grid_dests,
    jobs,
    refuse_task_flags,
    run_settings,
    schedules,
    store_place,
    task_flags,
)
from lab import formats

CSV_FILES = ("runs.csv", "accuracy.csv", "ablations.csv")


def register(sub) -> None:
    p = sub.add_parser(
        "sweep",
        help=f"train a grid or a preset of runs in parallel (served from the run store in {store_place()} when known)",
    )
    add_model_args(p, many=True)
    p.add_argument("--preset", help="a named set of runs instead of the grid: article, accuracy, ablations, smoke")
    p.add_argument(
        "--jobs", type=jobs, default=-1, help=f"parallel workers: -1 (all cores, the default) or 1-{MAX_JOBS}"
    )
    p.add_argument("--backend", choices=("loky", "dask"), default="loky")
    p.add_argument("--scheduler", help="dask scheduler address, e.g. tcp://127.0.0.1:8786 (with --backend dask)")
    p.add_argument("--csv", metavar="DIR", help="also write runs.csv, accuracy.csv and ablations.csv to DIR")
    confirm.add_yes(p)
    p.add_argument(
        "--group-by",
        choices=GRID_FACTORS,
        metavar="FACTOR",
        help=f"group the runs by one factor ({', '.join(GRID_FACTORS)}) over seeds and compare each level with "
        "the first, paired by seed",
    )
    p.set_defaults(func=cmd_sweep, parser=p)

    from cli.cache import register as register_cache

    register_cache(sub)


def sweep_runs(a) -> list:
    """The runs a parsed `sweep` command asks for: the preset (with overridden flags) or the grid."""
    from lab.presets import grid, grid_size, preset, with_settings

    if a.preset:
        grid_flags = [dest for dest in grid_dests() if dest not in task_flags()] + ["scaling"]  # --scaling on off
        given = [f"--{flag.replace('_', '-')}" for flag in grid_flags if getattr(a, flag) != a.parser.get_default(flag)]
        if given:
            raise ConfigError("preset", f"a preset fixes its runs; drop {', '.join(given)} or drop --preset")
        # the shared flags given with a non-default value apply to every run of the preset
        changed = {key: getattr(a, key) for key in SETTING_FLAGS if getattr(a, key) != a.parser.get_default(key)}
        return [with_settings(run, **changed) for run in preset(a.preset)]
    check_length_flags(a)
    for name in a.task:
        if tasks.get(name).has_page:  # a task with an experiment of its own
            raise ConfigError("task", f"the {name} task is swept by `python -m attncore {name}` (or trained by train)")
    refuse_task_flags(a)
    if a.scaling and a.no_scaling:
        raise ConfigError("scaling", "give --scaling on/off or --no-scaling, not both")
    scalings = [v == "on" for v in a.scaling] if a.scaling else None
    scheduled = schedules(a)
    size = grid_size(a.task, a.length, a.seed, a.position, a.norm, a.lr, scalings) * len(scheduled)  # before any
    if size > MAX_GRID:
        if not a.yes:
            raise ConfigError("yes", f"the grid has {size:,} runs, more than {MAX_GRID:,}; add --yes to run them all")
        print(f"{size:,} runs in the grid", file=sys.stderr)
    settings = run_settings(a)
    if scalings is not None:
        del settings["scaling"]
    runs = [
        run
        for schedule in scheduled  # the seeds still vary fastest within each schedule
        for run in grid(a.task, a.length, a.seed, a.position, a.norm, a.lr, scalings, **(settings | schedule))
    ]
    return list(dict.fromkeys(runs))


def check_csv_dir(directory: Path) -> None:
    """Make `directory` and try a file in it, so a --csv that cannot be written fails before any training."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
        for name in CSV_FILES:
            path = directory / name
            if path.exists() and not (path.is_file() and os.access(path, os.W_OK)):
                raise PermissionError(f"{path} is not a writable file")
    except OSError as e:
        raise ConfigError("csv", f"must be a directory this user can write; {directory}: {e.strerror or e}") from None


class ProgressBar:
    """done/total runs, elapsed time and the time left on stderr: redrawn in place on a terminal, else a line a
    second at most. The time left is `estimate` (wall seconds, lab.wall's) less the time elapsed until a few runs
    are done, then the pace so far (lab.wall.time_left), each run weighted by its estimated computing when `costs`
    gives them (in the order the runs finish: a sweep deals the longest first), else counted alike."""

    def __init__(self, stream=None, width: int = 30, estimate: float | None = None, costs=None):
        self.stream = stream or sys.stderr
        self.width, self.start, self.last = width, time.perf_counter(), -1.0
        self.tty = self.stream.isatty()
        self.estimate = estimate
        self.costs = list(costs) if costs is not None else None

    def left(self, done: int, total: int, elapsed: float) -> float | None:
        from lab import wall

        if done >= total:
            return None
        costs = self.costs if self.costs is not None and len(self.costs) == total else [1.0] * total
        return wall.time_left(self.estimate, elapsed, done, sum(costs[:done]), sum(costs))

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter() - self.start
        if not self.tty and done < total and now - self.last < 1.0:
            return
        self.last = now
        filled = self.width * done // max(total, 1)
        line = f"[{'#' * filled}{'.' * (self.width - filled)}] {done}/{formats.count(total, 'run')}  {now:.1f} s"
        if (left := self.left(done, total, now)) is not None:
            line += f", about {formats.duration(left)} left"
        end = "\n" if done == total or not self.tty else ""
        self.stream.write(("\r" if self.tty else "") + line.ljust(78 if self.tty else 0) + end)
        self.stream.flush()


class StepProgress:
    """One training's step, loss, elapsed time and time left on stderr (get_run's callback): redrawn in place on a
    terminal, else a line every few seconds; a last line when the steps are done and the evaluation starts."""

    def __init__(self, steps: int, stream=None, every: float = 5.0):
        self.stream = stream or sys.stderr
        self.steps, self.start = steps, time.perf_counter()
        self.tty = self.stream.isatty()
        self.every = 0.2 if self.tty else every
        self.last = 0.0  # the first line once `every` has passed: a short training prints only its last

    def __call__(self, step: int, loss: float) -> None:
        now = time.perf_counter() - self.start
        done = step + 1
        final = done >= self.steps
        if not final and now - self.last < self.every:
            return
        self.last = now
        line = f"step {done:,}/{self.steps:,}  loss {formats.loss(loss)}  {formats.duration(now)} elapsed"
        if final:
            line += ", evaluating on the test sequences"
        else:
            line += f", about {formats.duration(now * (self.steps - done) / done)} left"
        end = "\n" if final or not self.tty else ""
        self.stream.write(("\r" if self.tty else "") + line.ljust(78 if self.tty else 0) + end)
        self.stream.flush()


def ablations(records):
    """(the ablation table, its base run, the base's label): lab.tables' table with the base named by the one
    factor the sweep varies ('learned position' against 'rope position'), or 'full' when it varies several."""
    from lab.tables import ablation_base, ablation_table, variant_name

    base = ablation_base(records)
    table = ablation_table(records, base)
    same = [r.config for r in records if (r.config.task, r.config.train.seed) == (base.task, base.train.seed)]
    names = {variant_name(base, other) for other in same if other != base}
    label = names.pop() if len(names) == 1 else "full"
    table.loc[table["variant"] == "full", "variant"] = label
    return table, base, label


def print_tables(records) -> None:
    from lab.tables import accuracy_table

    acc = accuracy_table(records)
    print("Accuracy by task and L over seeds (mean, min)")
    print(text.table(acc, ["task", "length"], formatters=formats.table_formatters(acc.columns, acc)))
    abl, base, label = ablations(records)
    if len(abl) > 1:
        print(f"\nAblations of {base.task.name} L={base.task.length} seed={base.train.seed} (diff: to '{label}')")
        print(text.table(abl, ["variant"], formatters=formats.table_formatters(abl.columns, abl)))


def check_group_by(runs, factor: str) -> None:
    """--group-by needs a grid that varies only that factor and the seed (pairs are matched by seed)."""
    from lab.factors import varied_besides

    others = varied_besides(runs, factor)
    if others:
        raise ConfigError(
            "group-by",
            f"{factor} over seeds needs a grid varying only --{factor} and --seed; it also varies "
            + ", ".join(f"--{o}" if o in GRID_FACTORS else o for o in others),
        )


def print_groups(records, factor: str, as_json: bool) -> None:
    """The grouped table (mean, min, max over seeds per level) and each level against the first, paired by seed,
    with its sign-flip interval (and the t interval), sign-flip p, floor, Holm's p, verdict and what the seeds
    allow (lab.compare.seeds_text)."""
    from lab.compare import RULE, display, seeds_text
    from lab.factors import group_by, tables, to_json

    groups = group_by(records, factor)
    table, comparisons, _ = tables([(None, groups)], curves=False)
    if as_json:
        print(json.dumps(to_json(factor, groups, table, comparisons)))
        return
    print(f"Runs grouped by {factor} (mean, min, max over seeds)")
    print(text.table(table, ["level"], formatters=formats.table_formatters(table.columns, table)))
    if len(comparisons):
        print(f"\nEach {factor} against {next(iter(groups))}, paired by seed (delta: level minus baseline)")
        print(text.table(display(comparisons, each=True), ["level", "metric"]))  # as `regimes` writes them
        print(f"\n{text.paragraph(seeds_text(comparisons))}")
    print(f"\n{text.paragraph(RULE)}")


def cmd_sweep(a) -> int:
    from attncore.memory import check_fits
    from lab.store import is_cached
    from lab.sweep import check_scheduler_address, connect, loky_workers, run_sweep

    if a.scheduler and a.backend != "dask":
        raise ConfigError("scheduler", "is only used with --backend dask")
    if a.backend == "dask":
        check_scheduler_address(a.scheduler)
    runs = sweep_runs(a)
    if a.group_by:
        check_group_by(runs, a.group_by)
    if a.csv:
        check_csv_dir(Path(a.csv))
    cached = [is_cached(run) for run in runs]
    missing = list(dict.fromkeys(run for run, c in zip(runs, cached, strict=True) if not c))
    if a.backend == "loky":  # dask workers are other machines: only the --max-memory cap applies to them
        check_fits(missing, loky_workers(a.jobs, len(missing)), a.max_memory)
        confirm.ask(a, "sweep", runs, a.jobs)  # this machine's estimate; the grid's size was checked above
    elif a.max_memory:
        check_fits(missing, 1, a.max_memory)
    client = connect(a.scheduler) if a.backend == "dask" and missing else None
    start = time.perf_counter()
    try:
        trained = set()
        records = run_sweep(
            runs,
            n_jobs=a.jobs,
            backend=a.backend,
            scheduler=client or a.scheduler,
            progress=ProgressBar(),
            trained=trained,
        )
    finally:
        if client is not None:
            client.close()
    seconds = time.perf_counter() - start
    unique = len(set(runs))  # served from the store: every run this sweep did not train (another may have)
    print(
        f"{formats.count(unique, 'run')} ({unique - len(trained):,} from the cache) in {seconds:.1f} s", file=sys.stderr
    )
    if a.csv:
        write_csv(records, Path(a.csv))
    if a.group_by:
        print_groups(records, a.group_by, a.json)
    elif a.json:
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
    from lab.tables import accuracy_table, runs_frame

    frames = runs_frame(records), accuracy_table(records), ablations(records)[0]
    try:  # checked before the sweep; the disk can still fill up or the directory vanish since
        directory.mkdir(parents=True, exist_ok=True)
        for frame, name in zip(frames, CSV_FILES, strict=True):
            frame.to_csv(directory / name, index=False)
    except OSError as e:
        raise ConfigError("csv", f"could not write {directory}: {e.strerror or e} (the runs are stored)") from None


def cmd_cache(a) -> int:
    from cli.cache import cmd_cache

    return cmd_cache(a)
