"""The store never serves a wrong run, never unpickles, and survives damage, a full disk and a read-only folder."""

from __future__ import annotations

import builtins
import errno
import io
import json
import pickle
import shutil
import warnings
from dataclasses import replace

import numpy as np
import pytest
from test_store import STEPS, assert_same_record, counting

from attncore.config import make_run
from lab import store
from lab.store import backend as entries
from lab.store import codec


def entry_dir(run):
    return store._Entry(run).path


def flip_bytes(path, other):
    data = bytearray((path / entries.RECORD_FILE).read_bytes())
    for i in (len(data) // 3, len(data) // 2):  # inside the arrays, not the zip's headers
        data[i] ^= 0xFF
    (path / entries.RECORD_FILE).write_bytes(bytes(data))


def other_runs_arrays(path, other):
    shutil.copy(other / entries.RECORD_FILE, path / entries.RECORD_FILE)


def other_runs_entry(path, other):  # arrays and sidecar: whole and sealed, but another run's
    for name in (entries.RECORD_FILE, entries.SIDECAR_FILE):
        shutil.copy(other / name, path / name)


def truncate(path, other):
    data = (path / entries.RECORD_FILE).read_bytes()
    (path / entries.RECORD_FILE).write_bytes(data[: len(data) // 2])


def garbage_sidecar(path, other):
    (path / entries.SIDECAR_FILE).write_bytes(b"\x00\xff{garbage")


def edited_sidecar(path, other):  # valid JSON, a number changed: the seal no longer matches
    sealed = json.loads((path / entries.SIDECAR_FILE).read_text())
    sealed["meta"]["summary"]["sequence_accuracy"] = 1.0
    (path / entries.SIDECAR_FILE).write_text(json.dumps(sealed))


@pytest.mark.slow
@pytest.mark.parametrize(
    "damage", [flip_bytes, other_runs_arrays, other_runs_entry, truncate, garbage_sidecar, edited_sidecar]
)
def test_a_damaged_entry_is_recomputed_bit_identical_and_repaired(cache, damage):
    run, other_run = make_run(steps=STEPS), make_run(steps=STEPS, seed=1)
    original = store.get_run(run)
    store.get_run(other_run)
    damage(entry_dir(run), entry_dir(other_run))
    assert not store.is_cached(run)
    steps, callback = counting()
    with pytest.warns(store.CacheWarning, match="failed its checks"):
        again = store.get_run(run, callback)
    assert len(steps) == STEPS  # recomputed, not served
    assert_same_record(original, again)
    assert again.final_loss == original.final_loss and again.eval.token_accuracy == original.eval.token_accuracy
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # repaired: a clean hit, and the other run untouched
        steps.clear()
        assert_same_record(original, store.get_run(run, callback))
        assert store.get_run(other_run).config == other_run
    assert steps == []
    assert store.check_store()["damaged"] == []


class Marker:
    """Unpickling this creates the file `path`: the proof that something unpickled it."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (builtins.open, (self.path, "w"))


def forge(path, meta: dict, data: bytes, key: str | None, monkeypatch) -> None:
    """Replace an entry by (meta, data) with a sidecar sealed as a forger would: with `key`, or with none."""
    meta = meta | {"npz_sha256": __import__("hashlib").sha256(data).hexdigest(), "npz_bytes": len(data)}
    with monkeypatch.context() as m:
        if key:
            m.setenv(codec.KEY_VAR, key)
        else:
            m.delenv(codec.KEY_VAR, raising=False)
        sidecar = codec.seal(meta)
    (path / entries.RECORD_FILE).write_bytes(data)
    (path / entries.SIDECAR_FILE).write_text(sidecar)


def pickle_payloads(marker) -> dict[str, bytes]:
    """A bare pickle, and an .npz whose loss_history is an object array (numpy pickles it)."""
    buffer = io.BytesIO()
    np.savez(buffer, loss_history=np.array([Marker(marker)], dtype=object))
    return {"pickle": pickle.dumps(Marker(marker)), "npz with an object array": buffer.getvalue()}


@pytest.mark.slow
@pytest.mark.parametrize("key", [None, "secret"])
def test_a_planted_pickle_never_runs(cache, tmp_path, monkeypatch, key):
    if key:
        monkeypatch.setenv(codec.KEY_VAR, key)
    run = make_run(steps=STEPS)
    original = store.get_run(run)
    path = entry_dir(run)
    meta = codec.unseal((path / entries.SIDECAR_FILE).read_bytes())
    marker = tmp_path / "pwned"
    for payload in pickle_payloads(marker).values():
        # joblib's own file name, with no sidecar: the old layout is never read
        shutil.rmtree(path)
        path.mkdir()
        (path / "output.pkl").write_bytes(payload)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", store.CacheWarning)
            assert_same_record(original, store.get_run(run))
        # a forged sidecar whose plain SHA-256 matches the payload (a forger without the key can write that)
        forge(path, meta, payload, None, monkeypatch)
        with pytest.warns(store.CacheWarning):
            assert_same_record(original, store.get_run(run))
        assert not marker.exists()


def _fewer_snapshots(record):
    record.snapshots = record.snapshots[:-1]


def _shifted_steps(record):
    record.snapshots = [replace(s, step=s.step + 1) for s in record.snapshots]


def _wrong_probe_shape(record):
    record.snapshots = [replace(s, probe_attention=s.probe_attention[:, :2]) for s in record.snapshots]


def _accuracy_out_of_range(record):
    record.snapshots = [replace(s, token_accuracy=2.0) for s in record.snapshots]


@pytest.mark.slow
@pytest.mark.parametrize("change", [_fewer_snapshots, _shifted_steps, _wrong_probe_shape, _accuracy_out_of_range])
def test_sealed_snapshots_that_do_not_fit_the_config_are_refused(cache, monkeypatch, change):
    """A consistent, sealed entry whose snapshot arrays do not fit the config is recomputed like any other."""
    run = make_run(steps=STEPS)
    genuine = store.get_run(run)
    forged = store.get_run(run)
    change(forged)
    meta, data = codec.encode(forged)
    meta["numerics_version"] = store.NUMERICS_VERSION
    forge(entry_dir(run), meta, data, None, monkeypatch)
    assert not store.is_cached(run) or change in (_shifted_steps, _accuracy_out_of_range)  # shapes: refused early
    steps, callback = counting()
    with pytest.warns(store.CacheWarning, match="failed its checks"):
        again = store.get_run(run, callback)
    assert len(steps) == STEPS
    assert_same_record(genuine, again)


@pytest.mark.slow
def test_with_a_key_a_forged_entry_is_refused_without_it_it_is_served(cache, monkeypatch):
    """The threat model: without ATTNCORE_CACHE_KEY a writer of the folder can plant a consistent wrong run."""
    run, other = make_run(steps=STEPS), make_run(steps=STEPS, seed=1)
    genuine, other_record = store.get_run(run), store.get_run(other)
    forged_meta, forged_data = codec.encode(other_record)  # seed 1's numbers under seed 0's config
    forged_meta |= {"numerics_version": store.NUMERICS_VERSION, "config": run.to_dict()}
    forged_meta["summary"] = forged_meta["summary"] | {"config": run.to_dict()}
    forge(entry_dir(run), forged_meta, forged_data, None, monkeypatch)
    served = store.get_run(run)  # no key: consistent and sealed, so served
    assert np.array_equal(served.loss_history, other_record.loss_history)

    monkeypatch.setenv(codec.KEY_VAR, "secret")
    steps, callback = counting()
    with pytest.warns(store.CacheWarning, match="not signed"):
        assert_same_record(genuine, store.get_run(run, callback))
    assert len(steps) == STEPS
    assert not store.is_cached(run) and store.unverified_runs()[0] == 2  # both unsigned: kept, never served (27.1)
    forge(entry_dir(run), forged_meta, forged_data, "a guessed key", monkeypatch)
    with pytest.warns(store.CacheWarning, match="not signed"):
        assert_same_record(genuine, store.get_run(run))
    assert store.check_store(repair=True)["unverified"] and store.unverified_runs()[0] == 2  # a repair keeps them
    assert len(store.check_store(repair=True, drop_unverified=True)["unverified"]) == 2  # deleted when asked to
    assert store.unverified_runs() == (0, 0)
    assert_same_record(genuine, store.get_run(run))  # computed and stored with the key
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rewritten with the key: served
        assert_same_record(genuine, store.get_run(run))


@pytest.mark.slow
@pytest.mark.parametrize("damage", [b"\xff\xfe\x00 random bytes \x80", b""], ids=["random bytes", "emptied"])
def test_a_damaged_joblib_code_file_deletes_nothing_and_breaks_nothing(cache, damage):
    runs = [make_run(steps=STEPS), make_run(steps=STEPS, seed=1)]
    originals = [store.get_run(run) for run in runs]
    (code_file,) = (cache / "joblib").rglob("func_code.py")
    code_file.write_bytes(damage)
    store._MEMO.clear()  # as a new process would start
    steps, callback = counting()
    for run, original in zip(runs, originals, strict=True):
        assert_same_record(original, store.get_run(run, callback))
    assert steps == []  # nothing was wiped or retrained
    assert code_file.read_text().startswith("# first line:")  # rewritten
    # joblib's own check now agrees (it would have wiped every run over an emptied file)
    func = store._memorized(str(cache))
    assert func.check_call_in_cache(runs[0].to_dict(), store.NUMERICS_VERSION)
    code_file.write_bytes(damage)  # damaged while a process runs: the store does not read it
    assert_same_record(originals[0], store.get_run(runs[0], callback))
    assert store.check_store(repair=True)["func_code"] is True
    assert len(store.list_cached()) == 2 and steps == []


class PartialWriter:
    """A file whose first write lands `after_bytes` bytes, then fails with `err` (a disk that fills up)."""

    def __init__(self, fh, err: int, after_bytes: int):
        self.fh, self.err, self.after_bytes = fh, err, after_bytes

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()

    def write(self, data):
        self.fh.write(data[: self.after_bytes])
        self.fh.flush()
        raise OSError(self.err, "simulated")


def failing_writes(monkeypatch, err: int, after_bytes: int | None):
    """Every file the store writes fails with `err`; after_bytes: how much of it lands on disk first."""
    real_open = builtins.open

    def fake_open(path, mode="r", *args, **kwargs):
        if "w" not in mode and ("a" not in mode or after_bytes is not None):  # a full disk still opens locks
            return real_open(path, mode, *args, **kwargs)
        if after_bytes is None:
            raise OSError(err, "simulated")
        return PartialWriter(real_open(path, mode, *args, **kwargs), err, after_bytes)

    monkeypatch.setattr(entries, "open", fake_open, raising=False)


@pytest.mark.slow
@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EROFS])
def test_a_full_or_read_only_store_still_returns_the_run_with_one_warning(cache, monkeypatch, err):
    stored_run, new_run = make_run(steps=STEPS), make_run(steps=STEPS, seed=1)
    stored = store.get_run(stored_run)
    before = sorted(p.relative_to(cache) for p in cache.rglob("*"))
    # ENOSPC: half of each file is written before the disk refuses; EROFS: nothing can even be opened
    with monkeypatch.context() as disk, warnings.catch_warnings(record=True) as caught:
        failing_writes(disk, err, 1000 if err == errno.ENOSPC else None)
        warnings.simplefilter("always")
        record = store.get_run(new_run)
        again = store.get_run(stored_run)
    assert_same_record(record, store.compute_run(new_run))
    assert_same_record(stored, again)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "not stored" in messages[0] and "simulated" in messages[0], messages
    after = sorted(p.relative_to(cache) for p in cache.rglob("*") if p.is_file())
    assert [p for p in after if p not in before] == []  # no partial file, no temporary file left
    assert not store.is_cached(new_run) and store.is_cached(stored_run)
    assert len(store.list_cached()) == 1


def test_an_unusable_store_folder_still_returns_the_run(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(store.ENV_VAR, str(blocker / "cache"))  # cannot be created: a file is in the way
    run = make_run(steps=STEPS)
    with pytest.warns(store.CacheWarning, match="unavailable"):
        record = store.get_run(run)
    assert_same_record(record, store.compute_run(run))
    assert not store.is_cached(run) and store.list_cached() == []


@pytest.mark.slow
def test_lock_files_are_removed_after_each_computation(cache):
    for seed in range(3):
        store.get_run(make_run(steps=STEPS, seed=seed))
    assert [p.name for p in (cache / "locks").iterdir()] == ["index.lock"]
