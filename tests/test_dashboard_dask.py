"""The dashboard's sweeps on a Dask cluster (issue 30.6): with dask_scheduler set, a page's Train button sends its
runs to the scheduler (never to the local worker pool), and they are bit-identical to runs trained here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from apptest_helpers import texts
from streamlit.testing.v1 import AppTest

from attncore.train import train
from lab import regimes
from lab.store import get_run, is_cached
from ui.limits import parse_limits

distributed = pytest.importorskip("distributed")
REPO = Path(__file__).resolve().parents[1]
QUERY = {"reg_exp": "depth", "reg_seeds": "1", "reg_steps": "100", "reg_depths": "2", "reg_lrs": "1e-2"}


@pytest.fixture(scope="module")
def cluster():
    mp = pytest.MonkeyPatch()
    mp.setenv("PYTHONPATH", str(REPO))  # the workers import lab and attncore from this checkout
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None, host="127.0.0.1"
    ) as c:
        yield c
        from ui import sweeps

        for client in sweeps._clients.values():  # before the cluster goes: no reconnection attempts at exit
            client.close()
        sweeps._clients.clear()
    mp.undo()


def click_train_on_the_regimes_page(timeout: int) -> AppTest:
    at = AppTest.from_file("../dashboard.py", default_timeout=timeout)
    at.query_params.update(QUERY)
    at.run()
    at.switch_page("app_pages/regimes.py").run()
    (button,) = [b for b in at.button if b.key == "reg_train"]
    button.click().run()
    return at


def test_a_scheduler_address_is_read_as_a_setting_and_checked():
    lim, problems = parse_limits({"ATTNLAB_DASK_SCHEDULER": "tcp://127.0.0.1:8786"}, {})
    assert lim.dask_scheduler == "tcp://127.0.0.1:8786" and problems == []
    lim, problems = parse_limits({}, {"dask_scheduler": "http://[evil](x)"})
    assert lim.dask_scheduler is None
    assert len(problems) == 1 and "dask_scheduler" in problems[0] and "[evil]" not in problems[0]
    assert parse_limits({}, {})[0].dask_scheduler is None  # no scheduler: the local workers, as before


def test_a_pages_sweep_goes_to_the_scheduler_and_matches_local_training(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNCORE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ATTNLAB_DASK_SCHEDULER", cluster.scheduler_address)

    def no_local_pool(n):
        raise AssertionError("the local worker pool was used with a scheduler configured")

    monkeypatch.setattr("ui.live.pool", no_local_pool)
    runs = regimes.all_runs(regimes.depth_cells(range(1), steps=100, depths=(2,), lrs=(1e-2,)))
    at = click_train_on_the_regimes_page(timeout=240)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert all(is_cached(run) for run in runs)
    assert "What the lab found." in texts(at.markdown)
    for run in runs[:2]:
        np.testing.assert_array_equal(get_run(run).loss_history, train(run, snapshots=False).loss_history)


def test_an_unreachable_scheduler_is_one_message_not_a_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNCORE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ATTNLAB_DASK_SCHEDULER", "tcp://127.0.0.1:9")  # the discard port: nothing answers
    at = click_train_on_the_regimes_page(timeout=120)
    assert not at.exception
    assert any("no dask scheduler answered at tcp://127.0.0.1:9" in e.value for e in at.error)
