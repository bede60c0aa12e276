"""How much memory a run needs, estimated from its shapes before anything is allocated, and how much
the machine has: the command line refuses a run that cannot fit instead of allocating until MemoryError.

The estimate counts the arrays of a run (train, then evaluate) by their shapes; tests/test_cli.py checks
it is within a factor of 2 of the peak that tracemalloc measures on small runs.
"""

from __future__ import annotations

import os
import re

from .config import ConfigError, RunConfig
from .task import task_of

GIB = 2**30
SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)(?:i?B)?\s*", re.IGNORECASE)


def _param_count(run: RunConfig) -> int:
    m = run.model
    d, f, v = m.d_model, m.d_ff, m.vocab_size
    per_block = 4 * d + 3 * d * d + 3 * d + d * d + d + d * f + f + f * d + d
    per_block += 4 * m.d_head if m.qk_norm else 0  # the q and k norms' gains and biases
    table = m.max_len * d if m.position == "learned" else 0
    return v * d + table + m.n_layers * per_block + 2 * d + d * v + v


def forward_elements(m, batch: int, t: int, keys: int) -> int:
    """Elements alive in one block's forward on batch x t queries against `keys` keys."""
    rows = batch * t
    # per block: x, the LN output and its cache, q/k/v, y, merged heads, the output, the residuals (~12 D
    # per row), the FFN hidden layer (F per row), scores and weights (2 H keys per row)
    return rows * (12 * m.d_model + m.d_ff + 2 * m.n_heads * keys)


def training_bytes(run: RunConfig) -> int:
    """Estimated peak bytes of training and evaluating `run` (the arrays only, not the interpreter)."""
    m = run.model
    item = 8 if m.dtype == "float64" else 4
    params = _param_count(run)
    widest = max(m.d_model * m.d_ff, m.d_model * 3 * m.d_model, m.vocab_size * m.d_model)
    # weights, gradients, Adam's two moments, the copy returned; at init a float64 draw of the widest matrix
    state = 5 * params * item + 8 * widest
    # the model reads [s1..sL, SEP, a1..a(L-1)] (2L) with a loss on the L answers; induction: T - 1, on all
    B, T, A = run.train.batch_size, run.task.n_inputs, run.task.answer_len
    rows = B * T
    # every block's forward is kept for the backward; the backward adds a gradient of each, and the
    # zeros the FFN's ReLU compares against stay cached per shape
    train = m.n_layers * forward_elements(m, B, T, T) + 3 * rows * m.d_ff + 3 * B * A * m.vocab_size
    # evaluation: as the task scores a run (Task.evaluation_elements)
    return state + item * max(train, task_of(run.task).evaluation_elements(run))


def available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (Linux), else free physical pages; None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_fits(runs: list[RunConfig], workers: int = 1, cap: int | None = None) -> None:
    """Raise ConfigError (field max_memory) if the `workers` largest runs, trained at once, are estimated to
    need more than `cap` bytes or than the memory available now."""
    if not runs:
        return
    need = sum(sorted((training_bytes(run) for run in runs), reverse=True)[:workers])
    limits = [(n, why) for n, why in ((cap, "--max-memory cap"), (available_bytes(), "available")) if n is not None]
    if not limits:
        return
    limit, why = min(limits)
    if need > limit:
        who = "the run needs" if workers == 1 else f"{workers} runs at once need"
        more = ", --layers or --jobs" if workers > 1 else " or --layers"
        raise ConfigError(
            "max_memory",
            f"training {who} about {human(need)} (estimated from the shapes), more than the {human(limit)} "
            f"{why}; lower --batch, --d, --d-ff{more}",
        )


def parse_size(text: str) -> int:
    """Bytes from '512M', '2G', '1.5GiB', '100000' (K, M, G, T are powers of 1024); ValueError otherwise."""
    match = SIZE.fullmatch(text)
    if not match:
        raise ValueError(f"must be a size like 512M, 2G or 1.5GiB, got {text!r}")
    number, unit = float(match.group(1)), match.group(2).upper()
    size = int(number * 1024 ** " KMGT".index(unit or " "))
    if size <= 0:
        raise ValueError(f"must be more than 0 bytes, got {text!r}")
    return size


def human(n: float) -> str:
    """Bytes in GiB from 1 GiB, MiB from 1 MiB, KiB from 1 KiB, else bytes (3 significant digits below 100): a cap
    of 1 byte is '1 byte', not '0 MiB', and 1500 bytes '1.46 KiB'."""
    for unit, size in (("GiB", GIB), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            value = n / size
            return f"{value:,.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"  # 1,536 MiB, 22.3 MiB, 1.46 KiB
    return f"{n:,.0f} byte{'s' * (n != 1)}"
