"""The `cache` command: list, clear, check [--repair [--drop-unverified]], sign, export FILE [filters], import FILE.

Every failure is one line on stderr with exit code 2 (a check that finds damage without --repair exits 1).
"""

from __future__ import annotations

import json
import sys

from attncore import task as tasks
from cli.flags import integer, number, store_place
from lab import formats


def register(sub) -> None:
    c = sub.add_parser("cache", help=f"list, clear, check, export or import the stored runs (in {store_place()})")
    actions = c.add_subparsers(dest="action", required=True, metavar="{list,clear,check,sign,export,import}")
    ls = actions.add_parser("list", help="the stored runs of this numerics version")
    ls.add_argument("--json", action="store_true", help="print the summaries as one JSON list")
    actions.add_parser("clear", help="delete every stored run")
    check = actions.add_parser("check", help="verify every entry's digests; --repair deletes what fails")
    check.add_argument("--repair", action="store_true", help="delete damaged entries and leftovers, rebuild the index")
    check.add_argument(
        "--drop-unverified",
        action="store_true",
        help="with --repair: also delete the runs not signed with ATTNCORE_CACHE_KEY (kept by default)",
    )
    actions.add_parser(
        "sign",
        help="re-seal the runs not signed with ATTNCORE_CACHE_KEY under it (after a key change: only your own runs)",
    )
    export = actions.add_parser("export", help="write stored runs to one bundle file (no pickle)")
    export.add_argument("file", help="the bundle to write, e.g. runs.zip ('-' for stdout)")
    export.add_argument("--preset", help="only the stored runs of this preset: article, accuracy, ablations, smoke")
    export.add_argument("--task", nargs="+", choices=tasks.names(), help="only runs of these tasks")
    export.add_argument("--length", nargs="+", type=integer, help="only runs of these lengths L")
    export.add_argument("--seed", nargs="+", type=integer, help="only runs of these seeds")
    imp = actions.add_parser("import", help="check a bundle file and store its runs")
    imp.add_argument("file", help="a bundle written by `cache export`")
    imp.add_argument("--max-mb", type=number, default=200.0, help="refuse bundles larger than this (default 200)")
    imp.add_argument(
        "--trust",
        action="store_true",
        help="with ATTNCORE_CACHE_KEY set: accept runs not signed with it, and sign them (only for your own files)",
    )
    c.set_defaults(func=cmd_cache)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _selected(a) -> list:
    from attncore.config import RunConfig
    from lab.presets import preset
    from lab.store import list_cached

    configs = [s["config"] for s in list_cached()]
    if a.preset:
        wanted = {json.dumps(r.to_dict(), sort_keys=True) for r in preset(a.preset)}
        configs = [c for c in configs if json.dumps(c, sort_keys=True) in wanted]
    runs = [RunConfig.from_dict(c) for c in configs]
    return [
        r
        for r in runs
        if (a.task is None or r.task.name in a.task)
        and (a.length is None or r.task.length in a.length)
        and (a.seed is None or r.train.seed in a.seed)
    ]


def _inside_store(file: str) -> bool:
    from pathlib import Path

    from lab.store import cache_dir

    target, root = Path(file).resolve(), cache_dir().resolve()
    return target == root or root in target.parents


def cmd_export(a) -> int:
    import os

    from lab.bundle import BundleError, export_bundle, write_bundle

    if a.file != "-" and _inside_store(a.file):
        return _fail(f"FILE: {a.file!r} is inside the run store; write the bundle somewhere else")
    runs = _selected(a)
    kept = f"; the existing {a.file!r} was left as it was" if a.file != "-" and os.path.exists(a.file) else ""
    if not runs:
        filtered = a.preset or a.task or a.length or a.seed
        what = "no stored run matches the filters" if filtered else "the run store holds no run of this version"
        return _fail(f"{what}; nothing was written{kept}")
    try:
        if a.file == "-":
            n = export_bundle(sys.stdout.buffer, runs)
        else:
            n = write_bundle(a.file, runs)  # beside FILE, renamed over it once whole
    except BrokenPipeError:
        raise  # cli.main: 141, quietly
    except BundleError as exc:
        return _fail(f"{exc}{kept}")
    except OSError as exc:
        return _fail(f"FILE: cannot write {a.file!r} ({exc.strerror or type(exc).__name__}){kept}")
    if n == 0:  # stdout: every matched run failed its checks
        return _fail("no stored run was written (those that matched failed their checks)")
    print(f"exported {formats.count(n, 'run')} to {a.file}", file=sys.stderr)
    return 0


def cmd_import(a) -> int:
    from lab.bundle import BundleError, foreign_text, import_bundle_report

    if not 1 <= a.max_mb <= 100_000:  # a smaller limit would refuse a bundle of one run
        return _fail(f"--max-mb: must be from 1 to 100,000 MB, got {a.max_mb:g}")
    try:
        stored, kept, families = import_bundle_report(a.file, int(a.max_mb * 2**20), trust=a.trust)
    except BundleError as exc:
        return _fail(f"FILE: {exc}")
    except OSError as exc:
        return _fail(f"the store cannot be written ({exc.strerror or type(exc).__name__}); no run was imported")
    print(f"imported {formats.count(stored, 'run')} ({kept:,} were already stored).{foreign_text(families)}")
    return 0


def _unverified_line(n: int, size: int) -> str:
    return (
        f"{formats.count(n, 'stored run')} ({size / 2**20:,.1f} MB) {'is' if n == 1 else 'are'} not signed with "
        "this store's ATTNCORE_CACHE_KEY (the key changed, or was set on an unkeyed store): kept but not served; "
        "`cache sign` re-seals them under the key, `cache check --repair --drop-unverified` deletes them"
    )


def cmd_check(a) -> int:
    from lab.store import cache_dir, check_store

    if a.drop_unverified and not a.repair:
        return _fail("--drop-unverified: only with --repair")
    report = check_store(repair=a.repair, drop_unverified=a.drop_unverified)
    verb = "deleted (recomputed when next asked for)" if a.repair else "found"
    print(f"{report['ok']} runs whole in {cache_dir()}; {report['other_version']} of other numerics versions")
    for path, problem in report["damaged"]:
        print(f"damaged, {verb}: {path}: {problem}")
    if report["unverified"]:
        if a.drop_unverified:
            print(f"deleted {formats.count(len(report['unverified']), 'run')} not signed with ATTNCORE_CACHE_KEY")
        else:
            n = len(report["unverified"])
            print(f"unverified, kept: {formats.count(n, 'run')} not signed with this store's ATTNCORE_CACHE_KEY")
            print("  `cache sign` re-seals them under the key, `cache check --repair --drop-unverified` deletes them")
    if report["leftovers"]:
        print(f"{report['leftovers']} leftover temporary or lock files{' removed' if a.repair else ''}")
    if report["func_code"]:
        print("rewrote joblib's func_code.py")
    return 1 if (report["damaged"] or report["unverified"]) and not a.repair else 0


def cmd_sign(a) -> int:
    from lab.store import cache_dir, sign_store

    try:
        report = sign_store()
    except ValueError as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"cannot sign in {cache_dir()} ({exc.strerror or type(exc).__name__})")
    print(
        f"signed {formats.count(report['signed'], 'run')} with ATTNCORE_CACHE_KEY in {cache_dir()} "
        f"({report['already']:,} already were)"
    )
    for path, problem in report["left"]:
        print(f"left unsigned: {path}: {problem}")
    return 0


def cmd_cache(a) -> int:
    from lab.bundle import interrupted_imports
    from lab.store import cache_dir, clear_cache, list_cached

    for line in interrupted_imports():  # an import killed midway: what came in of it
        print(f"warning: {line}", file=sys.stderr)

    if a.action == "export":
        return cmd_export(a)
    if a.action == "import":
        return cmd_import(a)
    if a.action == "check":
        return cmd_check(a)
    if a.action == "sign":
        return cmd_sign(a)
    if a.action == "clear":
        try:
            print(f"removed {formats.count(clear_cache(cache_dir()), 'run')} from {cache_dir()}")
        except OSError as exc:
            return _fail(f"cannot clear {cache_dir()} ({exc.strerror or type(exc).__name__})")
        return 0
    from lab.store import unverified_runs

    summaries = list_cached()
    n_unverified, unverified_size = unverified_runs()
    if n_unverified:
        print(f"warning: {_unverified_line(n_unverified, unverified_size)}", file=sys.stderr)
    if a.json:
        print(json.dumps(summaries))
        return 0
    from lab.tables import runs_frame

    frame = runs_frame(summaries)
    columns = ["task", "length", "seed", "position", "norm", "scaling", "lr", "steps", "d_model", "final_loss"]
    columns += ["token_accuracy", "sequence_accuracy", "train_seconds"]
    print(f"{formats.count(len(frame), 'run')} in {cache_dir()}")
    if len(frame):
        print(frame[columns].to_string(index=False, formatters=formats.table_formatters(columns, frame[columns])))
    return 0
