"""The induction task's measurements (SPEC §14, Olsson et al. 2022): the held-out loss on the repeat and on the
first copy, Olsson's in-context learning score, each head's induction and previous-token scores on the probe set,
and the phase change of the repeat loss over training. Pure functions of weights, attention maps or curves.

Queries (model positions t, predicting x[t + 1]) of a sequence with repeated prefix length k:
  first copy  0 .. k - 2     the target x[t + 1] is a fresh random token: the loss stays at ln V
  repeat      k .. 2k - 2    the target x[t + 1] = x[t + 1 - k] was seen one copy back: predictable in context only
An induction head at a repeat query t attends to key t - k + 1, the token after the previous occurrence of x[t];
a previous-token head attends from every query t to t - 1.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ._blas import one_blas_thread
from .config import RunConfig
from .model import attention_weights, forward
from .tasks import N_TEST, induction_probe_set, induction_test_set, repeat_queries

CHUNK = 50  # sequences per forward pass: a fixed split, so a stored number never depends on memory
N_SNAPSHOT_TEST = 200  # a training snapshot scores the first 200 of the 500 held-out sequences
WINDOW = 200  # steps of the window whose largest drop of the repeat loss is the phase change
PHASE_THRESHOLD = 0.5  # nats: a largest window drop at most this is no phase change
SNAPSHOT_EVERY = 25  # steps between an induction run's snapshots (50 past 2,000 steps, ...: at most 80 snapshots)
MAX_SNAPSHOTS = 80
SCORES = ("induction", "previous token")  # the head-detector patterns of this task


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
    nll, right = [], []
    with one_blas_thread():
        for start in range(0, len(seqs), CHUNK):
            chunk = seqs[start : start + CHUNK]
            logits, _ = forward(params, chunk[:, :-1], run.model, head_mask=head_mask)  # (b, T - 1, V)
            z = logits.astype(np.float64)
            z -= z.max(axis=-1, keepdims=True)
            targets = chunk[:, 1:]
            picked = np.take_along_axis(z, targets[..., None], axis=-1)[..., 0]
            nll.append(np.log(np.exp(z).sum(axis=-1)) - picked)
            right.append(logits.argmax(axis=-1) == targets)
    return np.concatenate(nll), np.concatenate(right)


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
