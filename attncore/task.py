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

# attncore.config imports this module (a TaskConfig is checked by its task): the configs are not imported here
TaskConfig = RunConfig = Any


class Task:
    """A task: its sequences, their lengths, its held-out set and probe, how a model of it is scored, and the
    run settings its experiment defaults to. A subclass overrides what its sequences need; the methods take the
    run's TaskConfig (or RunConfig) so one object serves every length.

    Config: check, check_run, seq_len, answer_len, vocab_size, max_len, describe.
    Data (NumPy): sample_batch, sample_range_batch, train_batch, batch_rows, test_size, test_set, test_distinct,
    probe, answer_tokens, answer_queries, parse_input.
    Scoring (the model): evaluate, test_loss, snapshot_steps, snapshot_scores, snapshot_shapes,
    snapshot_figures_possible, final_figures, metric_low, evaluation_elements.
    Interpretation: patterns, pattern, head_scores, test_scores, lens_inputs, contrast_positions,
    contrast_symbols, contrast.
    """

    name: str = ""
    summary: str = ""  # one line: what a model of the task must do (the sidebar's and --help's text)
    length_name: str = "L"  # what TaskConfig.length means for it, as the pages and flags name it
    length_label: str = ""  # the sidebar's label of its length (default 'Sequence length <length_name>')
    # TaskConfig fields besides name and length that the task reads, {field: default}
    fields: dict[str, Any] = {}
    # run settings (attncore.settings names) its experiment sets when not given: a link or command naming only the
    # task opens that experiment's run
    defaults: dict[str, Any] = {}
    # run settings that mean nothing for it (attncore.settings names): not compared (lab.factors.factors_for)
    excluded: frozenset[str] = frozenset()
    metrics: tuple[str, ...] = ()  # figures of a run besides the accuracies and losses (RunRecord.figures)
    paired: tuple[str, ...] = ()  # of those, the ones a comparison of its runs pairs beside the test loss
    has_page: str | None = None  # the page that is the task's own experiment (app_pages path), if any
    # its length's range, the operator limit (ui.limits) that caps it on a hosted server, and what it counts
    length_range: tuple[int, int] = (1, 64)
    length_cap: str = "max_length"
    length_help: str = ""
    lengths_vary: bool = False  # trains on a range of lengths and is evaluated at other lengths (length generalisation)
    has_sep: bool = False  # its sequences hold SEP (token 20) between the input and the answer
    patterns: dict[str, str] = {}  # the head-detection patterns scored for it, {name: what it is}
    pattern: str = ""  # of those, the one a head that reads what the task needs matches
    # what evaluation and snapshots cost in training steps' time: (per snapshot, once) (lab.cost_model)
    eval_cost_steps: tuple[int, int] = (0, 0)
    accuracy_how: str = "by greedy generation"  # how its accuracy is measured, for captions
    generates: bool = False  # its answer is generated greedily after a prompt (else read teacher-forced)

    # --- the config -----------------------------------------------------------------------------------------
    def check(self, task: TaskConfig) -> None:
        """Raise ConfigError unless the task's fields are in range; fill its fields not given (object.__setattr__
        on the frozen config, from `fields`)."""
        raise NotImplementedError

    def check_run(self, run: RunConfig) -> None:
        """Raise ConfigError for a model or training setting the task cannot run with (e.g. too few positions)."""

    def refuse_fields(self, config: TaskConfig) -> None:
        """ConfigError for a field of another registered task given to a config of this one."""
        for other in _TASKS.values():
            for field in other.fields:
                if field not in self.fields and getattr(config, field, None) is not None:
                    raise ConfigError(field, f"is a setting of the {other.name} task, not of {config.name}")

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
        """Its lengths in a run's one-line description, e.g. 'L=6' or 'L=1-6' (a training range)."""
        if task.train_lengths is not None:
            return f"{self.length_name}={task.train_lengths[0]}-{task.train_lengths[1]}"
        return f"{self.length_name}={task.length}"

    # --- data -------------------------------------------------------------------------------------------------
    def sample_batch(self, task: TaskConfig, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """A fresh training batch (B, seq_len) drawn from rng."""
        raise NotImplementedError

    def sample_range_batch(self, task: TaskConfig, batch_size: int, rng: np.random.Generator):
        """A batch of a run trained on a range of lengths: (seqs, lengths); lengths None when rectangular."""
        raise NotImplementedError

    def train_batch(self, task: TaskConfig, batch_size: int, rng: np.random.Generator):
        """One training step's (batch, lengths or None, the answer targets with a loss per sequence)."""
        if task.train_lengths is None:
            return self.sample_batch(task, batch_size, rng), None, self.answer_len(task)
        batch, lengths = self.sample_range_batch(task, batch_size, rng)
        return batch, lengths, (batch.shape[1] - 1) // 2

    def batch_rows(self, task: TaskConfig, batch_size: int) -> int:
        """The sequences a training batch of `batch_size` holds (fewer where the task's training set is smaller)."""
        return batch_size

    def test_size(self, task: TaskConfig) -> int | None:
        """The held-out sequences its evaluation scores; None: the lab's N_TEST (attncore.sequences)."""
        return None

    def test_set(self, task: TaskConfig, n: int) -> np.ndarray:
        """The first n of the fixed held-out sequences, the same for every run of the task at these fields."""
        raise NotImplementedError

    def test_distinct(self, task: TaskConfig) -> np.ndarray:
        """(N_TEST,) True where a held-out sequence's symbols (those a repeat would make ambiguous) all differ."""
        raise NotImplementedError

    def probe(self, task: TaskConfig) -> np.ndarray:
        """The model input of the task's probe, the sequence whose attention the pages draw."""
        raise NotImplementedError

    def answer_queries(self, task: TaskConfig) -> np.ndarray:
        """The queries of the probe (or a typed input) that carry the task's answer."""
        raise NotImplementedError

    def answer_tokens(self, task: TaskConfig, tokens: np.ndarray) -> np.ndarray:
        """(B, A) the correct token at each of answer_queries of inputs tokens (B, T')."""
        raise NotImplementedError

    def input_count(self, task: TaskConfig) -> int:
        """The symbols a user types for an input (parse_input), a contrast may change."""
        return task.length

    def input_help(self, task: TaskConfig) -> str:
        """What a user types for an input, e.g. '6 symbols from 0 to 19'."""
        return f"{self.input_count(task)} symbols"

    def parse_input(self, text: str, task: TaskConfig) -> np.ndarray:
        """A user's symbols, validated -> the model input; ConfigError('sequence', ...) when they are not."""
        raise NotImplementedError

    # --- scoring ----------------------------------------------------------------------------------------------
    def evaluate(self, params, run: RunConfig, *, head_mask=None, n: int, positions=None):
        """attncore.evaluate.EvalResult of the weights on the first n held-out sequences."""
        raise NotImplementedError

    def test_loss(self, params, run: RunConfig, n: int) -> float:
        """The held-out loss (teacher-forced) on the first n held-out sequences."""
        raise NotImplementedError

    def snapshot_steps(self, steps: int) -> list[int]:
        """The steps a run of `steps` steps takes its training snapshots at."""
        raise NotImplementedError

    def snapshot_scores(self, params, run: RunConfig) -> tuple[float, float, dict | None]:
        """(token accuracy, sequence accuracy, the task's figures or None) of a training snapshot."""
        raise NotImplementedError

    def snapshot_shapes(self, n_layers: int, n_heads: int, n_snapshots: int) -> dict[str, tuple[int, ...]]:
        """name -> shape of the figures snapshot_scores adds (float64, stacked over the snapshots)."""
        return {}

    def snapshot_figures_possible(self, arrays: dict[str, np.ndarray]) -> bool:
        """Whether stored snapshot figures (snapshot_shapes' arrays) are possible numbers."""
        return True

    def snapshots_how(self, n: int) -> str:
        """Where a run's n training snapshots are taken and what they score, for captions."""
        raise NotImplementedError

    def final_figures(self, params, run: RunConfig) -> dict | None:
        """The figures of `metrics` for trained weights (in the record's summary), or None without metrics."""
        return None

    def metric_low(self, name: str) -> float:
        """The smallest possible value of one of `metrics` (a loss: 0)."""
        return 0.0

    def evaluation_elements(self, run: RunConfig) -> int:
        """Array elements alive at once while evaluating a run (attncore.memory's estimate)."""
        raise NotImplementedError

    # --- interpretation ---------------------------------------------------------------------------------------
    def head_scores(self, maps: np.ndarray, tokens: np.ndarray, task: TaskConfig) -> dict[str, np.ndarray]:
        """{pattern: (..., n_layers, H)} for attention maps (..., n_layers, H, T', T') of the input tokens."""
        raise NotImplementedError

    def test_scores(self, params, run: RunConfig, n_test: int) -> dict[str, np.ndarray]:
        """{pattern: (n_layers, H)} averaged over the first n_test held-out sequences."""
        raise NotImplementedError

    def lens_inputs(self, task: TaskConfig, n: int) -> np.ndarray:
        """(n, T') model inputs the logit lens averages over."""
        raise NotImplementedError

    def contrast_positions(self, task: TaskConfig) -> range:
        """The input positions a patching contrast may change."""
        raise NotImplementedError

    def contrast_symbols(self, task: TaskConfig) -> range:
        """The symbols an input position may take."""
        raise NotImplementedError

    def contrast(self, run: RunConfig, clean: np.ndarray, position: int, symbol: int):
        """attncore.interpret.patching.Contrast: `clean` with input `position` set to `symbol`."""
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


def task_of(x) -> Task:
    """The Task of a task name, a TaskConfig or a RunConfig."""
    if isinstance(x, str):
        return get(x)
    return get(x.name if hasattr(x, "name") else x.task.name)
