"""How much of the pages is prose: the characters of string literals a page shows as text, against the page's size.

Usage: python benchmarks/prose_share.py [--rev GIT_REVISION]   (default: the working tree)
Counts, by an ast walk over app_pages/*.py, the characters of every string constant (the literal parts of an
f-string included) written inside a call to .caption, .markdown, .info, .warning, .success, .error, .write or
.text (st.caption, a column's .markdown, plain.error ...) or passed as a help= keyword; prints each page's count,
its share of the page's characters, and the share over all of app_pages/. Nothing is timed; the figure is a
property of the source, the same on any machine.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHOWN = {"caption", "markdown", "info", "warning", "success", "error", "write", "text"}


def _literal_chars(node: ast.AST) -> int:
    """Characters of the string constants in an expression (an f-string's literal parts; not its {fields})."""
    return sum(len(n.value) for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str))


def prose_chars(source: str) -> int:
    """Characters of the string literals a page's source shows as text (see the module docstring)."""
    counted: set[int] = set()  # a literal inside two counted calls (a caption inside a markdown) counts once
    total = 0
    for call in ast.walk(ast.parse(source)):
        if not isinstance(call, ast.Call):
            continue
        shown = list(call.args) if isinstance(call.func, ast.Attribute) and call.func.attr in SHOWN else []
        shown += [k.value for k in call.keywords if k.arg == "help"]
        for arg in shown:
            for n in ast.walk(arg):
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in counted:
                    counted.add(id(n))
                    total += len(n.value)
    return total


def page_sources(rev: str | None = None) -> dict[str, str]:
    """app_pages/*.py by file name: in the working tree, or at a git revision."""
    if rev is None:
        return {p.name: p.read_text(encoding="utf-8") for p in sorted((ROOT / "app_pages").glob("*.py"))}
    names = subprocess.run(["git", "ls-tree", "--name-only", f"{rev}:app_pages"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()  # fmt: skip

    def show(name: str) -> str:
        return subprocess.run(["git", "show", f"{rev}:app_pages/{name}"], cwd=ROOT, check=True, capture_output=True,
                              text=True).stdout  # fmt: skip

    return {name: show(name) for name in sorted(names) if name.endswith(".py")}


def shares(sources: dict[str, str]) -> tuple[dict[str, tuple[int, int]], float]:
    """Per page (prose characters, page characters), and the prose share of all the pages' characters."""
    per_page = {name: (prose_chars(text), len(text)) for name, text in sources.items()}
    prose, size = (sum(column) for column in zip(*per_page.values(), strict=True))
    return per_page, prose / size


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", help="a git revision to measure instead of the working tree")
    rev = parser.parse_args(argv).rev
    per_page, share = shares(page_sources(rev))
    print(f"app_pages/ at {rev or 'the working tree'}")
    print(f"{'page':<20} {'prose':>7} {'chars':>7} {'share':>6}")
    for name, (prose, size) in sorted(per_page.items(), key=lambda kv: -kv[1][0]):
        print(f"{name:<20} {prose:>7,} {size:>7,} {prose / max(size, 1):>6.1%}")
    total = sum(p for p, _ in per_page.values()), sum(s for _, s in per_page.values())
    print(f"{'all pages':<20} {total[0]:>7,} {total[1]:>7,} {share:>6.1%}")


if __name__ == "__main__":
    sys.exit(main())
