"""Named sets of runs: the article's presets, grids of RunConfigs, variants of one run, and how many workers
a sweep of them may ask for (MAX_JOBS).

Pure configs over attncore (no store, no joblib): the store imports it to keep the article's runs from
eviction, the sweeps to know what to run.
"""

from __future__ import annotations

import itertools
import math

from attncore.config import ConfigError, RunConfig, make_run
from attncore.settings import settings_of

MAX_JOBS = 256  # a sweep's workers: -1 (all cores) or 1..MAX_JOBS

# The article's five ablations of copy, L = 6, seed 0, as make_run overrides.
ABLATIONS = {
    "no scaling": {"scaling": False},
    "no position": {"position": "none"},
    "post-LN": {"norm": "post"},
    "pre-LN, lr 1e-2": {"lr": 1e-2},
    "post-LN, lr 1e-2": {"norm": "post", "lr": 1e-2},
}

PRESETS = {
    "article": "the article's: copy and sort x L 4, 6, 8 x seeds 0, 1, 2 plus five ablations of copy L=6 (23 runs)",
    "accuracy": "copy and sort x L 4, 6, 8 x seeds 0, 1, 2 (18 runs)",
    "ablations": "copy L=6 seed 0: full, no scaling, no position, post-LN, pre-LN lr 1e-2, post-LN lr 1e-2 (6 runs)",
    "smoke": "copy and sort x L 4 x seeds 0, 1 at 200 steps: tries the pipeline in seconds (4 runs)",
}


def _listed(values) -> list:
    return [values] if isinstance(values, (str, int, float)) else list(values)


def grid(
    tasks=("copy",),
    lengths=(6,),
    seeds=(0,),
    positions=("learned",),
    norms=("pre",),
    lrs=(3e-3,),
    scalings=None,
    **common,
) -> list[RunConfig]:
    """The product of the listed values (seeds vary fastest), each a make_run(..., **common); no duplicates.

    scalings (e.g. (True, False)) varies scaling too; None leaves it to `common` (default on).
    """
    scaled = [{}] if scalings is None else [{"scaling": bool(s)} for s in _listed(scalings)]
    product = itertools.product(
        _listed(tasks), _listed(lengths), _listed(positions), _listed(norms), _listed(lrs), scaled, _listed(seeds)
    )
    runs = (
        make_run(task, length, seed, position=position, norm=norm, lr=lr, **(common | scaling))
        for task, length, position, norm, lr, scaling, seed in product
    )
    return list(dict.fromkeys(runs))  # RunConfig is hashable: duplicates dropped, order kept


def grid_size(
    tasks=("copy",), lengths=(6,), seeds=(0,), positions=("learned",), norms=("pre",), lrs=(3e-3,), scalings=(True,)
) -> int:
    """How many runs grid() would return for these lists, without building them."""
    return math.prod(len(set(_listed(v))) for v in (tasks, lengths, seeds, positions, norms, lrs, scalings or (True,)))


def ablations(task: str = "copy", length: int = 6, seed: int = 0, **common) -> list[RunConfig]:
    """The full run followed by its five ablations (the article's)."""
    return [make_run(task, length, seed, **common)] + [
        make_run(task, length, seed, **(common | change)) for change in ABLATIONS.values()
    ]


def preset(name: str) -> list[RunConfig]:
    """The runs of a named preset (see PRESETS)."""
    if name not in PRESETS:
        raise ConfigError("preset", f"must be one of {', '.join(PRESETS)}; got {name!r}")
    accuracy = grid(("copy", "sort"), (4, 6, 8), (0, 1, 2))
    if name == "article":
        return accuracy + ablations()[1:]
    if name == "accuracy":
        return accuracy
    if name == "ablations":
        return ablations()
    return grid(("copy", "sort"), (4,), (0, 1), steps=200)


def with_settings(run: RunConfig, **overrides) -> RunConfig:
    """`run` rebuilt by make_run with some of its settings replaced (e.g. steps=300 for a quick preset): every
    setting of its records (attncore.settings.settings_of), so none is dropped; one that follows another (d_ff = 4d)
    follows a new value of it."""
    return make_run(**(settings_of(run) | overrides))
