"""The layers the README draws hold in the code: import-linter's contracts (pyproject) and no import circle at all.

Lazy imports (inside functions) count: grimp, import-linter's graph, reads every import statement.
"""

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("attncore", "serving", "lab", "ui", "app_pages", "cli")  # the contracts' root packages (checked below)


@pytest.fixture(scope="module")
def graph():
    sys.path.insert(0, str(ROOT))
    try:
        return grimp.build_graph(*PACKAGES, cache_dir=None)
    finally:
        sys.path.remove(str(ROOT))


def test_import_linter_contracts_are_kept():
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports())"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def strongly_connected(graph) -> list[set[str]]:
    """Tarjan's components of the module graph with more than one module (each is an import circle)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(start):
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in graph.modules:
                    continue  # an external package
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(component)

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_circle_among_the_projects_modules(graph):
    assert strongly_connected(graph) == []


def test_the_circle_finder_finds_a_circle(graph):
    """The check above can fail: one added upward import (the store reaching for the sweeps) is a circle."""
    graph.add_import(importer="lab.store", imported="lab.sweep")
    try:
        assert {"lab.store", "lab.sweep"} in strongly_connected(graph)
    finally:
        graph.remove_import(importer="lab.store", imported="lab.sweep")


def package_inits(root: Path) -> list[Path]:
    """The __init__.py of every package and subpackage the contracts name, under root; nothing else in the tree
    (a .venv, site-packages, build folders), so the check holds in a checkout with its virtual environment inside."""
    return sorted(init for name in PACKAGES for init in (root / name).rglob("__init__.py"))


def test_the_packages_checked_are_the_contracts_root_packages():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert set(config["tool"]["importlinter"]["root_packages"]) == set(PACKAGES)


def test_package_inits_walk_the_project_only_not_a_virtual_environment_inside_it(tmp_path):
    """Regression: `python -m pytest` in the README's .venv walked into .venv/lib/python3.11/site-packages."""
    for rel in ("attncore/__init__.py", "attncore/serving/__init__.py", "cli/__init__.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text('"""Owns x; may import y."""\n')
    foreign = tmp_path / ".venv/lib/python3.11/site-packages/foo/__init__.py"
    foreign.parent.mkdir(parents=True)
    foreign.write_text("")
    (tmp_path / "build/lib/attncore").mkdir(parents=True)
    (tmp_path / "build/lib/attncore/__init__.py").write_text("")
    found = [p.relative_to(tmp_path).as_posix() for p in package_inits(tmp_path)]
    assert found == ["attncore/__init__.py", "attncore/serving/__init__.py", "cli/__init__.py"]


def test_a_package_opens_with_what_it_owns_and_may_import():
    inits = package_inits(ROOT)
    assert len(inits) >= len(PACKAGES)
    for init in inits:
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "import" in doc.lower(), f"{init.relative_to(ROOT)} does not say what it may import"


def test_the_entry_point_imports_only_the_ui():
    tree = ast.parse((ROOT / "dashboard.py").read_text())
    imported = {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imported <= {"pathlib", "streamlit", "ui"}
