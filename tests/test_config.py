"""Config validation: every invalid value raises ConfigError naming the field and what is allowed."""

from __future__ import annotations

import dataclasses
import re

import pytest

from attncore.config import ConfigError, ModelConfig, RunConfig, TaskConfig, TrainConfig, make_run

# (build the invalid config, the fields the error may name, patterns the message must contain:
# the allowed values or range, chosen so that echoing the bad value cannot match)
INVALID = {
    "d not divisible by heads": (lambda: ModelConfig(d_model=30, n_heads=4), {"n_heads", "d_model"}, ["30", "5", "15"]),
    "d not divisible by heads (make_run)": (lambda: make_run(d_model=32, n_heads=3), {"n_heads", "d_model"}, ["8"]),
    "L = 0": (lambda: TaskConfig("copy", 0), {"length"}, [r"\b1\b"]),
    "L < 0 (make_run)": (lambda: make_run("sort", -2), {"length"}, [r"\b1\b"]),
    "L beyond the position table": (
        lambda: RunConfig(ModelConfig(max_len=8), TrainConfig(), TaskConfig("copy", 6)),
        {"length"},
        ["8", "4"],  # the table's size and the longest L it allows
    ),
    "L beyond the sinusoidal table": (
        lambda: RunConfig(ModelConfig(max_len=9, position="sinusoidal"), TrainConfig(), TaskConfig("sort", 5)),
        {"length"},
        ["9", "4"],
    ),
    "steps = 0": (lambda: TrainConfig(steps=0), {"steps"}, [r"\b1\b"]),
    "steps < 0 (make_run)": (lambda: make_run(steps=-5), {"steps"}, [r"\b1\b"]),
    "unknown task": (lambda: TaskConfig("shuffle", 4), {"task", "name"}, ["copy", "sort", "reverse"]),
    "unknown task (make_run)": (lambda: make_run("Copy"), {"task", "name"}, ["copy", "sort", "reverse"]),
    "unknown position": (
        lambda: ModelConfig(position="t5"),
        {"position"},
        ["learned", "sinusoidal", "rope", "alibi", "none"],
    ),
    "unknown norm": (lambda: ModelConfig(norm="sandwich"), {"norm"}, ["pre", "post"]),
    "unknown dtype": (lambda: ModelConfig(dtype="float16"), {"dtype"}, ["float32", "float64"]),
    "lr = 0": (lambda: TrainConfig(lr=0.0), {"lr"}, [r"[(>]\s*0"]),
    "lr < 0 (make_run)": (lambda: make_run(lr=-2.0), {"lr"}, [r"[(>]\s*0"]),
    "warm-up < 0": (lambda: TrainConfig(warmup=-1), {"warmup"}, [r"\b0\b", "1,500"]),
    "warm-up beyond the steps (make_run)": (lambda: make_run(steps=200, warmup=201), {"warmup"}, [r"\b0\b", "200"]),
    "warm-up not whole": (lambda: TrainConfig(warmup=2.5), {"warmup"}, ["integer"]),
    "unknown decay": (lambda: make_run(decay="exponential"), {"decay"}, ["none", "linear", "cosine"]),
    "min_lr_ratio > 1": (lambda: make_run(decay="cosine", min_lr_ratio=1.5), {"min_lr_ratio"}, [r"\[0, 1\]"]),
    "min_lr_ratio nan": (lambda: make_run(decay="linear", min_lr_ratio=float("nan")), {"min_lr_ratio"}, [r"\[0, 1\]"]),
    "min_lr_ratio without a decay": (lambda: make_run(min_lr_ratio=0.1), {"min_lr_ratio"}, ["linear or cosine"]),
    "weight decay < 0": (lambda: make_run(weight_decay=-0.1), {"weight_decay"}, [r"\[0\.0, 10\.0\)"]),
    "weight decay 10": (lambda: TrainConfig(weight_decay=10), {"weight_decay"}, [r"\[0\.0, 10\.0\)"]),
    "weight decay nan": (lambda: make_run(weight_decay=float("nan")), {"weight_decay"}, [r"\[0\.0, 10\.0\)"]),
    "weight decay a word": (lambda: make_run(weight_decay="0.1"), {"weight_decay"}, ["number"]),
}


@pytest.mark.parametrize("case", INVALID)
def test_invalid_value_raises_config_error_naming_field_and_allowed_values(case):
    build, fields, words = INVALID[case]
    with pytest.raises(ConfigError) as info:
        build()
    error = info.value
    assert error.field in fields
    message = str(error)
    assert error.field in message
    for pattern in words:
        assert re.search(pattern, message), f"{pattern!r} missing from {message!r}"


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def test_defaults_are_the_articles_experiment():
    """The article's experiment: d 32, 4 heads, 2 blocks, d_ff 128, batch 32, 1500 steps, lr 3e-3, pre-LN,
    scaling, learned."""
    run = make_run()
    assert run == RunConfig()
    m, t = run.model, run.train
    assert (m.d_model, m.n_heads, m.n_layers, m.d_ff, m.max_len) == (32, 4, 2, 128, 13)
    assert (m.position, m.norm, m.scaling) == ("learned", "pre", True)
    assert (t.steps, t.batch_size, t.lr, t.beta1, t.beta2, t.eps) == (1500, 32, 3e-3, 0.9, 0.999, 1e-8)


def test_position_free_modes_accept_lengths_beyond_max_len():
    """rope and none have no table, so a short max_len does not bound L."""
    for position in ("rope", "none"):
        RunConfig(ModelConfig(max_len=4, position=position), TrainConfig(), TaskConfig("copy", 6))


def test_configs_are_frozen_hashable_and_round_trip_through_dicts():
    run = make_run("sort", 8, seed=3, position="rope", norm="post", scaling=False, dtype="float64")
    assert RunConfig.from_dict(run.to_dict()) == run
    assert hash(RunConfig.from_dict(run.to_dict())) == hash(run)
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.model.d_model = 64  # type: ignore[misc]
    with pytest.raises(ConfigError):
        dataclasses.replace(run.train, steps=0)  # variants are validated too


def test_the_default_runs_key_is_the_one_stored_before_the_schedule():
    """warmup, decay and min_lr_ratio are left out of the key at their defaults: every stored run keeps its key."""
    assert make_run().to_dict() == {
        "model": {"vocab_size": 21, "d_model": 32, "n_heads": 4, "n_layers": 2, "d_ff": 128, "max_len": 13}
        | {"position": "learned", "norm": "pre", "scaling": True, "dtype": "float32"},
        "train": {"steps": 1500, "batch_size": 32, "lr": 0.003, "beta1": 0.9, "beta2": 0.999, "eps": 1e-08, "seed": 0},
        "task": {"name": "copy", "length": 6},
    }
    scheduled = make_run(warmup=300, decay="cosine", min_lr_ratio=0.1)
    assert scheduled.to_dict()["train"] | {} == make_run().to_dict()["train"] | {
        "warmup": 300, "decay": "cosine", "min_lr_ratio": 0.1
    }  # fmt: skip
    assert RunConfig.from_dict(scheduled.to_dict()) == scheduled
    assert make_run(decay="linear", min_lr_ratio=0) == make_run(decay="linear", min_lr_ratio=0.0)
    assert make_run(decay="linear", min_lr_ratio=0).to_dict() == make_run(decay="linear").to_dict()


def test_weight_decay_enters_the_key_only_when_set():
    """0 (the default, plain Adam) leaves the stored key as it was; 0 and 0.0 are one run."""
    assert make_run(weight_decay=0) == make_run() and make_run(weight_decay=0).to_dict() == make_run().to_dict()
    decayed = make_run(weight_decay=1)
    assert decayed.to_dict()["train"] == make_run().to_dict()["train"] | {"weight_decay": 1.0}
    assert RunConfig.from_dict(decayed.to_dict()) == decayed
