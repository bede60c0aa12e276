"""Every cap is read by name, wherever it is declared: the central table (Limits), a task (Task.caps) or the module
that does a page's work (lab.limits.declare); docs/hosting.md's table of caps lists each of them, a page's own with
the default and meaning it declares (the rows are generated here from the records)."""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import fields
from pathlib import Path

import pytest

import ui
from attncore import task as tasks
from lab import limits as lab_limits
from lab.jobs.limits import Limits, own_cap_defaults, parse_limits
from lab.limits import Cap, declare, declared

HOSTING = Path(__file__).resolve().parents[1] / "docs" / "hosting.md"
SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def import_every_page_module() -> None:
    """Import every module of ui (the pages' views and charts): each declares its page's caps when imported."""
    for module in pkgutil.walk_packages(ui.__path__, "ui."):
        importlib.import_module(module.name)


def shown(default: int) -> str:
    """A default as the docs write it: 2048, or 10⁸ for a power of ten of a million or more."""
    power = len(str(default)) - 1
    return f"10{str(power).translate(SUPERSCRIPT)}" if default >= 10**6 and default == 10**power else str(default)


def docs_caps() -> dict[str, str]:
    """{cap: its row} of the Caps table in docs/hosting.md (a row may name several caps, apart by commas)."""
    text = HOSTING.read_text()
    table = text.split("## Caps", 1)[1].split("\n## ", 1)[0]
    out = {}
    for row in re.findall(r"^\| (.+?) \|.*$", table, re.MULTILINE):
        for name in row.split(", "):
            if name not in ("cap", "---"):
                out[name] = row
    return out


def page_rows() -> list[str]:
    """The table's rows of the pages' own caps, from their records."""
    return [f"| {c.name} | {shown(c.default)} | {c.meaning} |" for c in declared().values()]


def test_the_hosting_docs_list_every_cap_and_each_pages_own_as_declared():
    import_every_page_module()
    central = {f.name for f in fields(Limits)} - {"explicit", "own_caps"}
    every = central | set(own_cap_defaults())
    listed = docs_caps()
    assert sorted(every - set(listed)) == [], "caps docs/hosting.md does not list"
    assert sorted(set(listed) - every) == [], "docs/hosting.md lists caps that are not read"
    text = HOSTING.read_text()
    missing = [row for row in page_rows() if row not in text]
    assert missing == [], "docs/hosting.md's rows of the pages' caps must read:\n" + "\n".join(page_rows())


def test_a_pages_caps_are_declared_where_its_work_lives_and_none_in_the_central_table():
    import_every_page_module()
    pages = declared()
    moved = {"max_cost_t", "max_ablation_heads", "max_gradcheck_coords", "max_patch_positions",
             "max_explain_restarts", "max_explain_steps", "max_test_length", "max_kv_new_tokens",
             "max_scaling_draws"}  # fmt: skip
    assert moved <= set(pages) and not moved & {f.name for f in fields(Limits)}
    task_caps = {cap for name in tasks.names() for cap in tasks.get(name).caps}
    assert not task_caps & set(pages)  # one home per cap


def test_a_cap_declared_in_a_test_is_read_by_name_like_every_other(monkeypatch):
    monkeypatch.setattr(lab_limits, "_DECLARED", dict(lab_limits._DECLARED))  # this test's declaration, undone after
    (cap,) = declare(Cap("max_widgets", 12, "A test page: widgets drawn"))
    assert declare(cap) == (cap,)  # a module imported again declares the same record
    with pytest.raises(ValueError, match="declared already"):
        declare(Cap("max_widgets", 13, "A test page: widgets drawn"))
    assert Limits().max_widgets == 12  # its default
    lim, problems = parse_limits({"ATTNLAB_MAX_WIDGETS": "3"}, {})
    assert (lim.max_widgets, problems) == (3, []) and "max_widgets" in lim.explicit
    assert parse_limits({}, {"max_widgets": 5})[0].max_widgets == 5  # [limits] in secrets.toml
    lim, problems = parse_limits({"ATTNLAB_MAX_WIDGETS": "0"}, {})
    assert lim.max_widgets == 12 and "max_widgets must be a whole number from 1" in problems[0]
    with pytest.raises(ValueError, match="is a field of Limits"):
        declare(Cap("max_steps", 10, "a page's cap named as a central one"))
        own_cap_defaults()
