"""The Attention page's input: the probe or a typed sequence (validated by attncore), and the model's answer."""

from __future__ import annotations

import numpy as np

from attncore import ConfigError, RunConfig
from attncore.inspect import model_answer, parse_sequence
from attncore.task import Words, task_of
from lab.store import RunRecord
from ui import plain
from ui.frames import token_name
from ui.params import url_text


def chosen_tokens(run: RunConfig, record: RunRecord, key: str = "seq") -> np.ndarray:
    """A text input mirrored in the URL (?seq=... or another key); invalid text shows st.error and falls back
    to the probe."""
    task, probe = task_of(run.task), record.probe_tokens
    L, what = task.input_count(run.task), task.input_help(run.task)  # the induction task: its first copy
    text = url_text(
        "Input symbols",
        key,
        "",
        check=lambda text: text.strip() and parse_sequence(text, run),
        placeholder=" ".join(map(str, probe[:L])),
        help=f"{what}, separated by spaces. Empty: the probe sequence.",
    )
    if not text.strip():
        return probe
    try:
        return parse_sequence(text, run)
    except ConfigError as e:
        plain.error("Not a valid input.", f"Input symbols: {e.message}. Showing the probe sequence instead.")
        return probe


def has_sep(run: RunConfig) -> bool:
    """Whether the task's sequences hold SEP (token 20), labelled so in the charts; another task's 20 is a token."""
    return task_of(run.task).has_sep


def words(run: RunConfig) -> Words:
    """The run's task's words for the pages (attncore.task.Words): every Lab page speaks of the task it shows."""
    return task_of(run.task).words(run.task)


def answer_line(run: RunConfig, record: RunRecord, tokens: np.ndarray) -> str:
    """Markdown: the input, the task's answer, and the trained model's (attncore.inspect.model_answer): greedy
    generation for a task that generates, else its most likely token at each answer query, reading the true
    tokens."""
    answer = model_answer(record.params, run, tokens)
    expected, predicted = " ".join(map(str, answer.expected)), " ".join(map(str, answer.predicted))
    if answer.generated:
        verdict = "right" if answer.right == len(answer.expected) else "wrong"
        return (
            f"Input `{' '.join(token_name(t) for t in tokens)}` · expected answer `{expected}` · "
            f"the model's greedy answer `{predicted}` (**{verdict}**)"
        )
    return (
        f"Input `{' '.join(map(str, tokens))}` · {words(run).answer} ({query_list(answer.queries)}) `{expected}` · "
        f"the model's most likely tokens there `{predicted}` "
        f"(**{answer.right} of {len(answer.expected)} right**, reading the true tokens)"
    )


def query_list(queries) -> str:
    """'query 2', 'queries 16–30' (a run of them) or 'queries 3, 9, 14' (the bigram_backcopy task's triggers)."""
    q = [int(x) for x in queries]
    if len(q) == 1:
        return f"query {q[0]}"
    if q == list(range(q[0], q[-1] + 1)):
        return f"queries {q[0]}–{q[-1]}"
    return "queries " + ", ".join(map(str, q))


def accuracy_how(run: RunConfig) -> str:
    """How a run's accuracy is measured, for captions: 'by greedy generation', or the task's own way."""
    return task_of(run.task).accuracy_how


def snapshots_how(run: RunConfig, n: int) -> str:
    """Where a run's n training snapshots are taken and scored, for captions."""
    return task_of(run.task).snapshots_how(n)
