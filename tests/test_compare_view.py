"""What the Ablations and Compare pages compute beside their tables (ui.compare_view), without a browser."""

from __future__ import annotations

import pandas as pd
import pytest

from attncore.evaluate import EvalResult
from ui import compare_view, frames


def evals(distinct: float, repeated: float) -> EvalResult:
    return EvalResult(0.9, 0.5, distinct, 219, repeated, 281, 0.01)


def test_the_breakdown_counts_the_test_sequences_once_not_once_per_seed():
    per_seed = [
        frames.breakdown_frame({"base": evals(0.2 + 0.1 * s, 0.1), "no position": evals(0.1, 0.0)}) for s in range(3)
    ]
    out = compare_view.breakdown_over_seeds(per_seed).set_index(["variant", "symbols"])
    assert out.loc[("base", "all distinct"), "n"] == 219  # the same 219 sequences serve all 3 seeds: not 657
    assert out.loc[("base", "some repeated"), "n"] == 281
    assert out.loc[("base", "all distinct"), "accuracy"] == pytest.approx(0.3)  # the mean over the seeds


def test_seeds_scored_on_different_test_sets_are_refused():
    a = frames.breakdown_frame({"base": evals(0.2, 0.1)})
    b = a.assign(n=[200, 300])
    with pytest.raises(ValueError, match="different test sets"):
        compare_view.breakdown_over_seeds([a, b])
    assert list(compare_view.breakdown_over_seeds([a]).columns) == ["variant", "symbols", "accuracy", "n"]
    assert isinstance(compare_view.breakdown_over_seeds([a, a]), pd.DataFrame)
