"""The Bigram-Backcopy task (Guo et al. 2024, arXiv:2410.13835; docs/sinks.md): a BOS token, then tokens drawn from
a fixed random bigram table, except that after a trigger token the next token copies the token before the trigger.
Its sequences, its Bayes loss, its measurements of an attention sink (the share of attention non-trigger queries put
on the BOS position, the copy head's attention to the previous token, the value and residual norms at position 0
against the others') and StreamingLLM's sliding-window test (Xiao et al. 2023, arXiv:2309.17453), and its Task.

Tokens: 0 .. V - 1 drawn by the table, the last K of them the triggers; BOS = V (the model embeds V + 1). A sequence
of N tokens is x[0] = BOS, x[1] uniform over the V - K ordinary tokens, then for t >= 1
  x[t + 1] = x[t - 1]                     if x[t] is a trigger (the copy: predictable from the context only)
  x[t + 1] ~ table[x[t]]                  otherwise (the bigram: predictable from x[t] alone)
No two triggers are adjacent (a copied token is never a trigger), so every copy reads an ordinary token.
Queries (model positions t, predicting x[t + 1]): 0, the BOS query; bigram queries t >= 1 with x[t] ordinary; copy
queries t with x[t] a trigger.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .. import memory
from .. import task as tasks
from .._blas import one_blas_thread
from ..checks import ConfigError, check_int
from ..config import RunConfig, TaskConfig, make_run
from ..evaluate import EvalResult, mean_or_nan, next_token_losses
from ..interpret.hooks import run_with_hooks
from ..interpret.patching import Contrast
from ..layers import window_mask
from ..sequences import N_TEST, TEST_SEED, all_distinct, parse_symbols
from ..settings import Setting

MIN_N, MAX_N = 4, 256  # N: tokens of a sequence, BOS included (the hosted cap may be lower)
MAX_BB_VOCAB = 1024
TABLE_SEED = 20_241_017  # the bigram table's own seed: the same table for every run of (V, K)
DIRICHLET = 0.3  # each row of the table ~ Dirichlet(0.3, ..., 0.3) over the V tokens: a few likely successors
# its own settings beside N (TaskConfig's fields, one record each: the sidebar, the flags and the URL read them)
FIELDS = (
    Setting("bigram_vocab", "task", 32, int, "Tokens V", metavar="V", low=3, high=MAX_BB_VOCAB, url="bbV",
            flag="--bigram-vocab", cap="max_vocab",
            help="Tokens of the bigram table, the triggers among them (BOS besides).",
            flag_help="the bigram_backcopy task's tokens, triggers included (BOS besides)"),
    Setting("triggers", "task", 3, int, "Trigger tokens", metavar="K", low=1, url="trig", flag="--triggers",
            cap="max_vocab",  # K < V: bounded by the tokens' own cap
            help="The last K of the V tokens: after one, the next token copies the token before it.",
            flag_help="the bigram_backcopy task's trigger tokens (the last K of the V)"),
)  # fmt: skip

# The sinks experiment's defaults (docs/sinks.md: which setting decides whether a sink forms, measured): N = 32
# tokens of V = 32 with K = 3 triggers; one block, d = 32, one head, learned positions, pre-LN, the embeddings drawn
# with std 1 (nn.Embedding's; at the lab's 0.1 no head sinks), a constant learning rate of 1e-2, batch 32, 2,000
# steps.
BB_RUN = dict(length=32, bigram_vocab=32, triggers=3, n_layers=1, d_model=32, n_heads=1, position="learned",
              norm="pre", embed_std=1.0, lr=1e-2, batch_size=32, steps=2000)  # fmt: skip


def make_backcopy(seed: int = 0, **overrides) -> RunConfig:
    """The task's run at BB_RUN's defaults, any make_run argument overridden (length is N)."""
    kw = BB_RUN | overrides
    return make_run("bigram_backcopy", kw.pop("length"), seed, **kw)


# --- its sequences ------------------------------------------------------------------------------------------


def bos(task: TaskConfig) -> int:
    return task.bigram_vocab


def trigger_tokens(task: TaskConfig) -> np.ndarray:
    """The triggers, the last K of the V tokens."""
    return np.arange(task.bigram_vocab - task.triggers, task.bigram_vocab)


@lru_cache(maxsize=16)
def _table(vocab: int, triggers: int) -> np.ndarray:
    rng = np.random.default_rng([TABLE_SEED, vocab, triggers])
    table = rng.dirichlet(np.full(vocab, DIRICHLET), size=vocab - triggers)  # (V - K, V): an ordinary token's row
    table.flags.writeable = False
    return table


def bigram_table(task: TaskConfig) -> np.ndarray:
    """(V - K, V): row a is the distribution of the token after ordinary token a; fixed by (V, K) alone."""
    return _table(task.bigram_vocab, task.triggers)


def sequences(task: TaskConfig, n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, N) sequences of the task drawn from rng (the table fixed, the draws rng's)."""
    V, K, N = task.bigram_vocab, task.triggers, task.length
    cdf = np.cumsum(bigram_table(task), axis=1)  # (V - K, V)
    cdf[:, -1] = 1.0
    out = np.empty((n, N), dtype=np.int64)
    out[:, 0] = V
    out[:, 1] = rng.integers(0, V - K, n)
    u = rng.random((n, max(N - 2, 0)))  # one uniform per later token, drawn whether or not it is used
    rows = np.arange(n)
    for t in range(1, N - 1):
        current = out[:, t]
        trigger = current >= V - K
        drawn = (u[:, t - 1, None] > cdf[np.where(trigger, 0, current)]).sum(axis=1)
        out[rows, t + 1] = np.where(trigger, out[:, t - 1], np.minimum(drawn, V - 1))
    return out


def test_sequences(task: TaskConfig) -> np.ndarray:
    """The fixed held-out sequences (N_TEST, N): the same for every run of N, V and K, never drawn in training
    (their own seed)."""
    return sequences(task, N_TEST, np.random.default_rng([TEST_SEED, task.length, task.bigram_vocab, task.triggers]))


test_sequences.__test__ = False


def query_kinds(task: TaskConfig, seqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bigram, copy) masks (B, N - 1) of the queries: bigram t >= 1 with x[t] ordinary, copy x[t] a trigger."""
    x = seqs[:, :-1]
    copy = x >= task.bigram_vocab - task.triggers
    copy &= x != bos(task)
    bigram = ~copy
    bigram[:, 0] = False
    return bigram, copy


# --- its Bayes loss ------------------------------------------------------------------------------------------


def entropies(task: TaskConfig) -> np.ndarray:
    """(V - K,) the entropy (nats) of each ordinary token's row of the table."""
    p = bigram_table(task)
    return -(p * np.log(np.where(p > 0, p, 1.0))).sum(axis=1)


def pair_marginals(task: TaskConfig) -> np.ndarray:
    """(N - 1, V + 1, V + 1): P(x[t - 1] = a, x[t] = b) for t = 1 .. N - 1 under the task's process (a = V: BOS)."""
    V, K, N = task.bigram_vocab, task.triggers, task.length
    p = bigram_table(task)
    joint = np.zeros((V + 1, V + 1))
    joint[V, : V - K] = 1.0 / (V - K)
    out = [joint]
    for _ in range(2, N):
        nxt = np.zeros_like(joint)
        nxt[: V - K, :V] = joint[:, : V - K].sum(axis=0)[:, None] * p  # an ordinary b: the table's row
        for b in range(V - K, V):  # a trigger b: the token before it, a, comes next
            nxt[b, :] += joint[:, b]
        joint = nxt
        out.append(joint)
    return np.array(out)


def bayes_by_query(task: TaskConfig) -> tuple[np.ndarray, np.ndarray]:
    """(expected loss, P(bigram query)) per query t = 0 .. N - 2 of the best predictor, which knows the table: the
    BOS query ln(V - K); a bigram query the entropy of x[t]'s row; a copy query 0. Exact, from pair_marginals."""
    V, K = task.bigram_vocab, task.triggers
    marginal = pair_marginals(task).sum(axis=1)  # (N - 1, V + 1): P(x[t] = b), t = 1 .. N - 1
    h = marginal[:-1, : V - K] @ entropies(task)  # queries 1 .. N - 2
    ordinary = marginal[:-1, : V - K].sum(axis=1)
    return np.concatenate([[np.log(V - K)], h]), np.concatenate([[0.0], ordinary])


def bayes_loss(task: TaskConfig, queries: np.ndarray | None = None) -> float:
    """The best predictor's mean loss over the queries (default every one, 0 .. N - 2, as the training loss): the
    mean over t of E[loss at t]."""
    h, _ = bayes_by_query(task)
    return float(h.mean() if queries is None else h[np.asarray(queries)].mean())


def bayes_bigram_loss(task: TaskConfig) -> float:
    """The table's mean conditional entropy over the bigram queries: Σ_t E[H(x[t]) 1{x[t] ordinary}] / Σ_t
    P(x[t] ordinary), t = 1 .. N - 2 (the copy queries' Bayes loss is 0)."""
    h, ordinary = bayes_by_query(task)
    return float(h[1:].sum() / ordinary[1:].sum())


# --- its measurements ---------------------------------------------------------------------------------------

CHUNK = 50  # sequences per forward: a fixed split, so a stored number never depends on memory
N_SNAPSHOT_TEST = 100  # a snapshot measures the first 100 held-out sequences
SNAPSHOT_EVERY = 50
MAX_SNAPSHOTS = 60
HEAD_FIGURES = ("sink_share", "copy_attention", "value_norm_first", "value_norm_rest")  # (n_layers, H) each
RESID_FIGURES = ("resid_norm_first", "resid_norm_rest")  # (n_layers + 1,): entering each block, and after the last
SCALARS = ("loss", "bigram_loss", "copy_loss")
FIGURES = ("bigram_loss", "copy_loss")  # the final figures in a run's summary (all 500 held-out sequences)
PATTERNS = {
    "first token": "key 0 (BOS), from every bigram query (a token that is not a trigger)",
    "previous token": "the key just before the query, from every copy query (a trigger)",
}


def snapshot_steps(steps: int) -> list[int]:
    every = SNAPSHOT_EVERY * max(1, -(-steps // (SNAPSHOT_EVERY * MAX_SNAPSHOTS)))
    return sorted(set(range(every, steps + 1, every)) | {steps})


def token_losses(params, run: RunConfig, seqs: np.ndarray, keys=None, head_mask=None) -> tuple[np.ndarray, np.ndarray]:
    """(nll, right), each (B, N - 1): every target's cross-entropy (float64 log-softmax) and whether it is the most
    likely token; keys (N - 1, N - 1) bool restricts the keys (a sliding window). CHUNK sequences a forward, one
    BLAS thread: the same bits whatever the caller's threads."""
    return next_token_losses(params, run, seqs, CHUNK, keys=keys, head_mask=head_mask)


@dataclass(frozen=True)
class HeldOut:
    loss: float  # every query
    bigram_loss: float
    copy_loss: float
    token_accuracy: float  # copy queries whose target is the most likely token
    sequence_accuracy: float  # sequences whose every copy query is
    right: np.ndarray  # (n,) per sequence


def held_out(params, run: RunConfig, n: int = N_TEST, head_mask=None) -> HeldOut:
    seqs = test_sequences(run.task)[:n]
    nll, right = token_losses(params, run, seqs, head_mask=head_mask)
    bigram, copy = query_kinds(run.task, seqs)
    whole = np.array([r[c].all() for r, c in zip(right, copy, strict=True)])
    return HeldOut(float(nll.mean()), float(nll[bigram].mean()), float(nll[copy].mean()),
                   float(right[copy].mean()), float(whole.mean()), whole)  # fmt: skip


def uniform_share(task: TaskConfig, n: int = N_SNAPSHOT_TEST) -> float:
    """A uniform causal head's share on key 0 over the bigram queries of the first n held-out sequences: the mean
    of 1/(t + 1)."""
    bigram, _ = query_kinds(task, test_sequences(task)[:n])
    t = np.broadcast_to(np.arange(bigram.shape[1]), bigram.shape)
    return float((1.0 / (t[bigram] + 1)).mean())


def sink_figures(params, run: RunConfig, n: int = N_SNAPSHOT_TEST) -> dict[str, np.ndarray]:
    """On the first n held-out sequences: per layer and head the mean weight on key 0 over the bigram queries
    (sink_share), on key t - 1 over the copy queries (copy_attention), the mean norm of the value at position 0 and
    at the others; per residual stream (entering each block, then leaving the last) the mean norm at 0 and at
    the others."""
    seqs = test_sequences(run.task)[:n]
    bigram, copy = query_kinds(run.task, seqs)
    x = seqs[:, :-1]
    T, n_layers = x.shape[1], run.model.n_layers
    sums = {k: 0.0 for k in (*HEAD_FIGURES, *RESID_FIGURES)}
    rows = np.arange(1, T)
    with one_blas_thread():
        for start in range(0, len(x), CHUNK):
            chunk, b, c = x[start : start + CHUNK], bigram[start : start + CHUNK], copy[start : start + CHUNK]
            _, acts, cache = run_with_hooks(params, chunk, run.model, keep_caches=True)
            share, prev, v_first, v_rest = [], [], [], []
            for i in range(n_layers):
                a = acts[f"blocks.{i}.attn.pattern"].astype(np.float64)  # (B, H, T, T)
                share.append((a[:, :, :, 0] * b[:, None]).sum(axis=(0, 2)))
                prev.append((a[:, :, rows, rows - 1] * c[:, None, 1:]).sum(axis=(0, 2)))
                v = np.linalg.norm(cache.blocks[i].attn.v.astype(np.float64), axis=-1)  # (B, H, T)
                v_first.append(v[:, :, 0].sum(axis=0))
                v_rest.append(v[:, :, 1:].mean(axis=2).sum(axis=0))
            streams = [acts[f"blocks.{i}.resid_pre"] for i in range(n_layers)] + [acts[f"blocks.{n_layers - 1}."
                                                                                      "resid_post"]]  # fmt: skip
            r = np.array([np.linalg.norm(s.astype(np.float64), axis=-1) for s in streams])  # (n_layers + 1, B, T)
            for key, value in zip(HEAD_FIGURES, (share, prev, v_first, v_rest), strict=True):
                sums[key] = sums[key] + np.array(value)
            sums["resid_norm_first"] = sums["resid_norm_first"] + r[:, :, 0].sum(axis=1)
            sums["resid_norm_rest"] = sums["resid_norm_rest"] + r[:, :, 1:].mean(axis=2).sum(axis=1)
    n_bigram, n_copy = max(int(bigram.sum()), 1), max(int(copy.sum()), 1)
    return {
        "sink_share": sums["sink_share"] / n_bigram,
        "copy_attention": sums["copy_attention"] / n_copy,
        "value_norm_first": sums["value_norm_first"] / len(x),
        "value_norm_rest": sums["value_norm_rest"] / len(x),
        "resid_norm_first": sums["resid_norm_first"] / len(x),
        "resid_norm_rest": sums["resid_norm_rest"] / len(x),
    }


@dataclass(frozen=True)
class WindowLosses:
    """StreamingLLM's test on the held-out set, over the queries t >= W + 1 (whose window of W + 1 keys no longer
    holds position 0): the loss under full attention, a window of W keys, a window of W + 1 keys, and a window of W
    keys with one early key kept beside it (key 0, the sink; key 1 or key 2, the controls), each of the last three
    a cache of W + 1 keys, as StreamingLLM compares them (Xiao et al. 2023, arXiv:2309.17453)."""

    window: int
    full_loss: float
    window_loss: float  # W keys
    window_wide_loss: float  # W + 1 keys: the same cache as the window + sink
    window_sink_loss: float  # W keys and key 0
    window_key1_loss: float  # W keys and key 1 (a control: an early key that is not the sink)
    window_key2_loss: float  # W keys and key 2
    bayes_loss: float  # the best predictor's loss over the same queries
    queries: int  # how many query positions (per sequence) the losses average over


KEPT = {"window_sink_loss": 0, "window_key1_loss": 1, "window_key2_loss": 2}  # the early key each condition keeps


def check_window(task: TaskConfig, window: int) -> None:
    """ConfigError unless 1 <= W <= N - 3: a window of W + 1 keys that leaves some query without position 0."""
    check_int("window", window, 1, task.length - 3)


def kept_key_mask(t: int, window: int, key: int) -> np.ndarray:
    """(T, T) bool: a sliding window of `window` keys with `key` kept beside it (causality is the model's)."""
    mask = window_mask(t, window)
    mask[:, key] = True
    return mask


def window_losses(params, run: RunConfig, window: int, n: int = N_TEST) -> WindowLosses:
    check_window(run.task, window)
    seqs = test_sequences(run.task)[:n]
    T = seqs.shape[1] - 1
    q = np.arange(window + 1, T)

    def loss(keys) -> float:
        return float(token_losses(params, run, seqs, keys=keys)[0][:, q].mean())

    kept = {name: loss(kept_key_mask(T, window, key)) for name, key in KEPT.items()}
    return WindowLosses(window, loss(None), loss(window_mask(T, window)), loss(window_mask(T, window + 1)),
                        **kept, bayes_loss=bayes_loss(run.task, q), queries=len(q))  # fmt: skip


GU_EPSILON = 0.3  # Gu et al. 2024 (arXiv:2410.10781): a head whose mean attention on key 0 exceeds it is a sink head


@dataclass(frozen=True)
class SinkImportance:
    """Gu et al. 2024's measure of each head's sink (arXiv:2410.10781): per held-out sequence the head's mean
    attention on key 0 over every query (the BOS query included), then per head the mean over the sequences
    (importance) and the share of sequences above ε (rate); the sink rate is the share over every (sequence, head)."""

    importance: np.ndarray  # (n_layers, H)
    rate: np.ndarray  # (n_layers, H)
    epsilon: float

    @property
    def sink_rate(self) -> float:
        return float(self.rate.mean())


def sink_importance(params, run: RunConfig, n: int = N_TEST, epsilon: float = GU_EPSILON) -> SinkImportance:
    x = test_sequences(run.task)[:n, :-1]
    per_seq = []  # (n_layers, B, H) a chunk
    with one_blas_thread():
        for start in range(0, len(x), CHUNK):
            _, acts = run_with_hooks(params, x[start : start + CHUNK], run.model)
            per_seq.append([acts[f"blocks.{i}.attn.pattern"][:, :, :, 0].astype(np.float64).mean(axis=2)
                            for i in range(run.model.n_layers)])  # fmt: skip
    a = np.concatenate([np.array(p) for p in per_seq], axis=1)  # (n_layers, n, H)
    return SinkImportance(a.mean(axis=1), (a > epsilon).mean(axis=1), epsilon)


def measure(params, run: RunConfig, n: int = N_SNAPSHOT_TEST) -> dict:
    h = held_out(params, run, n)
    out = {"loss": h.loss, "bigram_loss": h.bigram_loss, "copy_loss": h.copy_loss}
    return out | {"token_accuracy": h.token_accuracy, "sequence_accuracy": h.sequence_accuracy}


# --- the task -------------------------------------------------------------------------------------------------


class BigramBackcopyTask(tasks.Interpretation, tasks.Task):
    """BOS, then a bigram chain whose triggers make the next token copy the one before them; the loss on every
    position, scored teacher-forced."""

    name = "bigram_backcopy"
    label = "Bigram-Backcopy"
    summary = "a bigram chain after BOS; after a trigger token, the token before it comes again"
    length_name = "N"
    length_range = (MIN_N, MAX_N)
    length_cap = "max_induction_length"
    length_help = "Tokens per sequence, BOS included."
    fields = FIELDS
    defaults = BB_RUN
    excluded = frozenset({"task", "length", "train_lengths", "mixed_lengths", "randomized_positions"})
    metrics = FIGURES
    paired = FIGURES
    metric_labels = {
        "bigram_loss": ("bigram loss", "Bigram queries' loss (held out)"),
        "copy_loss": ("copy loss", "Copy queries' loss (held out)"),
    }
    has_page = "app_pages/sinks.py"
    patterns = PATTERNS
    pattern = "previous token"
    eval_cost_steps = (8, 15)  # a snapshot (held-out losses, sink figures, norms) about 8 steps, the final figures 15
    accuracy_how = "as the most likely token at each copy query (after a trigger), the model reading the true tokens"

    # --- the config -------------------------------------------------------------------------------------------
    def check(self, task: TaskConfig) -> None:
        check_int("N", task.length, MIN_N, MAX_N)
        check_int("bigram_vocab", task.bigram_vocab, 3, MAX_BB_VOCAB)
        if (
            isinstance(task.triggers, int)
            and not isinstance(task.triggers, bool)
            and task.triggers >= task.bigram_vocab - 1
        ):
            raise ConfigError("triggers", f"must be from 1 to V - 2 = {task.bigram_vocab - 2} (two ordinary tokens "
                              f"at least), got {task.triggers}")  # fmt: skip
        check_int("triggers", task.triggers, 1, task.bigram_vocab - 2)
        if task.train_lengths is not None:
            raise ConfigError("train_lengths", "is not a setting of the bigram_backcopy task (one length N)")

    def check_run(self, run: RunConfig) -> None:
        if run.model.position in ("learned", "sinusoidal") and run.model.max_len < run.task.n_inputs:
            raise ConfigError("N", f"N={run.task.length} needs {run.task.n_inputs} positions but the position "
                              f"table has max_len={run.model.max_len}")  # fmt: skip
        if run.train.randomized_positions is not None:
            raise ConfigError("randomized_positions", "is not a setting of the bigram_backcopy task")

    def seq_len(self, task: TaskConfig) -> int:
        return task.length

    def answer_len(self, task: TaskConfig) -> int:
        return task.length - 1

    def vocab_size(self, task: TaskConfig) -> int:
        return task.bigram_vocab + 1  # BOS besides

    def describe(self, task: TaskConfig) -> str:
        return f"N={task.length}, V={task.bigram_vocab}, K={task.triggers}"

    # --- data -------------------------------------------------------------------------------------------------
    def sample_batch(self, task: TaskConfig, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        return sequences(task, batch_size, rng)

    def test_set(self, task: TaskConfig, n: int = N_TEST) -> np.ndarray:
        return test_sequences(task)[:n]

    def test_distinct(self, task: TaskConfig) -> np.ndarray:
        """The tokens a sequence's triggers copy all differ (a sequence without a trigger counts)."""
        seqs = test_sequences(task)
        _, copy = query_kinds(task, seqs)
        copied = np.where(copy[:, 1:], seqs[:, :-2], -1 - np.arange(seqs.shape[1] - 2))  # distinct fill elsewhere
        return all_distinct(copied)

    def _probe_sequence(self, task: TaskConfig) -> np.ndarray:
        """The first held-out sequence with at least two copy queries (else the first)."""
        seqs = test_sequences(task)
        _, copy = query_kinds(task, seqs)
        found = np.flatnonzero(copy.sum(axis=1) >= 2)
        return seqs[found[0] if len(found) else 0]

    def probe(self, task: TaskConfig) -> np.ndarray:
        return self._probe_sequence(task)[:-1]

    def answer_queries(self, task: TaskConfig) -> np.ndarray:
        """The probe's copy queries."""
        probe = self._probe_sequence(task)[None]
        return np.flatnonzero(query_kinds(task, probe)[1][0])

    def answer_tokens(self, task: TaskConfig, tokens: np.ndarray) -> np.ndarray:
        """The token before each of answer_queries' triggers (what the copy brings back)."""
        tokens = np.atleast_2d(np.asarray(tokens))
        return tokens[:, self.answer_queries(task) - 1]

    def input_count(self, task: TaskConfig) -> int:
        return task.length - 2

    def input_help(self, task: TaskConfig) -> str:
        V, K = task.bigram_vocab, task.triggers
        return f"N − 2 = {task.length - 2} tokens from 0 to {V - 1} after BOS (triggers {V - K} to {V - 1})"

    def parse_input(self, text: str, task: TaskConfig) -> np.ndarray:
        n = task.length - 2
        symbols = parse_symbols(text, n, task.bigram_vocab, f"N − 2 = {n} tokens")
        return np.array([bos(task), *symbols], dtype=np.int64)

    # --- scoring ----------------------------------------------------------------------------------------------
    def evaluate(self, params, run: RunConfig, *, head_mask=None, n: int = N_TEST, positions=None) -> EvalResult:
        """Teacher-forced: per-token = copy targets right, per-sequence = all of a sequence's."""
        start = time.perf_counter()
        h = held_out(params, run, n, head_mask)
        distinct = self.test_distinct(run.task)[:n]
        return EvalResult(h.token_accuracy, h.sequence_accuracy, mean_or_nan(h.right[distinct]), int(distinct.sum()),
                          mean_or_nan(h.right[~distinct]), int((~distinct).sum()),
                          time.perf_counter() - start)  # fmt: skip

    def test_loss(self, params, run: RunConfig, n: int = N_TEST) -> float:
        return held_out(params, run, n).loss

    def snapshot_steps(self, steps: int) -> list[int]:
        return snapshot_steps(steps)

    def snapshot_scores(self, params, run: RunConfig):
        m = measure(params, run)
        figures = {k: m[k] for k in SCALARS} | sink_figures(params, run)
        return m["token_accuracy"], m["sequence_accuracy"], figures

    def snapshot_shapes(self, n_layers: int, n_heads: int, n_snapshots: int) -> dict[str, tuple[int, ...]]:
        out = {name: (n_snapshots,) for name in SCALARS}
        out |= {name: (n_snapshots, n_layers, n_heads) for name in HEAD_FIGURES}
        return out | {name: (n_snapshots, n_layers + 1) for name in RESID_FIGURES}

    def snapshot_figures_possible(self, arrays: dict[str, np.ndarray]) -> bool:
        """Losses and norms >= 0, attention shares from 0 to 1 (NaN where training diverged)."""
        ok = [np.isnan(arrays[k]) | (arrays[k] >= 0) for k in (*SCALARS, *HEAD_FIGURES, *RESID_FIGURES)]
        ok += [np.isnan(arrays[k]) | (arrays[k] <= 1 + 1e-9) for k in ("sink_share", "copy_attention")]
        return all(np.all(a) for a in ok)

    def snapshots_how(self, n: int) -> str:
        return (
            f"{n} training snapshots (every {SNAPSHOT_EVERY} steps or more), on the first {N_SNAPSHOT_TEST} of the "
            f"{N_TEST} held-out sequences"
        )

    def words(self, task: TaskConfig) -> tasks.Words:
        return tasks.Words(
            test_set=f"the {N_TEST} fixed held-out sequences",
            measured=f"Accuracy is measured by the most likely token at each copy query (after a trigger) of "
            f"{N_TEST} fixed held-out sequences, the model reading the true tokens. Per-sequence counts a sequence "
            "only if every copy in it is right.",
            held_out_loss=f"Teacher-forced next-token cross-entropy over every position of the {N_TEST} fixed "
            "held-out sequences (bigram and copy queries together; the Sinks page splits them)",
            loss="Next-token cross-entropy on every position, averaged over them, at every step on a fresh batch "
            "(there is no fixed training set to overfit)",
            answer="the copies' targets",
            reads="Each copy query (a trigger) must read the token just before it: a previous-token head; the other "
            "queries predict from their own token alone, and may put their weight on BOS (an attention sink).",
            distinct="Copied tokens all distinct",
            repeated="Some copied token repeated",
            distinct_why="Per-sequence accuracy split by whether the tokens a sequence's triggers copy all differ.",
            then="every copy right on {accuracy} of " + f"{N_SNAPSHOT_TEST} held-out sequences",
            ablation="share of sequences whose copies are all right (teacher-forced)",
            score_rows="the rows each pattern names",
            contrast="(the trigger's query, which copies the changed position {position}), both inputs the same "
            "elsewhere.",
            lens_over="100 held-out sequences",
        )

    def final_figures(self, params, run: RunConfig) -> dict:
        h = held_out(params, run)
        return {"bigram_loss": h.bigram_loss, "copy_loss": h.copy_loss}

    def evaluation_elements(self, run: RunConfig) -> int:
        m, T = run.model, run.task.n_inputs
        return 2 * m.n_layers * memory.forward_elements(m, CHUNK, T, T) + 6 * CHUNK * T * m.vocab_size

    # --- interpretation ---------------------------------------------------------------------------------------
    def head_scores(self, maps: np.ndarray, tokens: np.ndarray, task: TaskConfig) -> dict[str, np.ndarray]:
        """{pattern: (..., n_layers, H)} for maps (..., n_layers, H, T', T') of one input tokens (T',)."""
        tokens = np.asarray(tokens).reshape(-1)
        full = np.concatenate([tokens, [0]])[None]  # a target is not needed to tell the queries apart
        bigram, copy = (m[0] for m in query_kinds(task, full))
        a = np.asarray(maps, dtype=np.float64)
        rows = np.flatnonzero(copy)
        first = a[..., bigram, 0].mean(axis=-1) if bigram.any() else np.zeros(a.shape[:-2])
        prev = a[..., rows, rows - 1].mean(axis=-1) if len(rows) else np.zeros(a.shape[:-2])
        return {"first token": first, "previous token": prev}

    def test_scores(self, params, run: RunConfig, n_test: int = 100) -> dict[str, np.ndarray]:
        f = sink_figures(params, run, n_test)
        return {"first token": f["sink_share"], "previous token": f["copy_attention"]}

    def lens_inputs(self, task: TaskConfig, n: int) -> np.ndarray:
        return test_sequences(task)[:n, :-1]

    def contrast_positions(self, task: TaskConfig) -> range:
        """The tokens before the probe's triggers (a copy reads them), from the first such to the last."""
        q = self.answer_queries(task)
        return range(int(q[0]) - 1, int(q[-1])) if len(q) else range(1, 2)

    def contrast_symbols(self, task: TaskConfig) -> range:
        return range(task.bigram_vocab - task.triggers)

    def contrast(self, run: RunConfig, clean: np.ndarray, position: int, symbol: int) -> Contrast:
        clean = np.asarray(clean, dtype=np.int64)
        queries = self.answer_queries(run.task)
        allowed = [int(q) - 1 for q in queries]
        if position not in allowed:
            raise ConfigError("position", f"must be a token before a trigger of the probe: {allowed}")
        check_int("symbol", symbol, 0, run.task.bigram_vocab - run.task.triggers - 1)
        if clean[position] == symbol:
            raise ConfigError("symbol", f"must differ from the clean token {int(clean[position])} at {position}")
        corrupted = clean.copy()
        corrupted[position] = symbol
        index = allowed.index(position)
        return Contrast(clean, corrupted, position, index, int(queries[index]), int(clean[position]), int(symbol))


BIGRAM_BACKCOPY = tasks.register(BigramBackcopyTask())
