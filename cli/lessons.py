"""`python -m attncore lessons [--json]`: the lab's lessons (lab.lessons), each with the link that opens it.
`python -m attncore lessons warm [LESSON ...] [--estimate] [--json] [--yes]`: trains into the store every run the
lessons' pages ask for (lab.experiments.lesson_runs), so that a class's server opens every lesson from the store;
what it costs first, as every heavy command (cli.confirm)."""

from __future__ import annotations

import json
import os
import sys

from lab.lessons import LESSONS

ESTIMATE_KEYS = ("runs", "missing", "cpu_seconds", "wall_seconds", "wall_low_seconds", "wall_high_seconds", "workers")


def cmd_lessons(a) -> int:
    rows = [lesson.to_dict(a.origin) for lesson in LESSONS]
    if a.json:
        print(json.dumps({"lessons": rows}))
        return 0
    for row in rows:
        print(f"{row['name']}  {row['title']}  ({row['page']})\n  {row['url']}")
    return 0


def lesson_needs(names=()) -> dict[str, list]:
    """{lesson name: the runs its page asks the store for}, in LESSONS' order: those named (default: every one)."""
    from cli.flags import ArgumentError
    from lab.experiments.lesson_runs import runs_of

    known = [lesson.name for lesson in LESSONS]
    if unknown := [n for n in names if n not in known]:
        raise ArgumentError(f"LESSON: no lesson named {', '.join(unknown)}; one of {', '.join(known)}")
    return {x.name: runs_of(x.page, x.params) for x in LESSONS if not names or x.name in names}


def status(needs: dict[str, list]) -> list[dict]:
    """[{name, runs, stored, missing}] for each lesson: how many of its runs the store holds now."""
    from lab.store import is_cached

    rows = []
    for name, runs in needs.items():
        stored = sum(map(is_cached, runs))
        rows.append({"name": name, "runs": len(runs), "stored": stored, "missing": len(runs) - stored})
    return rows


def _print(rows: list[dict], cost: dict, as_json: bool, trained: int | None = None, evaluated: int = 0) -> None:
    """What warm found (and did: `trained` None for --estimate)."""
    from cli.regimes import estimate_line
    from lab import formats

    if as_json:
        done = {} if trained is None else {"trained": trained, "evaluated": evaluated}
        print(json.dumps({"lessons": rows, "estimate": {k: cost[k] for k in ESTIMATE_KEYS}} | done))
        return
    for r in rows:
        state = "all stored" if not r["missing"] else f"{r['stored']} stored, {r['missing']} missing"
        print(f"{r['name']}: {formats.count(r['runs'], 'run')}, {state}" if r["runs"] else f"{r['name']}: no runs")
    if trained:  # the estimate was printed before the training
        print(f"trained {formats.count(trained, 'run')}: these lessons open from the store")
    else:
        print(estimate_line(cost))
    if evaluated:
        print(f"evaluated {formats.count(evaluated, 'run')} at other lengths, kept beside the store")


def cmd_warm(a) -> int:
    from attncore.memory import check_fits
    from cli import confirm
    from cli.regimes import estimate, estimate_line
    from cli.sweep import ProgressBar
    from lab.sweep import run_sweep

    needs = lesson_needs(a.names)
    every = list(dict.fromkeys(run for runs in needs.values() for run in runs))
    check_fits(every, workers=2 if a.jobs != 1 else 1, cap=a.max_memory)
    cost = estimate("lessons warm", None, every, a.jobs)
    if a.estimate:
        _print(status(needs), cost, a.json)
        return 0
    trained: set = set()
    if cost["missing"]:
        print(estimate_line(cost), file=sys.stderr)
        confirm.check(a, "lessons warm", cost["missing"], cost["cpu_seconds"])
        bar = ProgressBar(estimate=cost["wall_seconds"])
        run_sweep(every, n_jobs=a.jobs, progress=bar, trained=trained, cost=cost["model"])
    evaluated = evaluate_lengths(a.names)
    _print(status(needs), cost, a.json, trained=len(trained), evaluated=evaluated)
    return 0


def evaluate_lengths(names=()) -> int:
    """Evaluate at other lengths the stored runs whose evaluations the lessons' pages show on their first view
    (lab.experiments.lesson_runs.evaluations), keeping them beside the store (lab.length_store); how many runs
    needed it. The test lengths are those of this machine's caps (lab.jobs.limits, as a page reads them)."""
    from attncore.evaluate import evaluate_lengths as evaluate
    from lab import length_store
    from lab.experiments.lesson_runs import evaluations
    from lab.jobs.limits import parse_limits
    from lab.jobs.training import run_key
    from lab.limits import file_secrets
    from lab.store import get_run

    caps, _ = parse_limits(os.environ, file_secrets())
    done = 0
    for lesson in (x for x in LESSONS if not names or x.name in names):
        for run, lengths, randomized in evaluations(lesson.page, lesson.params, caps.max_test_length):
            key = run_key(run)
            missing = [n for n in lengths if n not in length_store.read(key, randomized)]
            if missing:
                results = evaluate(get_run(run).params, run, missing, randomized=randomized)
                length_store.write(key, {r.length: r for r in results}, randomized)
                done += 1
    return done


def register(sub) -> None:
    from cli.regimes import add_sweep_flags

    p = sub.add_parser("lessons", help="list the lessons: pages opened at chosen values with a note and a question")
    p.add_argument("--json", action="store_true", help="one JSON object: {lessons: [{name, title, page, url}]}")
    p.add_argument("--origin", default="", metavar="URL",
                   help="put the server's address before each path, e.g. http://127.0.0.1:8501")  # fmt: skip
    p.set_defaults(func=cmd_lessons)
    actions = p.add_subparsers(dest="action", metavar="{warm}")
    w = actions.add_parser(
        "warm",
        help="train every run the lessons' pages ask for into the store (what it costs first), so that a class's "
        "server opens every lesson from the store",
    )
    w.add_argument("names", nargs="*", metavar="LESSON", help="only these lessons (default: every lesson)")
    add_sweep_flags(w)  # --jobs, --max-memory, --json ({lessons: [{name, runs, stored, missing}], estimate}), ...
    w.set_defaults(func=cmd_warm)
