"""What a task is, and the registry of tasks: everything outside a task's own module asks its Task object.

A task (copy, sort, reverse, induction, ...) is one module of attncore.tasks that builds a Task and calls
`register`. This module sits at the bottom of attncore (beside config): the registry holds the objects, so the
numerics (train, evaluate, snapshots, interpret) call a task's methods without importing its module, and the
task modules, at the top of attncore, may use the model to score themselves. Standard library only.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .checks import ConfigError

if TYPE_CHECKING:  # annotations only
    import numpy as np

# attncore.config imports this module (a TaskConfig is checked by its task): the configs are not imported here
TaskConfig = RunConfig = Any


@dataclass(frozen=True)
class Words:
    """A task's words for the pages at one config (Task.words): what its queries, answers, test set and scores are.
    Each is plain text the pages put into a sentence; `then` and `contrast` are str.format templates."""

    test_set: str  # the held-out set its final numbers use, e.g. "the 500 fixed test sequences"
    held_out_loss: str  # what its test loss is, e.g. "Teacher-forced cross-entropy over the answer tokens of ..."
    measured: str  # how its accuracy is measured, whole sentences ("Accuracy is measured by ... Per-sequence ...")
    loss: str  # what its training loss averages, e.g. "Cross-entropy on the answer tokens only, averaged over them"
    answer: str  # what the model must produce at its answer queries, e.g. "the answer", "the repeat's targets"
    reads: str  # what a head that solves it reads, whole sentences (the Attention page)
    distinct: str  # the subset of the held-out set whose symbols all differ, e.g. "All 6 symbols distinct"
    repeated: str  # the rest, e.g. "Some symbol repeated"
    distinct_why: str  # why the split matters, a sentence
    then: str  # a snapshot's accuracy, {accuracy} filled, e.g. "per-sequence accuracy then: {accuracy} on 100 ..."
    ablation: str  # the figure a head ablation changes, e.g. "per-sequence accuracy"
    score_rows: str  # the queries the head-detection scores average over
    contrast: str  # the patching metric's query, {answer} {position} {before} {query} filled
    lens_over: str  # the inputs the logit lens averages over, e.g. "100 test sequences"


class Task(ABC):
    """A task: what every task must say (the abstract methods below: its lengths, sequences, held-out set and probe,
    how a model of it is scored, its words for the pages) and the run settings its experiment defaults to. The
    methods take the run's TaskConfig (or RunConfig) so one object serves every length. What only some tasks do is a
    capability with its own defaults: VaryingLengths (trained on a range of lengths) and Interpretation (head
    scores, the logit lens, patching contrasts); a task's own figures (`metrics`) default to none.

    A task declares its data: its fields (`fields`, one attncore.settings.Setting record each: default, range,
    label, help, URL key, flag and the cap that bounds its widget), caps of its own (`caps`: read by
    lab.jobs.limits like the central ones), its metrics with their labels (`metrics`, `metric_labels`), its label
    and one-line summary (the sidebar, Home and --help show them). TaskConfig holds a task's fields, the settings
    table, the flags, the sidebar and its URL read its records from the registry: a task with a field of a new name
    is its module alone.
    """

    name: str = ""
    label: str = ""  # what the pages call it (default: its name)
    summary: str = ""  # one line: what a model of the task must do (the sidebar's task help, Home, --help)
    length_name: str = "L"  # what TaskConfig.length means for it, as the pages and flags name it
    length_label: str = ""  # the sidebar's label of its length (default 'Sequence length <length_name>')
    # its own settings besides name and length, one record each (attncore.settings.Setting, section "task", default
    # the task's; not imported here: attncore.settings reads this registry): TaskConfig fills one not given with its
    # default and checks its range, a run's key holds them
    fields: tuple = ()
    # operator limits of its own, {cap name: default} (ATTNLAB_<NAME> or [limits] like every cap: lab.jobs.limits)
    caps: dict[str, int] = {}
    # run settings (attncore.settings names) its experiment sets when not given: a link or command naming only the
    # task opens that experiment's run
    defaults: dict[str, Any] = {}
    # run settings that mean nothing for it (attncore.settings names): not compared (lab.factors.factors_for)
    excluded: frozenset[str] = frozenset()
    metrics: tuple[str, ...] = ()  # figures of a run besides the accuracies and losses (RunRecord.figures)
    # {metric: (its short name in a sentence, its title over a table)}, e.g. ("repeat loss", "Repeat loss (held out)")
    metric_labels: dict[str, tuple[str, str]] = {}
    paired: tuple[str, ...] = ()  # of those, the ones a comparison of its runs pairs beside the test loss
    has_page: str | None = None  # the page that is the task's own experiment (app_pages path), if any
    # its length's range, the operator limit (ui.limits) that caps it on a hosted server, and what it counts
    length_range: tuple[int, int] = (1, 64)
    length_cap: str = "max_length"
    length_help: str = ""
    lengths_vary: bool = False  # trains on a range of lengths and is evaluated at other lengths (VaryingLengths)
    patterns: dict[str, str] = {}  # the head-detection patterns scored for it, {name: what it is}
    pattern: str = ""  # of those, the one a head that reads what the task needs matches
    has_sep: bool = False  # its sequences hold SEP (token 20) between the input and the answer: labelled so in charts
    # what evaluation and snapshots cost in training steps' time: (per snapshot, once) (lab.cost_model)
    eval_cost_steps: tuple[int, int] = (0, 0)
    accuracy_how: str = "by greedy generation"  # how its accuracy is measured, for captions
    generates: bool = False  # its answer is generated greedily after a prompt (else read teacher-forced)

    # --- the config -----------------------------------------------------------------------------------------
    @abstractmethod
    def check(self, task: TaskConfig) -> None:
        """Raise ConfigError unless its length and fields are in range together (TaskConfig has filled the fields
        not given from their records and refused another task's, and checks each record's own range after this)."""

    def check_run(self, run: RunConfig) -> None:  # noqa: B027  a default: most tasks run with any model
        """Raise ConfigError for a model or training setting the task cannot run with (e.g. too few positions)."""

    def field_names(self) -> tuple[str, ...]:
        """Its fields' names (TaskConfig's keywords, the run key's task entries besides name and length)."""
        return tuple(s.name for s in self.fields)

    @abstractmethod
    def seq_len(self, task: TaskConfig) -> int:
        """Tokens of a whole sequence."""

    @abstractmethod
    def answer_len(self, task: TaskConfig) -> int:
        """Targets with a loss, the last ones of the sequence."""

    @abstractmethod
    def vocab_size(self, task: TaskConfig) -> int:
        """Tokens the model must embed."""

    def max_len(self, task: TaskConfig, randomized_positions: int | None) -> int:
        """Rows of the position table a run of the task needs."""
        return self.seq_len(task)

    def describe(self, task: TaskConfig) -> str:
        """Its lengths in a run's one-line description, e.g. 'L=6' or 'L=1-6' (a training range)."""
        if task.train_lengths is not None:
            return f"{self.length_name}={task.train_lengths[0]}-{task.train_lengths[1]}"
        return f"{self.length_name}={task.length}"

    # --- data -------------------------------------------------------------------------------------------------
    @abstractmethod
    def sample_batch(self, task: TaskConfig, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """A fresh training batch (B, seq_len) drawn from rng."""

    def train_batch(self, task: TaskConfig, batch_size: int, rng: np.random.Generator):
        """One training step's (batch, lengths or None, the answer targets with a loss per sequence)."""
        return self.sample_batch(task, batch_size, rng), None, self.answer_len(task)

    def batch_rows(self, task: TaskConfig, batch_size: int) -> int:
        """The sequences a training batch of `batch_size` holds (fewer where the task's training set is smaller)."""
        return batch_size

    def test_size(self, task: TaskConfig) -> int | None:
        """The held-out sequences its evaluation scores; None: the lab's N_TEST (attncore.sequences)."""
        return None

    @abstractmethod
    def test_set(self, task: TaskConfig, n: int) -> np.ndarray:
        """The first n of the fixed held-out sequences, the same for every run of the task at these fields."""

    @abstractmethod
    def test_distinct(self, task: TaskConfig) -> np.ndarray:
        """(N_TEST,) True where a held-out sequence's symbols (those a repeat would make ambiguous) all differ."""

    @abstractmethod
    def probe(self, task: TaskConfig) -> np.ndarray:
        """The model input of the task's probe, the sequence whose attention the pages draw."""

    @abstractmethod
    def answer_queries(self, task: TaskConfig) -> np.ndarray:
        """The queries of the probe (or a typed input) that carry the task's answer."""

    @abstractmethod
    def answer_tokens(self, task: TaskConfig, tokens: np.ndarray) -> np.ndarray:
        """(B, A) the correct token at each of answer_queries of inputs tokens (B, T')."""

    def input_count(self, task: TaskConfig) -> int:
        """The symbols a user types for an input (parse_input), a contrast may change."""
        return task.length

    def input_help(self, task: TaskConfig) -> str:
        """What a user types for an input, e.g. '6 symbols from 0 to 19'."""
        return f"{self.input_count(task)} symbols"

    @abstractmethod
    def parse_input(self, text: str, task: TaskConfig) -> np.ndarray:
        """A user's symbols, validated -> the model input; ConfigError('sequence', ...) when they are not."""

    # --- scoring ----------------------------------------------------------------------------------------------
    @abstractmethod
    def evaluate(self, params, run: RunConfig, *, head_mask=None, n: int, positions=None):
        """attncore.evaluate.EvalResult of the weights on the first n held-out sequences."""

    @abstractmethod
    def test_loss(self, params, run: RunConfig, n: int) -> float:
        """The held-out loss (teacher-forced) on the first n held-out sequences."""

    @abstractmethod
    def snapshot_steps(self, steps: int) -> list[int]:
        """The steps a run of `steps` steps takes its training snapshots at."""

    @abstractmethod
    def snapshot_scores(self, params, run: RunConfig) -> tuple[float, float, dict | None]:
        """(token accuracy, sequence accuracy, the task's figures or None) of a training snapshot."""

    @abstractmethod
    def snapshots_how(self, n: int) -> str:
        """Where a run's n training snapshots are taken and what they score, for captions."""

    @abstractmethod
    def evaluation_elements(self, run: RunConfig) -> int:
        """Array elements alive at once while evaluating a run (attncore.memory's estimate)."""

    # --- a task's own figures (defaults: none) -------------------------------------------------------------
    def snapshot_shapes(self, n_layers: int, n_heads: int, n_snapshots: int) -> dict[str, tuple[int, ...]]:
        """name -> shape of the figures snapshot_scores adds (float64, stacked over the snapshots)."""
        return {}

    def snapshot_figures_possible(self, arrays: dict[str, np.ndarray]) -> bool:
        """Whether stored snapshot figures (snapshot_shapes' arrays) are possible numbers."""
        return True

    def final_figures(self, params, run: RunConfig) -> dict | None:
        """The figures of `metrics` for trained weights (in the record's summary), or None without metrics."""
        return None

    def metric_low(self, name: str) -> float:
        """The smallest possible value of one of `metrics` (a loss: 0)."""
        return 0.0

    # --- its words --------------------------------------------------------------------------------------------
    @abstractmethod
    def words(self, task: TaskConfig) -> Words:
        """Its words for the pages at this config (Words)."""

    def shown_name(self) -> str:
        """Its label on the pages (its name when it declares none)."""
        return self.label or self.name

    def __repr__(self) -> str:
        return f"<task {self.name}>"


class VaryingLengths:
    """A capability: the task trains on a range of lengths and is evaluated at other lengths (Ruoss et al.)."""

    lengths_vary = True

    @abstractmethod
    def sample_range_batch(self, task: TaskConfig, batch_size: int, rng: np.random.Generator):
        """A batch of a run trained on a range of lengths: (seqs, lengths); lengths None when rectangular."""

    def train_batch(self, task: TaskConfig, batch_size: int, rng: np.random.Generator):
        """With a range of lengths, a batch of them whose answer targets are its sequences' second half."""
        if task.train_lengths is None:
            return self.sample_batch(task, batch_size, rng), None, self.answer_len(task)
        batch, lengths = self.sample_range_batch(task, batch_size, rng)
        return batch, lengths, (batch.shape[1] - 1) // 2


class Interpretation:
    """A capability: what the interpretation pages ask of a task (Attention's head scores, Patching's contrasts and
    logit lens, Explanations' patterns); every Lab page but Train needs it."""

    @abstractmethod
    def head_scores(self, maps: np.ndarray, tokens: np.ndarray, task: TaskConfig) -> dict[str, np.ndarray]:
        """{pattern: (..., n_layers, H)} for attention maps (..., n_layers, H, T', T') of the input tokens."""

    @abstractmethod
    def test_scores(self, params, run: RunConfig, n_test: int) -> dict[str, np.ndarray]:
        """{pattern: (n_layers, H)} averaged over the first n_test held-out sequences."""

    def lens_inputs(self, task: TaskConfig, n: int) -> np.ndarray:
        """(n, T') model inputs the logit lens averages over: the first n held-out sequences' inputs."""
        return self.test_set(task, n)[:n, :-1]

    def contrast_positions(self, task: TaskConfig) -> range:
        """The input positions a patching contrast may change: the symbols a user types."""
        return range(self.input_count(task))

    def contrast_symbols(self, task: TaskConfig) -> range:
        """The symbols an input position may take: every token the model embeds."""
        return range(self.vocab_size(task))

    @abstractmethod
    def contrast(self, run: RunConfig, clean: np.ndarray, position: int, symbol: int):
        """attncore.interpret.patching.Contrast: `clean` with input `position` set to `symbol`."""


_TASKS: dict[str, Task] = {}
# called after the registry changes: attncore.settings keeps its table of settings to the registered tasks' fields
# (and raises ValueError for a field whose name another setting holds: the registration is then undone)
_LISTENERS: list[Callable[[], None]] = []


def on_change(listener: Callable[[], None]) -> None:
    """Call `listener` after every register and unregister (attncore.settings: the tasks' fields)."""
    _LISTENERS.append(listener)


def _changed() -> None:
    for listener in _LISTENERS:
        listener()


def register(task: Task) -> Task:
    """Add a task to the registry under its name (a name registered twice is an error: tasks are found by name; so
    is a field whose name another setting holds)."""
    if not task.name or not task.name.isidentifier():
        raise ValueError(f"a task's name is a short identifier, got {task.name!r}")
    if task.name in _TASKS and _TASKS[task.name] is not task:
        raise ValueError(f"a task named {task.name!r} is registered already")
    _TASKS[task.name] = task
    try:
        _changed()
    except ValueError:
        del _TASKS[task.name]
        _changed()
        raise
    return task


def unregister(name: str) -> None:
    """Remove a task (a test's own task, after the test)."""
    if _TASKS.pop(name, None) is not None:
        _changed()


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
