"""The model's answer to one input (attncore.inspect.model_answer) is the library's; the UI only words it."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from attncore.config import make_run
from attncore.inspect import ModelAnswer, model_answer
from attncore.model import forward, generate
from attncore.task import task_of

ROOT = Path(__file__).resolve().parents[1]


def test_a_generating_task_answers_by_greedy_generation_after_its_prompt(random_params):
    run = make_run("copy", 5, 0)
    params, probe = random_params(run.model, 1), task_of(run.task).probe(run.task)
    answer = model_answer(params, run, probe)
    L = run.task.length
    uncached = generate(params, probe[None, : L + 1], L, run.model, use_cache=False)[0][0]  # (L,)
    assert answer.generated and answer.expected.tolist() == probe[:L].tolist()  # copy: the symbols themselves
    assert answer.predicted.tolist() == uncached.tolist()
    assert answer.right == int((uncached == probe[:L]).sum())


@pytest.mark.parametrize("name", ["induction", "modular", "bigram_backcopy"])
def test_a_teacher_forced_task_answers_with_the_most_likely_token_of_each_answer_query(name, random_params):
    """Each query's prediction is the argmax of the logits the model gives reading only the tokens up to it."""
    task = task_of(name)
    run = make_run(name, task.defaults["length"], 0)
    params, probe = random_params(run.model, 2), task.probe(run.task)
    answer = model_answer(params, run, probe)
    assert not answer.generated and answer.queries.tolist() == task.answer_queries(run.task).tolist()
    for q, predicted in zip(answer.queries, answer.predicted, strict=True):
        logits, _ = forward(params, probe[None, : q + 1], run.model)  # (1, q + 1, V): the prefix alone
        assert predicted == logits[0, -1].argmax()
    assert answer.expected.tolist() == task.answer_tokens(run.task, probe)[0].tolist()


def test_right_counts_the_matching_queries():
    answer = ModelAnswer(np.arange(3), np.array([1, 2, 3]), np.array([1, 0, 3]), generated=False)
    assert answer.right == 2


def test_no_ui_module_or_page_takes_an_argmax():
    """Picking the model's token is numerics: the library does it (import-linter keeps the model's forward and
    generate out of ui/ and app_pages/; this keeps the argmax of their logits out)."""
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in [*(ROOT / "ui").rglob("*.py"), *(ROOT / "app_pages").glob("*.py")]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and node.attr in ("argmax", "softmax")
    ]
    assert found == []
