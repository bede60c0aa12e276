"""Run bundles: a round trip is bit-identical, and every hostile bundle is refused whole with one clear line."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
from test_store import STEPS, assert_same_record, counting
from test_store_integrity import Marker

from attncore.config import make_run
from cli.main import main
from lab import bundle, store

pytestmark = pytest.mark.slow  # each trains its runs or runs the command line in a subprocess

RUNS = [make_run(steps=STEPS), make_run("sort", 4, 1, steps=STEPS), make_run(steps=STEPS, position="none")]


@pytest.fixture
def originals(cache):
    return [store.get_run(run) for run in RUNS]


def test_export_clear_import_gives_bit_identical_records(cache, tmp_path, originals):
    path = tmp_path / "runs.zip"
    assert bundle.export_bundle(path) == 3
    with zipfile.ZipFile(path) as z:  # no pickle anywhere: JSON and plain arrays
        assert sorted(z.namelist()) == ["manifest.json", "runs/00000.npz", "runs/00001.npz", "runs/00002.npz"]
        for name in [n for n in z.namelist() if n != "manifest.json"]:
            with np.load(io.BytesIO(z.read(name)), allow_pickle=False) as npz:
                assert all(npz[k].dtype != object for k in npz.files)
    store.clear_cache(cache)
    assert store.list_cached() == []
    assert bundle.import_bundle(path) == (3, 0)
    steps, callback = counting()
    for run, original in zip(RUNS, originals, strict=True):
        again = store.get_run(run, callback)
        assert_same_record(original, again)
        assert again.eval == original.eval and again.final_loss == original.final_loss
        assert again.train_seconds == original.train_seconds and again.n_params == original.n_params
        assert np.array_equal(again.probe_tokens, original.probe_tokens)
    assert steps == []  # served, not trained
    assert store.list_cached() == [r.summary() for r in originals]
    assert bundle.import_bundle(path) == (0, 3)  # a second import keeps what is stored


def test_the_cache_command_exports_filtered_runs_and_imports_them(cache, tmp_path, originals, capsys):
    path = tmp_path / "sort.zip"
    assert main(["cache", "export", str(path), "--task", "sort"]) == 0
    store.clear_cache(cache)
    assert main(["cache", "import", str(path)]) == 0
    assert "imported 1 run (0 were already stored)" in capsys.readouterr().out
    assert [s["config"] for s in store.list_cached()] == [RUNS[1].to_dict()]
    assert main(["cache", "export", str(tmp_path / "missing" / "x.zip")]) == 2
    assert main(["cache", "import", str(tmp_path / "nothing.zip")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("error: FILE: ") for line in err)


def rewrite(path, change) -> bytes:
    """The bundle at `path` with change(members: dict name -> bytes) applied, as bytes."""
    with zipfile.ZipFile(path) as z:
        members = {name: z.read(name) for name in z.namelist()}
    change(members)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return out.getvalue()


def edit_manifest(members, edit):
    manifest = json.loads(members["manifest.json"])
    edit(manifest)
    members["manifest.json"] = json.dumps(manifest).encode()


def flip(members):
    data = bytearray(members["runs/00001.npz"])
    data[len(data) // 2] ^= 1
    members["runs/00001.npz"] = bytes(data)


def other_config(members):  # another model's config: the digests still hold, the shapes do not
    def edit(m):
        for config in (m["runs"][0]["config"], m["runs"][0]["summary"]["config"]):
            config["model"] |= {"d_model": 64, "d_ff": 256}

    edit_manifest(members, edit)


def object_array(members):  # an array numpy would unpickle, with a manifest that vouches for its bytes
    import hashlib

    buffer = io.BytesIO()
    np.savez(buffer, loss_history=np.array([Marker(members["marker"])], dtype=object))
    data = buffer.getvalue()
    members["runs/00000.npz"] = data

    def edit(m):
        m["runs"][0] |= {"npz_sha256": hashlib.sha256(data).hexdigest(), "npz_bytes": len(data)}

    edit_manifest(members, edit)


def zip_bomb(members):
    members["runs/00002.npz"] = b"\0" * (5 * 2**20)  # deflates to a few kB, unpacks beyond twice the 2 MB cap


HOSTILE = {
    "not a zip": (lambda m: None, "not a zip archive"),
    "flipped byte": (flip, "run 2 of 3: the array file's SHA-256"),
    "other config": (other_config, "run 1 of 3: array"),
    "other numerics version": (lambda m: edit_manifest(m, lambda x: x.update(numerics_version=1)), "numerics"),
    "garbage manifest": (lambda m: m.update({"manifest.json": b"\xff{"}), "not a attnlab-bundle/1 manifest"),
    "extra member": (lambda m: m.update({"../evil.py": b"x"}), "files other than"),
    "missing run": (lambda m: m.pop("runs/00001.npz"), "files other than"),
    "manifest claims more runs": (
        lambda m: edit_manifest(m, lambda x: x.update(runs=x["runs"] * 2000)),
        "manifest.json is larger than 3 runs need",
    ),
    "too many runs": (lambda m: m.update({f"runs/{i:05d}.npz": b"" for i in range(5001)}), "more than 5000"),
    "object array": (object_array, "run 1 of 3"),
    "zip bomb": (zip_bomb, "unpacks to more"),
}


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_a_hostile_bundle_is_refused_whole_and_stores_nothing(cache, tmp_path, originals, case):
    path = tmp_path / "runs.zip"
    bundle.export_bundle(path)
    store.clear_cache(cache)
    change, message = HOSTILE[case]
    marker = tmp_path / "pwned"
    if case == "not a zip":
        data = b"PK\x03\x04 but not really"
    else:
        data = rewrite(path, lambda m: (m.update(marker=str(marker).encode()), change(m), m.pop("marker")))
    big = case in ("too many runs", "manifest claims more runs")
    with pytest.raises(bundle.BundleError, match=message) as info:
        bundle.import_bundle(data, max_bytes=(64 if big else 2) * 2**20)
    assert "\n" not in str(info.value)
    assert store.list_cached() == [] and not marker.exists()


def test_a_bundle_over_the_size_cap_is_refused_before_it_is_read(cache, tmp_path, originals):
    path = tmp_path / "runs.zip"
    bundle.export_bundle(path)
    size = path.stat().st_size
    with pytest.raises(bundle.BundleError, match=f"the bundle is {size:,} bytes; the limit is 1,000 bytes"):
        bundle.import_bundle(path, max_bytes=1000)
