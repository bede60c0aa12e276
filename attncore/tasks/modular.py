"""Modular addition, the grokking task (Power et al. 2022, arXiv:2201.02177; Nanda et al. 2023, arXiv:2301.05217;
docs/grokking.md): the input "a b =" for a, b in 0 .. p - 1, the answer (a + b) mod p predicted at "=". A fixed
random fraction of the p² pairs trains, the rest is held out; training batches come from the training pairs only.
Its measurements (accuracy and loss on both parts, the weight norm, the embedding's Fourier spectrum) and its Task.

Tokens: 0 .. p - 1 the numbers, p the "=" sign (vocabulary p + 1). A sequence is [a, b, =, c] (4 tokens): the model
reads a, b, = and is scored on c, read at "=" (query 2), as Nanda et al.'s one-layer model.
"""

from __future__ import annotations

import functools
import math
import numbers
import time

import numpy as np

from .. import memory
from .. import task as tasks
from .._blas import one_blas_thread
from ..checks import ConfigError, check_int
from ..config import RunConfig, TaskConfig, make_run
from ..evaluate import EvalResult, mean_or_nan
from ..interpret.patching import Contrast
from ..model import attention_weights, forward
from ..sequences import parse_symbols
from ..settings import Setting

MIN_P, MAX_P = 3, 256  # the modulus p (the hosted cap, max_modulus, may be lower)
MAX_MODULUS = 113  # the hosted cap's default, Nanda et al.'s p: p² pairs a view scores at every snapshot
SPLIT_SEED = 20_220_106  # the training split's own seed (Power et al.'s arXiv date): the split is a function of p and
# the fraction only, the same for every run of those fields
FRACTION_DIGITS = 6  # the fraction enters the split's seed rounded to a millionth
# its own setting beside p (TaskConfig's field: the sidebar, the flags and the URL read its record); Nanda et al.'s 30 %
FIELDS = (
    Setting("fraction", "task", 0.3, float, "Training fraction", metavar="F", low=0.0, high=1.0, url="frac",
            flag="--fraction", ui_low=0.05, ui_high=0.95, step=0.05,
            help="The share of the p² pairs (a, b) that trains, a fixed random split; the rest is held out.",
            flag_help="the modular task's share of the p² pairs that trains (0 < F < 1)"),
)  # fmt: skip

# The grokking experiment's defaults: Nanda et al.'s recipe (one layer, 4 heads, d_ff = 4d, AdamW with λ = 1 and
# betas 0.9/0.98, full batch: 65,536 covers every training set up to p = 256) at p = 59, d = 64, lr 3e-3 and 40 % of
# the pairs in place of their p = 113, d = 128, lr 1e-3 and 30 %, so that with weight decay the held-out accuracy
# reaches 99 % and stays there within 2,000 steps, a default view of 12 runs in minutes on 2 cores (docs/grokking.md:
# what was tried; at 30 % and 3,000 steps the runs' late spikes left some seeds ungrokked at the end).
MODULAR_RUN = dict(length=59, fraction=0.4, n_layers=1, d_model=64, n_heads=4, position="learned", norm="pre",
                   lr=3e-3, beta2=0.98, weight_decay=1.0, batch_size=65536, steps=2000, embed_std=0.1)  # fmt: skip


def make_modular(seed: int = 0, **overrides) -> RunConfig:
    """The modular task's run at MODULAR_RUN's defaults, any make_run argument overridden (length is p)."""
    kw = MODULAR_RUN | overrides
    return make_run("modular", kw.pop("length"), seed, **kw)


# --- its pairs -------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def split(p: int, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """(training pair indices, held-out pair indices), each sorted; pair i is (a, b) = divmod(i, p). The training
    part is round(fraction · p²) pairs drawn without replacement from a stream seeded by p and the fraction only."""
    rng = np.random.default_rng([SPLIT_SEED, p, round(fraction * 10**FRACTION_DIGITS)])
    order = rng.permutation(p * p)
    n_train = train_count(p, fraction)
    train, held = np.sort(order[:n_train]), np.sort(order[n_train:])
    train.setflags(write=False)
    held.setflags(write=False)
    return train, held


def train_count(p: int, fraction: float) -> int:
    """The training pairs of a split: round(fraction · p²)."""
    return round(fraction * p * p)


def sequences(p: int, pairs: np.ndarray) -> np.ndarray:
    """(n, 4) sequences [a, b, =, (a + b) mod p] of pair indices (n,)."""
    a, b = np.divmod(np.asarray(pairs, dtype=np.int64), p)
    equals = np.full_like(a, p)
    return np.stack([a, b, equals, (a + b) % p], axis=1)


def training_sequences(task: TaskConfig) -> np.ndarray:
    """The training pairs' sequences (n_train, 4), in pair order."""
    return sequences(task.length, split(task.length, task.fraction)[0])


def held_out_sequences(task: TaskConfig) -> np.ndarray:
    """The held-out pairs' sequences (p² - n_train, 4), in pair order: the task's test set."""
    return sequences(task.length, split(task.length, task.fraction)[1])


def training_batch(task: TaskConfig, batch_size: int, rng: np.random.Generator) -> np.ndarray:
    """A training step's batch: every training pair when batch_size covers them (full batch, as Nanda et al.; it
    draws nothing from rng), else batch_size of them drawn without replacement from rng."""
    train = training_sequences(task)
    if batch_size >= len(train):
        return train
    return train[np.sort(rng.choice(len(train), size=batch_size, replace=False))]


# --- its measurements --------------------------------------------------------------------------------------------

CHUNK = 1024  # sequences per forward pass: a fixed split, so a stored number never depends on memory
KEY_FREQUENCIES = 5  # Nanda et al.'s model of p = 113 uses five key frequencies: the spectrum's top-5 share
SNAPSHOT_EVERY = 25  # steps between snapshots at least (more on long runs: at most MAX_EVERY_SNAPSHOTS of them)
MAX_EVERY_SNAPSHOTS = 120
SNAPSHOT_SCALARS = ("train_accuracy", "train_loss", "test_loss", "weight_norm", "fourier_share", "fourier_frequencies")
FIGURES = ("train_accuracy", "train_loss", "weight_norm", "fourier_share", "fourier_frequencies")  # final figures


def scores(params, run: RunConfig, seqs: np.ndarray) -> tuple[float, float, np.ndarray]:
    """(loss, accuracy, right (n,)) of the answer read at "=" on seqs (n, 4): the cross-entropy in float64, over
    CHUNK sequences at a time on one BLAS thread (the same bits whatever the caller's threads: they are stored)."""
    nll, right = [], []
    with one_blas_thread():
        for start in range(0, len(seqs), CHUNK):
            chunk = seqs[start : start + CHUNK]
            logits, _ = forward(params, chunk[:, :3], run.model, out_from=2)  # (b, 1, V)
            z = logits[:, 0].astype(np.float64)
            z -= z.max(axis=-1, keepdims=True)
            picked = z[np.arange(len(chunk)), chunk[:, 3]]
            nll.append(np.log(np.exp(z).sum(axis=-1)) - picked)
            right.append(logits[:, 0].argmax(axis=-1) == chunk[:, 3])
    nll, right = np.concatenate(nll), np.concatenate(right)
    return float(nll.mean()), float(right.mean()), right


def weight_norm(params) -> float:
    """‖θ‖₂ over every trained tensor (what weight decay shrinks), in float64."""
    return math.sqrt(sum(float(np.sum(np.square(a, dtype=np.float64))) for a in params.values()))


def fourier_spectrum(embedding: np.ndarray) -> np.ndarray:
    """The share of the embedding's power at each frequency k = 1 .. p // 2 over the p numbers (embedding (p, d),
    row a the number a's vector): the discrete Fourier transform over a, |F_k|² summed over the d dimensions, k and
    p - k together (a real signal's two halves), the constant k = 0 left out; the shares sum to 1 (Nanda et al.'s
    key frequencies are the few that carry most of it). A sum of cos(2πka/p) and sin(2πka/p) puts all of it at k."""
    e = np.asarray(embedding, dtype=np.float64)
    p = e.shape[0]
    power = (np.abs(np.fft.fft(e - e.mean(axis=0), axis=0)) ** 2).sum(axis=1)  # (p,)
    k = np.arange(1, p // 2 + 1)
    folded = power[k] + np.where(p - k != k, power[p - k], 0.0)
    total = folded.sum()
    return folded / total if total > 0 else np.full(len(k), 1.0 / len(k))


def top_share(spectrum: np.ndarray, k: int = KEY_FREQUENCIES) -> float:
    """The share of the power in the k strongest frequencies (k / (p // 2) for an even spread)."""
    return float(np.sort(spectrum)[::-1][:k].sum())


def effective_frequencies(spectrum: np.ndarray) -> float:
    """1 / Σ s_k²: how many frequencies the power is spread over (p // 2 when even, 1 at a single frequency)."""
    return float(1.0 / np.sum(np.square(spectrum)))


def embedding_spectrum(params, p: int) -> np.ndarray:
    """fourier_spectrum of the numbers' rows of the token embedding (the "=" row left out)."""
    return fourier_spectrum(params["tok_emb"][:p])


def measure(params, run: RunConfig) -> dict:
    """A snapshot's figures: accuracy and loss on every training and every held-out pair, the weight norm, the
    embedding spectrum's top share and effective count."""
    task = run.task
    train_loss, train_accuracy, _ = scores(params, run, training_sequences(task))
    test_loss, test_accuracy, _ = scores(params, run, held_out_sequences(task))
    spectrum = embedding_spectrum(params, task.length)
    return {
        "train_accuracy": train_accuracy,
        "train_loss": train_loss,
        "test_accuracy": test_accuracy,
        "test_loss": test_loss,
        "weight_norm": weight_norm(params),
        "fourier_share": top_share(spectrum),
        "fourier_frequencies": effective_frequencies(spectrum),
    }


def snapshot_steps(steps: int) -> list[int]:
    """A modular run's snapshot steps: every SNAPSHOT_EVERY steps or a multiple of it (at most MAX_EVERY_SNAPSHOTS
    of them), the lab's 20 log-spaced steps (the early rise of the training accuracy on a log axis), and the last."""
    from ..snapshots import snapshot_steps as log_spaced

    every = SNAPSHOT_EVERY * max(1, -(-steps // (SNAPSHOT_EVERY * MAX_EVERY_SNAPSHOTS)))
    return sorted(set(range(every, steps + 1, every)) | set(log_spaced(steps)) | {steps})


# --- the task ---------------------------------------------------------------------------------------------------


class ModularTask(tasks.Interpretation, tasks.Task):
    """(a + b) mod p from "a b =", a fixed split of the p² pairs; scored at "=" on every held-out pair."""

    name = "modular"
    summary = "(a + b) mod p from 'a b =', trained on a fixed fraction of the p² pairs"
    length_name = "p"
    length_label = "Modulus p"
    length_range = (MIN_P, MAX_P)
    length_cap = "max_modulus"
    caps = {"max_modulus": MAX_MODULUS}  # its own operator limit (lab.jobs.limits reads it like the central ones)
    length_help = "The modulus: numbers 0 to p − 1, p² pairs (a, b)."
    fields = FIELDS
    defaults = MODULAR_RUN
    excluded = frozenset({"task", "length", "train_lengths", "mixed_lengths", "randomized_positions"})
    metrics = FIGURES
    metric_labels = {
        "train_accuracy": ("training accuracy", "Training accuracy (the modular task)"),
        "train_loss": ("training loss", "Training loss (the modular task)"),
        "weight_norm": ("weight norm", "Weight norm ‖θ‖ (the modular task)"),
        "fourier_share": ("top-5 Fourier share", "Embedding's top-5 Fourier share"),
        "fourier_frequencies": ("effective frequencies", "Embedding's effective frequencies"),
    }
    paired = ("train_accuracy", "weight_norm")
    has_page = "app_pages/grokking.py"
    patterns = {
        "first operand": 'the query "=" on the key a',
        "second operand": 'the query "=" on the key b',
    }
    pattern = "first operand"
    # a snapshot scores all p² pairs and measures the norms on a full batch: about 6 steps' CPU time (0.135 s beside
    # 0.022 s a step at the defaults, measured over 300 steps and 31 snapshots); the final figures about 4
    eval_cost_steps = (6, 4)
    accuracy_how = 'as the most likely token at "=" on every held-out pair (the modular task)'

    # --- the config -------------------------------------------------------------------------------------------
    def check(self, task: TaskConfig) -> None:
        """p in range and the fraction in (0, 1) leaving at least one pair on each side."""
        check_int("p", task.length, MIN_P, MAX_P)
        f = task.fraction
        if isinstance(f, bool) or not isinstance(f, numbers.Real) or not 0.0 < f < 1.0:  # also refuses nan
            raise ConfigError("fraction", f"must be a number above 0 and below 1 (the share of the p² pairs that "
                                          f"trains), got {f!r}")  # fmt: skip
        n = train_count(task.length, task.fraction)
        if not 1 <= n < task.length**2:
            raise ConfigError(
                "fraction", f"leaves {n:,} of the {task.length**2:,} pairs for training: at least 1 must train and "
                f"1 be held out, got {task.fraction:g}")  # fmt: skip
        if task.train_lengths is not None:
            raise ConfigError("train_lengths", "is not a setting of the modular task (one modulus p)")

    def check_run(self, run: RunConfig) -> None:
        if run.train.randomized_positions is not None:
            raise ConfigError("randomized_positions", "is not a setting of the modular task")

    def seq_len(self, task: TaskConfig) -> int:
        return 4

    def answer_len(self, task: TaskConfig) -> int:
        return 1  # the answer at "="

    def vocab_size(self, task: TaskConfig) -> int:
        return task.length + 1  # the numbers and "="

    def describe(self, task: TaskConfig) -> str:
        return f"p={task.length}, {task.fraction:g} of the pairs train"

    # --- data -------------------------------------------------------------------------------------------------
    def sample_batch(self, task: TaskConfig, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """A batch of training pairs (training_batch): the norms' fixed batches come from the training pairs too."""
        return training_batch(task, batch_size, rng)

    def train_batch(self, task: TaskConfig, batch_size: int, rng: np.random.Generator):
        return training_batch(task, batch_size, rng), None, 1

    def batch_rows(self, task: TaskConfig, batch_size: int) -> int:
        return min(batch_size, train_count(task.length, task.fraction))

    def test_size(self, task: TaskConfig) -> int:
        return task.length**2 - train_count(task.length, task.fraction)

    def test_set(self, task: TaskConfig, n: int | None = None) -> np.ndarray:
        """Every held-out pair's sequence, in pair order (the first n)."""
        return held_out_sequences(task)[:n]

    def test_distinct(self, task: TaskConfig) -> np.ndarray:
        """a ≠ b (a = b: the pair is its own mirror (b, a), which no other held-out pair can teach)."""
        seqs = held_out_sequences(task)
        return seqs[:, 0] != seqs[:, 1]

    def probe(self, task: TaskConfig) -> np.ndarray:
        """The first held-out pair's input "a b =" (3,)."""
        return held_out_sequences(task)[0, :3]

    def answer_queries(self, task: TaskConfig) -> np.ndarray:
        return np.array([2])

    def answer_tokens(self, task: TaskConfig, tokens: np.ndarray) -> np.ndarray:
        tokens = np.atleast_2d(np.asarray(tokens))
        return (tokens[:, :1] + tokens[:, 1:2]) % task.length

    def input_count(self, task: TaskConfig) -> int:
        return 2

    def input_help(self, task: TaskConfig) -> str:
        return f"a and b, two numbers from 0 to {task.length - 1}"

    def parse_input(self, text: str, task: TaskConfig) -> np.ndarray:
        """ "a b" -> the input [a, b, =] (3,)."""
        a, b = parse_symbols(text, 2, task.length, "two numbers a b")
        return np.array([a, b, task.length], dtype=np.int64)

    # --- scoring ----------------------------------------------------------------------------------------------
    def evaluate(self, params, run: RunConfig, *, head_mask=None, n=None, positions=None) -> EvalResult:
        """On every held-out pair (n: the first n), the answer read at "=": per-token and per-sequence the same;
        the subsets split the pairs by a ≠ b."""
        start = time.perf_counter()
        seqs = held_out_sequences(run.task)[:n]
        right = _right(params, run, seqs, head_mask)
        distinct = seqs[:, 0] != seqs[:, 1]
        accuracy = float(right.mean())
        return EvalResult(
            token_accuracy=accuracy,
            sequence_accuracy=accuracy,
            distinct_accuracy=mean_or_nan(right[distinct]),
            n_distinct=int(distinct.sum()),
            repeated_accuracy=mean_or_nan(right[~distinct]),
            n_repeated=int((~distinct).sum()),
            eval_seconds=time.perf_counter() - start,
        )

    def test_loss(self, params, run: RunConfig, n=None) -> float:
        return scores(params, run, held_out_sequences(run.task)[:n])[0]

    def snapshot_steps(self, steps: int) -> list[int]:
        return snapshot_steps(steps)

    def snapshot_scores(self, params, run: RunConfig):
        m = measure(params, run)
        return m["test_accuracy"], m["test_accuracy"], {k: m[k] for k in SNAPSHOT_SCALARS}

    def snapshot_shapes(self, n_layers: int, n_heads: int, n_snapshots: int) -> dict[str, tuple[int, ...]]:
        return {name: (n_snapshots,) for name in SNAPSHOT_SCALARS}

    def snapshot_figures_possible(self, arrays: dict[str, np.ndarray]) -> bool:
        """Losses and norms >= 0, shares from 0 to 1, the effective count >= 1 (NaN where training diverged)."""
        ok = {k: arrays[k] >= 0 for k in ("train_loss", "test_loss", "weight_norm")}
        ok |= {k: (arrays[k] >= 0) & (arrays[k] <= 1 + 1e-9) for k in ("train_accuracy", "fourier_share")}
        ok["fourier_frequencies"] = arrays["fourier_frequencies"] >= 1 - 1e-9
        return all(np.all(np.isnan(arrays[k]) | fine) for k, fine in ok.items())

    def snapshots_how(self, n: int) -> str:
        return f"{n} training snapshots (every {SNAPSHOT_EVERY} steps or more), on every training and held-out pair"

    def final_figures(self, params, run: RunConfig) -> dict:
        m = measure(params, run)
        return {k: m[k] for k in FIGURES}

    def evaluation_elements(self, run: RunConfig) -> int:
        # CHUNK sequences a forward with its cache (twice, for the temporaries), the logits' float64 copies
        m = run.model
        return 2 * m.n_layers * memory.forward_elements(m, CHUNK, 3, 3) + 6 * CHUNK * m.vocab_size

    def words(self, task: TaskConfig) -> tasks.Words:
        n = self.test_size(task)
        return tasks.Words(
            test_set=f"every one of the {n:,} held-out pairs",
            measured=f'Accuracy is measured as the most likely token at "=" on every one of the {n:,} held-out '
            "pairs (those that never train). Per-token and per-sequence are the same number: one answer per pair.",
            held_out_loss=f'Cross-entropy of the answer at "=" over every one of the {n:,} held-out pairs',
            loss='Cross-entropy of the answer at "=", averaged over the step\'s batch of training pairs (all of them '
            "when the batch covers them): the training set is fixed, and the held-out pairs never train",
            answer='the answer at "="',
            reads='The query "=" must read both numbers, a (key 0) and b (key 1), to answer (a + b) mod p.',
            distinct="a ≠ b",
            repeated="a = b",
            distinct_why="Accuracy split by whether the two numbers differ: a pair (a, a) is its own mirror, which "
            "no other held-out pair can teach.",
            then="held-out accuracy then: {accuracy} on every held-out pair",
            ablation="held-out accuracy",
            score_rows='the query "="',
            contrast='(the query "="), both inputs "a b =" with one number changed.',
            lens_over="the first 100 held-out pairs (all of them when fewer)",
        )

    # --- interpretation ---------------------------------------------------------------------------------------
    def head_scores(self, maps: np.ndarray, tokens: np.ndarray, task: TaskConfig) -> dict[str, np.ndarray]:
        """The weight from the query "=" (2) on a (key 0) and on b (key 1)."""
        a = np.asarray(maps, dtype=np.float64)
        return {"first operand": a[..., 2, 0], "second operand": a[..., 2, 1]}

    def test_scores(self, params, run: RunConfig, n_test: int = 100) -> dict[str, np.ndarray]:
        seqs = held_out_sequences(run.task)[:n_test, :3]
        maps = attention_weights(params, seqs, run.model).mean(axis=1)  # (n_layers, H, 3, 3)
        return self.head_scores(maps, seqs, run.task)

    def lens_inputs(self, task: TaskConfig, n: int) -> np.ndarray:
        return held_out_sequences(task)[:n, :3]

    def contrast_positions(self, task: TaskConfig) -> range:
        return range(2)

    def contrast_symbols(self, task: TaskConfig) -> range:
        return range(task.length)

    def contrast(self, run: RunConfig, clean: np.ndarray, position: int, symbol: int) -> Contrast:
        """The input "a b =" with a (position 0) or b (1) set to `symbol`: the answer at "=" changes with it."""
        p = run.task.length
        clean = np.asarray(clean, dtype=np.int64)
        check_int("position", position, 0, 1)
        check_int("symbol", symbol, 0, p - 1)
        if clean[position] == symbol:
            raise ConfigError(
                "symbol", f"must differ from the clean number {int(clean[position])} at position {position}"
            )
        corrupted = clean.copy()
        corrupted[position] = symbol
        answer = (clean[0] + clean[1]) % p, (corrupted[0] + corrupted[1]) % p
        return Contrast(clean, corrupted, position, 0, 2, int(answer[0]), int(answer[1]))


def _right(params, run: RunConfig, seqs: np.ndarray, head_mask=None) -> np.ndarray:
    """(n,) whether the most likely token at "=" is the answer, CHUNK sequences at a time."""
    right = []
    with one_blas_thread():
        for start in range(0, len(seqs), CHUNK):
            chunk = seqs[start : start + CHUNK]
            logits, _ = forward(params, chunk[:, :3], run.model, out_from=2, head_mask=head_mask)
            right.append(logits[:, 0].argmax(axis=-1) == chunk[:, 3])
    return np.concatenate(right) if right else np.zeros(0, dtype=bool)


MODULAR = tasks.register(ModularTask())
