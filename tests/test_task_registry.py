"""A task is one object: a task defined here, in the test, and registered (no other file edited) is found by the
command line, the sidebar and its URL, Compare's task factor and the run store, and is scored like the article's."""

from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

from attncore import ConfigError, TaskConfig, make_run
from attncore import task as tasks
from attncore.tasks.symbols import SymbolsTask

DASHBOARD = "../dashboard.py"
STEPS = 20


def increment(symbols: np.ndarray) -> np.ndarray:
    """The answer of the increment task: each symbol plus one, modulo the 20 symbols."""
    return (symbols + 1) % 20


@pytest.fixture(scope="module")
def increment_task(tmp_path_factory):
    """The increment task registered for this module's tests (and its run store a fresh folder), removed after."""
    task = tasks.register(SymbolsTask("increment", increment, "L back", "each of the L symbols plus one"))
    mp = pytest.MonkeyPatch()
    mp.setenv("ATTNCORE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    try:
        yield task
    finally:
        mp.undo()
        tasks.unregister("increment")


def test_the_registry_finds_a_task_by_name_and_refuses_unknown_and_duplicate_names(increment_task):
    assert tasks.get("increment") is increment_task and "increment" in tasks.names()
    assert tasks.names()[:6] == ("copy", "sort", "reverse", "induction", "bigram_backcopy", "modular")
    registered = "copy, sort, reverse, induction, bigram_backcopy, modular, increment"
    with pytest.raises(ConfigError, match=f"task: must be one of {registered}"):
        TaskConfig("decrement", 4)
    with pytest.raises(ValueError, match="registered already"):
        tasks.register(SymbolsTask("increment", increment, "L back"))
    with pytest.raises(ValueError, match="short identifier"):
        tasks.register(SymbolsTask("in crement", increment, "L back"))


def test_its_sequences_lengths_and_probe_come_from_the_task(increment_task):
    run = make_run("increment", 4, 0, steps=STEPS)
    assert (run.task.seq_len, run.task.n_inputs, run.task.answer_len, run.task.vocab_size) == (9, 8, 4, 21)
    batch = increment_task.sample_batch(run.task, 5, np.random.default_rng(0))
    assert batch.shape == (5, 9) and (batch[:, 4] == 20).all()
    assert (batch[:, 5:] == (batch[:, :4] + 1) % 20).all()
    probe = increment_task.probe(run.task)  # the article's probe symbols, 17 3 0 12, and their answer
    assert probe.tolist() == [17, 3, 0, 12, 20, 18, 4, 1]
    assert increment_task.parse_input("19 0 1 2", run.task).tolist() == [19, 0, 1, 2, 20, 0, 1, 2]
    ranged = make_run("increment", 5, 0, train_lengths=(2, 5), mixed_lengths=True)  # its lengths vary
    assert ranged.task.train_lengths == (2, 5)


def test_the_command_line_trains_it_and_the_store_keeps_it(increment_task, capsys):
    from cli.main import main
    from lab.store import get_run, is_cached, list_cached, stored_run

    assert main(["train", "--task", "increment", "--length", "4", "--steps", str(STEPS), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"]["task"] == {"name": "increment", "length": 4}
    assert 0 <= out["token_accuracy"] <= 1 and out["test_loss"] > 0 and len(out["loss_history"]) == STEPS

    run = make_run("increment", 4, 0, steps=STEPS)
    assert is_cached(run)  # stored, and found again without training
    assert any(entry["config"]["task"]["name"] == "increment" for entry in list_cached())
    record = stored_run(run)
    assert record is not None and record.final_loss == out["final_loss"] and record.test_loss == out["test_loss"]
    assert get_run(run).eval.token_accuracy == out["token_accuracy"]

    assert main(["train", "--task", "decrement", "--steps", str(STEPS)]) == 2  # its choices list the registry's
    choices = "'copy', 'sort', 'reverse', 'induction', 'bigram_backcopy', 'modular', 'increment'"
    assert f"(choose from {choices})" in capsys.readouterr().err


@pytest.mark.slow  # an AppTest of the dashboard
def test_the_sidebar_lists_it_and_a_url_selects_it(increment_task):
    from lab.store import get_run

    get_run(make_run("increment", 4, 0, steps=STEPS))  # the page serves it from the store
    at = AppTest.from_file(DASHBOARD, default_timeout=120)
    at.query_params.update({"task": "increment", "L": "4", "steps": str(STEPS)})
    at._page_hash = calc_hash("train")  # a first request for /train, as test_urls opens a page
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    radio = at.radio(key="task")
    assert "increment" in radio.options and radio.value == "increment"
    assert any("increment · L=4" in c.value for c in at.caption)  # the page's run is the increment task's


def test_compare_offers_it_as_a_level_of_the_task_factor(increment_task):
    from lab.factors import factors_for
    from ui.compare_view import level_options
    from ui.limits import limits

    offered, default = level_options("task", limits())
    assert "increment" in offered and "induction" not in offered and default == ["copy", "sort"]
    assert "task" in factors_for("increment")
