"""A run's settings are declared once (attncore.settings): the configs' defaults and checks, the run's key, the
sidebar's URL keys and labels, the command line's flags, Compare's factors and the runs table read the records."""

from __future__ import annotations

import dataclasses

import pytest

from attncore import ConfigError, ModelConfig, TrainConfig, make_run
from attncore import settings as schema
from attncore.config import OPTIONAL_FIELDS


def test_the_configs_defaults_are_the_settings_defaults():
    defaults = {f.name: f.default for c in (ModelConfig, TrainConfig) for f in dataclasses.fields(c)}
    for s in schema.SETTINGS.values():
        if s.section in ("model", "train"):
            assert defaults[s.config_field] == s.default, s.name
    run = make_run()
    assert (run.task.name, run.task.length, run.train.seed) == tuple(
        schema.SETTINGS[n].default for n in ("task", "length", "seed")
    )


def test_a_runs_key_holds_an_optional_setting_only_when_it_is_set():
    assert OPTIONAL_FIELDS == schema.optional_fields()
    assert "warmup" not in make_run().to_dict()["train"]
    assert make_run(warmup=10).to_dict()["train"]["warmup"] == 10
    for s in schema.SETTINGS.values():  # every other field of the sections is always in the key
        if not s.optional and s.section != "task":
            assert s.config_field in make_run().to_dict()[s.section], s.name


# the task's length and own fields are checked by the task (tests/test_task_registry.py)
@pytest.mark.parametrize("name", [s.name for s in schema.SETTINGS.values() if s.kind is int and s.section != "task"])
def test_an_integer_setting_out_of_its_range_is_refused_naming_its_field(name):
    s = schema.SETTINGS[name]
    with pytest.raises(ConfigError) as e:
        make_run(**{name: int(s.low) - 1})
    assert e.value.field == s.config_field


def test_every_choice_setting_labels_every_choice():
    for s in schema.SETTINGS.values():
        if s.labels:
            assert set(s.labels) == set(s.options), s.name


def test_the_sidebar_reads_its_url_keys_labels_and_advanced_section_from_the_settings():
    from ui import sidebar

    keyed = {s.url for s in schema.SETTINGS.values() if s.url}
    assert keyed <= set(sidebar.DEFAULTS)
    assert set(sidebar.DEFAULTS) - keyed == set(sidebar.TASK_KEYS) - keyed  # a task's own length (T) only
    assert sidebar.ADVANCED_FIELDS == {s.name for s in schema.SETTINGS.values() if s.advanced}
    for s in schema.SETTINGS.values():
        assert sidebar.FIELD_LABELS[s.config_field] == s.label or s.name == "length", s.name


def test_the_command_line_has_one_flag_per_setting_with_a_flag_and_errors_name_it():
    from cli.flags import Parser, add_model_args, flag_of

    p = Parser(prog="train")
    add_model_args(p)
    flags = {o for a in p._actions for o in a.option_strings}
    for s in schema.SETTINGS.values():
        if s.flag:
            assert s.flag in flags, s.name
            assert flag_of(s.config_field) == (s.flag if s.name != "scaling" else "--scaling")


def test_compare_and_the_runs_table_read_the_factors_and_columns_from_the_settings():
    from lab import factors, tables

    settings_factors = schema.factors()
    assert set(factors.FACTORS) == set(settings_factors) | {"d_k"}
    for name, s in settings_factors.items():
        f = factors.FACTORS[name]
        assert (f.section, f.key, f.label) == (s.section, s.config_field, s.factor_label or name)
    assert tables.SETTINGS == schema.table_columns()
    assert len(set(tables.SETTINGS)) == len(tables.SETTINGS)


def test_a_setting_added_to_the_schema_reaches_the_key_and_the_factors(monkeypatch):
    added = schema.Setting("z_loss", "train", 0.0, float, "z-loss", optional=True, factor="zloss", levels=(0.0, 1e-4))
    monkeypatch.setitem(schema.SETTINGS, added.name, added)
    assert schema.optional_fields()["train"]["z_loss"] == 0.0
    assert schema.factors()["zloss"] is added
    assert schema.by_field("z_loss") is added
