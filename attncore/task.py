"""What a task is, and the registry of tasks: everything outside a task's own module asks its Task object.

A task (copy, sort, reverse, induction, ...) is one module of attncore.tasks that builds a Task and calls
`register`. This module sits at the bottom of attncore (beside config): the registry holds the objects, so the
numerics (train, evaluate, snapshots, interpret) call a task's methods without importing its module, and the
task modules, at the top of attncore, may use the model to score themselves. Standard library only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .checks import ConfigError

if TYPE_CHECKING:  # annotations only
    import numpy as np

    from .config import RunConfig, TaskConfig


class Task:
    """A task: its sequences, their lengths, its held-out set and probe, how a model of it is scored, and the
    run settings its experiment defaults to. A subclass overrides what its sequences need; the methods take the
    run's TaskConfig (or RunConfig) so one object serves every length.

    Data (NumPy): sample_batch, test_set, test_distinct, probe, answer_tokens, answer_queries, parse_input.
    Scoring (the model): evaluate, test_loss, snapshot_steps, take_snapshot, final_figures.
    Interpretation: head_patterns, head_scores, test_scores, lens_inputs, contrast_positions, contrast_symbols,
    contrast.
    """

    name: str = ""
    summary: str = ""  # one line: what a model of the task must do (the sidebar's and --help's text)
    length_name: str = "L"  # what TaskConfig.length means for it, as the pages and flags name it
    # TaskConfig fields besides name and length that the task reads, {field: default}
    fields: dict[str, Any] = {}
    # run settings (attncore.settings names) its experiment sets when not given: a link or command naming only the
    # task opens that experiment's run
    defaults: dict[str, Any] = {}
    # run settings that mean nothing for it (attncore.settings names): refused, not shown, not compared
    excluded: frozenset[str] = frozenset()
    metrics: tuple[str, ...] = ()  # figures of a run besides the accuracies and losses (RunRecord.figures)
    has_page: str | None = None  # the page that is the task's own experiment (app_pages path), if any

    # --- the config -----------------------------------------------------------------------------------------
    def check(self, task: TaskConfig) -> None:
        """Raise ConfigError unless the task's fields are in range (fields not given are filled by the caller)."""
        raise NotImplementedError

    def check_run(self, run: RunConfig) -> None:
        """Raise ConfigError for a model or training setting the task cannot run with (e.g. too few positions)."""

    def seq_len(self, task: TaskConfig) -> int:
        """Tokens of a whole sequence."""
        raise NotImplementedError

    def answer_len(self, task: TaskConfig) -> int:
        """Targets with a loss, the last ones of the sequence."""
        raise NotImplementedError

    def vocab_size(self, task: TaskConfig) -> int:
        """Tokens the model must embed."""
        raise NotImplementedError

    def max_len(self, task: TaskConfig, randomized_positions: int | None) -> int:
        """Rows of the position table a run of the task needs."""
        return self.seq_len(task)

    def describe(self, task: TaskConfig) -> str:
        """Its lengths in a run's one-line description, e.g. 'L=6'."""
        return f"{self.length_name}={task.length}"

    # --- data -------------------------------------------------------------------------------------------------
    def sample_batch(self, task: TaskConfig, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def test_set(self, task: TaskConfig, n: int) -> np.ndarray:
        raise NotImplementedError

    def probe(self, task: TaskConfig) -> np.ndarray:
        """The model input of the task's probe, the sequence whose attention the pages draw."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<task {self.name}>"


_TASKS: dict[str, Task] = {}


def register(task: Task) -> Task:
    """Add a task to the registry under its name (a name registered twice is an error: tasks are found by name)."""
    if not task.name or not task.name.isidentifier():
        raise ValueError(f"a task's name is a short identifier, got {task.name!r}")
    if task.name in _TASKS and _TASKS[task.name] is not task:
        raise ValueError(f"a task named {task.name!r} is registered already")
    _TASKS[task.name] = task
    return task


def unregister(name: str) -> None:
    """Remove a task (a test's own task, after the test)."""
    _TASKS.pop(name, None)


def names() -> tuple[str, ...]:
    """The registered tasks' names, in registration order."""
    return tuple(_TASKS)


def get(name: str) -> Task:
    """The task named `name`; raises ConfigError('task', ...) listing the registered ones."""
    task = _TASKS.get(name) if isinstance(name, str) else None
    if task is None:
        raise ConfigError("task", f"must be one of {', '.join(_TASKS)}; got {name!r}")
    return task
