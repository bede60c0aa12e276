"""Bundles at their limits: the documented 5,000 runs, an export that cannot finish
or matches nothing leaves an existing file as it was, and an import counts what it wrote.
"""

from __future__ import annotations

import errno
import io
import json
import os
import subprocess
import sys
import threading
import zipfile

import pytest
from conftest import ROOT
from test_store import STEPS

from attncore.config import make_run
from cli.main import main
from lab import bundle, store
from lab.store import codec

pytestmark = pytest.mark.slow  # each trains its runs or runs the command line in a subprocess

sys.path.insert(0, str(ROOT / "benchmarks"))
from store_listing import fill_store  # noqa: E402

RUNS = [make_run(steps=STEPS), make_run("sort", 4, 1, steps=STEPS), make_run(steps=STEPS, position="none")]


@pytest.fixture
def stored(cache):
    for run in RUNS:
        store.get_run(run)
    return cache


@pytest.fixture
def exported(stored, tmp_path):
    path = tmp_path / "out" / "runs.zip"  # a folder of its own: what is left beside it is seen
    path.parent.mkdir()
    assert bundle.write_bundle(path) == 3
    return path


def members(path) -> dict:
    with zipfile.ZipFile(path) as z:
        return {name: z.read(name) for name in z.namelist()}


def zipped(files: dict) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return out.getvalue()


# --- the documented maximum -------------------------------------------------------------------------------------


def test_a_bundle_of_the_documented_5000_runs_passes_the_manifest_checks(exported, monkeypatch):
    """5,000 entries as large as a default (2-layer) run's: the manifest (~20 MB) is read, every run reached.

    The runs' arrays are stand-ins (decode is replaced), so the test builds in a second; before, the 8 MB
    manifest cap refused anything above about 2,000 such runs.
    """
    entry = json.loads(members(exported)["manifest.json"])["runs"][0]
    assert RUNS[0].model.n_layers == 2 and 3000 < len(json.dumps(entry)) < 8192
    metas = []
    for seed in range(bundle.MAX_RUNS):
        config = json.loads(json.dumps(entry["config"]))
        config["train"]["seed"] = seed
        metas.append(entry | {"config": config, "summary": entry["summary"] | {"config": config}, "npz_bytes": 1})
    manifest = json.dumps({"format": bundle.FORMAT, "numerics_version": store.NUMERICS_VERSION, "runs": metas})
    assert len(manifest) > 16 * 2**20  # twice the old cap
    files = {"manifest.json": manifest.encode()} | {bundle._member(i): b"x" for i in range(bundle.MAX_RUNS)}
    reached = []
    monkeypatch.setattr(codec, "decode", lambda meta, blob, *a, **k: reached.append(meta["config"]) or meta)
    assert len(bundle.read_bundle(zipped(files), max_bytes=200 * 2**20)) == bundle.MAX_RUNS
    assert [c["train"]["seed"] for c in reached] == list(range(bundle.MAX_RUNS))


def test_a_manifest_of_millions_of_numbers_within_the_byte_cap_is_refused_before_parsing(exported):
    """Scalars are counted as containers are: 5,000 runs' worth of bytes spent on numbers costs no json.loads."""
    files = {bundle._member(i): b"" for i in range(bundle.MAX_RUNS)}
    body = b'{"format": "attnlab-bundle/1", "runs": [' + b"0.5," * (bundle.MAX_MANIFEST_BYTES // 5) + b"0.5]}"
    assert len(body) < bundle._manifest_limit(bundle.MAX_RUNS)
    files["manifest.json"] = body
    with pytest.raises(bundle.BundleError, match="manifest.json holds more values than 5000 runs need"):
        bundle.read_bundle(zipped(files), max_bytes=200 * 2**20)


# --- an export never destroys what is there ------------------------------------------------------------------


def full_disk_after(monkeypatch, n_members: int) -> None:
    """ZipFile.writestr raises ENOSPC once n_members members are written (the disk filled up mid-export)."""
    real, calls = zipfile.ZipFile.writestr, []

    def writestr(self, *args, **kwargs):
        calls.append(1)
        if len(calls) > n_members:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "writestr", writestr)


def test_cache_export_over_a_bundle_on_a_full_disk_leaves_the_old_bundle_whole(cache, exported, monkeypatch, capsys):
    before = exported.read_bytes()
    with monkeypatch.context() as disk:  # the full disk only: undoing it keeps the test's own store
        full_disk_after(disk, 1)
        assert main(["cache", "export", str(exported)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err and "was left as it was" in err
    assert exported.read_bytes() == before
    assert sorted(p.name for p in exported.parent.iterdir()) == [exported.name]  # no temporary file left
    assert store.clear_cache(cache) == 3
    assert bundle.import_bundle(exported) == (3, 0)


def test_cache_export_matching_nothing_refuses_and_keeps_the_existing_bundle(cache, exported, capsys):
    before = exported.read_bytes()
    assert main(["cache", "export", str(exported), "--seed", "999"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no stored run matches the filters; nothing was written" in err
    assert exported.read_bytes() == before
    new = exported.parent / "new.zip"
    assert main(["cache", "export", str(new), "--task", "reverse"]) == 2
    assert not new.exists()
    store.clear_cache(cache)
    assert main(["cache", "export", str(exported)]) == 2
    assert "the run store holds no run" in capsys.readouterr().err
    assert exported.read_bytes() == before


def test_write_bundle_refuses_when_every_matched_run_is_damaged(stored, tmp_path):
    target = tmp_path / "keep.zip"
    target.write_bytes(b"the operator's file")
    entry = store._Entry(RUNS[0])
    data = bytearray((entry.path / "record.npz").read_bytes())
    data[len(data) // 2] ^= 1
    (entry.path / "record.npz").write_bytes(bytes(data))
    with pytest.warns(store.CacheWarning), pytest.raises(bundle.BundleError, match="no stored run was written"):
        bundle.write_bundle(target, [RUNS[0]])
    assert target.read_bytes() == b"the operator's file"
    assert bundle.write_bundle(target, RUNS[1:]) == 2


def test_an_export_that_an_import_would_refuse_is_refused_before_anything_is_written(stored, tmp_path, monkeypatch):
    target = tmp_path / "keep.zip"
    target.write_bytes(b"the operator's file")
    most = bundle.MAX_RUNS
    monkeypatch.setattr(bundle, "MAX_RUNS", 2)
    with pytest.raises(bundle.BundleError, match=r"3 runs are more than a bundle holds \(2\); export a part"):
        bundle.write_bundle(target)
    monkeypatch.setattr(bundle, "MAX_RUNS", most)
    monkeypatch.setattr(bundle, "MANIFEST_BYTES_PER_RUN", 1024)  # as if the runs had many more layers
    with pytest.raises(bundle.BundleError, match="an import would refuse this bundle .manifest.json would be"):
        bundle.write_bundle(target)
    assert target.read_bytes() == b"the operator's file"


def test_the_same_runs_give_the_same_bundle_bytes(exported, tmp_path):
    """What lets Streamlit keep one copy of Home's download, however often it is clicked."""
    again = tmp_path / "again.zip"
    assert bundle.write_bundle(again) == 3
    assert again.read_bytes() == exported.read_bytes()
    with zipfile.ZipFile(again) as z:
        manifest = z.read("manifest.json")
        import hashlib

        assert z.comment.decode().endswith(hashlib.sha256(manifest).hexdigest())


# --- an import counts what it wrote ------------------------------------------------------------------------------


def test_a_bundle_listing_a_run_twice_counts_it_once(cache, exported, capsys):
    files = members(exported)
    manifest = json.loads(files["manifest.json"])
    manifest["runs"].append(manifest["runs"][0])
    files["manifest.json"] = json.dumps(manifest).encode()
    files[bundle._member(3)] = files[bundle._member(0)]
    store.clear_cache(cache)
    assert bundle.import_bundle(zipped(files)) == (3, 0)
    assert len(store.list_cached()) == 3
    assert bundle.import_bundle(zipped(files)) == (0, 3)


def test_two_concurrent_imports_of_one_bundle_report_each_run_stored_once(cache, exported, monkeypatch):
    """Both imports look the bundle's runs up in the store before either writes (a barrier after their last
    look-up): each run is written by one of them, and the two counts add up to the bundle's runs."""
    store.clear_cache(cache)
    real, barrier, calls = store.is_cached, threading.Barrier(2, timeout=30), threading.local()

    def is_cached(run, **kwargs):
        found = real(run, **kwargs)
        calls.n = getattr(calls, "n", 0) + 1
        if calls.n == len(RUNS):
            barrier.wait()
        return found

    monkeypatch.setattr(store, "is_cached", is_cached)
    results = []

    def one():
        results.append(bundle.import_bundle(exported))

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 2
    assert sum(stored for stored, _ in results) == 3, results
    assert all(stored + kept == 3 for stored, kept in results), results
    assert len(store.list_cached()) == 3


# --- the held-out loss (a run's summary's test_loss) ----------------------------------------------------------


def with_test_loss(path, value) -> bytes:
    """The bundle with run 1's test_loss set to `value` (left out when value is ...)."""
    files = members(path)
    manifest = json.loads(files["manifest.json"])
    summary = manifest["runs"][0]["summary"]
    summary.pop("test_loss", None)
    if value is not ...:
        summary["test_loss"] = value
    files["manifest.json"] = json.dumps(manifest).encode()
    return zipped(files)


def test_a_run_with_a_valid_test_loss_or_none_at_all_is_imported(cache, exported):
    assert "test_loss" in json.loads(members(exported)["manifest.json"])["runs"][0]["summary"]
    store.clear_cache(cache)
    assert bundle.import_bundle(with_test_loss(exported, 0.125)) == (3, 0)
    assert store.list_cached()[0]["test_loss"] == 0.125
    store.clear_cache(cache)
    assert bundle.import_bundle(with_test_loss(exported, ...)) == (3, 0)  # runs stored before the test loss was kept
    assert len(store.list_cached()) == 3  # its held-out loss, if asked for, is computed from the weights


@pytest.mark.parametrize("value", [-1.0, float("inf"), float("nan"), "0.5", True, None], ids=repr)
def test_a_run_with_an_impossible_test_loss_is_refused(cache, exported, value):
    store.clear_cache(cache)
    with pytest.raises(bundle.BundleError, match="run 1 of 3: test_loss is not a finite number >= 0"):
        bundle.import_bundle(with_test_loss(exported, value))
    assert store.list_cached() == []


def test_export_counts_a_manifest_as_import_does(exported):
    """export checks the structure on the document, import on the text: the same counts for the same manifest."""
    text = members(exported)["manifest.json"]
    bare = bundle._STRING.sub(b'""', text)
    brackets = bare.count(b"{") + bare.count(b"[")
    containers, commas, depth = bundle._structure(json.loads(text))
    assert (containers, commas, depth) == (brackets, bare.count(b","), 6)


# --- an import streams its runs ----------------------------------------------------------------------------------

PEAK_RSS = """
import resource, sys
from cli.main import main
code = main(sys.argv[1:])
print("peak", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, code, file=sys.stderr)
"""


def peak_rss(args: list[str], location) -> tuple[int, int]:
    """(peak resident bytes, exit code) of the command line running `args` in a fresh process on `location`."""
    env = os.environ | {"PYTHONPATH": str(ROOT), store.ENV_VAR: str(location)}
    # a hang guard, not a time limit: importing 2,000 runs took more than 300 s at a load of 15-20 on two cores
    done = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600
    )
    line = next(line for line in done.stderr.splitlines() if line.startswith("peak "))
    return int(line.split()[1]), int(line.split()[2])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss is in kB on Linux only")
def test_an_import_of_2000_runs_reads_them_from_the_file_one_at_a_time(tmp_path):
    """Before, the whole file and then every decoded run were in memory at once (a 385 MB bundle of 2,203 runs
    peaked at 963 MB); now each run is checked, then stored, one at a time, straight from the file."""
    fill_store(tmp_path / "source", 2000)
    path = tmp_path / "runs.zip"
    assert bundle.export_bundle(path, location=tmp_path / "source") == 2000
    size = path.stat().st_size
    baseline, code = peak_rss(["cache", "list"], tmp_path / "empty")  # the same process, reading no bundle
    assert code == 0
    peak, code = peak_rss(["cache", "import", str(path)], tmp_path / "target")
    assert code == 0 and len(store.list_cached(location=tmp_path / "target")) == 2000
    assert peak - baseline < size, (peak - baseline, size)  # the manifest and one run; before, 1.5x the file here
