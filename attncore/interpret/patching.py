"""Activation patching (as TransformerLens's `get_act_patch_*`): run a clean and a corrupted input,
copy one component's activation from one run into the other, and measure how much of the difference it carries.

Two directions (Heimersheim & Nanda 2024, "How to use and interpret activation patching", arXiv:2404.15255):
  denoise  clean activations copied into the corrupted run: is the component *sufficient* to restore the
           clean answer? Components that only work together each restore little.
  noise    corrupted activations copied into the clean run: is the component *necessary*, does the clean
           answer break without it? Redundant components each break little.

The metric is the logit difference logit[clean answer] - logit[corrupted answer] at the first answer position
where the two inputs' answers differ; both inputs carry the clean answer prefix after SEP (teacher forcing). On
the induction task a token p of the first copy changes (the repeat keeps the clean tokens): the query k + p - 1,
whose token's previous occurrence is at p - 1, should now predict the new token if an induction head reads p.
Before that position the two prefixes agree anyway, so the metric there is the same under either prefix.
Fraction moved = (patched - patched run's own) / (source run's - patched run's own): denoising, the restored
fraction (patched - corrupted) / (clean - corrupted); noising, the fraction destroyed (clean - patched) /
(clean - corrupted). 1 = the component alone carries the whole difference.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import N_SYMBOLS, ConfigError, RunConfig
from ..task import task_of
from .hooks import run_with_hooks


@dataclass(frozen=True)
class Contrast:
    """A clean and a corrupted model input (2L,) and where their answers first differ."""

    clean: np.ndarray  # (2L,)
    corrupted: np.ndarray  # (2L,)
    position: int  # the input symbol changed (0..L-1)
    answer_index: int  # first answer token that differs (0..L-1)
    query: int  # the model position predicting it: L + answer_index
    clean_token: int
    corrupted_token: int


def positions(run: RunConfig) -> range:
    """The input positions a contrast may change (Task.contrast_positions): the L symbols, or the induction first
    copy's 1 .. k - 1 (k = T/2; position 0 is read by no repeat query)."""
    return task_of(run.task).contrast_positions(run.task)


def symbols(run: RunConfig) -> range:
    """The symbols an input position may take: 0..19, or the induction task's 0..V-1."""
    return task_of(run.task).contrast_symbols(run.task)


def contrast(run: RunConfig, clean: np.ndarray, position: int, symbol: int) -> Contrast:
    """The clean input with input symbol `position` set to `symbol` (Task.contrast): the article's tasks keep the
    clean answer prefix; the induction task changes a first-copy token and keeps the repeat clean."""
    return task_of(run.task).contrast(run, clean, position, symbol)


def default_symbol(clean: np.ndarray, length: int, position: int, vocab: int = N_SYMBOLS) -> int:
    """The smallest symbol absent from the clean input's first `length` symbols (so the change is unambiguous), else
    any other; vocab: the symbols there are (the induction task's V)."""
    present = set(int(s) for s in clean[:length])
    free = [s for s in range(vocab) if s not in present]
    return free[0] if free else (int(clean[position]) + 1) % vocab


def logit_difference(logits: np.ndarray, c: Contrast) -> np.ndarray:
    """(B,) logit[clean answer] - logit[corrupted answer] at the contrast's query."""
    row = logits[:, c.query]
    return (row[:, c.clean_token] - row[:, c.corrupted_token]).astype(np.float64)


def clean_probability(logits: np.ndarray, c: Contrast) -> np.ndarray:
    """(B,) softmax probability of the clean answer at the contrast's query."""
    row = logits[:, c.query].astype(np.float64)
    e = np.exp(row - row.max(axis=-1, keepdims=True))
    return e[:, c.clean_token] / e.sum(axis=-1)


def copy_from(clean_act: np.ndarray, index):
    """A hook writing clean_act[index] into the activation at `index` (a tuple of slices after the batch axis)."""

    def hook(act):
        out = act.copy()
        out[(slice(None),) + index] = clean_act[(slice(None),) + index]
        return out

    return hook


DIRECTIONS = {
    "denoise": "clean activations copied into the corrupted run (is the component sufficient to restore?)",
    "noise": "corrupted activations copied into the clean run (is the component necessary?)",
}


@dataclass(frozen=True)
class PatchResult:
    contrast: Contrast
    clean_metric: float
    corrupted_metric: float
    clean_prob: float
    corrupted_prob: float
    head: np.ndarray  # (n_layers, H) restored fraction, each head's z at every position
    head_by_position: np.ndarray  # (n_layers, H, T)
    resid_by_position: np.ndarray  # (n_layers, T) resid_pre of each block
    mlp: np.ndarray  # (n_layers,) each MLP's output at every position
    mlp_by_position: np.ndarray  # (n_layers, T)
    positions: np.ndarray  # (T',) the positions patched one by one (the first T' of the input)
    direction: str = "denoise"  # a key of DIRECTIONS; every grid above is the fraction moved in this direction

    def to_dict(self) -> dict:
        c = self.contrast
        return {
            "clean": c.clean.tolist(),
            "corrupted": c.corrupted.tolist(),
            "position": c.position,
            "query": c.query,
            "clean_token": c.clean_token,
            "corrupted_token": c.corrupted_token,
            "metric": "logit[clean answer] - logit[corrupted answer] at the query, clean answer prefix",
            "direction": self.direction,
            "patched": DIRECTIONS[self.direction],
            "clean_metric": self.clean_metric,
            "corrupted_metric": self.corrupted_metric,
            "clean_probability": self.clean_prob,
            "corrupted_probability": self.corrupted_prob,
            "grid": _listed(self.head),
            "by_position": _listed(self.head_by_position),
            "resid_by_position": _listed(self.resid_by_position),
            "mlp": _listed(self.mlp),
            "mlp_by_position": _listed(self.mlp_by_position),
            "positions": self.positions.tolist(),
        }


def _listed(a: np.ndarray):
    return [None if np.isnan(x) else float(x) for x in a] if a.ndim == 1 else [_listed(r) for r in a]


def _batched_metric(params, cfg, tokens, hooks_list, c: Contrast) -> np.ndarray:
    """The metric of the corrupted input under each set of hooks: one pass per hook set, batch of one."""
    out = np.empty(len(hooks_list))
    for n, hooks in enumerate(hooks_list):
        logits, _ = run_with_hooks(params, tokens[None], cfg, hooks)
        out[n] = logit_difference(logits, c)[0]
    return out


def patch(params, run: RunConfig, c: Contrast, *, max_positions: int | None = None, direction="denoise") -> PatchResult:
    """Fractions moved for every component, in `direction` (denoise: clean into corrupted, the restored fraction;
    noise: corrupted into clean, the fraction destroyed); positions beyond the first `max_positions` are NaN."""
    if direction not in DIRECTIONS:
        raise ConfigError("direction", f"must be one of {', '.join(DIRECTIONS)}; got {direction!r}")
    cfg = run.model
    T = len(c.clean)
    n_pos = T if max_positions is None else min(T, max_positions)
    clean_logits, clean_acts = run_with_hooks(params, c.clean[None], cfg)
    corrupt_logits, corrupt_acts = run_with_hooks(params, c.corrupted[None], cfg)
    m_clean, m_corrupt = logit_difference(clean_logits, c)[0], logit_difference(corrupt_logits, c)[0]
    if direction == "denoise":  # the activations come from `source` and go into the run of `target`
        source, target, m_source, m_target = clean_acts, c.corrupted, m_clean, m_corrupt
    else:
        source, target, m_source, m_target = corrupt_acts, c.clean, m_corrupt, m_clean
    span = m_source - m_target

    def moved(hooks_list):
        m = _batched_metric(params, cfg, target, hooks_list, c)
        return (m - m_target) / span if span != 0 else np.full(len(m), np.nan)

    nl, H, everywhere = cfg.n_layers, cfg.n_heads, slice(None)
    z = [source[f"blocks.{i}.attn.z"] for i in range(nl)]
    head = moved([{f"blocks.{i}.attn.z": copy_from(z[i], (everywhere, h))} for i in range(nl) for h in range(H)])
    by_pos = np.full((nl, H, T), np.nan)
    by_pos[:, :, :n_pos] = moved(
        [{f"blocks.{i}.attn.z": copy_from(z[i], (t, h))} for i in range(nl) for h in range(H) for t in range(n_pos)]
    ).reshape(nl, H, n_pos)
    resid = np.full((nl, T), np.nan)
    name = "blocks.{}.resid_pre"
    resid[:, :n_pos] = moved(
        [{name.format(i): copy_from(source[name.format(i)], (t,))} for i in range(nl) for t in range(n_pos)]
    ).reshape(nl, n_pos)
    name = "blocks.{}.mlp_out"
    mlp = moved([{name.format(i): copy_from(source[name.format(i)], (everywhere,))} for i in range(nl)])
    mlp_pos = np.full((nl, T), np.nan)
    mlp_pos[:, :n_pos] = moved(
        [{name.format(i): copy_from(source[name.format(i)], (t,))} for i in range(nl) for t in range(n_pos)]
    ).reshape(nl, n_pos)
    return PatchResult(
        c,
        float(m_clean),
        float(m_corrupt),
        float(clean_probability(clean_logits, c)[0]),
        float(clean_probability(corrupt_logits, c)[0]),
        head.reshape(nl, H),
        by_pos,
        resid,
        mlp,
        mlp_pos,
        np.arange(n_pos),
        direction,
    )
