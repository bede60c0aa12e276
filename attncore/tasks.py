"""The copy, sort and reverse tasks (SPEC §7): sequences [s1..sL, SEP, a1..aL] over 20 symbols; batches at one
length, at a length drawn from a training range, or mixed lengths right-padded (SPEC §11). The induction task
(SPEC §14): T tokens uniform over V with x[k:2k] = x[0:k], k ~ U{k_min .. T/2} per sequence."""

from __future__ import annotations

import numpy as np

from .config import INDUCTION, N_SYMBOLS, SEP, TaskConfig

TEST_SEED = 20_240_607  # the fixed test set's own seed, independent of any training seed
N_TEST = 500
# SPEC §8's probe for copy L = 6; longer probes continue it with seeded symbols.
PROBE_SYMBOLS = [17, 3, 0, 12, 7, 9] + list(np.random.default_rng(8).integers(0, N_SYMBOLS, 58))


def make_sequences(symbols: np.ndarray, task: str) -> np.ndarray:
    """(B, L) symbols -> (B, 2L+1) sequences with the task's answer after SEP."""
    if task == "copy":
        answer = symbols
    elif task == "sort":
        answer = np.sort(symbols, axis=1)
    elif task == "reverse":
        answer = symbols[:, ::-1]
    else:
        raise ValueError(f"unknown task {task!r}")
    sep = np.full((len(symbols), 1), SEP, dtype=np.int64)
    return np.concatenate([symbols, sep, answer], axis=1).astype(np.int64)


def sample_batch(task: TaskConfig, batch_size: int, rng: np.random.Generator) -> np.ndarray:
    """A fresh batch (B, 2L+1) of uniformly drawn symbols; induction: (B, T) (induction_sequences)."""
    if task.name == INDUCTION:
        return induction_sequences(task, batch_size, rng)[0]
    return make_sequences(rng.integers(0, N_SYMBOLS, (batch_size, task.length)), task.name)


def test_set(task: TaskConfig, n: int = N_TEST) -> np.ndarray:
    """The fixed evaluation sequences (n, 2L+1), the same for every run of a task and L (induction: of T, V and
    k_min; (n, T), the first n of induction_test_set's)."""
    if task.name == INDUCTION:
        return induction_test_set(task)[0][:n]
    return sample_batch(task, n, np.random.default_rng([TEST_SEED, task.length]))


def probe_sequence(task: TaskConfig) -> np.ndarray:
    """The model input (2L,) of the probe: [s1..sL, SEP, a1..a_{L-1}]; induction: the first of the probe set
    (T - 1,), repeated random tokens with k = T/2."""
    if task.name == INDUCTION:
        return induction_probe_set(task)[0][0, :-1]
    symbols = np.array([PROBE_SYMBOLS[: task.length]])
    return make_sequences(symbols, task.name)[0, :-1]


def all_distinct(symbols: np.ndarray) -> np.ndarray:
    """(B,) True where a row of (B, L) symbols has no repeated symbol."""
    s = np.sort(symbols, axis=1)
    return ~np.any(s[:, 1:] == s[:, :-1], axis=1)


def test_distinct(task: TaskConfig) -> np.ndarray:
    """(N_TEST,) True where a test sequence's symbols all differ: the L symbols, or the induction task's first
    copy x[0:k] (a repeated token there makes the token after it ambiguous)."""
    if task.name != INDUCTION:
        return all_distinct(test_set(task)[:, : task.length])
    seqs, ks = induction_test_set(task)
    first = np.where(np.arange(task.length) < ks[:, None], seqs, -1 - np.arange(task.length))  # distinct fill
    return all_distinct(first)


test_distinct.__test__ = False  # a measurement: pytest must not collect it where a test module imports it


# --- the induction task (SPEC §14) ---------------------------------------------

PROBE_SEED = 20_220_308  # the induction probe set's own seed (Olsson et al.'s repeated random tokens)
N_PROBE = 32  # sequences of the probe set: the in-context score and the head scores average over them


def repeat_prefix(tokens: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """(B, T) tokens with x[k:2k] = x[0:k] in each row (ks (B,)); the rest unchanged."""
    t = np.arange(tokens.shape[1])
    ks = np.asarray(ks)[:, None]
    source = np.where((t >= ks) & (t < 2 * ks), t - ks, t)  # (B, T)
    return np.take_along_axis(tokens, source, axis=1)


def induction_sequences(task: TaskConfig, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(sequences (n, T), k (n,)): k ~ U{k_min .. T/2} per sequence, then T tokens uniform over V, then
    x[k:2k] = x[0:k]. A fixed k would be solvable by position alone (a 1-layer model learns it)."""
    T = task.length
    ks = rng.integers(task.k_min, T // 2 + 1, n)
    tokens = rng.integers(0, task.vocab, (n, T))
    return repeat_prefix(tokens, ks).astype(np.int64), ks.astype(np.int64)


def induction_test_set(task: TaskConfig) -> tuple[np.ndarray, np.ndarray]:
    """The fixed held-out sequences (N_TEST, T) and their k (N_TEST,): the same for every run of T, V and k_min."""
    rng = np.random.default_rng([TEST_SEED, task.length, task.vocab, task.k_min])
    return induction_sequences(task, N_TEST, rng)


def induction_probe_set(task: TaskConfig, n: int = N_PROBE) -> tuple[np.ndarray, np.ndarray]:
    """Olsson et al.'s probe: n sequences (n, T) of random tokens whose first half repeats (k = T/2), their k. The
    first copy's tokens all differ (drawn without replacement when V >= T/2), as nearly always in Olsson's 50,000-token
    vocabulary: the token after a previous occurrence is then unambiguous."""
    T, k, V = task.length, task.length // 2, task.vocab
    rng = np.random.default_rng([PROBE_SEED, T, V])
    tokens = rng.integers(0, V, (n, T))
    if V >= k:
        tokens[:, :k] = [rng.permutation(V)[:k] for _ in range(n)]
    ks = np.full(n, k, dtype=np.int64)
    return repeat_prefix(tokens, ks).astype(np.int64), ks


def repeat_queries(k: int) -> np.ndarray:
    """The query positions k .. 2k - 2 of the repeat: their targets x[t + 1] = x[t + 1 - k] are predictable
    in context only (the first copy's queries 0 .. k - 2 stay at ln V)."""
    return np.arange(k, 2 * k - 1)


def induction_input(first_copy: np.ndarray, T: int) -> np.ndarray:
    """The model input (T - 1,) of an induction sequence of T tokens whose first half (k = T/2 tokens) repeats."""
    first_copy = np.asarray(first_copy, dtype=np.int64)
    return np.concatenate([first_copy, first_copy])[: T - 1]


def answer_tokens(task: TaskConfig, tokens: np.ndarray) -> np.ndarray:
    """(B, A) the correct token at each of answer_queries(task) of inputs tokens (B, T'): the task's answer
    (make_sequences), or the induction repeat's targets, the first copy's tokens 1 .. k - 1."""
    tokens = np.atleast_2d(np.asarray(tokens))
    if task.name == INDUCTION:
        return tokens[:, 1 : task.length // 2]
    return make_sequences(tokens[:, : task.length], task.name)[:, task.length + 1 :]


def answer_queries(task: TaskConfig) -> np.ndarray:
    """The queries of the probe (or a typed input) that carry the task's answer: L .. 2L - 1, or the induction
    probe's repeat k .. 2k - 2 (k = T/2)."""
    if task.name == INDUCTION:
        return repeat_queries(task.length // 2)
    return np.arange(task.length, 2 * task.length)


PAD = 0  # the token right padding writes; masked out of attention and the loss, so its value is never read


def pad_sequences(seqs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Sequences (2n+1,) of lengths n -> a right-padded (B, 2·max n + 1) batch and the lengths n (B,)."""
    lengths = np.array([(len(s) - 1) // 2 for s in seqs], dtype=np.int64)
    out = np.full((len(seqs), 2 * int(lengths.max()) + 1), PAD, dtype=np.int64)
    for row, s in zip(out, seqs, strict=True):
        row[: len(s)] = s
    return out, lengths


def sample_range_batch(task: TaskConfig, batch_size: int, rng: np.random.Generator):
    """A training batch of a range-trained task: (seqs, lengths); lengths None when rectangular.

    One length per batch (the default, Ruoss et al.): n ~ U{L_min..L_max} drawn once, then a (B, 2n+1) batch.
    Mixed: each sequence draws its own n; the batch is right-padded to the longest (pad_sequences).
    """
    lo, hi = task.train_lengths
    if not task.mixed_lengths:
        n = int(rng.integers(lo, hi + 1))
        return sample_batch(TaskConfig(task.name, n), batch_size, rng), None
    ns = rng.integers(lo, hi + 1, batch_size)
    symbols = rng.integers(0, N_SYMBOLS, (batch_size, hi))  # row b uses its first ns[b] symbols
    width = 2 * int(ns.max()) + 1
    out = np.full((batch_size, width), PAD, dtype=np.int64)
    for n in np.unique(ns):  # one vectorised make_sequences per length present
        rows = np.flatnonzero(ns == n)
        out[rows, : 2 * n + 1] = make_sequences(symbols[rows, :n], task.name)
    return out, ns.astype(np.int64)


def draw_positions(rng: np.random.Generator, t: int, n_max: int) -> np.ndarray:
    """Randomized positions (Ruoss et al.): t sorted positions drawn without replacement from [0, n_max)."""
    return np.sort(rng.choice(n_max, size=t, replace=False)).astype(np.int64)
