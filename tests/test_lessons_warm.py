"""`python -m attncore lessons warm`: the runs it names for each lesson are the runs the lesson's page asks the store
for (lab.experiments.lesson_runs against the page itself, opened with AppTest), its estimate trains nothing, and a
warmed lesson opens from the store without training, on a hosted server too, where a lesson with runs missing names
the command that stores them."""

from __future__ import annotations

import json

import pytest
from apptest_helpers import TIMEOUT, shown
from streamlit.testing.v1 import AppTest

import cli.lessons
from cli.main import main
from lab import lessons
from lab.experiments import lesson_runs
from lab.jobs.limits import Limits
from lab.store import is_cached, list_cached
from ui import runs as ui_runs
from ui.nav import PAGES

BY_PATH = {p.url_path: p for p in PAGES}
# the page asks for these lessons' other runs only once a first one is stored (Explanations: the other seeds' runs
# once the sidebar's run is there): the slow test below warms them and checks the whole set
ASKED_AFTER_A_RUN = {"map-explanation"}
CHEAP = ("causal-mask", "map-explanation")  # the lessons whose runs a test can train (4 runs of 1,500 steps)


def open_lesson(x: lessons.Lesson, monkeypatch) -> tuple[AppTest, list]:
    """The lesson's link opened on its page, and every run the page asked the store for (ui.runs.cached)."""
    asked = []
    real = ui_runs.cached

    def cached(run):
        asked.append(run)
        return real(run)

    at = AppTest.from_file("../dashboard.py", default_timeout=TIMEOUT)
    at.run()
    monkeypatch.setattr(ui_runs, "cached", cached)  # from here: the lesson's page only
    at.query_params.update(dict(x.query()))
    at.switch_page(BY_PATH[x.page].path).run()
    assert not at.exception, [e.message for e in at.exception]
    return at, list(dict.fromkeys(asked))


def training_offered(at: AppTest) -> list[str]:
    """What the page says or offers when a run it needs is not stored."""
    said = [shown(i.value) for i in at.info if "Not trained yet" in i.value or "still to train" in i.value]
    return said + [b.label for b in at.button if b.label.startswith("Train")]


@pytest.mark.parametrize("x", lessons.LESSONS, ids=lambda x: x.name)
def test_warm_names_the_runs_the_lesson_page_asks_for(cache, monkeypatch, x):
    needed = lesson_runs.runs_of(x.page, x.params)
    at, asked = open_lesson(x, monkeypatch)
    assert len(needed) == len(set(needed))
    if x.name in ASKED_AFTER_A_RUN:
        assert asked and set(asked) < set(needed)
    else:
        assert set(asked) == set(needed), (len(asked), len(needed))
    assert bool(training_offered(at)) == bool(needed)  # a fresh store: the page offers to train what it needs


def test_every_lesson_fits_the_hosted_caps_once_stored():
    """What the caps read: a view's runs (max_compare_runs, cached or not), the training it would start (nothing,
    once stored), steps and seeds as the controls' ranges."""
    caps = Limits()
    for x in lessons.LESSONS:
        needed = lesson_runs.runs_of(x.page, x.params)
        assert len(needed) <= caps.max_compare_runs, x.name
        assert all(run.train.steps <= caps.max_steps and run.model.n_layers <= caps.max_layers for run in needed)
        assert len({run.train.seed for run in needed}) <= caps.max_seeds, x.name


def test_warm_estimate_prints_the_cost_and_trains_nothing(cache, capsys):
    assert main(["lessons", "warm", "--estimate", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["name"]: r for r in out["lessons"]}
    assert list(rows) == [x.name for x in lessons.LESSONS]
    every = set()
    for x in lessons.LESSONS:
        needed = lesson_runs.runs_of(x.page, x.params)
        every |= set(needed)
        assert rows[x.name] == {"name": x.name, "runs": len(needed), "stored": 0, "missing": len(needed)}
    assert out["estimate"]["runs"] == out["estimate"]["missing"] == len(every) > 0
    assert out["estimate"]["cpu_seconds"] > 0 and out["estimate"]["wall_seconds"] > 0
    assert not any(map(is_cached, every))


def test_warm_past_the_rule_needs_yes(cache, monkeypatch, capsys):
    monkeypatch.setattr(cli.lessons, "LESSONS", (lessons.by_name("causal-mask"),))
    monkeypatch.setattr("cli.confirm.CONFIRM_COMPUTING_SECONDS", 0)  # any training is "past an hour"
    assert main(["lessons", "warm"]) == 2
    assert "--yes" in capsys.readouterr().err
    assert not is_cached(lesson_runs.runs_of("masks", {})[0])


def test_hosted_lesson_with_runs_missing_names_the_warm_command(cache, monkeypatch):
    monkeypatch.setenv("ATTNLAB_HOSTED", "1")
    at, _ = open_lesson(lessons.by_name("induction-zeroed"), monkeypatch)
    lines = [shown(i.value) for i in at.info if "lessons warm" in i.value]
    assert lines == ["None of the 18 runs this lesson needs are stored on this server; "
                     "`python -m attncore lessons warm` stores every lesson's runs."]  # fmt: skip


@pytest.mark.slow
def test_a_warmed_lesson_opens_from_the_store_without_training(cache, monkeypatch, capsys):
    chosen = tuple(lessons.by_name(n) for n in CHEAP)
    monkeypatch.setattr(cli.lessons, "LESSONS", chosen)
    assert main(["lessons", "warm", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trained"] == out["estimate"]["missing"] == 4
    assert all(r["stored"] == r["runs"] and r["missing"] == 0 for r in out["lessons"])
    monkeypatch.setenv("ATTNLAB_HOSTED", "1")  # a class's server: the caps in force
    stored = len(list_cached())
    for x in chosen:
        at, asked = open_lesson(x, monkeypatch)
        assert set(asked) == set(lesson_runs.runs_of(x.page, x.params)), x.name  # every run, the baselines too
        assert training_offered(at) == [], x.name
        assert not [w.value for w in at.warning if "block" in str(w.icon)], x.name  # no cap refuses it
        assert not any("lessons warm" in i.value for i in at.info), x.name
    assert len(list_cached()) == stored  # nothing trained by opening them
    assert main(["lessons", "warm", "--json"]) == 0  # again: nothing left to train
    assert json.loads(capsys.readouterr().out)["trained"] == 0


def test_warm_names_only_known_lessons(cache, capsys):
    assert main(["lessons", "warm", "causal-mask", "nope", "--estimate"]) == 2
    err = capsys.readouterr().err
    assert "no lesson named nope" in err and "causal-mask" in err and "Traceback" not in err
    assert not any(map(is_cached, lesson_runs.runs_of("masks", {})))


def test_the_missing_line_counts_what_is_missing():
    from ui.lesson import _missing_line

    tail = " on this server; `python -m attncore lessons warm` stores every lesson's runs."
    assert _missing_line(1, 1) == "The run this lesson needs is not stored" + tail
    assert _missing_line(1, 3) == "1 of the 3 runs this lesson needs is not stored" + tail
    assert _missing_line(2, 3) == "2 of the 3 runs this lesson needs are not stored" + tail
