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
    if s.section == "task" or s.follows:
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
        pytest.skip(f"{name} is the task's or follows another setting")
    kw = {name: value}
    for requirement in (s.requires,) if s.requires else ():
        kw[requirement] = _other_value(schema.SETTINGS[requirement])
    run = make_run(**kw)
    assert with_settings(run) == run
    other = {"seed": 7} if name != "seed" else {"steps": 300}
    assert with_settings(run, **other) == make_run(**(kw | other)) != run
