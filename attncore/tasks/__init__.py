"""The tasks, one module each, at the top of attncore: symbols (copy, sort, reverse: the article's
[s1..sL, SEP, a1..aL] over 20 symbols) and induction (T tokens of V with a repeated prefix). Each module builds
its Task (attncore.task) and registers it; importing this package imports every module in it, so a task is added
by adding a module. Everything else asks a task through the registry (attncore.task.get).

The functions below ask the task of a TaskConfig (the names the lab and its tests have always imported).
"""

from __future__ import annotations

import importlib
import pkgutil

import numpy as np

from ..config import TaskConfig
from ..sequences import N_TEST, PAD, TEST_SEED, all_distinct, draw_positions, pad_sequences
from ..task import get

# isort: off
from . import symbols  # the article's tasks first: the registry's order is the order the pages and flags list
from . import induction

# isort: on
from .induction import (
    N_PROBE,
    PROBE_SEED,
    induction_input,
    induction_probe_set,
    induction_sequences,
    induction_test_set,
    repeat_prefix,
    repeat_queries,
)
from .symbols import PROBE_SYMBOLS

for _module in pkgutil.iter_modules(__path__):  # any further task module of the package
    importlib.import_module(f"{__name__}.{_module.name}")


def make_sequences(symbols: np.ndarray, task: str) -> np.ndarray:
    """(B, L) symbols -> (B, 2L+1) sequences with the answer of the task named `task` after SEP (a task over
    [s1..sL, SEP, a1..aL])."""
    return get(task).make_sequences(symbols)


def sample_batch(task: TaskConfig, batch_size: int, rng: np.random.Generator) -> np.ndarray:
    """A fresh training batch of the task (B, seq_len)."""
    return get(task.name).sample_batch(task, batch_size, rng)


def sample_range_batch(task: TaskConfig, batch_size: int, rng: np.random.Generator):
    """A training batch of a range-trained task: (seqs, lengths); lengths None when rectangular."""
    return get(task.name).sample_range_batch(task, batch_size, rng)


def test_set(task: TaskConfig, n: int = N_TEST) -> np.ndarray:
    """The fixed evaluation sequences (the first n), the same for every run of a task at its length and fields."""
    return get(task.name).test_set(task, n)


def test_distinct(task: TaskConfig) -> np.ndarray:
    """(N_TEST,) True where a test sequence's symbols (those a repeat would make ambiguous) all differ."""
    return get(task.name).test_distinct(task)


def probe_sequence(task: TaskConfig) -> np.ndarray:
    """The model input of the task's probe."""
    return get(task.name).probe(task)


def answer_queries(task: TaskConfig) -> np.ndarray:
    """The queries of the probe (or a typed input) that carry the task's answer."""
    return get(task.name).answer_queries(task)


def answer_tokens(task: TaskConfig, tokens: np.ndarray) -> np.ndarray:
    """(B, A) the correct token at each of answer_queries(task) of inputs tokens (B, T')."""
    return get(task.name).answer_tokens(task, tokens)


test_set.__test__ = False  # measurements: pytest must not collect them where a test module imports them
test_distinct.__test__ = False

__all__ = [
    "N_PROBE",
    "N_TEST",
    "PAD",
    "PROBE_SEED",
    "PROBE_SYMBOLS",
    "TEST_SEED",
    "all_distinct",
    "answer_queries",
    "answer_tokens",
    "draw_positions",
    "induction",
    "induction_input",
    "induction_probe_set",
    "induction_sequences",
    "induction_test_set",
    "make_sequences",
    "pad_sequences",
    "probe_sequence",
    "repeat_prefix",
    "repeat_queries",
    "sample_batch",
    "sample_range_batch",
    "symbols",
    "test_distinct",
    "test_set",
]
