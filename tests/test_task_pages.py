"""Every registered task on every Lab page: the sidebar draws its fields, and each page speaks of the task it shows
(its Words, its label, its summary), for the lab's tasks and for one defined here with a cap and a metric of its own.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from attncore import make_run
from attncore import task as tasks
from attncore.settings import SETTINGS
from attncore.tasks.symbols import SymbolsTask
from lab.jobs.limits import Limits, parse_limits
from tests.apptest_helpers import dashboard_at, temporary_store, texts

STEPS = 20
LAB_PAGES = ("train", "results", "attention", "patching", "explanations")


class RotateTask(SymbolsTask):
    """The rotate task, defined in this test alone: the L symbols shifted one place left (s2..sL, s1), its length
    bounded by a cap of its own, and a metric of its own (the held-out answer loss) in each run's record."""

    label = "Rotate (test)"
    caps = {"max_rotate_length": 5}
    length_cap = "max_rotate_length"
    metrics = ("rotate_loss",)
    metric_labels = {"rotate_loss": ("rotate loss", "Rotate loss (held out)")}
    paired = ("rotate_loss",)

    def __init__(self):
        super().__init__("rotate", lambda s: np.roll(s, -1, axis=1), "L back", "the L symbols shifted one place left")

    def final_figures(self, params, run):
        return {"rotate_loss": self.test_loss(params, run)}


@pytest.fixture(scope="module")
def rotate():
    task = tasks.register(RotateTask())
    try:
        yield task
    finally:
        tasks.unregister("rotate")


def page_run(name: str):
    """The run a Lab page shows for ?task=<name>&steps=20: the task's experiment at 20 steps."""
    task = tasks.get(name)
    kw = {k: v for k, v in task.defaults.items() if k != "length"}
    return make_run(name, task.defaults.get("length", SETTINGS["length"].default), 0, **kw | {"steps": STEPS})


# --- the sidebar ------------------------------------------------------------------------------------------------


def test_every_task_field_gets_a_bounded_widget(rotate):
    """A field without an upper bound or a cap of its setting (the bigram_backcopy task's K) used to raise
    'min() arg is an empty sequence' on every Lab page; each field's widget now has a top, its task's cap where
    the field's record names one (Setting.cap on Task.fields)."""
    from ui import sidebar

    lim = Limits()
    for name in tasks.names():
        for field in tasks.get(name).fields:
            draw = sidebar._widget(field, lim, name)
            low, high = draw.args[3], draw.args[4]
            assert low <= sidebar.default(field.url, name) <= high, (name, field.name)
    triggers = sidebar._widget(SETTINGS["triggers"], lim, "bigram_backcopy")
    assert triggers.args[4] == lim.max_vocab  # K < V: the tokens' own cap


def test_the_task_choice_shows_labels_and_each_tasks_summary(rotate):
    from ui import sidebar

    assert sidebar.task_label("bigram_backcopy") == "Bigram-Backcopy"
    assert sidebar.task_label("rotate") == "Rotate (test)"
    assert sidebar.task_label("copy") == "copy"  # no label declared: its name
    help_text = sidebar.task_help()
    for name in tasks.names():
        assert tasks.get(name).summary and tasks.get(name).summary in help_text, name


# --- caps, metrics and words, asked of the task ---------------------------------------------------------------


def test_a_tasks_own_cap_is_read_like_the_central_ones(rotate):
    assert Limits().max_rotate_length == 5 and Limits().max_modulus == 113  # the tasks' declared defaults
    lim, problems = parse_limits({"ATTNLAB_MAX_ROTATE_LENGTH": "3"}, {"max_modulus": 50})
    assert (lim.max_rotate_length, lim.max_modulus, problems) == (3, 50, [])
    assert {"max_rotate_length", "max_modulus"} <= lim.explicit
    lim, problems = parse_limits({"ATTNLAB_MAX_ROTATE_LENGTH": "many"}, {})
    assert lim.max_rotate_length == 5 and "max_rotate_length must be a whole number" in problems[0]
    with pytest.raises(AttributeError, match="no cap named"):
        getattr(Limits(), "max_nothing")  # noqa: B009  the name is the point


def test_compare_names_a_tasks_metric_from_the_task(rotate):
    from ui.compare_view import metric_names, table_titles

    assert metric_names()["rotate_loss"] == "rotate loss" and table_titles()["rotate_loss"] == "Rotate loss (held out)"
    assert metric_names()["weight_norm"] == "weight norm"  # the modular task's, declared on it
    assert table_titles()["copy_loss"] == "Copy queries' loss (held out)"  # the bigram_backcopy task's


def test_the_command_lines_task_help_says_each_tasks_summary(rotate, capsys):
    from cli.main import main

    with pytest.raises(SystemExit) as done:
        main(["train", "--help"])
    said = " ".join(capsys.readouterr().out.split())  # argparse wraps the help
    assert done.value.code == 0 and "rotate: the L symbols shifted one place left" in said
    assert "modular: (a + b) mod p" in said and "bigram_backcopy: a bigram chain after BOS" in said


def test_the_command_line_trains_it_and_the_store_keeps_its_metric(rotate, cache, capsys):
    from cli.main import main
    from lab.store import stored_run

    assert main(["train", "--task", "rotate", "--length", "4", "--steps", str(STEPS), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    record = stored_run(make_run("rotate", 4, 0, steps=STEPS))
    assert record is not None and record.figures["rotate_loss"] == out["rotate_loss"] > 0  # its own metric, kept
    assert record.figures["rotate_loss"] == pytest.approx(record.test_loss)  # what it measures: the held-out loss


def test_each_task_says_its_own_words():
    """The modular task scores every held-out pair, the bigram_backcopy task its copies: neither speaks of the
    induction task's repeat or of the article's 500 test sequences."""
    said = {name: tasks.get(name).words(page_run(name).task) for name in tasks.names()}
    modular = said["modular"]
    assert "held-out pairs" in modular.test_set and "500" not in modular.test_set
    for name in ("modular", "bigram_backcopy", "copy"):
        for words in (said[name].measured, said[name].reads, said[name].then, said[name].contrast):
            assert "induction" not in words and "repeat's" not in words, (name, words)
    assert "repeat" in said["induction"].answer and "copies" in said["bigram_backcopy"].answer
    assert len({w.measured for w in said.values()}) == 4  # copy, sort and reverse say one thing; each other its own


# --- every task on every Lab page -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def every_task_trained(rotate, tmp_path_factory):
    """A store of this module's own holding each registered task's run at 20 steps (rotate at L = 4)."""
    runs = [page_run(name) for name in tasks.names() if name != "rotate"] + [make_run("rotate", 4, 0, steps=STEPS)]
    with temporary_store(tmp_path_factory, runs):
        yield runs


@pytest.mark.slow  # 35 AppTests of the dashboard
@pytest.mark.parametrize("page", LAB_PAGES)
def test_every_task_opens_every_lab_page_in_its_own_words(every_task_trained, page):
    for run in every_task_trained:
        task = tasks.get(run.task.name)
        query = {"task": run.task.name, "steps": str(STEPS)}
        query |= {"L": "4"} if task.name == "rotate" else {}
        at = dashboard_at(page, query)
        assert not at.exception, (task.name, page, [e.message for e in at.exception])
        assert at.radio(key="task").value == task.name
        shown = texts(at.caption) + "\n" + texts(at.markdown)
        if page == "results":
            continue  # the article's tasks over lengths: it names its own grid
        assert f"{task.shown_name()} · {task.describe(run.task)}" in shown, (task.name, page)  # its run, trained
        assert "train" not in [b.key for b in at.button], (task.name, page)  # no "Train this configuration"
        words = task.words(run.task)
        expected = {
            "train": [words.measured, words.distinct_why],
            "attention": [words.reads.split(":")[0]],
            "patching": [words.lens_over],
            "explanations": [f"over {words.score_rows}"],
        }[page]
        for text in expected:
            assert text in shown, (task.name, page, text)
        others = {tasks.get(n).words(r.task).measured for n, r in ((r.task.name, r) for r in every_task_trained)}
        for other in others - {words.measured}:
            assert other not in shown, (task.name, page, other)


@pytest.mark.slow  # an AppTest of the dashboard
def test_a_tasks_own_cap_bounds_its_length_in_the_sidebar(every_task_trained, monkeypatch):
    monkeypatch.setenv("ATTNLAB_MAX_ROTATE_LENGTH", "4")
    at = dashboard_at("train", {"task": "rotate", "L": "4", "steps": str(STEPS)})
    assert not at.exception, [e.message for e in at.exception]
    assert at.number_input(key="L").max == 4  # the task's own cap, set by the operator
    assert "Rotate (test)" in at.radio(key="task").options


@pytest.mark.slow  # an AppTest of the dashboard
def test_choosing_each_task_in_the_sidebar_draws_its_fields(every_task_trained):
    """Choosing Bigram-Backcopy in the sidebar used to raise on every Lab page, as its link did."""
    at = dashboard_at("train", {"steps": str(STEPS)})
    for name in tasks.names():
        at.radio(key="task").set_value(name).run()
        assert not at.exception, (name, [e.message for e in at.exception])
        for field in tasks.get(name).fields:
            assert at.number_input(key=field.url).max is not None, (name, field.name)
