"""The schedule on the pages: the sidebar's Advanced fields and their URL keys reach the run, the Train page
draws the learning rate under the loss curve when a schedule is on (and not otherwise), and Ablations offers
post-LN with warm-up."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest
from apptest_helpers import temporary_store, texts
from streamlit.testing.v1 import AppTest
from streamlit.util import calc_hash

from attncore import make_run
from ui import variants
from ui.sidebar import make

pytestmark = pytest.mark.slow  # AppTests of pages that train

SCHEDULED = {"steps": "30", "warmup": "10", "decay": "cosine", "minlr": "0.1"}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    runs = [make_run(steps=30), make_run(steps=30, warmup=10, decay="cosine", min_lr_ratio=0.1)]
    with temporary_store(tmp_path_factory, runs):
        yield


def open_train(query: dict) -> AppTest:
    at = AppTest.from_file("../dashboard.py", default_timeout=120)
    at.query_params.update(query)
    at._page_hash = calc_hash("train")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def lr_frames(at: AppTest) -> list[pd.DataFrame]:
    """The data of every chart with a learning-rate column."""
    found = [pa.ipc.open_stream(d.data.data).read_pandas() for c in at.get("vega_lite_chart") for d in c.proto.datasets]
    return [df for df in found if "lr" in df.columns]


def test_a_schedule_in_the_url_trains_that_run_and_draws_its_learning_rate(store):
    at = open_train(SCHEDULED)
    assert not at.error and not at.warning
    caption = texts(at.caption)
    assert "The learning rate of each step: warm-up 10 steps, cosine decay to 0.1 lr;" in caption  # not "step·"
    assert "from 3e-4 to 3e-3" in caption  # lr/10 at the first step, lr at the end of the warm-up
    (lr,) = lr_frames(at)
    assert list(lr["step"]) == list(range(1, 31))
    assert lr["lr"].iloc[0] == pytest.approx(3e-4) and lr["lr"].iloc[-1] == pytest.approx(3e-4)  # r * lr at the end
    assert lr["lr"].max() == pytest.approx(3e-3)
    assert not lr_frames(open_train({"steps": "30"}))  # no schedule, no learning-rate chart


def test_an_impossible_warm_up_names_the_field_and_unfolds_advanced(store):
    at = open_train({"steps": "30", "warmup": "40"})
    assert "Warm-up steps: must be from 0 to 30, got 40" in texts(at.error)
    assert next(e for e in at.sidebar.expander if e.label == "Advanced").proto.expanded
    at = open_train({"steps": "30", "minlr": "2"})  # out of the widget's range: a notice, the default used
    assert "URL parameter minlr=2 ignored. Decay to (fraction of lr): a number from 0 to 1" in texts(at.warning)


def test_a_decay_end_without_a_decay_is_dropped_not_refused():
    assert make(steps=30, decay="none", min_lr_ratio=0.5) == make_run(steps=30)


def test_ablations_offer_post_ln_with_a_warm_up_of_a_fifth_of_the_steps():
    base = make_run(steps=1500)
    chosen, notes = variants.variant_runs(
        base, ["post-LN", "post-LN with warm-up"], lambda **kw: make(steps=1500, **kw)
    )
    assert not notes
    assert list(chosen) == ["base: the full model", "post-LN", "post-LN, warm-up 300"]
    run = chosen["post-LN, warm-up 300"]
    assert (run.model.norm, run.train.warmup, run.train.decay) == ("post", 300, "none")
