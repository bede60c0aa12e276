"""A canary run store: made before the suite, compared byte for byte after it (`.ci/run`, tests/test_store_fence.py).

    python tests/canary_store.py make DIR MANIFEST [--article]   # a few short runs, a pinned view, a manifest
    python tests/canary_store.py check DIR MANIFEST              # exit 1 unless every file is as it was

The manifest (outside DIR) lists every file under DIR with its size and SHA-256; `check` fails on a file
changed, missing or added, and says which. With --article the store also holds one of the article's runs,
which the store never evicts, pinned as a visitor's view pins it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CANARY_STEPS = 20  # short runs: the canary is about its files, not its numbers


def canary_runs(article: bool) -> list:
    from attncore.config import make_run
    from lab.presets import preset

    runs = [make_run(steps=CANARY_STEPS), make_run("sort", 4, 1, steps=CANARY_STEPS)]
    runs.append(make_run(steps=CANARY_STEPS, position="none"))
    return runs + (preset("article")[:1] if article else [])


def make(location: Path, article: bool = False) -> list:
    """Train the canary's runs into `location` and pin them as one visitor's view; returns the runs."""
    from lab import store

    runs = canary_runs(article)
    for run in runs:
        store.get_run(run, location=location)
    store.pin_view("c" * 64, runs, location=location)
    return runs


def digest(location: Path) -> dict[str, list]:
    """{relative path: [size, sha256]} of every file under `location`, folders' own entries aside."""
    files = {}
    for path in sorted(location.rglob("*")):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            files[str(path.relative_to(location))] = [len(data), hashlib.sha256(data).hexdigest()]
    return files


def differences(before: dict, after: dict) -> list[str]:
    changed = [f"changed: {p}" for p in before if p in after and before[p] != after[p]]
    missing = [f"missing: {p}" for p in before if p not in after]
    added = [f"added: {p}" for p in after if p not in before]
    return changed + missing + added


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["make", "check"])
    parser.add_argument("location", type=Path)
    parser.add_argument("manifest", type=Path)
    parser.add_argument("--article", action="store_true", help="also store (and pin) one of the article's runs")
    a = parser.parse_args(argv)
    if a.action == "make":
        sys.path.insert(0, str(ROOT))
        runs = make(a.location, a.article)
        files = digest(a.location)
        a.manifest.write_text(json.dumps(files, indent=1))
        print(f"canary store: {len(runs)} runs, {len(files)} files in {a.location}")
        return 0
    problems = differences(json.loads(a.manifest.read_text()), digest(a.location))
    for line in problems:
        print(f"canary store {a.location}: {line}", file=sys.stderr)
    if not problems:
        print(f"canary store {a.location}: every file byte-identical")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
