"""A task is one object: a task defined here, in the test, and registered (no other file edited) is found by the
command line, the sidebar and its URL, Compare's task factor and the run store, and is scored like the article's; one
with a field of a new name (stride), a cap and a metric of its own reaches each of them and every Lab page too."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attncore import ConfigError, RunConfig, TaskConfig, make_run
from attncore import task as tasks
from attncore.settings import SETTINGS, Setting
from attncore.tasks.symbols import SymbolsTask
from tests.apptest_helpers import dashboard_at

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
    at = dashboard_at("train", {"task": "increment", "L": "4", "steps": str(STEPS)}, timeout=120)
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


# --- a task with a field, a cap and a metric of its own, defined here alone ---------------------------------------


class StrideTask(SymbolsTask):
    """The stride task, defined in this test alone (no product file edited for it): each of the L symbols plus s,
    modulo the 20 symbols. Its field `stride` (s) is a settings record on the task (its range, flag, URL key, label
    and the cap of its own that bounds its widget), and its metric, the held-out answer loss, is labelled by it."""

    label = "Stride (test)"
    fields = (
        Setting("stride", "task", 1, int, "Stride s", low=1, high=19, url="stride", flag="--stride", metavar="S",
                cap="max_stride", help="Each answer symbol is its input symbol plus s, modulo 20.",
                flag_help="the stride task's shift s"),
    )  # fmt: skip
    caps = {"max_stride": 7}
    metrics = ("stride_loss",)
    metric_labels = {"stride_loss": ("stride loss", "Stride loss (held out)")}

    def __init__(self):
        super().__init__("stride", None, "L back", "each of the L symbols plus s")

    def answer_of(self, symbols: np.ndarray, task) -> np.ndarray:
        return (symbols + task.stride) % 20

    def describe(self, task) -> str:
        return f"{super().describe(task)}, s={task.stride}"

    def final_figures(self, params, run):
        return {"stride_loss": self.test_loss(params, run)}


LAB_PAGES = ("train", "results", "attention", "patching", "explanations")


@pytest.fixture(scope="module")
def stride_task(tmp_path_factory):
    """The stride task registered for these tests, its store a fresh folder holding its run at s = 3; removed after."""
    from lab.store import get_run

    task = tasks.register(StrideTask())
    mp = pytest.MonkeyPatch()
    mp.setenv("ATTNCORE_CACHE_DIR", str(tmp_path_factory.mktemp("stride_cache")))
    try:
        get_run(make_run("stride", 4, 0, stride=3, steps=STEPS))
        yield task
    finally:
        mp.undo()
        tasks.unregister("stride")
        assert "stride" not in SETTINGS  # its field leaves the settings with it


def test_a_tasks_field_is_a_setting_its_config_checks_and_its_key_holds(stride_task):
    assert SETTINGS["stride"] is stride_task.fields[0]  # in the settings table while the task is registered
    run = make_run("stride", 4, 0, stride=3)
    assert run.task.stride == 3 and make_run("stride", 4, 0).task.stride == 1  # its default, filled
    assert run.to_dict()["task"] == {"name": "stride", "length": 4, "stride": 3}  # the run's key holds it
    assert make_run("copy", 4, 0).to_dict()["task"] == {"name": "copy", "length": 4}  # another task's key: not
    assert make_run("copy", 4, 0).task.stride is None and RunConfig.from_dict(run.to_dict()) == run
    batch = stride_task.sample_batch(run.task, 8, np.random.default_rng(0))
    assert (batch[:, 5:] == (batch[:, :4] + 3) % 20).all()  # the field acts where the task reads it
    for bad in (0, 20):
        with pytest.raises(ConfigError, match=f"stride: must be from 1 to 19, got {bad}"):
            make_run("stride", 4, 0, stride=bad)
    with pytest.raises(ConfigError, match="stride: is a setting of the stride task, not of copy"):
        make_run("copy", 4, 0, stride=3)


def test_a_field_named_as_another_setting_is_refused_and_the_registry_left_as_it_was():
    class Clash(StrideTask):
        fields = (Setting("seed", "task", 1, int, "Seed again", low=1),)

        def __init__(self):
            SymbolsTask.__init__(self, "clash", None, "L back")

    before = (tasks.names(), dict(SETTINGS))
    with pytest.raises(ValueError, match="'seed' has the name of a setting already"):
        tasks.register(Clash())
    assert (tasks.names(), dict(SETTINGS)) == before


def test_the_command_line_reads_its_flag_refuses_its_range_and_the_store_keys_it(stride_task, capsys):
    from cli.main import main
    from lab.store import is_cached, stored_run

    assert main(["train", "--task", "stride", "--length", "4", "--stride", "3", "--steps", str(STEPS), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"]["task"] == {"name": "stride", "length": 4, "stride": 3}
    record = stored_run(make_run("stride", 4, 0, stride=3, steps=STEPS))  # trained by the fixture, served here
    assert record is not None and record.config.task.stride == 3
    assert record.figures["stride_loss"] == out["stride_loss"] == pytest.approx(record.test_loss)  # its metric
    assert not is_cached(make_run("stride", 4, 0, stride=2, steps=STEPS))  # another s: another key

    assert main(["train", "--task", "stride", "--stride", "20", "--steps", str(STEPS)]) == 2
    assert "stride: must be from 1 to 19, got 20" in capsys.readouterr().err
    assert main(["train", "--task", "copy", "--stride", "3", "--steps", str(STEPS)]) == 2
    assert "is a setting of --task stride" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "--stride S" in capsys.readouterr().out


def test_compare_offers_it_and_labels_its_metric_and_its_cap_is_read_by_name(stride_task):
    from lab.jobs.limits import Limits, parse_limits
    from ui.compare_view import level_options, metric_names, table_titles
    from ui.limits import limits

    offered, _ = level_options("task", limits())
    assert "stride" in offered
    assert metric_names()["stride_loss"] == "stride loss" and table_titles()["stride_loss"] == "Stride loss (held out)"
    assert Limits().max_stride == 7 and parse_limits({"ATTNLAB_MAX_STRIDE": "4"}, {})[0].max_stride == 4


@pytest.mark.slow  # AppTests of the dashboard
def test_the_sidebar_draws_its_field_capped_and_the_url_reads_and_writes_it(stride_task, monkeypatch):
    at = dashboard_at("train", {"task": "stride", "L": "4", "stride": "3.0", "steps": str(STEPS)})
    assert not at.exception, [e.message for e in at.exception]
    widget = at.number_input(key="stride")
    assert (widget.value, widget.min, widget.max) == (3, 1, 7)  # read from the URL; its range, under its own cap
    assert widget.label.startswith("Stride s") and at.query_params["stride"] == "3"  # written back as it spells it
    assert any("Stride (test) · L=4, s=3" in c.value for c in at.caption)  # the page's run is the URL's
    widget.set_value(5).run()
    assert not at.exception and any("Stride (test) · L=4, s=5" in c.value for c in at.caption)
    monkeypatch.setenv("ATTNLAB_MAX_STRIDE", "4")  # the operator lowers the task's own cap
    at = dashboard_at("train", {"task": "stride", "L": "4", "stride": "3", "steps": str(STEPS)})
    assert at.number_input(key="stride").max == 4


@pytest.mark.slow  # 5 AppTests of the dashboard
def test_every_lab_page_shows_it_in_its_own_words(stride_task):
    from tests.apptest_helpers import texts

    run = make_run("stride", 4, 0, stride=3, steps=STEPS)
    words = stride_task.words(run.task)
    expected = {
        "train": [words.measured],
        "results": [],  # the article's tasks over lengths: it names its own grid
        "attention": [words.reads.split(":")[0]],
        "patching": [words.lens_over],
        "explanations": [f"over {words.score_rows}"],
    }
    for page in LAB_PAGES:
        at = dashboard_at(page, {"task": "stride", "L": "4", "stride": "3", "steps": str(STEPS)})
        assert not at.exception, (page, [e.message for e in at.exception])
        assert at.radio(key="task").value == "stride", page
        shown = texts(at.caption) + "\n" + texts(at.markdown)
        if page != "results":
            assert "Stride (test) · L=4, s=3" in shown, page  # its run, with its field, served from the store
        for text in expected[page]:
            assert text in shown, (page, text)
