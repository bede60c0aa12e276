"""The article's tasks: sequences [s1..sL, SEP, a1..aL] over 20 symbols, the loss on the L answer tokens;
copy, sort and reverse are one class, SymbolsTask, given the answer's function and the head pattern the answer
needs read. Batches at one length, at a length drawn from a training range, or mixed lengths right-padded
(Ruoss et al. 2023); scored by greedy generation on a fixed test set."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import evaluate as ev
from .. import memory, snapshots
from .. import task as tasks
from ..checks import ConfigError, check_int
from ..config import MAX_LENGTH, N_SYMBOLS, SEP, VOCAB_SIZE, RunConfig, TaskConfig
from ..interpret import heads
from ..interpret.patching import Contrast
from ..model import attention_weights
from ..sequences import N_TEST, PAD, TEST_SEED, all_distinct, parse_symbols

# The article's probe for copy L = 6; longer probes continue it with seeded symbols.
PROBE_SYMBOLS = [17, 3, 0, 12, 7, 9] + list(np.random.default_rng(8).integers(0, N_SYMBOLS, 58))


class SymbolsTask(tasks.VaryingLengths, tasks.Interpretation, tasks.Task):
    """A task over [s1..sL, SEP, a1..aL]: L symbols of 20, SEP, and the answer `answer(symbols)` (B, L) -> (B, L).
    `pattern` names the head pattern of attncore.interpret.heads.PATTERNS a model must read the answer by."""

    length_name = "L"
    length_range = (1, MAX_LENGTH)
    length_help = "Symbols before the separator."
    has_sep = True
    generates = True
    patterns = heads.PATTERNS
    eval_cost_steps = (0, 80)  # the evaluation and the 20 snapshots (with their norms) cost about 80 steps

    def __init__(self, name: str, answer: Callable[[np.ndarray], np.ndarray], pattern: str, summary: str = ""):
        if pattern not in heads.PATTERNS:
            raise ValueError(f"pattern must be one of {', '.join(heads.PATTERNS)}; got {pattern!r}")
        self.name, self.answer, self.pattern, self.summary = name, answer, pattern, summary

    # --- sequences --------------------------------------------------------------------------------------------
    def answer_of(self, symbols: np.ndarray, task: TaskConfig | None) -> np.ndarray:
        """(B, L) the answer to symbols (B, L) under the config `task`: `answer(symbols)`; a task whose answer reads
        a field of its own (Task.fields) overrides this."""
        return self.answer(symbols)

    def make_sequences(self, symbols: np.ndarray, task: TaskConfig | None = None) -> np.ndarray:
        """(B, L) symbols -> (B, 2L+1) sequences with the task's answer (at the config `task`) after SEP."""
        sep = np.full((len(symbols), 1), SEP, dtype=np.int64)
        return np.concatenate([symbols, sep, self.answer_of(symbols, task)], axis=1).astype(np.int64)

    # --- the config -------------------------------------------------------------------------------------------
    def check(self, task: TaskConfig) -> None:
        check_int("length", task.length, 1, MAX_LENGTH)

    def check_run(self, run: RunConfig) -> None:
        L, model = run.task.length, run.model
        if model.position in ("learned", "sinusoidal") and model.max_len < 2 * L:
            raise ConfigError(
                "length",
                f"L={L} needs {2 * L} positions but the position "
                f"table has max_len={model.max_len}; allowed L from 1 to {model.max_len // 2}",
            )
        n_max = run.train.randomized_positions
        if n_max is not None:
            if model.position == "none":
                raise ConfigError(
                    "randomized_positions", "needs a position encoding (learned, sinusoidal, rope, alibi)"
                )
            if n_max < 2 * L:
                raise ConfigError(
                    "randomized_positions",
                    f"N_MAX must be at least 2L = {2 * L} (the inputs' positions), got {n_max}",
                )
            if model.position in ("learned", "sinusoidal") and model.max_len < n_max:
                raise ConfigError("randomized_positions", f"needs a table of N_MAX={n_max} rows (max_len)")

    def seq_len(self, task: TaskConfig) -> int:
        return 2 * task.length + 1

    def answer_len(self, task: TaskConfig) -> int:
        return task.length

    def vocab_size(self, task: TaskConfig) -> int:
        return VOCAB_SIZE

    def max_len(self, task: TaskConfig, randomized_positions: int | None) -> int:
        return self.seq_len(task) if randomized_positions is None else max(self.seq_len(task), randomized_positions)

    # --- data -------------------------------------------------------------------------------------------------
    def sample_batch(self, task: TaskConfig, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """A fresh batch (B, 2L+1) of uniformly drawn symbols."""
        return self.make_sequences(rng.integers(0, N_SYMBOLS, (batch_size, task.length)), task)

    def sample_range_batch(self, task: TaskConfig, batch_size: int, rng: np.random.Generator):
        """A training batch of a range-trained task: (seqs, lengths); lengths None when rectangular.

        One length per batch (the default, Ruoss et al.): n ~ U{L_min..L_max} drawn once, then a (B, 2n+1) batch.
        Mixed: each sequence draws its own n; the batch is right-padded to the longest (pad_sequences).
        """
        lo, hi = task.train_lengths
        if not task.mixed_lengths:
            n = int(rng.integers(lo, hi + 1))
            return self.make_sequences(rng.integers(0, N_SYMBOLS, (batch_size, n)), task), None
        ns = rng.integers(lo, hi + 1, batch_size)
        symbols = rng.integers(0, N_SYMBOLS, (batch_size, hi))  # row b uses its first ns[b] symbols
        width = 2 * int(ns.max()) + 1
        out = np.full((batch_size, width), PAD, dtype=np.int64)
        for n in np.unique(ns):  # one vectorised make_sequences per length present
            rows = np.flatnonzero(ns == n)
            out[rows, : 2 * n + 1] = self.make_sequences(symbols[rows, :n], task)
        return out, ns.astype(np.int64)

    def test_set(self, task: TaskConfig, n: int = N_TEST) -> np.ndarray:
        """The fixed evaluation sequences (n, 2L+1), the same for every run of a task and L."""
        return self.sample_batch(task, n, np.random.default_rng([TEST_SEED, task.length]))

    def test_distinct(self, task: TaskConfig) -> np.ndarray:
        return all_distinct(self.test_set(task)[:, : task.length])

    def probe(self, task: TaskConfig) -> np.ndarray:
        """The model input (2L,) of the probe: [s1..sL, SEP, a1..a_{L-1}]."""
        return self.make_sequences(np.array([PROBE_SYMBOLS[: task.length]]), task)[0, :-1]

    def answer_queries(self, task: TaskConfig) -> np.ndarray:
        return np.arange(task.length, 2 * task.length)

    def answer_tokens(self, task: TaskConfig, tokens: np.ndarray) -> np.ndarray:
        tokens = np.atleast_2d(np.asarray(tokens))
        return self.make_sequences(tokens[:, : task.length], task)[:, task.length + 1 :]

    def input_help(self, task: TaskConfig) -> str:
        return f"{task.length} symbols from 0 to {N_SYMBOLS - 1}"

    def parse_input(self, text: str, task: TaskConfig) -> np.ndarray:
        """A user's symbols, e.g. "17 3 0 12 7 9" -> the model input (2L,) with the task's answer."""
        symbols = parse_symbols(text, task.length, N_SYMBOLS, f"L={task.length} symbols")
        return self.make_sequences(np.array([symbols]), task)[0, :-1]  # the task's own answer (reverse too)

    # --- scoring ----------------------------------------------------------------------------------------------
    def evaluate(self, params, run: RunConfig, *, head_mask=None, n: int = N_TEST, positions=None):
        return ev.generated(params, run, head_mask=head_mask, n=n, positions=positions)

    def test_loss(self, params, run: RunConfig, n: int = N_TEST) -> float:
        return ev.answer_loss(params, run, n)

    def snapshot_steps(self, steps: int) -> list[int]:
        return snapshots.snapshot_steps(steps)

    def snapshot_scores(self, params, run: RunConfig):
        scores = ev.evaluate(params, run, n=snapshots.SNAPSHOT_N_TEST)
        return scores.token_accuracy, scores.sequence_accuracy, None

    def snapshots_how(self, n: int) -> str:
        return (
            f"{n} training snapshots (log-spaced steps), on the first {snapshots.SNAPSHOT_N_TEST} of the {N_TEST} "
            "test sequences"
        )

    def evaluation_elements(self, run: RunConfig) -> int:
        # N_TEST sequences, the prompt (L + 1 positions) in one forward, then one token at a time with a KV cache
        # of every layer; blocks are not kept
        m, L = run.model, run.task.length
        prompt = N_TEST * (L + 1)
        kv = 2 * m.n_layers * N_TEST * 2 * L * m.d_model
        return 2 * memory.forward_elements(m, N_TEST, L + 1, L + 1) + kv + 2 * prompt * m.d_ff

    def words(self, task: TaskConfig) -> tasks.Words:
        L = task.length
        return tasks.Words(
            test_set=f"the {N_TEST} fixed test sequences",
            measured=f"Accuracy is measured by true greedy generation on {N_TEST} fixed test sequences: the model is "
            f"fed its own previous outputs. Per-sequence counts a sequence only if all {L} answer symbols are right.",
            held_out_loss=f"Teacher-forced cross-entropy over the answer tokens of the {N_TEST} fixed test sequences",
            loss="Cross-entropy on the answer tokens only, averaged over them, at every step on a fresh batch (there "
            "is no fixed training set to overfit)",
            answer="the answer",
            reads=f"The answer queries {L}..{2 * L - 1} must read the symbols at 0..{L - 1}: on copy, a head that "
            f"does so looks a constant {L} positions back.",
            distinct=f"All {L} symbols distinct",
            repeated="Some symbol repeated",
            distinct_why="Per-sequence accuracy split by whether the input repeats a symbol: a model without "
            "position information cannot tell two equal symbols apart by where they sit.",
            then="per-sequence accuracy then: {accuracy} on " + f"{snapshots.SNAPSHOT_N_TEST} test sequences",
            ablation="per-sequence accuracy",
            score_rows=f"the answer queries {L}..{2 * L - 1}",
            contrast="(answer token {answer}, the first that differs), both inputs carrying the clean answer prefix "
            "after SEP (teacher forcing).",
            lens_over="100 test sequences",
        )

    # --- interpretation ---------------------------------------------------------------------------------------
    def head_scores(self, maps: np.ndarray, tokens: np.ndarray, task: TaskConfig) -> dict[str, np.ndarray]:
        return heads.scores(maps, tokens, task.length)

    def test_scores(self, params, run: RunConfig, n_test: int = 100) -> dict[str, np.ndarray]:
        seqs = self.test_set(run.task)[:n_test, :-1]  # (N, 2L)
        maps = attention_weights(params, seqs, run.model)  # (n_layers, N, H, T, T)
        per = [heads.scores(maps[:, n], seqs[n], run.task.length) for n in range(len(seqs))]
        return {name: np.mean([p[name] for p in per], axis=0) for name in heads.PATTERNS}

    def lens_inputs(self, task: TaskConfig, n: int) -> np.ndarray:
        return self.test_set(task)[:n, :-1]

    def contrast_positions(self, task: TaskConfig) -> range:
        return range(task.length)

    def contrast_symbols(self, task: TaskConfig) -> range:
        return range(N_SYMBOLS)

    def contrast(self, run: RunConfig, clean: np.ndarray, position: int, symbol: int) -> Contrast:
        """The clean input (2L,) with input symbol `position` set to `symbol`, keeping the clean answer prefix."""
        L = run.task.length
        clean = np.asarray(clean, dtype=np.int64)
        check_int("position", position, 0, L - 1)
        check_int("symbol", symbol, 0, N_SYMBOLS - 1)
        if clean[position] == symbol:
            raise ConfigError(
                "symbol", f"must differ from the clean symbol {int(clean[position])} at position {position}"
            )
        symbols = clean[None, :L].copy()
        symbols[0, position] = symbol
        clean_answer = self.make_sequences(clean[None, :L], run.task)[0, L + 1 :]  # (L,)
        corrupted_answer = self.make_sequences(symbols, run.task)[0, L + 1 :]
        j = int(np.flatnonzero(clean_answer != corrupted_answer)[0])  # a changed symbol always changes the answer
        corrupted = clean.copy()
        corrupted[position] = symbol
        return Contrast(clean, corrupted, position, j, L + j, int(clean_answer[j]), int(corrupted_answer[j]))


COPY = tasks.register(SymbolsTask("copy", lambda s: s, "L back", "repeat the L symbols after SEP"))
SORT = tasks.register(
    SymbolsTask("sort", lambda s: np.sort(s, axis=1), "k-th smallest", "write the L symbols in order after SEP")
)
REVERSE = tasks.register(
    SymbolsTask("reverse", lambda s: s[:, ::-1], "mirrored", "write the L symbols backwards after SEP")
)
