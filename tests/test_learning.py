"""The model learns what the article says it learns, measured by true greedy generation on the fixed test set."""

from __future__ import annotations

import pytest

from attncore.config import make_run
from attncore.evaluate import evaluate
from attncore.train import train

pytestmark = pytest.mark.slow  # each trains a run to its end

CHANCE = 1 / 20  # one of 20 symbols


def test_copy_length_4_with_default_settings_is_learned():
    run = make_run("copy", 4)
    result = train(run)
    scores = evaluate(result.params, run)
    assert result.final_loss < 0.05
    assert scores.sequence_accuracy >= 0.99
    assert scores.token_accuracy >= 0.99


def test_copy_length_6_without_position_fails_per_sequence_but_beats_chance_per_token():
    """A causal decoder without position recovers some order (row t sees t + 1 keys), not enough to copy."""
    run = make_run("copy", 6, position="none")
    scores = evaluate(train(run).params, run)
    assert scores.sequence_accuracy < 0.5
    assert scores.token_accuracy > 6 * CHANCE  # far above chance (the article's figure: 0.656)
