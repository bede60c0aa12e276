"""A changed or new ATTNCORE_CACHE_KEY never deletes runs: untrusted is not damaged.

A record whose seal does not verify under the current key is kept but never served; only an explicit
`cache check --repair --drop-unverified` deletes it, and `cache sign` adopts it under the current key.
"""

from __future__ import annotations

import pytest
from test_store import STEPS, counting

from attncore.config import make_run
from cli.main import main
from lab import store
from lab.store import codec

RUNS = [make_run(steps=STEPS, seed=s) for s in range(2)]


def store_files(cache) -> dict:
    """Every file of the store's entries (record.npz, record.json, joblib's metadata.json), path -> bytes."""
    func_dir = store._Entry(RUNS[0], cache).func_dir
    return {p: p.read_bytes() for entry in func_dir.iterdir() if entry.is_dir() for p in entry.iterdir()}


@pytest.mark.slow
@pytest.mark.parametrize("first_key", ["key A", None], ids=["changed key", "key set on an unkeyed store"])
def test_another_key_keeps_every_run_until_it_is_signed(cache, monkeypatch, first_key):
    if first_key:
        monkeypatch.setenv(codec.KEY_VAR, first_key)
    records = [store.get_run(run) for run in RUNS]
    before = store_files(cache)
    assert len(before) == 6 and len(store.list_cached()) == 2

    monkeypatch.setenv(codec.KEY_VAR, "key B")
    report = store.check_store(repair=True)  # what the dashboard runs at startup
    assert report["damaged"] == [] and len(report["unverified"]) == 2
    assert store_files(cache) == before  # nothing deleted, nothing rewritten
    assert store.list_cached() == [] and not store.is_cached(RUNS[0])  # untrusted: never served
    assert store.unverified_runs() == (2, sum(len(b) for b in before.values()))
    with pytest.warns(store.CacheWarning, match="not signed with this store's ATTNCORE_CACHE_KEY"):
        assert store.get_run(RUNS[0]).config == RUNS[0]  # computed for the caller, not stored over the entry
    assert store.enforce_cap(1) == 0  # neither counted nor evicted by a cap pass
    assert store_files(cache) == before

    assert store.sign_store() == {"signed": 2, "already": 0, "left": []}
    assert store.unverified_runs() == (0, 0) and len(store.list_cached()) == 2
    steps, callback = counting()
    for run, record in zip(RUNS, records, strict=True):
        assert store.get_run(run, callback).final_loss == record.final_loss
    assert steps == []  # served, not trained
    assert store.check_store()["ok"] == 2


@pytest.mark.slow
def test_only_drop_unverified_deletes_them(cache, monkeypatch, capsys):
    monkeypatch.setenv(codec.KEY_VAR, "key A")
    for run in RUNS:
        store.get_run(run)
    monkeypatch.setenv(codec.KEY_VAR, "key B")
    assert main(["cache", "check"]) == 1
    assert main(["cache", "check", "--repair"]) == 0
    out = capsys.readouterr().out
    assert "unverified, kept: 2 runs not signed with this store's ATTNCORE_CACHE_KEY" in out
    assert "`cache sign` re-seals them" in out and "damaged" not in out
    assert len(store_files(cache)) == 6
    assert main(["cache", "list"]) == 0
    listed = capsys.readouterr()
    assert listed.out.startswith("0 runs in ")
    assert listed.err.startswith("warning: 2 stored runs (") and "not signed" in listed.err
    assert main(["cache", "check", "--drop-unverified"]) == 2  # only with --repair
    assert "--drop-unverified: only with --repair" in capsys.readouterr().err
    assert main(["cache", "check", "--repair", "--drop-unverified"]) == 0
    assert "deleted 2 runs not signed with ATTNCORE_CACHE_KEY" in capsys.readouterr().out
    assert store_files(cache) == {} and store.unverified_runs() == (0, 0)


def test_cache_sign_adopts_an_unkeyed_store_and_says_how_many(cache, monkeypatch, capsys):
    for run in RUNS:
        store.get_run(run)
    assert main(["cache", "sign"]) == 2  # no key: nothing to sign with
    assert "ATTNCORE_CACHE_KEY is not set" in capsys.readouterr().err
    monkeypatch.setenv(codec.KEY_VAR, "a new key")
    assert main(["cache", "sign"]) == 0
    assert capsys.readouterr().out.startswith("signed 2 runs with ATTNCORE_CACHE_KEY in ")
    assert main(["cache", "sign"]) == 0
    again = capsys.readouterr().out
    assert "signed 0 runs" in again and "(2 already were)" in again
    assert len(store.list_cached()) == 2 and store.check_store()["unverified"] == []


def test_sign_never_adopts_a_damaged_entry(cache, monkeypatch):
    for run in RUNS:
        store.get_run(run)
    (store._Entry(RUNS[1]).path / "record.npz").write_bytes(b"not the arrays")
    monkeypatch.setenv(codec.KEY_VAR, "a new key")
    report = store.sign_store()
    assert report["signed"] == 1 and len(report["left"]) == 1 and "SHA-256" in report["left"][0][1]
    assert [s["config"] for s in store.list_cached()] == [RUNS[0].to_dict()]
