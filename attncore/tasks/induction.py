"""The induction task (Olsson et al. 2022, docs/induction.md): T tokens uniform over V with x[k:2k] = x[0:k],
k ~ U{k_min .. T/2} per sequence, the loss on every position. Its sequences, its measurements (the held-out loss on
the repeat and on the first copy, Olsson's in-context learning score, each head's induction and previous-token scores
on the probe set, the phase change of the repeat loss over training) and its Task. Pure functions of weights,
attention maps or curves.

Queries (model positions t, predicting x[t + 1]) of a sequence with repeated prefix length k:
  first copy  0 .. k - 2     the target x[t + 1] is a fresh random token: the loss stays at ln V
  repeat      k .. 2k - 2    the target x[t + 1] = x[t + 1 - k] was seen one copy back: predictable in context only
An induction head at a repeat query t attends to key t - k + 1, the token after the previous occurrence of x[t];
a previous-token head attends from every query t to t - 1.
"""

from __future__ import annotations

import math
import numbers
import time
from dataclasses import asdict, dataclass

import numpy as np

from .. import memory
from .. import task as tasks
from ..checks import ConfigError, check_int
from ..config import RunConfig, TaskConfig, make_run
from ..evaluate import EvalResult, mean_or_nan, next_token_losses
from ..interpret.patching import Contrast
from ..model import attention_weights
from ..sequences import N_TEST, TEST_SEED, all_distinct, parse_symbols
from ..settings import Setting

MIN_INDUCTION_T, MAX_INDUCTION_T = 4, 256  # T: tokens of an induction sequence (the hosted cap may be lower)
MAX_INDUCTION_VOCAB = 1024  # V: tokens drawn uniformly
MIN_K = 2  # the shortest repeated prefix: its repeat holds one query with a target (k .. 2k - 2)
# its own settings beside T (TaskConfig's fields, one record each: the sidebar, the flags and the URL read them)
FIELDS = (
    Setting("vocab", "task", 32, int, "Vocabulary V", metavar="V", low=2, high=MAX_INDUCTION_VOCAB, url="V",
            flag="--V", cap="max_vocab", help="Tokens drawn uniformly.", flag_help="the induction task's vocabulary"),
    Setting("k_min", "task", 4, int, "Shortest repeat k_min", low=MIN_K, url="kmin", flag="--k-min",
            cap="max_induction_length", cap_divisor=2,
            help="The repeated prefix k is drawn from k_min to T/2 per sequence.",
            flag_help="the induction task's shortest repeated prefix"),
)  # fmt: skip

# The induction experiment's defaults (from a prototype that showed the phase change on 4 of 4 seeds):
# T = 32 tokens of V = 32, k ~ U{4 .. 16}; 2 blocks, d = 32, 2 heads, RoPE, pre-LN, lr 1e-3, batch 32, 2,000 steps;
# the token embedding drawn N(0, 1) as the prototype's (PyTorch's nn.Embedding): at the article's 0.1 the blocks'
# outputs drown the tokens' identity in the residual stream and the pair of heads had not formed by 2,000 steps
# (docs/induction.md).
INDUCTION_RUN = dict(length=32, vocab=32, k_min=4, n_layers=2, d_model=32, n_heads=2, position="rope", norm="pre",
                     lr=1e-3, batch_size=32, steps=2000, embed_std=1.0)  # fmt: skip


def make_induction(seed: int = 0, **overrides) -> RunConfig:
    """The induction task's run at INDUCTION_RUN's defaults, any make_run argument overridden (length is T)."""
    kw = INDUCTION_RUN | overrides
    return make_run("induction", kw.pop("length"), seed, **kw)


# --- its sequences ------------------------------------------------------------------------------------------

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


# --- its measurements ---------------------------------------------------------------------------------------

CHUNK = 50  # sequences per forward pass: a fixed split, so a stored number never depends on memory
N_SNAPSHOT_TEST = 200  # a training snapshot scores the first 200 of the 500 held-out sequences
WINDOW = 200  # steps of the window whose largest drop of the repeat loss is the phase change
PHASE_THRESHOLD = 0.5  # nats: a largest window drop at most this is no phase change
SNAPSHOT_EVERY = 25  # steps between an induction run's snapshots (50 past 2,000 steps, ...: at most 80 snapshots)
MAX_SNAPSHOTS = 80
SCORES = ("induction", "previous token")  # the head-detector patterns of this task
PATTERNS = {
    "induction": "the key after the previous occurrence of the query's token, k − 1 back (over the repeat's queries)",
    "previous token": "the key just before the query (over every query but the first)",
}
SNAPSHOT_SCALARS = ("loss", "repeat_loss", "first_loss", "icl_score")  # a snapshot's figures: these, then
SNAPSHOT_HEADS = {"induction_score": "induction", "previous_token_score": "previous token"}  # (n_layers, H) each
FIGURES = ("repeat_loss", "first_loss", "icl_score")  # the final figures, in a run's summary (all 500 sequences)


def snapshot_steps(steps: int) -> list[int]:
    """An induction run's snapshot steps: every SNAPSHOT_EVERY steps (a multiple of it, so that at most
    MAX_SNAPSHOTS are taken), and the last step."""
    every = SNAPSHOT_EVERY * max(1, -(-steps // (SNAPSHOT_EVERY * MAX_SNAPSHOTS)))
    return sorted(set(range(every, steps + 1, every)) | {steps})


def query_masks(ks: np.ndarray, n_inputs: int) -> tuple[np.ndarray, np.ndarray]:
    """(repeat, first) masks (B, n_inputs) of the repeat queries k .. 2k - 2 and the first copy's 0 .. k - 2."""
    t, k = np.arange(n_inputs)[None, :], np.asarray(ks)[:, None]
    return (t >= k) & (t <= 2 * k - 2), t <= k - 2


def token_losses(params, run: RunConfig, seqs: np.ndarray, head_mask=None) -> tuple[np.ndarray, np.ndarray]:
    """(nll, right), each (B, T - 1): the cross-entropy of every next-token target of seqs (B, T) and whether the
    most likely token is it. The model computes in its dtype; the log-softmax is float64, over CHUNK sequences
    at a time on one BLAS thread (the same bits whatever the caller's threads: the numbers are stored)."""
    return next_token_losses(params, run, seqs, CHUNK, head_mask=head_mask)


@dataclass(frozen=True)
class HeldOut:
    """Teacher-forced figures on held-out sequences (the model reads the true tokens)."""

    loss: float  # every position: the training objective on held-out sequences
    repeat_loss: float  # mean over every repeat query's target
    first_loss: float  # mean over every first-copy query's target (ln V for a model that learned nothing wrong)
    token_accuracy: float  # share of repeat targets that are the most likely token
    sequence_accuracy: float  # share of sequences whose every repeat target is
    right: np.ndarray  # (n,) bool, per sequence: every repeat target right

    def losses(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k in ("loss", "repeat_loss", "first_loss")}


def held_out(params, run: RunConfig, n: int = N_TEST, head_mask=None) -> HeldOut:
    """The figures on the first n of the fixed held-out sequences (tasks.induction_test_set)."""
    seqs, ks = (a[:n] for a in induction_test_set(run.task))
    nll, right = token_losses(params, run, seqs, head_mask)
    repeat, first = query_masks(ks, run.task.n_inputs)
    whole = np.array([r[m].all() for r, m in zip(right, repeat, strict=True)])
    return HeldOut(
        loss=float(nll.mean()),
        repeat_loss=float(nll[repeat].mean()),
        first_loss=float(nll[first].mean()),
        token_accuracy=float(right[repeat].mean()),
        sequence_accuracy=float(whole.mean()),
        right=whole,
    )


def icl_positions(T: int) -> tuple[int, int]:
    """(early, late) query positions of the in-context score on the probe (k = T/2): the early query predicts
    the token at k/2 in the first copy, the late one the same token one copy later (for T = 32: queries 7, 23)."""
    k = T // 2
    return k // 2 - 1, k // 2 + k - 1


def icl_score(nll: np.ndarray, T: int) -> float:
    """Olsson et al.'s in-context learning score: the loss at a late token minus the loss at an early one,
    averaged over the probe set's sequences (nll (N, T - 1)); negative when the context helps."""
    early, late = icl_positions(T)
    return float(nll[:, late].mean() - nll[:, early].mean())


def head_scores(maps: np.ndarray, k: int) -> dict[str, np.ndarray]:
    """{pattern: (..., n_layers, H)} for attention maps (..., n_layers, H, T', T') of inputs whose prefix of k
    repeats: the induction score, the mean weight from each repeat query t (k .. 2k - 2) on key t - k + 1, and the
    previous-token score, the mean weight from every query t >= 1 on key t - 1 (as TransformerLens's pattern: a
    previous-token head is one everywhere; query 0 has no previous token). Each row sums to 1, so these are
    TransformerLens's Σ(A ⊙ D) / ΣA over those rows."""
    rows, every = repeat_queries(k), np.arange(1, np.shape(maps)[-1])
    a = np.asarray(maps, dtype=np.float64)
    induction, previous = a[..., rows, rows - k + 1], a[..., every, every - 1]  # (..., n_layers, H, rows)
    return {"induction": induction.mean(axis=-1), "previous token": previous.mean(axis=-1)}


def probe_figures(params, run: RunConfig) -> dict:
    """On the probe set (k = T/2): the in-context score and each head's scores, averaged over its sequences."""
    seqs, ks = induction_probe_set(run.task)
    nll, _ = token_losses(params, run, seqs)
    maps = attention_weights(params, seqs[:, :-1], run.model)  # (n_layers, N, H, T', T')
    scores = head_scores(maps.mean(axis=1), int(ks[0]))  # the mean map of the set: its score is the mean score
    return {"icl_score": icl_score(nll, run.task.length)} | {k: v for k, v in scores.items()}


def measure(params, run: RunConfig, n_test: int = N_SNAPSHOT_TEST) -> dict:
    """A training snapshot's figures: the held-out losses and repeat accuracy on the first n_test sequences, and
    the probe set's in-context score, induction and previous-token scores ((n_layers, H) arrays)."""
    h = held_out(params, run, n_test)
    probe = probe_figures(params, run)
    return h.losses() | {"token_accuracy": h.token_accuracy, "sequence_accuracy": h.sequence_accuracy} | probe


# --- the phase change ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PhaseChange:
    """The largest drop of the repeat loss over WINDOW steps of a run's snapshots, and where it happened."""

    step: int | None  # where the loss has made half of the largest drop; None: no window drops > threshold
    largest_drop: float  # nats: the largest fall of the loss over any window of WINDOW steps
    window_start: int  # the step that window starts at
    threshold: float
    drop_before: float | None  # the fall over the WINDOW steps before `step` (None without a step or a curve)
    drop_earlier: float | None  # ... over the WINDOW steps before those

    def to_dict(self) -> dict:
        return asdict(self)


def phase_change(steps, losses, window: int = WINDOW, threshold: float = PHASE_THRESHOLD) -> PhaseChange:
    """The phase change of a loss curve (steps increasing, the loss at each; read as straight lines between
    them): the largest drop L(s) - L(s + window) over the steps s with s + window on the curve; its step the
    first t >= s where the curve reaches L(s) - drop/2 (from the window's start on). No step when the largest
    drop is at most `threshold` (or the curve is shorter than the window)."""
    steps, losses = np.asarray(steps, dtype=np.float64), np.asarray(losses, dtype=np.float64)
    starts = steps[steps + window <= steps[-1]] if len(steps) else steps
    if not len(starts):
        return PhaseChange(None, 0.0, int(steps[0]) if len(steps) else 0, threshold, None, None)
    drops = np.interp(starts, steps, losses) - np.interp(starts + window, steps, losses)
    i = int(np.argmax(drops))
    start, drop = starts[i], float(drops[i])
    if not drop > threshold:
        return PhaseChange(None, drop, int(start), threshold, None, None)
    half = np.interp(start, steps, losses) - drop / 2
    after = np.flatnonzero((steps > start) & (losses <= half))[0]  # exists: the window's end is below half
    s0, s1, l0, l1 = steps[after - 1], steps[after], losses[after - 1], losses[after]
    at = max(start, s0 + (s1 - s0) * (l0 - half) / (l0 - l1)) if l0 > half else s0
    step = int(round(at))

    def fall(a: float, b: float) -> float | None:
        return float(np.interp(a, steps, losses) - np.interp(b, steps, losses)) if a >= steps[0] else None

    before, earlier = fall(step - window, step), fall(step - 2 * window, step - window)
    return PhaseChange(step, drop, int(start), threshold, before, earlier)


# --- the task -------------------------------------------------------------------------------------------------


class InductionTask(tasks.Interpretation, tasks.Task):
    """T tokens of V whose first k repeat; the loss and the accuracy on every position, scored teacher-forced."""

    name = "induction"
    summary = "T random tokens whose first k repeat, predicted at every position"
    length_name = "T"
    length_range = (MIN_INDUCTION_T, MAX_INDUCTION_T)
    length_cap = "max_induction_length"
    length_help = "Tokens per sequence; k ~ U{k_min .. T/2} of them repeat."
    fields = FIELDS
    defaults = INDUCTION_RUN
    # one T per run (its own length, no range), positions as trained; compared only with runs of its own
    excluded = frozenset({"task", "length", "train_lengths", "mixed_lengths", "randomized_positions"})
    metrics = FIGURES
    metric_labels = {
        "repeat_loss": ("repeat loss", "Repeat loss (held out)"),
        "first_loss": ("first-copy loss", "First-copy loss (held out)"),
        "icl_score": ("in-context score", "In-context learning score (held out)"),
    }
    paired = ("repeat_loss", "first_loss")  # its test loss is over every position, most of them unpredictable
    has_page = "app_pages/induction.py"
    patterns = PATTERNS
    pattern = "induction"
    # a snapshot (held-out losses, the probe set's scores, the norms) costs about 5 steps, the final figures about
    # 20 (measured on the default run: 424 steps' time beside 2,000 steps, 81 snapshots)
    eval_cost_steps = (5, 20)
    accuracy_how = (
        "as the most likely token at each repeat query, the model reading the true tokens (the induction task)"
    )

    # --- the config -------------------------------------------------------------------------------------------
    def check(self, task: TaskConfig) -> None:
        """T, V and k_min in range (k_min at most T/2)."""
        check_int("T", task.length, MIN_INDUCTION_T, MAX_INDUCTION_T)
        check_int("vocab", task.vocab, 2, MAX_INDUCTION_VOCAB)
        half = task.length // 2
        if isinstance(task.k_min, numbers.Integral) and not isinstance(task.k_min, bool) and task.k_min > half:
            raise ConfigError("k_min", f"must be from {MIN_K} to T/2 = {half} (the repeat must fit), got {task.k_min}")
        check_int("k_min", task.k_min, MIN_K, half)
        if task.train_lengths is not None:
            raise ConfigError("train_lengths", "is not a setting of the induction task (one length T)")

    def check_run(self, run: RunConfig) -> None:
        if run.model.position in ("learned", "sinusoidal") and run.model.max_len < run.task.n_inputs:
            raise ConfigError(
                "T",
                f"T={run.task.length} needs {run.task.n_inputs} positions but the position table has "
                f"max_len={run.model.max_len}; allowed T from {MIN_INDUCTION_T} to {run.model.max_len + 1}",
            )
        if run.train.randomized_positions is not None:
            raise ConfigError("randomized_positions", "is not a setting of the induction task")

    def seq_len(self, task: TaskConfig) -> int:
        return task.length

    def answer_len(self, task: TaskConfig) -> int:
        return task.length - 1  # every next-token target

    def vocab_size(self, task: TaskConfig) -> int:
        return task.vocab

    def describe(self, task: TaskConfig) -> str:
        return f"T={task.length}, V={task.vocab}, k={task.k_min}-{task.length // 2}"

    # --- data -------------------------------------------------------------------------------------------------
    def sample_batch(self, task: TaskConfig, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        return induction_sequences(task, batch_size, rng)[0]

    def test_set(self, task: TaskConfig, n: int = N_TEST) -> np.ndarray:
        """(n, T), the first n of induction_test_set's."""
        return induction_test_set(task)[0][:n]

    def test_distinct(self, task: TaskConfig) -> np.ndarray:
        """The first copy x[0:k] all different (a repeated token there makes the token after it ambiguous)."""
        seqs, ks = induction_test_set(task)
        first = np.where(np.arange(task.length) < ks[:, None], seqs, -1 - np.arange(task.length))  # distinct fill
        return all_distinct(first)

    def probe(self, task: TaskConfig) -> np.ndarray:
        """The first of the probe set (T - 1,), repeated random tokens with k = T/2."""
        return induction_probe_set(task)[0][0, :-1]

    def answer_queries(self, task: TaskConfig) -> np.ndarray:
        """The probe's repeat k .. 2k - 2 (k = T/2)."""
        return repeat_queries(task.length // 2)

    def answer_tokens(self, task: TaskConfig, tokens: np.ndarray) -> np.ndarray:
        """The repeat's targets, the first copy's tokens 1 .. k - 1."""
        tokens = np.atleast_2d(np.asarray(tokens))
        return tokens[:, 1 : task.length // 2]

    def input_count(self, task: TaskConfig) -> int:
        return task.length // 2

    def input_help(self, task: TaskConfig) -> str:
        return f"The first copy, T/2 = {task.length // 2} tokens from 0 to {task.vocab - 1} (the input repeats it)"

    def parse_input(self, text: str, task: TaskConfig) -> np.ndarray:
        """Its first copy, T/2 tokens from 0 to V - 1, -> the input (T - 1,) with that copy repeated."""
        n = task.length // 2
        symbols = parse_symbols(text, n, task.vocab, f"T/2 = {n} tokens")
        return induction_input(np.array(symbols), task.length)

    # --- scoring ----------------------------------------------------------------------------------------------
    def evaluate(self, params, run: RunConfig, *, head_mask=None, n: int = N_TEST, positions=None) -> EvalResult:
        """Teacher-forced (the model reads the true tokens): per-token = repeat targets right, per-sequence = every
        one of a sequence's; the subsets split the sequences by whether their first copy's tokens all differ."""
        start = time.perf_counter()
        h = held_out(params, run, n, head_mask)
        distinct = self.test_distinct(run.task)[:n]
        return EvalResult(
            token_accuracy=h.token_accuracy,
            sequence_accuracy=h.sequence_accuracy,
            distinct_accuracy=mean_or_nan(h.right[distinct]),
            n_distinct=int(distinct.sum()),
            repeated_accuracy=mean_or_nan(h.right[~distinct]),
            n_repeated=int((~distinct).sum()),
            eval_seconds=time.perf_counter() - start,
        )

    def test_loss(self, params, run: RunConfig, n: int = N_TEST) -> float:
        """Its training objective on the held-out set: the mean over every position."""
        return held_out(params, run, n).loss

    def snapshot_steps(self, steps: int) -> list[int]:
        return snapshot_steps(steps)

    def snapshot_scores(self, params, run: RunConfig):
        m = measure(params, run)
        figures = {k: m[k] for k in SNAPSHOT_SCALARS} | {k: m[p] for k, p in SNAPSHOT_HEADS.items()}
        return m["token_accuracy"], m["sequence_accuracy"], figures

    def snapshot_shapes(self, n_layers: int, n_heads: int, n_snapshots: int) -> dict[str, tuple[int, ...]]:
        out = {name: (n_snapshots,) for name in SNAPSHOT_SCALARS}
        return out | {name: (n_snapshots, n_layers, n_heads) for name in SNAPSHOT_HEADS}

    def snapshot_figures_possible(self, arrays: dict[str, np.ndarray]) -> bool:
        """Losses >= 0 and head scores from 0 to 1 (NaN where training diverged); the in-context score, a
        difference of losses, any number or NaN."""
        nan_or = [np.isnan(arrays[k]) | (arrays[k] >= 0) for k in ("loss", "repeat_loss", "first_loss")]
        nan_or += [np.isnan(arrays[k]) | ((arrays[k] >= 0) & (arrays[k] <= 1 + 1e-9)) for k in SNAPSHOT_HEADS]
        return all(np.all(a) for a in nan_or) and not np.isinf(arrays["icl_score"]).any()

    def snapshots_how(self, n: int) -> str:
        return (
            f"{n} training snapshots (every {SNAPSHOT_EVERY} steps or more), on the first {N_SNAPSHOT_TEST} of the "
            f"{N_TEST} held-out sequences"
        )

    def words(self, task: TaskConfig) -> tasks.Words:
        k, queries = task.length // 2, self.answer_queries(task)
        return tasks.Words(
            test_set=f"the {N_TEST} fixed held-out sequences",
            measured=f"Accuracy is measured by the most likely token at each repeat query of {N_TEST} fixed held-out "
            "sequences, the model reading the true tokens (the induction task). Per-sequence counts a sequence only "
            "if every repeat token is right.",
            held_out_loss=f"Teacher-forced next-token cross-entropy over every position of the {N_TEST} fixed "
            "held-out sequences (most of them unpredictable: the repeat's loss is the induction page's)",
            loss="Next-token cross-entropy on every position (the induction task's loss), averaged over them, at "
            "every step on a fresh batch (there is no fixed training set to overfit)",
            answer="the repeat's targets",
            reads=f"The repeat's queries {queries[0]}..{queries[-1]} predict the first copy's next token: an "
            f"induction head looks {k - 1} positions back (the token after the previous occurrence of the query's "
            "own), a previous-token head one back.",
            distinct="First copy's tokens all distinct",
            repeated="Some token repeated",
            distinct_why="Per-sequence accuracy split by whether the first copy repeats a token: after a repeated "
            "token, the token that follows its previous occurrence is ambiguous, and an induction head must guess.",
            then="the repeat's tokens all right on {accuracy} of " + f"{N_SNAPSHOT_TEST} held-out sequences",
            ablation="share of sequences whose repeat is all right (teacher-forced)",
            score_rows="the rows each pattern names",
            contrast="(the repeat's query whose token last occurred at {before}: an induction head reads the "
            "changed position {position} from it), both inputs carrying the clean repeat.",
            lens_over="100 held-out sequences of the probe's layout (k = T/2)",
        )

    def final_figures(self, params, run: RunConfig) -> dict:
        """On all the held-out sequences and the probe set."""
        held = held_out(params, run).losses()
        icl = probe_figures(params, run)["icl_score"]
        return {k: held[k] for k in ("repeat_loss", "first_loss")} | {"icl_score": icl}

    def metric_low(self, name: str) -> float:
        return -math.inf if name == "icl_score" else 0.0  # the in-context score is a difference of losses

    def evaluation_elements(self, run: RunConfig) -> int:
        # teacher-forced, CHUNK sequences a forward with every block's cache (and the temporaries beside them:
        # tracemalloc measured up to twice those), the logits' float64 copies
        m, T = run.model, run.task.n_inputs
        return 2 * m.n_layers * memory.forward_elements(m, CHUNK, T, T) + 6 * CHUNK * T * m.vocab_size

    # --- interpretation ---------------------------------------------------------------------------------------
    def head_scores(self, maps: np.ndarray, tokens: np.ndarray, task: TaskConfig) -> dict[str, np.ndarray]:
        """On an input whose first half repeats (the probe's layout, k = T/2)."""
        return head_scores(maps, task.length // 2)

    def test_scores(self, params, run: RunConfig, n_test: int = 100) -> dict[str, np.ndarray]:
        """Each held-out sequence scored at its own repeated prefix k."""
        seqs, ks = (a[:n_test] for a in induction_test_set(run.task))
        maps = attention_weights(params, seqs[:, :-1], run.model)  # (n_layers, N, H, T', T')
        per = [head_scores(maps[:, n], int(k)) for n, k in enumerate(ks)]
        return {name: np.mean([p[name] for p in per], axis=0) for name in PATTERNS}

    def lens_inputs(self, task: TaskConfig, n: int) -> np.ndarray:
        """Its probe set, whose k is the probe's, so that the repeat's queries are the same positions."""
        return induction_probe_set(task, n)[0][:, :-1]

    def contrast_positions(self, task: TaskConfig) -> range:
        """The first copy's 1 .. k - 1 (k = T/2; position 0 is read by no repeat query: query k - 1 cannot know
        that the repeat starts)."""
        return range(1, task.length // 2)

    def contrast_symbols(self, task: TaskConfig) -> range:
        return range(task.vocab)

    def contrast(self, run: RunConfig, clean: np.ndarray, position: int, symbol: int) -> Contrast:
        """The induction input (T - 1,) with first-copy token `position` set to `symbol`; the repeat stays clean."""
        clean = np.asarray(clean, dtype=np.int64)
        k, allowed = run.task.length // 2, self.contrast_positions(run.task)
        check_int("position", position, allowed.start, allowed.stop - 1)
        check_int("symbol", symbol, 0, run.task.vocab - 1)
        if clean[position] == symbol:
            raise ConfigError(
                "symbol", f"must differ from the clean token {int(clean[position])} at position {position}"
            )
        corrupted = clean.copy()
        corrupted[position] = symbol
        return Contrast(clean, corrupted, position, position - 1, k + position - 1, int(clean[position]), int(symbol))


INDUCTION = tasks.register(InductionTask())
