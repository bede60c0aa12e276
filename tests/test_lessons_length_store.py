"""lab.length_store: a stored run's evaluations at other lengths, kept beside the store for the lessons' first views,
read back exactly (NaN and "no number" too) and ignored whenever the file does not hold (the folder is shared)."""

from __future__ import annotations

import json
import math

from attncore import make_run
from attncore.evaluate import LengthResult
from lab import length_store
from lab.jobs.training import run_key
from lab.store import NUMERICS_VERSION
from lab.store.codec import seal

KEY = run_key(make_run("copy", 8, train_min=1, steps=30))
RESULTS = {
    3: LengthResult(3, 0.5, 0.25, None),
    9: LengthResult(9, None, None, "learned positions: a table of 17 rows"),
    12: LengthResult(12, 1.0, math.nan, None),
}


def same(a: LengthResult, b: LengthResult) -> bool:
    return (
        a.length == b.length
        and a.note == b.note
        and all(
            x == y or (x is not None and y is not None and math.isnan(x) and math.isnan(y))
            for x, y in ((a.token_accuracy, b.token_accuracy), (a.sequence_accuracy, b.sequence_accuracy))
        )
    )


def test_kept_results_read_back_exactly_and_merge(cache):
    assert length_store.read(KEY) == {}
    length_store.write(KEY, {3: RESULTS[3], 9: RESULTS[9]})
    length_store.write(KEY, {12: RESULTS[12]})
    kept = length_store.read(KEY)
    assert sorted(kept) == [3, 9, 12] and all(same(kept[n], RESULTS[n]) for n in RESULTS)
    assert length_store.read(KEY, randomized=True) == {}  # another position draw: another file
    assert length_store.read(run_key(make_run("copy", 8, train_min=1, steps=31))) == {}


def _forge(meta_change=None, text=None):
    path = length_store._path(KEY, False, None)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"run": KEY, "numerics": NUMERICS_VERSION, "randomized": False, "results": [[3, 0.5, 0.25, None]]}
    path.write_text(text if text is not None else seal(meta | (meta_change or {})))


def test_a_file_that_does_not_hold_is_ignored(cache):
    _forge()
    assert sorted(length_store.read(KEY)) == [3]  # the forger's baseline: a whole file reads
    bad = [
        {"run": run_key(make_run())},  # another run's
        {"numerics": NUMERICS_VERSION + 1},
        {"randomized": True},
        {"results": [[3, 1.5, 0.25, None]]},  # an accuracy out of range
        {"results": [[0, 0.5, 0.25, None]]},  # no such length
        {"results": [[3, "0.5", 0.25, None]]},
        {"results": [[3, 0.5, 0.25, "x" * 10_000]]},
        {"results": [[3, True, 0.25, None]]},
        {"results": "[[3, 0.5, 0.25, null]]"},
    ]
    for change in bad:
        _forge(change)
        assert length_store.read(KEY) == {}, change
    good = json.loads(seal({"run": KEY, "numerics": NUMERICS_VERSION, "randomized": False, "results": []}))
    good["meta"]["results"] = [[3, 0.9, 0.9, None]]  # edited without resealing: the digest no longer holds
    _forge(text=json.dumps(good))
    assert length_store.read(KEY) == {}
    _forge(text="{" * 100_000)  # over the size bound: not even parsed
    assert length_store.read(KEY) == {}
    length_store.write(KEY, {9: RESULTS[9]})  # a bad file is replaced by the next write
    assert sorted(length_store.read(KEY)) == [9]


def test_a_read_only_folder_only_loses_the_keeping(cache, monkeypatch):
    def refuse(*a, **k):
        raise OSError("read-only file system")

    monkeypatch.setattr(length_store, "write_atomic", refuse)
    length_store.write(KEY, RESULTS)  # no exception
    assert length_store.read(KEY) == {}


def test_the_length_page_keeps_what_it_evaluates_and_reads_what_is_kept(cache):
    """The sidebar's run at 30 steps: its first view evaluates and keeps; a later server (the memo emptied) reads
    the kept numbers instead of generating (a distinctive kept value shows in the table)."""
    from apptest_helpers import TIMEOUT
    from streamlit.testing.v1 import AppTest

    def open_page(query):  # the sidebar reads its settings (steps) from the link the session starts with
        at = AppTest.from_file("../dashboard.py", default_timeout=TIMEOUT)
        at.query_params.update(query)
        at.switch_page("app_pages/lengths.py").run()
        assert not at.exception, [e.message for e in at.exception]
        return at

    from attncore.evaluate import evaluate_lengths
    from lab.jobs import memo
    from lab.store import get_run

    run = make_run(steps=30)
    record = get_run(run)
    memo.shared.clear()  # a fresh server: another test of this process may have evaluated the run into the memo
    open_page({"steps": "30", "len_L": "2,7"})
    kept = length_store.read(run_key(run))
    assert sorted(kept) == [2, 7]
    assert all(same(kept[r.length], r) for r in evaluate_lengths(record.params, run, [2, 7]))
    length_store.write(run_key(run), {7: LengthResult(7, 0.123456, 0.0, None)})
    memo.shared.clear()  # a fresh server: its memos empty
    at = open_page({"steps": "30", "len_L": "2,7"})
    tables = [t.value for t in at.dataframe]
    assert any("0.123" in set(t.get("token_accuracy", [])) for t in tables)


def test_turned_off_it_neither_reads_nor_keeps(cache, monkeypatch):
    length_store.write(KEY, RESULTS)
    monkeypatch.setenv(length_store.OFF_VAR, "0")
    assert length_store.read(KEY) == {}
    length_store.write(KEY, {20: LengthResult(20, 0.5, 0.5, None)})
    monkeypatch.delenv(length_store.OFF_VAR)
    assert sorted(length_store.read(KEY)) == [3, 9, 12]
