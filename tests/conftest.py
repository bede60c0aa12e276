"""Shared test setup: the user's run stores fenced off (store_guard), the repository root on sys.path,
PyTorch on one thread, parameters with every tensor random, an empty run store per test."""

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

import store_guard  # noqa: E402

store_guard.isolate()  # before any test imports the lab: the session's own store, the user's fenced off

from attncore.model import init_params  # noqa: E402


def pytest_sessionfinish(session, exitstatus):
    store_guard.end_session()
    if store_guard.touched:
        print(f"\nthe suite reached a user's run store: {store_guard.touched}", file=sys.stderr)
        session.exitstatus = 1


_reported = 0  # how many entries of store_guard.touched a failure has named already


def _fail_if_reached(before: int, where: str) -> None:
    global _reported
    reached = store_guard.touched[max(before, _reported) :]
    _reported = len(store_guard.touched)
    if reached:
        pytest.fail(f"this test reached a user's run store{where}: {reached}", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Fails the test that reached a user's run store, even if it caught the guard's error."""
    before = len(store_guard.touched)
    result = yield
    _fail_if_reached(before, "")
    return result


@pytest.fixture(autouse=True)
def _store_fence():
    """The same for the test's fixtures (reported as an error of its setup or teardown)."""
    before = len(store_guard.touched)
    yield
    _fail_if_reached(before, " in a fixture")


_MAIN = sys.modules["__main__"]  # pytest's (or an xdist worker's) own


@pytest.fixture(autouse=True)
def _main_module_restored():
    """The process's __main__ put back after each test: Streamlit's script runner installs each page it runs (an
    AppTest's script file, or a function's body written to a temporary file) as sys.modules["__main__"] and leaves
    it there, and multiprocessing's spawn re-runs __main__'s file in every child it starts. A later test in the same
    worker that starts processes that way (dask.distributed's LocalCluster) then ran a page's script in its workers,
    which died ("Nanny failed to start"): which tests share a worker depends on the machine's load under xdist."""
    yield
    sys.modules["__main__"] = _MAIN


@pytest.fixture(autouse=True)
def _torch_on_one_thread():
    """PyTorch, the oracle, on one intra-op thread once a test module has imported it: on a shared 2-core machine
    its thread pool spins against the other processes (tests/test_oracle.py took 45 times as long with two)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


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
