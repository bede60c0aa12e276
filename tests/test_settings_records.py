"""Every consumer of a run's settings reads the records of attncore.settings: a preset's copy of a run keeps every
setting, and a setting registered in a test alone reaches the flags, the sidebar and its URL, the descriptions, the
runs table and the variant names."""

from __future__ import annotations

import pytest

from attncore import make_run
from attncore import settings as schema
from lab.presets import with_settings


def _other_value(s: schema.Setting):
    """A value of the setting other than its default that make_run accepts on the default task (None: none)."""
    if s.section == "task":
        return None
    if s.kind is bool:
        return not s.default
    if s.options:
        return next(v for v in s.options if v != s.default)
    levels = [v for v in s.levels if v is not None and v != s.default]
    if levels:
        return levels[-1]
    if s.kind is int:
        return int(s.default) + 1
    return float(s.default) / 2 if s.default else 0.5


def test_a_presets_copy_of_a_run_keeps_the_schedule_adam_and_the_tasks_fields():
    run = make_run(warmup=100, decay="cosine", min_lr_ratio=0.1, beta1=0.8, beta2=0.95, eps=1e-6, dtype="float64")
    assert with_settings(run) == run
    assert with_settings(run, steps=300) == make_run(
        warmup=100, decay="cosine", min_lr_ratio=0.1, beta1=0.8, beta2=0.95, eps=1e-6, dtype="float64", steps=300
    )
    induction = make_run("induction", 16, 1, vocab=12, k_min=3, position="rope")
    assert with_settings(induction, steps=300).task == induction.task
    ranged = make_run("copy", 8, 2, train_min=2, mixed_lengths=True, randomized_positions=64)
    assert with_settings(ranged) == ranged


@pytest.mark.parametrize("name", list(schema.SETTINGS))
def test_a_presets_copy_of_a_run_keeps_every_setting(name):
    s = schema.SETTINGS[name]
    value = _other_value(s)
    if value is None:
        pytest.skip(f"{name} is the task's (the test above)")
    kw = {name: value}
    for requirement in (s.requires,) if s.requires else ():
        kw[requirement] = _other_value(schema.SETTINGS[requirement])
    run = make_run(**kw)
    assert with_settings(run) == run
    other = {"seed": 7} if name != "seed" else {"steps": 300}
    assert with_settings(run, **other) == make_run(**(kw | other)) != run


DESCRIBED = {  # the one-line descriptions the pages showed before they were read from the records
    (): "copy · L=6 · seed 0 · learned position · pre-LN · scaling on · lr 3e-3 · 1,500 steps · d=32, 4 heads, "
    "2 layers · batch 32",
    (("qk_norm", True), ("z_loss", 1e-4), ("weight_decay", 0.1), ("warmup", 300), ("decay", "cosine"),
     ("min_lr_ratio", 0.1), ("embed_std", 1.0)): "copy · L=6 · seed 0 · learned position · pre-LN · scaling on · "
    "qk-norm · lr 3e-3 · 1,500 steps · d=32, 4 heads, 2 layers · batch 32 · warm-up 300 steps, cosine decay to "
    "0.1 lr · embedding std 1 · weight decay 0.1 · z-loss 0.0001",
    (("length", 8), ("train_min", 2), ("mixed_lengths", True), ("randomized_positions", 64), ("decay", "linear")):
    "copy · L=2-8 mixed · randomized positions < 64 · seed 0 · learned position · pre-LN · scaling on · lr 3e-3 · "
    "1,500 steps · d=32, 4 heads, 2 layers · batch 32 · linear decay to 0 lr",
}  # fmt: skip


@pytest.mark.parametrize("settings", list(DESCRIBED))
def test_the_description_read_from_the_records_says_what_the_pages_said(settings):
    from lab import phrases

    assert phrases.describe(make_run(**dict(settings))) == DESCRIBED[settings]


def test_a_setting_that_needs_another_is_dropped_by_the_sidebar_and_a_sweep_and_refused_by_the_configs():
    from attncore import ConfigError
    from cli.flags import Parser, add_model_args, schedules

    assert schema.without_unused({"decay": "none", "min_lr_ratio": 0.5}) == {"decay": "none", "min_lr_ratio": 0.0}
    assert schema.without_unused({"mixed_lengths": True}) == {"mixed_lengths": False}
    assert schema.without_unused({"train_lengths": (1, 6), "mixed_lengths": True})["mixed_lengths"] is True
    with pytest.raises(ConfigError) as e:
        make_run(min_lr_ratio=0.5)
    assert e.value.field == "min_lr_ratio" and "give decay linear or cosine too" in e.value.message
    sweep = Parser(prog="sweep")
    add_model_args(sweep, many=True)
    a = sweep.parse_args(["--decay", "none", "cosine", "--min-lr-ratio", "0.1"])
    assert [(s["decay"], s["min_lr_ratio"]) for s in schedules(a)] == [("none", 0.0), ("cosine", 0.1)]
    with pytest.raises(ConfigError) as e:
        schedules(sweep.parse_args(["--min-lr-ratio", "0.1"]))
    assert e.value.field == "min_lr_ratio" and "give --decay linear or cosine too" in e.value.message


# --- a setting added in this test alone ----------------------------------------------------------------------------

ADDED = schema.Setting(
    "label_smoothing", "train", 0.0, float, "Label smoothing ε", low=0.0, high=1.0, open_low=False, url="ls",
    flag="--label-smoothing", advanced=True, optional=True, factor="label_smoothing", levels=(0.0, 0.1), column=99,
    phrase="label smoothing {}", shared=True, step=0.05, fmt="%g", metavar="E", flag_help="the targets' smoothing",
)  # fmt: skip


@pytest.fixture
def added_setting(monkeypatch):
    """ADDED registered as a real setting is: its record, and the field it sets in TrainConfig (here a subclass with
    the field, where make_run and from_dict find TrainConfig). The sidebar is imported again to read its records,
    and again after the test without them."""
    import dataclasses
    import importlib

    import cli.flags  # noqa: F401  (imported before the record is: their tables hold the settings as declared)
    import cli.sweep  # noqa: F401
    import lab.factors  # noqa: F401
    import lab.tables  # noqa: F401
    from attncore import config
    from ui import sidebar

    train = dataclasses.make_dataclass(
        "TrainConfig", [(ADDED.name, float, ADDED.default)], bases=(config.TrainConfig,), frozen=True
    )
    monkeypatch.setitem(schema.SETTINGS, ADDED.name, ADDED)
    monkeypatch.setattr(config, "TrainConfig", train)
    importlib.reload(sidebar)
    yield ADDED
    monkeypatch.undo()
    importlib.reload(sidebar)


def _sidebar_script() -> None:
    import streamlit as st

    from ui import sidebar

    sidebar.render()
    st.caption(sidebar.describe(sidebar.selected_run()))


def test_a_setting_registered_in_a_test_reaches_flags_descriptions_tables_variants_and_presets(added_setting):
    from attncore import ConfigError
    from cli.flags import Parser, add_model_args, flag_of, grid_dests, run_of, run_settings
    from lab import phrases, tables

    run, base = make_run(label_smoothing=0.1), make_run()
    assert run.train.label_smoothing == 0.1 and base.train.label_smoothing == 0.0
    with pytest.raises(ConfigError) as e:  # the config checks its range, as the record declares it
        make_run(label_smoothing=1.0)
    assert e.value.field == "label_smoothing" and "1" in e.value.message
    # the command line: train's flag, an error's name for it, a sweep's shared value (not a grid axis)
    train = Parser(prog="train")
    add_model_args(train)
    assert run_of(train.parse_args(["--label-smoothing", "0.1"])) == run
    assert run_of(train.parse_args([])) == base
    assert flag_of("label_smoothing") == "--label-smoothing"
    sweep = Parser(prog="sweep")
    add_model_args(sweep, many=True)
    assert run_settings(sweep.parse_args(["--seed", "0", "1", "--label-smoothing", "0.1"]))["label_smoothing"] == 0.1
    assert "label_smoothing" not in grid_dests()
    # the description names it when set (it is optional), a variant's name by its phrase, a preset's copy keeps it
    assert phrases.describe(run) == phrases.describe(base) + " · label smoothing 0.1"
    assert tables.variant_name(run, base) == "label smoothing 0.1"
    assert tables.variant_name(base, run) == "label smoothing 0"
    assert with_settings(run, seed=3) == make_run("copy", 6, 3, label_smoothing=0.1)
    # the runs table has its column
    summaries = [{"config": r.to_dict(), "token_accuracy": 1.0} for r in (run, base)]
    assert list(tables.runs_frame(summaries)["label_smoothing"]) == [0.1, 0.0]


def test_a_setting_registered_in_a_test_is_in_the_sidebar_and_its_url(added_setting):
    from streamlit.testing.v1 import AppTest

    from ui import sidebar

    assert sidebar.DEFAULTS["ls"] == ("label_smoothing", 0.0) and "label_smoothing" in sidebar.ADVANCED_FIELDS
    at = AppTest.from_function(_sidebar_script, default_timeout=60)
    at.query_params["ls"] = "0.1"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.number_input(key="ls").value == 0.1
    assert [c.value for c in at.caption if "label smoothing 0.1" in c.value]
    at.query_params.clear()
    at.session_state["ls"] = 0.0
    at.run()
    assert not [c.value for c in at.caption if "label smoothing" in c.value]  # the default: not named


def _sidebar_run_script() -> None:
    import streamlit as st

    from ui import sidebar

    sidebar.render()
    run = sidebar.selected_run()
    k, t = run.task, run.train
    st.json({"lengths": k.train_lengths, "mixed": k.mixed_lengths, "n_max": t.randomized_positions, "decay": t.decay,
             "ratio": t.min_lr_ratio})  # fmt: skip


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"range": "true", "mixed": "true", "nmax": "64"}, [[1, 6], True, 64, "none", 0.0]),
        ({"mixed": "true", "minlr": "0.5"}, [None, False, None, "none", 0.0]),  # each needs another that is off
        ({"decay": "cosine", "minlr": "0.5", "nmax": "0"}, [None, False, None, "cosine", 0.5]),
    ],
)
def test_the_sidebar_drops_a_setting_whose_requirement_is_off_and_reads_0_as_off(query, expected):
    import json

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_sidebar_run_script, default_timeout=60)
    at.query_params.update(query)
    at.run()
    assert not at.exception and not at.error, [e.message for e in at.exception]
    shown = json.loads(at.json[0].value)
    assert [shown[k] for k in ("lengths", "mixed", "n_max", "decay", "ratio")] == expected
