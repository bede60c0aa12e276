"""Provenance: every record says which CPU, BLAS kernel family, NumPy and dtype computed it (a sidecar without it
is refused); `train --json` prints it; Home and `cache import` name runs from another family."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from threadpoolctl import threadpool_info

from attncore import make_run
from lab import bundle, provenance, store
from lab.store import codec

REPO = Path(__file__).resolve().parents[1]
RUN = make_run("copy", 4, 0, steps=30)


def this_blas() -> dict:
    return next(i for i in threadpool_info() if i["user_api"] == "blas")


def test_a_computed_record_stores_the_platform_that_computed_it(cache):
    record = store.get_run(RUN)
    p, blas = record.platform, this_blas()
    assert (p["blas"], p["blas_version"], p["blas_kernel"]) == (
        blas["internal_api"],
        blas["version"],
        blas["architecture"],
    )
    assert p["blas_threads"] == 1  # the store trains on one BLAS thread
    assert p["dtype"] == "float32" and p["numpy"] == __import__("numpy").__version__
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        assert p["cpu"] in cpuinfo.read_text()
    assert store.get_run(RUN).platform == p  # read back from the sidecar
    assert store.list_cached()[0]["platform"] == p
    assert provenance.kernel_family(p) == f"{blas['internal_api']} {blas['architecture']}"


def test_a_sidecar_without_a_platform_is_refused():
    """Every record of this numerics version was computed with its platform recorded: one without is damaged."""
    meta, data = codec.encode(store.compute_run(make_run("copy", 2, 0, steps=5)))
    meta |= {"numerics_version": store.NUMERICS_VERSION}
    assert codec.decode(meta, data, store.NUMERICS_VERSION).platform == meta["platform"]
    for absent in ({k: v for k, v in meta.items() if k != "platform"}, meta | {"platform": None}):
        with pytest.raises(codec.RecordError, match="lacks a field or has one of the wrong type"):
            codec.decode(absent, data, store.NUMERICS_VERSION)
    summary = {k: v for k, v in meta["summary"].items() if k != "platform"}
    with pytest.raises(codec.RecordError, match="lacks a field or has one of the wrong type"):
        codec.decode(meta | {"summary": summary}, data, store.NUMERICS_VERSION)
    with pytest.raises(codec.RecordError, match="the summary lacks a field"):
        codec.check_summary(summary)


@pytest.mark.parametrize(
    "platform", [{"cpu": "x" * 500}, {"cpu": "a\nb"}, {"blas_threads": True}, {"colour": "red"}, ["openblas"]]
)
def test_a_forged_platform_is_refused(platform):
    meta, data = codec.encode(store.compute_run(make_run("copy", 2, 0, steps=5)))
    meta |= {"numerics_version": store.NUMERICS_VERSION, "platform": platform}
    with pytest.raises(codec.RecordError, match="lacks a field or has one of the wrong type"):
        codec.decode(meta, data, store.NUMERICS_VERSION)


@pytest.mark.slow
def test_runs_from_another_kernel_family_are_counted_and_named(cache, tmp_path, monkeypatch):
    record = store.compute_run(RUN)
    elsewhere = dataclasses.replace(record, platform=record.platform | {"blas_kernel": "Zen"})
    family = provenance.here()
    assert provenance.foreign([record.summary()]) == {}
    assert provenance.foreign([elsewhere.summary(), record.summary()]) == {"openblas Zen": 1}
    assert provenance.foreign([elsewhere.summary()], family="openblas Zen") == {}
    assert family != "openblas Zen"
    store.put_run(elsewhere)
    target = tmp_path / "runs.zip"
    bundle.export_bundle(target)
    env = os.environ | {"PYTHONPATH": str(REPO), store.ENV_VAR: str(tmp_path / "other")}
    out = subprocess.run(
        [sys.executable, "-m", "attncore", "cache", "import", str(target)], env=env, text=True, capture_output=True
    )
    assert out.returncode == 0, out.stderr
    assert (
        f"1 of them computed on another BLAS kernel family than this machine's ({family}): openblas Zen" in out.stdout
    )


@pytest.mark.slow
def test_train_json_prints_the_platform(tmp_path):
    env = os.environ | {"PYTHONPATH": str(REPO), store.ENV_VAR: str(tmp_path)}
    argv = [sys.executable, "-m", "attncore", "train", "--length", "2", "--steps", "5", "--json"]
    out = json.loads(subprocess.run(argv, env=env, text=True, capture_output=True, check=True).stdout)
    assert out["platform"]["blas_kernel"] == this_blas()["architecture"] and out["platform"]["blas_threads"] == 1


def test_a_record_says_whether_the_environment_forced_the_kernel_family(cache, monkeypatch):
    """The family follows the CPU's instruction set unless OPENBLAS_CORETYPE forces one; the record keeps
    the variable (None when unset) and the caption says which, without touching the run's cache key or numbers. The
    variable is only set in this process's os.environ, after OpenBLAS loaded: it changes what is recorded, not the
    kernels."""
    monkeypatch.delenv(provenance.CORETYPE, raising=False)
    plain = store.get_run(RUN)
    assert plain.platform["blas_coretype"] is None
    monkeypatch.setenv(provenance.CORETYPE, "Haswell")
    steps = []
    assert store.get_run(RUN, lambda s, loss: steps.append(s)).platform == plain.platform and not steps  # same key
    forced = store.compute_run(RUN)
    assert forced.platform["blas_coretype"] == "Haswell"
    assert forced.loss_history.tobytes() == plain.loss_history.tobytes()
    if plain.platform["blas"] == "openblas":
        assert "forced by OPENBLAS_CORETYPE=Haswell in the environment" in provenance.describe(forced.platform)
        assert "kernels on 1 thread (picked by OpenBLAS from the CPU's instruction set)" in provenance.describe(
            plain.platform
        )
    store.put_run(forced)
    assert store.get_run(RUN).platform["blas_coretype"] == "Haswell"  # stored in the sealed sidecar, read back
    older = {k: v for k, v in plain.platform.items() if k != "blas_coretype"}  # stored before the variable was recorded
    assert provenance.checked(older) == older
    assert "forced" not in provenance.describe(older) and "picked" not in provenance.describe(older)


@pytest.mark.parametrize("value", ["", "x" * 100, "Has\nwell"])
def test_an_odd_coretype_is_recorded_as_plain_bounded_text(monkeypatch, value):
    monkeypatch.setenv(provenance.CORETYPE, value)
    recorded = provenance.current()["blas_coretype"]
    assert provenance.checked(provenance.current()) is not None  # a sidecar with it reads back
    assert recorded is None if value == "" else (len(recorded) <= 40 and recorded.isprintable())
