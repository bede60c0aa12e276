"""Shared test setup: the repository root on sys.path, parameters with every tensor random, an empty run store."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
for path in (ROOT, TESTS):  # attncore, and torch_reference for the oracle tests
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from attncore.model import init_params  # noqa: E402


def _random_params(cfg, seed: int = 0) -> dict[str, np.ndarray]:
    """init_params, then biases, LN gammas and betas moved off 0 and 1.

    At init every bias is 0 and every gamma 1, which would hide a backward that
    forgets to multiply by gamma or to add a bias.
    """
    rng = np.random.default_rng(seed)
    params = init_params(cfg, rng)
    for name, p in params.items():
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "gamma":
            p += 0.3 * rng.standard_normal(p.shape)
        elif leaf.startswith("b"):  # beta and every bias: b_qkv, b_out, b1, b2, b
            p += 0.1 * rng.standard_normal(p.shape)
    return params


@pytest.fixture(scope="session")
def random_params():
    """random_params(cfg, seed) -> an attncore params dict with no tensor at its trivial init value."""
    return _random_params


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty run store of this test's own (no HMAC key, no size cap from the environment)."""
    from lab import store
    from lab.store import codec

    location = tmp_path / "cache"
    monkeypatch.setenv(store.ENV_VAR, str(location))
    monkeypatch.delenv(codec.KEY_VAR, raising=False)
    monkeypatch.delenv(store.MAX_STORE_VAR, raising=False)
    return location
