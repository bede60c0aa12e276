"""Evaluation on the fixed test set: true greedy generation, at the trained length or at other test lengths
(length generalisation), and the held-out test loss (teacher-forced)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace

import numpy as np

from ._blas import one_blas_thread
from .config import MAX_LENGTH, ConfigError, RunConfig, check_int
from .model import forward, generate
from .sequences import N_TEST, TEST_SEED, all_distinct, draw_positions
from .task import task_of


@dataclass(frozen=True)
class EvalResult:
    token_accuracy: float
    sequence_accuracy: float
    distinct_accuracy: float  # per-sequence accuracy where all L symbols differ
    n_distinct: int
    repeated_accuracy: float  # ... where some symbol repeats
    n_repeated: int
    eval_seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


def mean_or_nan(x: np.ndarray) -> float:
    return float(x.mean()) if x.size else float("nan")


def evaluation_positions(length: int, n_max: int):
    """Randomized positions for evaluation at `length` (2L sorted from [0, n_max)), fixed by their own seed."""
    return draw_positions(np.random.default_rng([TEST_SEED, length, 1]), 2 * length, n_max)


def next_token_losses(params, run: RunConfig, seqs: np.ndarray, chunk: int, *, keys=None, head_mask=None):
    """(nll, right), each (B, T - 1): the cross-entropy of every next-token target of seqs (B, T) and whether the most
    likely token is it (the tasks scored on every position: induction, Bigram-Backcopy). The model computes in its
    dtype; the log-softmax is float64, over `chunk` sequences a forward (a fixed split, so a stored number never
    depends on memory) on one BLAS thread (the same bits whatever the caller's threads). keys (T - 1, T - 1) bool
    restricts the keys a query reads (model.forward)."""
    nll, right = [], []
    with one_blas_thread():
        for start in range(0, len(seqs), chunk):
            part = seqs[start : start + chunk]
            logits, _ = forward(params, part[:, :-1], run.model, head_mask=head_mask, keys=keys)  # (b, T - 1, V)
            z = logits.astype(np.float64)
            z -= z.max(axis=-1, keepdims=True)
            targets = part[:, 1:]
            picked = np.take_along_axis(z, targets[..., None], axis=-1)[..., 0]
            nll.append(np.log(np.exp(z).sum(axis=-1)) - picked)
            right.append(logits.argmax(axis=-1) == targets)
    return np.concatenate(nll), np.concatenate(right)


def evaluate(params, run: RunConfig, *, head_mask=None, n: int | None = None, positions=None) -> EvalResult:
    """The accuracy of the weights on the first n (default: all, Task.test_size) of the task's fixed test sequences,
    as the task scores it (Task.evaluate): the article's tasks by greedy generation (`generated`), the induction
    task teacher-forced."""
    task = task_of(run.task)
    n = (task.test_size(run.task) or N_TEST) if n is None else n
    return task.evaluate(params, run, head_mask=head_mask, n=n, positions=positions)


def generated(params, run: RunConfig, *, head_mask=None, n: int = N_TEST, positions=None) -> EvalResult:
    """Feed the model its own greedy outputs (KV-cached) and score the L answer tokens of sequences
    [s1..sL, SEP, a1..aL]; positions (2L,) in place of 0..2L-1 (evaluation on randomized positions, as Ruoss et
    al.'s code)."""
    start = time.perf_counter()
    L = run.task.length
    seqs = task_of(run.task).test_set(run.task, n)
    tokens, _ = generate(params, seqs[:, : L + 1], L, run.model, head_mask=head_mask, positions=positions)
    correct = tokens == seqs[:, L + 1 :]  # (n, L)
    whole = correct.all(axis=1)
    distinct = all_distinct(seqs[:, :L])
    return EvalResult(
        token_accuracy=float(correct.mean()),
        sequence_accuracy=float(whole.mean()),
        distinct_accuracy=mean_or_nan(whole[distinct]),
        n_distinct=int(distinct.sum()),
        repeated_accuracy=mean_or_nan(whole[~distinct]),
        n_repeated=int((~distinct).sum()),
        eval_seconds=time.perf_counter() - start,
    )


TEST_LOSS_CHUNK = 50  # sequences per forward pass: a fixed split, so the stored number never depends on memory


def test_loss(params, run: RunConfig, n: int | None = None) -> float:
    """The test loss: teacher-forced cross-entropy over the L answer tokens of the fixed test set (test_set(run.task),
    the sequences the accuracy is measured on: the same for every run of a task and L), averaged over every answer
    token, at positions 0..2L-1.

    A range-trained run (train_lengths MIN..L) is scored at its L, as its accuracy is, so that it pairs with any
    other run of that task and L on the same sequences. The model computes in its own dtype; the log-softmax and
    the mean are float64 over a fixed split into TEST_LOSS_CHUNK sequences, on one BLAS thread (attncore._blas):
    the same bits whatever the caller's thread count, since the number is stored with the run.

    Each task says what its test loss is (Task.test_loss): the induction task's is its training objective on the
    held-out set, the mean over every position. n: the first n test sequences (default: all, Task.test_size).
    """
    task = task_of(run.task)
    return task.test_loss(params, run, (task.test_size(run.task) or N_TEST) if n is None else n)


def answer_loss(params, run: RunConfig, n: int = N_TEST) -> float:
    """The teacher-forced cross-entropy over the L answer tokens of the first n test sequences [s1..sL, SEP,
    a1..aL] (test_loss of the article's tasks)."""
    L = run.task.length
    seqs = task_of(run.task).test_set(run.task, n)
    nll = []
    with one_blas_thread():
        for start in range(0, n, TEST_LOSS_CHUNK):
            chunk = seqs[start : start + TEST_LOSS_CHUNK]
            logits, _ = forward(params, chunk[:, :-1], run.model, out_from=L)  # (b, L, V): the answer rows
            z = logits.astype(np.float64)
            z -= z.max(axis=-1, keepdims=True)
            targets = chunk[:, L + 1 :]  # (b, L)
            picked = np.take_along_axis(z, targets[..., None], axis=-1)[..., 0]
            nll.append(np.log(np.exp(z).sum(axis=-1)) - picked)  # (b, L)
    return float(np.concatenate(nll).mean())


test_loss.__test__ = False  # a measurement: pytest must not collect it where a test module imports it


# --- length generalisation ---------------------------------------------------

MAX_TEST_LENGTHS = 16  # test lengths asked at once; each from 1 to MAX_LENGTH (64)


@dataclass(frozen=True)
class LengthResult:
    """Greedy generation at one test length L on that L's own fixed test set (N_TEST sequences).

    token_accuracy and sequence_accuracy are None where the model cannot run at that length; `note`
    says why, or warns about a number that was computed (None when there is nothing to say).
    """

    length: int
    token_accuracy: float | None
    sequence_accuracy: float | None
    note: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def check_test_lengths(lengths) -> list[int]:
    """Validated test lengths (a list of 1 to 16 distinct integers, each 1 to 64), in the order given.

    Raises ConfigError naming the field 'test_lengths' and the allowed range.
    """
    if isinstance(lengths, (str, bytes)) or not hasattr(lengths, "__iter__"):
        raise ConfigError("test_lengths", f"must be a list of integers from 1 to {MAX_LENGTH}, got {lengths!r}")
    lengths = list(lengths)
    if not 1 <= len(lengths) <= MAX_TEST_LENGTHS:
        raise ConfigError("test_lengths", f"must hold 1 to {MAX_TEST_LENGTHS} lengths, got {len(lengths)}")
    for length in lengths:
        check_int("test_lengths", length, 1, MAX_LENGTH)
    if len(set(lengths)) != len(lengths):
        raise ConfigError("test_lengths", f"must not repeat a length, got {lengths}")
    return [int(length) for length in lengths]


def run_at_length(run: RunConfig, length: int) -> tuple[RunConfig | None, str | None]:
    """The config that evaluates `run`'s weights at test length `length`, and a note.

    (None, why) when learned positions would need rows past their table. At the trained length the
    run itself. Sinusoidal tables are extended past max_len (their rows do not depend on the table's
    size); RoPE, ALiBi and no positions need no table. Learned rows the training never reached give a note.
    Positions at evaluation are 0..2L-1, also for runs trained on randomized positions.
    """
    if length == run.task.length:
        return run, None
    # the task at that length, its own fields kept
    model, task = run.model, replace(run.task, length=length, train_lengths=None, mixed_lengths=False)
    n_max = run.train.randomized_positions  # trained rows: all N_MAX of them, else those of 0..2L-1
    need, trained = 2 * length, 2 * run.task.length if n_max is None else n_max  # inputs at positions 0..2L-1
    note = None
    if model.position == "learned":
        if need > model.max_len:
            return None, (
                f"learned positions: L={length} needs positions 0-{need - 1} but the table has "
                f"{model.max_len} rows (0-{model.max_len - 1}); a learned table cannot reach past its rows"
            )
        if need > trained:
            note = f"positions {trained}-{need - 1} are rows of the table that training never updated"
    elif model.position == "sinusoidal" and need > model.max_len:
        model = replace(model, max_len=need)
    # evaluation reads positions 0..2L-1 whatever the training drew (randomized positions are a training device)
    return RunConfig(model, replace(run.train, randomized_positions=None), task), note


def evaluate_lengths(params, run: RunConfig, lengths, *, randomized: bool = False) -> list[LengthResult]:
    """Evaluate trained weights at each test length, in the order given (see run_at_length).

    At run.task.length the numbers are exactly those of evaluate(params, run). randomized=True (a run trained on
    randomized positions): each length is evaluated on 2L positions drawn from [0, N_MAX) as in training, one
    fixed draw per length (evaluation_positions); a length with 2L > N_MAX has no number.
    """
    n_max = run.train.randomized_positions
    if randomized and n_max is None:
        raise ConfigError("randomized", "evaluation on randomized positions needs a run trained on them")
    results = []
    for length in check_test_lengths(lengths):
        at, note = run_at_length(run, length)
        positions = None
        if at is not None and randomized:
            if 2 * length > n_max:
                at, note = None, f"randomized positions: L={length} needs {2 * length} positions of N_MAX={n_max}"
            else:
                positions, note = evaluation_positions(length, n_max), None
        if at is None:
            results.append(LengthResult(length, None, None, note))
            continue
        scores = evaluate(params, at, positions=positions)
        results.append(LengthResult(length, scores.token_accuracy, scores.sequence_accuracy, note))
    return results
