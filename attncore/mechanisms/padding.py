"""The article's trap 4 on a trained model: do a padded batch's per-sequence losses depend on the batch order, the
amount of padding, the loss mask, the key padding mask? Cheap: a few forward passes of B ≤ 8.

Imports the core (model, tasks, layers) only.
"""

from __future__ import annotations

import numpy as np

from ..config import ModelConfig
from ..model import forward, sequence_losses
from ..sequences import pad_sequences

CASES = (
    ("as batched", "right padding, key mask and loss mask"),
    ("batch reversed", "the same sequences in the opposite order"),
    ("two more padding", "two extra padding tokens per sequence"),
    ("no loss mask", "the loss also averages over padding positions"),
    ("no key mask", "right padding without the key padding mask"),
    ("left padding, no key mask", "each sequence alone, two padding tokens before it, unmasked"),
)


def _left_padded_loss(params, seq: np.ndarray, cfg: ModelConfig, pad: int) -> float:
    """One sequence with `pad` tokens before it, no key mask; its real tokens keep positions 0..2n-1."""
    n = (len(seq) - 1) // 2
    idx = np.concatenate([np.zeros(pad, dtype=np.int64), seq[:-1]])[None, :]
    positions = np.concatenate([np.zeros(pad, dtype=np.int64), np.arange(2 * n)])  # pads share position 0
    logits, _ = forward(params, idx, cfg, positions=positions)
    z = logits[0, pad + n : pad + 2 * n]  # the answer positions
    z = z - z.max(axis=-1, keepdims=True)
    nll = np.log(np.exp(z).sum(axis=-1)) - z[np.arange(n), seq[n + 1 :]]
    return float(nll.mean())


def padding_trap(params, cfg: ModelConfig, seqs: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Per case of CASES: (B,) per-sequence losses, in the order of `seqs` (sequences [s, SEP, a] of lengths n)."""
    batch, lengths = pad_sequences(seqs)
    out = {"as batched": sequence_losses(params, batch, lengths, cfg)}
    order = np.arange(len(seqs))[::-1]
    rev = sequence_losses(params, batch[order], lengths[order], cfg)
    out["batch reversed"] = rev[np.argsort(order)]
    wider = np.pad(batch, ((0, 0), (0, 2)))
    out["two more padding"] = sequence_losses(params, wider, lengths, cfg)
    out["no loss mask"] = sequence_losses(params, wider, lengths, cfg, loss_mask=False)
    out["no key mask"] = sequence_losses(params, wider, lengths, cfg, key_padding=False)
    out["left padding, no key mask"] = np.array([_left_padded_loss(params, s, cfg, 2) for s in seqs])
    return out


def same_losses(losses: np.ndarray, base: np.ndarray, dtype: str) -> bool:
    """Equal to rounding: every loss within 64 units of the model dtype's last place (relative) of its base.

    The cases compute with arrays of other shapes (another batch order, more padding, every position), which
    a BLAS may round differently; a loss that really changes moves by orders of magnitude more.
    """
    return bool(np.all(np.abs(losses - base) <= 64 * np.finfo(dtype).eps * np.abs(base)))
