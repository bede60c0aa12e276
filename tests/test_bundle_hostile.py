"""Hostile bundles: each is refused in one line, before it can cost much CPU or memory.

The JSON bomb, the deep nesting, the huge .npy header, device files and FIFOs; through lab.bundle, the
command line (exit 2, one line) and Home's upload (one plain message). The CPU bound is generous (the
refusals take milliseconds); it stands for "bounded before allocating", which the memory bound checks too.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import time
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from test_store import STEPS

from attncore.config import make_run
from lab import bundle, store
from lab.store import codec

pytestmark = pytest.mark.slow  # each builds and exports its runs; many run the command line in a subprocess

REPO = Path(__file__).resolve().parents[1]
RUNS = [make_run(steps=STEPS), make_run("sort", 4, 1, steps=STEPS)]
CPU_SECONDS = 0.5
PEAK_BYTES = 200 * 2**20


@pytest.fixture
def exported(cache, tmp_path):
    for run in RUNS:
        store.get_run(run)
    path = tmp_path / "runs.zip"
    assert bundle.export_bundle(path) == 2
    store.clear_cache(cache)
    return path


def members(path) -> dict:
    with zipfile.ZipFile(path) as z:
        return {name: z.read(name) for name in z.namelist()}


def zipped(files: dict, compression=zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return out.getvalue()


def json_bomb(_) -> bytes:
    """A ~90 kB zip whose manifest inflates to ~90 MB of `{},` (2.4 GB of RAM through json.loads before)."""
    body = b'{"format": "attnlab-bundle/1", "numerics_version": %d, "runs": [' % store.NUMERICS_VERSION
    return zipped({"manifest.json": body + b"{}," * (30 * 2**20) + b"{}]}"})


def deep_nesting(_) -> bytes:
    """A few hundred bytes: a manifest nested 10^5 deep (a RecursionError traceback before)."""
    return zipped({"manifest.json": b"[" * 10**5 + b"]" * 10**5})


def deep_nesting_in_a_run(path) -> bytes:
    """The nesting inside a run's entry of a real manifest."""
    files = members(path)
    text = files["manifest.json"].decode()
    files["manifest.json"] = text.replace('"eval": {', '"deep": ' + "[" * 200 + "]" * 200 + ', "eval": {', 1).encode()
    return zipped(files)


def with_brackets_in_strings(path) -> bytes:
    """Closing brackets hidden in a string cannot hide the nesting after them."""
    files = members(path)
    text = files["manifest.json"].decode()
    deep = '"x": "' + "]" * 40 + '", "deep": ' + "[" * 40 + "]" * 40 + ', "eval": {'
    files["manifest.json"] = text.replace('"eval": {', deep, 1).encode()
    return zipped(files)


def huge_header(path) -> bytes:
    """Run 1's loss history with an .npy header claiming 10^12 elements, its digests fixed to match."""
    files = members(path)
    with zipfile.ZipFile(io.BytesIO(files["runs/00000.npz"])) as z:
        arrays = {name: z.read(name) for name in z.namelist()}
    header = {"descr": "<f8", "fortran_order": False, "shape": (10**12,)}
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, header)
    arrays["loss_history.npy"] = buffer.getvalue() + b"\0" * 64
    data = zipped(arrays, zipfile.ZIP_STORED)  # as np.savez writes it
    manifest = json.loads(files["manifest.json"])
    manifest["runs"][0] |= {"npz_sha256": hashlib.sha256(data).hexdigest(), "npz_bytes": len(data)}
    files["manifest.json"], files["runs/00000.npz"] = json.dumps(manifest).encode(), data
    return zipped(files)


HOSTILE = {
    "json bomb": (json_bomb, "manifest.json is larger than 0 runs need"),
    "deep nesting": (deep_nesting, "manifest.json is larger than 0 runs need"),
    "deep nesting in a run": (deep_nesting_in_a_run, "manifest.json is nested deeper than 16 levels"),
    "deep nesting in strings": (lambda p: with_brackets_in_strings(p), "manifest.json is nested deeper than 16"),
    "huge npy header": (huge_header, "run 1 of 2: array loss_history does not have the shape"),
}


def cost(fn):
    """(what fn raised, its CPU seconds, its peak of traced memory in bytes)."""
    tracemalloc.start()
    start = time.process_time()
    try:
        fn()
    except Exception as exc:
        raised = exc
    else:
        raised = None
    seconds = time.process_time() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return raised, seconds, peak


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_a_hostile_bundle_costs_little_and_is_refused_in_one_line(exported, case):
    make, message = HOSTILE[case]
    data = make(exported)
    assert len(data) < 2**20  # all of them are small files
    raised, seconds, peak = cost(lambda: bundle.import_bundle(data))
    assert isinstance(raised, bundle.BundleError), repr(raised)
    assert message in str(raised) and "\n" not in str(raised)
    assert seconds < CPU_SECONDS and peak < PEAK_BYTES, (seconds, peak)
    assert store.list_cached() == []


def cli(*args, env_extra=None, timeout=60) -> subprocess.CompletedProcess:
    """`python -m cli ...` in a subprocess limited to 1 GB of address space beyond what Python needs."""
    env = os.environ | (env_extra or {})

    def limit():
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))

    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=limit,
    )


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_cache_import_of_a_hostile_bundle_exits_2_with_one_line(exported, tmp_path, case):
    path = tmp_path / "hostile.zip"
    path.write_bytes(HOSTILE[case][0](exported))
    done = cli("cache", "import", str(path))
    assert done.returncode == 2, done.stderr[-500:]
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: FILE: ")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_a_device_file_is_refused_before_it_is_read(cache):
    raised, seconds, peak = cost(lambda: bundle.import_bundle("/dev/zero"))
    assert isinstance(raised, bundle.BundleError) and str(raised) == "the bundle is not a regular file"
    assert seconds < CPU_SECONDS and peak < PEAK_BYTES
    done = cli("cache", "import", "/dev/zero", timeout=30)
    assert done.returncode == 2 and done.stderr == "error: FILE: the bundle is not a regular file\n"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_fifo_is_refused_without_blocking(cache, tmp_path):
    fifo = tmp_path / "runs.zip"
    os.mkfifo(fifo)
    done = cli("cache", "import", str(fifo), timeout=30)  # reading it would wait for a writer forever
    assert done.returncode == 2 and done.stderr == "error: FILE: the bundle is not a regular file\n"
    env = {store.ENV_VAR: str(tmp_path / "cache")}
    done = cli("cache", "import", str(tmp_path), env_extra=env, timeout=30)  # a folder
    assert done.returncode == 2 and done.stderr == "error: FILE: the bundle is not a regular file\n"


def test_the_shipped_bundle_variable_refuses_a_device_file(cache, monkeypatch):
    from ui import bundles

    bundles._warm.clear()
    assert bundles._warm("/dev/zero", str(cache)) == "ATTNLAB_BUNDLE was not loaded: the bundle is not a regular file"


def test_home_shows_one_plain_message_for_a_json_bomb(cache, monkeypatch):
    from apptest_helpers import texts
    from test_app import app

    monkeypatch.setenv("ATTNLAB_BUNDLE_UPLOAD", "1")
    at = app()
    at.file_uploader(key="bundle_upload").set_value(("x.zip", json_bomb(None), "application/zip")).run()
    assert not at.exception
    assert texts(at.error).startswith("The bundle was not loaded: not a bundle: manifest.json is larger than")
    assert "\n" not in texts(at.error)


def test_home_shows_one_plain_message_for_a_huge_header(exported, monkeypatch):
    from apptest_helpers import texts
    from test_app import app

    monkeypatch.setenv("ATTNLAB_BUNDLE_UPLOAD", "1")
    at = app()
    at.file_uploader(key="bundle_upload").set_value(("x.zip", huge_header(exported), "application/zip")).run()
    assert not at.exception
    assert texts(at.error) == (
        "The bundle was not loaded: run 1 of 2: array loss_history does not have the shape (50,) its config needs"
    )


def test_codec_reads_no_array_whose_header_disagrees(exported):
    files = members(exported)
    data = files["runs/00000.npz"]
    meta = json.loads(files["manifest.json"])["runs"][0]
    meta.pop("hmac", None)
    record = codec.decode(meta, data, store.NUMERICS_VERSION, imported=True)
    assert record.config == RUNS[0]


# --- signatures and ranges ------------------------------------------------------------------------------------


def forge(path, edit) -> bytes:
    """The bundle with edit(meta) applied to run 1's entry and to its summary alike (both say the same)."""
    files = members(path)
    manifest = json.loads(files["manifest.json"])
    edit(manifest["runs"][0])
    files["manifest.json"] = json.dumps(manifest).encode()  # inf and NaN as JSON's Infinity / NaN
    return zipped(files)


def both(**values):
    def edit(meta):
        for name, value in values.items():
            target = meta["eval"] if name in codec.EVAL_FIELDS else meta
            target[name] = value
            meta["summary"][name] = value

    return edit


FORGED = {
    "infinite loss": (both(final_loss=float("inf")), "final_loss is not a finite number"),
    "NaN accuracy": (both(token_accuracy=float("nan")), "token_accuracy is not a number from 0 to 1"),
    "accuracy above 1": (both(sequence_accuracy=1.5), "sequence_accuracy is not a number from 0 to 1"),
    "huge n_params": (both(n_params=10**30), "n_params is not the config's model's"),
    "negative count": (both(n_distinct=-7), "n_distinct is not a count from 0 to 500"),
    "counts not adding up": (both(n_distinct=1, n_repeated=1), "n_distinct + n_repeated"),
    "count not the test set's": (
        both(n_distinct=499, n_repeated=1),
        "n_distinct is not the count of the fixed test set",
    ),
    "summary disagrees": (lambda m: m.update(final_loss=0.0), "the summary's numbers are not the record's"),
}


@pytest.mark.parametrize("case", FORGED, ids=list(FORGED))
def test_imported_numbers_are_range_checked(exported, case):
    edit, message = FORGED[case]
    with pytest.raises(bundle.BundleError, match="run 1 of 2: ") as info:
        bundle.import_bundle(forge(exported, edit))
    assert message in str(info.value)
    assert store.list_cached() == []


def forge_arrays(path, edit) -> bytes:
    """The bundle with edit(arrays) applied to run 1's .npz (its dtypes kept), the manifest's digests fixed."""
    files = members(path)
    with np.load(io.BytesIO(files["runs/00000.npz"]), allow_pickle=False) as npz:
        arrays = {name: npz[name].copy() for name in npz.files}
    edit(arrays)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    data = buffer.getvalue()
    manifest = json.loads(files["manifest.json"])
    manifest["runs"][0] |= {"npz_sha256": hashlib.sha256(data).hexdigest(), "npz_bytes": len(data)}
    files["manifest.json"], files["runs/00000.npz"] = json.dumps(manifest).encode(), data
    return zipped(files)


def at(name, where, value):
    def edit(arrays):
        arrays[name][where] = value

    return edit


def zero(name):
    def edit(arrays):
        arrays[name][...] = 0.0

    return edit


FORGED_NORMS = {  # each on a run whose loss converged, and each was once imported
    "NaN gradient norm": (at("norms.grad_norm", (1, 0, 2), np.nan), "norms.grad_norm holds a number that is not"),
    "infinite gradient norm": (at("norms.grad_norm", (0, 1, 0), np.inf), "norms.grad_norm holds a number that is"),
    "NaN entropy": (at("norms.entropy", (2, 0), np.nan), "norms.entropy holds a number that is not finite"),
    "gradient norm of 1e308": (
        at("norms.grad_norm", (3, 0, 1), 1e308),
        "norms.grad_norm holds 1e+308, above the 1.84e+19 a float32 model can produce without overflowing",
    ),
    "residual norm of 1e308": (at("norms.residual_norm", (1, 1), 1e308), "norms.residual_norm holds 1e+308, above"),
    "attention logit of 1e300": (at("norms.max_logit", (4, 0), 1e300), "norms.max_logit holds 1e+300, above the"),
    "gradient norms all zero": (zero("norms.grad_norm"), "norms.grad_norm is 0 at every snapshot, while the loss"),
}


@pytest.mark.parametrize("case", FORGED_NORMS, ids=list(FORGED_NORMS))
def test_imported_norms_are_checked_against_the_run_and_the_model(exported, case):
    edit, message = FORGED_NORMS[case]
    with pytest.raises(bundle.BundleError, match="run 1 of 2: ") as info:
        bundle.import_bundle(forge_arrays(exported, edit))
    assert message in str(info.value) and "\n" not in str(info.value), str(info.value)
    assert store.list_cached() == []


def test_the_norms_bounds_are_where_float32_overflows_far_above_a_real_run(cache):
    from attncore.interpret import norms

    bounds = norms.figure_bounds(RUNS[0].model)
    assert bounds["grad_norm"] == pytest.approx(np.sqrt(np.finfo(np.float32).max))  # 1.8e19
    assert 1e38 < bounds["residual_norm"] < 1e300 and 1e76 < bounds["max_logit"] < 1e300
    assert np.isinf(norms.figure_bounds(make_run(dtype="float64").model)["max_logit"])  # float64's own overflow
    arrays = norms.stack(store.get_run(RUNS[0]).norms)  # a real run: ten orders of magnitude below, at least
    assert all(arrays[name].max() < bound * 1e-10 for name, bound in bounds.items())


def test_a_stored_run_keeps_the_non_finite_norms_of_a_diverged_training(cache):
    """The store's own records: NaN and +inf norms are what a diverged training measures, read back as stored."""
    from attncore.interpret import norms

    run = RUNS[0]
    arrays = norms.stack(store.get_run(run).norms)
    arrays["grad_norm"][-1] = np.nan
    arrays["residual_norm"][-1] = np.inf
    norms.check(arrays, run.model, 2 * run.task.length)  # read from the store: no losses given, accepted
    with pytest.raises(ValueError, match="not finite"):
        norms.check(arrays, run.model, 2 * run.task.length, losses=store.get_run(run).loss_history)


def test_a_keyed_store_accepts_only_bundles_signed_with_its_key(cache, tmp_path, monkeypatch):
    for run in RUNS:
        store.get_run(run)
    unsigned = tmp_path / "unsigned.zip"
    bundle.export_bundle(unsigned)
    monkeypatch.setenv(codec.KEY_VAR, "the-operators-key")
    store.clear_cache(cache)
    for run in RUNS:
        store.get_run(run)
    signed = tmp_path / "signed.zip"
    bundle.export_bundle(signed)
    assert "hmac" in json.loads(members(signed)["manifest.json"])["runs"][0]
    store.clear_cache(cache)
    with pytest.raises(bundle.BundleError, match=f"run 1 of 2 is not signed with this store's {codec.KEY_VAR}"):
        bundle.import_bundle(unsigned)
    assert store.list_cached() == []
    assert bundle.import_bundle(signed) == (2, 0)
    store.clear_cache(cache)
    # a forged number under a signature made with another key, or after signing, is refused too
    monkeypatch.setenv(codec.KEY_VAR, "another-key")
    with pytest.raises(bundle.BundleError, match="is not signed"):
        bundle.import_bundle(signed)
    monkeypatch.setenv(codec.KEY_VAR, "the-operators-key")
    with pytest.raises(bundle.BundleError, match="is not signed"):
        bundle.import_bundle(forge(signed, both(train_seconds=1.0)))
    assert store.list_cached() == []


def test_cache_import_of_an_unsigned_bundle_names_the_key_unless_trusted(exported, tmp_path):
    env = {codec.KEY_VAR: "the-operators-key", store.ENV_VAR: str(tmp_path / "keyed")}
    done = cli("cache", "import", str(exported), env_extra=env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and codec.KEY_VAR in done.stderr
    done = cli("cache", "import", "--trust", str(exported), env_extra=env)
    assert done.returncode == 0 and "imported 2 runs" in done.stdout
    done = cli("cache", "check", env_extra=env)  # stored and signed with the key: whole under it
    assert done.returncode == 0 and done.stdout.startswith("2 runs whole")


def test_the_web_upload_never_signs_unsigned_runs(exported, monkeypatch):
    from apptest_helpers import texts
    from test_app import app

    monkeypatch.setenv("ATTNLAB_BUNDLE_UPLOAD", "1")
    monkeypatch.setenv(codec.KEY_VAR, "the-operators-key")
    at = app()
    at.file_uploader(key="bundle_upload").set_value(("x.zip", exported.read_bytes(), "application/zip")).run()
    assert not at.exception
    assert f"is not signed with this store's {codec.KEY_VAR}" in texts(at.error)
    assert store.list_cached() == []


# --- Download all runs ------------------------------------------------------------------------------------------

MANY = [make_run("copy", 4, seed, steps=STEPS) for seed in range(8)]


@pytest.fixture
def eight_runs(cache):
    for run in MANY:
        store.get_run(run)
    return cache


def test_a_bundle_streams_to_its_file_one_run_at_a_time(cache, eight_runs, tmp_path):
    one = max(len(store._Entry(run).stored_bytes(warn=False)[1]) for run in MANY)
    path = tmp_path / "all.zip"
    with open(path, "wb") as fh:
        raised, _, peak = cost(lambda: bundle.export_bundle(fh))
    assert raised is None
    assert peak < 4 * one < path.stat().st_size / 2, (peak, one)  # about one run in memory, not all eight
    store.clear_cache(cache)
    assert bundle.import_bundle(path) == (8, 0)


def test_home_offers_the_download_only_within_the_cap(eight_runs, monkeypatch):
    from apptest_helpers import texts
    from test_app import app

    at = app()
    assert [b.label for b in at.button if b.key == "bundle_prepare"] == ["Prepare Download all runs"]
    monkeypatch.setenv("ATTNLAB_MAX_DOWNLOAD_MB", "1")
    assert store.stored_bytes() > 2**20
    at = app()
    assert not [b for b in at.button if b.key == "bundle_prepare"] and not at.get("link_button")
    assert "more than this server's download limit of 1 MB" in texts(at.info)


# --- the command line's promises -----------------------------------------------------------------------------


def test_cache_export_into_a_closed_pipe_exits_141_quietly(exported, tmp_path):
    location = tmp_path / "piped"
    env = os.environ | {store.ENV_VAR: str(location)}
    assert cli("cache", "import", str(exported), env_extra={store.ENV_VAR: str(location)}).returncode == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli", "cache", "export", "-"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # the reader left before the first byte (`... | head -c0`)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141 and err == ""


def test_params_preset_list_json_prints_json():
    done = cli("params", "--preset", "list", "--json")
    assert done.returncode == 0
    rows = json.loads(done.stdout)
    assert rows and all({"name", "attention", "published", "source"} <= row.keys() for row in rows)
    done = cli("kv-cache", "--preset", "list", "--json")
    assert done.returncode == 0 and {"name", "attention"} <= json.loads(done.stdout)[0].keys()


def test_cache_export_onto_a_file_inside_the_store_is_refused(cache, capsys):
    from cli.main import main

    store.get_run(RUNS[0])
    entry = store._Entry(RUNS[0])
    target = entry.path / "record.npz"
    before = target.read_bytes()
    assert main(["cache", "export", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "inside the run store" in err
    assert target.read_bytes() == before and store.is_cached(RUNS[0])
    assert main(["cache", "export", str(cache / "runs.zip")]) == 2  # anywhere in the store's folder


def test_uploads_are_refused_while_streamlits_upload_limit_exceeds_max_bundle_mb(cache, monkeypatch):
    import tomllib

    from apptest_helpers import texts
    from test_app import app

    from lab.jobs.limits import Limits

    shipped = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
    assert shipped["server"]["maxUploadSize"] == Limits().max_bundle_mb  # the shipped settings agree
    monkeypatch.setenv("ATTNLAB_BUNDLE_UPLOAD", "1")
    at = app()
    assert at.get("file_uploader")
    monkeypatch.setenv("ATTNLAB_MAX_BUNDLE_MB", "20")  # the operator lowered the cap, not Streamlit's limit
    at = app()
    assert not at.get("file_uploader")
    assert "Load a bundle is off: Streamlit's server.maxUploadSize is 50 MB" in texts(at.warning)


def test_an_upload_is_capped_in_the_unit_the_browser_counts_and_says_it(cache, monkeypatch):
    """Streamlit's browser refuses files above maxUploadSize x 10^6 bytes: Home's cap and its label use that MB;
    a file just above it (as a Windows browser, counting 2^20, lets through) is refused."""
    from apptest_helpers import texts
    from streamlit import config
    from test_app import app

    monkeypatch.setenv("ATTNLAB_BUNDLE_UPLOAD", "1")
    monkeypatch.setenv("ATTNLAB_MAX_BUNDLE_MB", "1")
    shipped = config.get_option("server.maxUploadSize")
    config.set_option("server.maxUploadSize", 1)
    try:
        at = app()
        uploader = at.file_uploader(key="bundle_upload")
        assert "up to 1 MB = 1,000,000 bytes" in uploader.label
        uploader.set_value(("x.zip", b"\0" * 1_000_001, "application/zip")).run()
    finally:
        config.set_option("server.maxUploadSize", shipped)
    assert not at.exception
    assert "The bundle is 1,000,001 bytes, more than this server's 1 MB = 1,000,000 bytes." in texts(at.error)
    assert store.list_cached() == []


def test_a_run_whose_arrays_inflate_beyond_their_file_is_refused_before_loading(cache, tmp_path):
    """A large config with its arrays deflated to nothing: every header fits its config, the file is tiny."""
    from dataclasses import replace

    sys.path.insert(0, str(REPO / "benchmarks"))
    from store_listing import fake_record

    run = make_run(steps=STEPS)
    run = replace(run, model=replace(run.model, d_model=1024, d_ff=16384, n_heads=4))  # ~75 M floats of params, 300 MB
    meta, _ = codec.encode(fake_record(make_run(steps=STEPS)))  # a real record's meta, then made to fit `run`
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for name, (shape, dtypes) in codec.expected_arrays(run).items():
            with z.open(name + ".npy", "w", force_zip64=True) as fh:  # streamed: the test never holds the zeros
                np.lib.format.write_array_header_1_0(fh, {"descr": dtypes[0], "fortran_order": False, "shape": shape})
                left = int(np.prod(shape)) * np.dtype(dtypes[0]).itemsize
                chunk = bytes(2**22)
                while left > 0:
                    fh.write(chunk[: min(left, len(chunk))])
                    left -= len(chunk)
    data = out.getvalue()  # deflated: ~0.3 MB holding ~300 MB of zeros
    meta = meta | {"config": run.to_dict(), "numerics_version": store.NUMERICS_VERSION}
    meta["summary"] = meta["summary"] | {"config": run.to_dict()}
    meta["arrays"] = {n: {"shape": list(s), "dtype": d[0]} for n, (s, d) in codec.expected_arrays(run).items()}
    meta |= {"npz_sha256": hashlib.sha256(data).hexdigest(), "npz_bytes": len(data)}
    raised, seconds, peak = cost(lambda: codec.decode(meta, data, store.NUMERICS_VERSION))
    assert isinstance(raised, codec.RecordError) and "is compressed" in str(raised), repr(raised)
    assert peak < PEAK_BYTES
