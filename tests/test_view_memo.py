"""The server-wide view memos (lab.jobs.memo.memoised, ui.charts.memo, ui.runs' records): bounded, keyed by content,
switched off by ATTNLAB_VIEW_MEMO=0, and serving what the page would have computed, no stale record."""

from __future__ import annotations

import json
import os

import altair as alt
import numpy as np
import pandas as pd
import pytest

from attncore.config import make_run
from lab.jobs import memo
from ui.charts import memo as chart_memo
from ui.charts.runs import loss_curve


@pytest.fixture(autouse=True)
def fresh_memos(monkeypatch):
    monkeypatch.delenv("ATTNLAB_VIEW_MEMO", raising=False)
    memo.view_memo.clear()
    yield
    memo.view_memo.clear()


def test_memo_is_bounded_by_the_bytes_it_declares():
    m = memo.Memo(max_entries=100, max_bytes=1000)
    for i in range(5):
        m.put(i, str(i), size=300)
    assert len(m) == 3 and m.bytes == 900  # the two oldest dropped
    assert m.get(0) is memo.MISSING and m.get(4) == "4"
    m.put("huge", "x", size=1001)  # more than the whole memo: not kept, nothing dropped for it
    assert m.get("huge") is memo.MISSING and len(m) == 3
    m.pop(4)
    assert m.bytes == 600


def test_memoised_computes_once_per_key_and_not_at_all_when_off(monkeypatch):
    calls = []

    def compute():
        calls.append(1)
        return object()

    first = memo.memoised("frames", ("k", 1), compute)
    assert memo.memoised("frames", ("k", 1), compute) is first and len(calls) == 1
    assert memo.memoised("frames", ("k", 2), compute) is not first and len(calls) == 2
    monkeypatch.setenv("ATTNLAB_VIEW_MEMO", "0")
    memo.memoised("frames", ("k", 1), compute)
    memo.memoised("frames", ("k", 1), compute)
    assert len(calls) == 4


def test_content_key_follows_every_value_label_and_type():
    df = pd.DataFrame({"step": [1, 2, 3], "loss": [0.5, 0.25, 0.125]})
    key = chart_memo.content_key(df)
    assert chart_memo.content_key(df.copy()) == key
    changed = df.copy()
    changed.loc[2, "loss"] = 0.126
    assert chart_memo.content_key(changed) != key
    assert chart_memo.content_key(df.rename(columns={"loss": "test loss"})) != key
    assert chart_memo.content_key(df.astype({"step": float})) != key
    assert chart_memo.content_key(df.iloc[::-1]) != key  # the same rows in another order draw another chart
    a = np.arange(6, dtype=np.float32)
    assert chart_memo.content_key(a) != chart_memo.content_key(a.reshape(2, 3))
    assert chart_memo.content_key(True) != chart_memo.content_key(1)  # equal in Python, not as an argument
    assert chart_memo.content_key(alt.Scale(domain=[0, 1])) == chart_memo.content_key(alt.Scale(domain=[0, 1]))
    assert chart_memo.content_key(alt.Scale(domain=[0, 1])) != chart_memo.content_key(alt.Scale(domain=[0, 2]))
    with pytest.raises(chart_memo.Unkeyable):  # a chart as an argument: not by its spec
        chart_memo.content_key(alt.Chart(df).mark_line())
    with pytest.raises(chart_memo.Unkeyable):
        chart_memo.content_key(object())
    with pytest.raises(chart_memo.Unkeyable):
        chart_memo.content_key(pd.DataFrame({"cell": [[1, 2]]}))


def test_a_memoised_chart_is_shared_and_converts_to_the_spec_a_fresh_one_does():
    df = pd.DataFrame({"step": np.arange(1, 51), "loss": np.linspace(2.0, 0.1, 50)})
    chart = loss_curve(df, log=True)
    assert loss_curve(df.copy(), log=True) is chart  # same content: the one chart
    assert loss_curve(df, log=False) is not chart
    df.loc[0, "loss"] = 99.0  # the caller changes its frame afterwards: the kept chart does not follow
    assert chart.data["loss"].iloc[0] == 2.0
    df.loc[0, "loss"] = 2.0
    fresh = loss_curve.__wrapped__(df, log=True)
    assert json.dumps(chart.to_dict(), sort_keys=True) == json.dumps(fresh.to_dict(), sort_keys=True)
    assert json.dumps(chart.to_dict(), sort_keys=True) == json.dumps(fresh.to_dict(), sort_keys=True)  # 2nd call


def test_a_chart_with_an_unkeyable_argument_is_built_each_time():
    df = pd.DataFrame({"step": [1, 2], "loss": [1.0, 0.5]})
    builds = []

    @chart_memo.memo_chart
    def chart(frame, extra):
        builds.append(1)
        return loss_curve.__wrapped__(frame)

    chart(df, object())
    chart(df, object())
    chart(df, "plain")
    chart(df, "plain")
    assert len(builds) == 3


class FakeChart:
    """Records the validate flag of each conversion; fails the check while `invalid`."""

    def __init__(self):
        self.validated, self.invalid = [], False

    def to_dict(self, validate=True, **kwargs):
        self.validated.append(validate)
        if validate and self.invalid:
            raise ValueError("schema")
        return {"mark": "line"}


def test_a_chart_checks_its_schema_until_one_conversion_passed():
    fake = FakeChart()
    fake.invalid = True
    chart = chart_memo.validated_once(fake)
    with pytest.raises(ValueError):
        chart.to_dict()
    with pytest.raises(ValueError):
        chart.to_dict()  # a failed check is not remembered as passed
    fake.invalid = False
    chart.to_dict()
    chart.to_dict()
    chart.to_dict(validate=False)
    assert fake.validated == [True, True, True, False, False]


def test_the_records_memo_serves_a_stored_run_until_its_entry_changes(cache):
    from lab.store import get_run
    from ui import runs

    run = make_run("copy", 4, steps=20)
    assert runs._remembered(run) is None  # not stored
    get_run(run)
    first = runs._remembered(run)
    assert first is not None and runs._remembered(run) is first  # read once, then from the memo
    sidecar = next(p for p in cache.rglob("record.json"))
    arrays = sidecar.parent / "record.npz"
    used = sidecar.stat().st_mtime_ns
    os.utime(sidecar, ns=(used - 10**9, used - 10**9))
    assert runs._remembered(run) is first
    assert sidecar.stat().st_mtime_ns > used - 10**9  # a view from the memo marks the run used, as a read does
    os.utime(arrays)  # the arrays written again (their times change): read and checked again
    again = runs._remembered(run)
    assert again is not first and np.array_equal(again.loss_history, first.loss_history)
    data = bytearray(arrays.read_bytes())
    data[len(data) // 2] ^= 0xFF  # damaged on disk: not served from memory
    arrays.write_bytes(bytes(data))
    assert runs._remembered(run) is None
    arrays.unlink()
    assert runs._remembered(run) is None
