"""The length-generalisation protocol of the literature (Ruoss et al. 2023, Kazemnejad et al. 2023; docs/
experiments.md): five position encodings trained on every length from 1 to LIT_L, tested past it. Its runs, from
any run maker (attncore.make_run, or the sidebar's, which starts from the sidebar's settings)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from attncore import make_run
from attncore.config import RunConfig
from attncore.evaluate import MAX_TEST_LENGTHS
from lab.limits import Cap, declare

# the Length generalisation page's cap (lab.limits: read by name, ATTNLAB_<NAME> or [limits] as every cap)
(TEST_LENGTH,) = declare(
    Cap("max_test_length", 16, "Length generalisation: longest test length L′ evaluated (up to 64)")
)

LIT_L, LIT_NMAX = 8, 64  # trained on 1..8, tested to 16; randomized positions from [0, 64)
# At 1,500 steps (the article's) the range 1..8 is not learned inside (per sequence 0.47-0.82 on copy): a
# comparison past it would compare nothing. 3,000 steps (the hosted cap) learn it. A visitor who changes the
# sidebar's steps from the default gets those instead.
LIT_STEPS = 3000
LIT_POSITIONS = ("none", "learned", "sinusoidal", "rope", "alibi")
LIT_TASK, LIT_SEEDS = "copy", 3  # the page's defaults


def literature_runs(
    task: str, randomized: bool, seeds: Sequence[int], steps: int, positions=LIT_POSITIONS, make: Callable = make_run
) -> list[RunConfig]:
    """Each encoding over the seeds, trained on 1..LIT_L (no position: never randomized); `make` takes make_run's
    keyword arguments."""
    return [
        make(
            task=task,
            length=LIT_L,
            train_min=1,
            position=p,
            seed=s,
            steps=steps,
            randomized_positions=LIT_NMAX if randomized and p != "none" else None,
        )
        for p in positions
        for s in seeds
    ]


def test_lengths(max_test_length: int) -> list[int]:
    """The lengths the protocol tests at: 1 to 2 LIT_L, within the server's cap (Limits.max_test_length)."""
    return list(range(1, min(2 * LIT_L, max_test_length, MAX_TEST_LENGTHS) + 1))
