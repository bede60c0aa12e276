"""The Masks page's trained model: copy on mixed lengths 1 to 6 in right-padded batches, the model whose losses
show whether a sequence's loss depends on its batch (attncore.mechanisms.padding)."""

from __future__ import annotations

from attncore import make_run
from attncore.config import RunConfig


def trap_run() -> RunConfig:
    return make_run("copy", 6, train_min=1, mixed_lengths=True)
