"""A page whose first compile loses CPython 3.11's race between threads building ASTs still renders.

Under 20 visitors a hosted server showed `SystemError: AST constructor recursion depth mismatch (before=39,
after=77)` from page.run(): Streamlit parses a page's script on its first run in a server, and on CPython 3.11 two
sessions' threads parsing at once can raise that (gh-106905). ui.nav.run compiles the page first and again after
that error; nothing of the page has run then.
"""

from __future__ import annotations

import pytest
from apptest_helpers import temporary_store
from streamlit.runtime.scriptrunner.script_cache import ScriptCache
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.slow  # AppTests of the dashboard (about 8 s)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    with temporary_store(tmp_path_factory, []):
        yield


def test_a_page_whose_compile_lost_the_ast_race_renders(store, monkeypatch):
    real, raised = ScriptCache.get_bytecode, []

    def racy(self, script_path):
        if script_path.endswith("heads_position.py") and not raised:
            raised.append(script_path)
            raise SystemError("AST constructor recursion depth mismatch (before=39, after=77)")  # CPython's words
        return real(self, script_path)

    monkeypatch.setattr(ScriptCache, "get_bytecode", racy)
    at = AppTest.from_file("../dashboard.py", default_timeout=60)
    at.query_params["steps"] = "30"
    at.run()
    at.switch_page("app_pages/heads_position.py").run()
    assert raised, "the page's compile was not reached"
    assert not at.exception, [e.message for e in at.exception]
    assert at.title[0].value == "Heads and position"


def test_another_system_error_is_not_hidden(store, monkeypatch):
    real = ScriptCache.get_bytecode

    def broken(self, script_path):
        if script_path.endswith("heads_position.py"):
            raise SystemError("something else")
        return real(self, script_path)

    monkeypatch.setattr(ScriptCache, "get_bytecode", broken)
    at = AppTest.from_file("../dashboard.py", default_timeout=60)
    at.run()
    at.switch_page("app_pages/heads_position.py").run()
    assert any("something else" in e.message for e in at.exception)
