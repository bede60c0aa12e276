"""A store written by the lab's code of this numerics version is served by the current code as it was stored.

tests/fixtures/store holds short runs spread over the config's surface, and tests/fixtures/store_manifest.json
what was stored for each (tests/fixtures/make_store_fixture.py, which is regenerated only with a NUMERICS_VERSION
bump). The current code must build the same config and key from the same make_run / make_induction call and the
same `train` flags, find every run through the store's own lookup (the dashboard's and the command line's)
without training it, every array and number bit for bit, and export them as the same bundle. Where this
machine's BLAS kernel family is the one that trained them, a few runs are trained again in a fresh store and must
give the same bits.

Every test reads a copy of the fixture in its own temporary folder: none writes the fixture.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from attncore.config import RunConfig
from cli.main import main
from lab import bundle, provenance, store
from lab.store import codec
from lab.store import record as store_record

# the fixture's script, by its path (tests/fixtures is no package, and `fixtures` is a name PyPI has taken)
_spec = importlib.util.spec_from_file_location(
    "make_store_fixture", Path(__file__).parent / "fixtures/make_store_fixture.py"
)
fixture = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fixture)

MANIFEST = json.loads(fixture.MANIFEST.read_text())
RUNS = {run["name"]: run for run in MANIFEST["runs"]}
COMMANDS = [name for name, run in RUNS.items() if run["cli"] is not None]
RETRAINED = ("copy-defaults", "sort-mixed-lengths", "induction-defaults")  # the default, padded and induction paths


@pytest.fixture
def fixture_store(tmp_path, monkeypatch) -> Path:
    """A copy of the fixture as the lab's store (ATTNCORE_CACHE_DIR, unkeyed, no size cap), where training fails."""
    location = tmp_path / "store"
    shutil.copytree(fixture.STORE, location)
    monkeypatch.setenv(store.ENV_VAR, str(location))
    monkeypatch.delenv(codec.KEY_VAR, raising=False)
    monkeypatch.delenv(store.MAX_STORE_VAR, raising=False)

    def refuse(*args, **kwargs):
        raise AssertionError("the store trained a run that it holds")

    monkeypatch.setattr(store, "compute_run", refuse)  # what the store calls to compute a run
    monkeypatch.setattr(store_record, "train", refuse)  # what that calls to train one
    return location


def built(run: dict) -> RunConfig:
    return fixture.build(run["factory"], run["kwargs"])


def differences(found: dict, recorded: dict, skip=()) -> list[str]:
    """The arrays or scalars of `found` (fixture.digests) that are not the recorded ones, named."""
    out = []
    for part in ("arrays", "scalars"):
        for name in sorted(found[part].keys() | recorded[part].keys()):
            if name in skip:
                continue
            a, b = found[part].get(name), recorded[part].get(name)
            if a is None or b is None:
                out.append(f"{part} {name}: {'missing' if a is None else 'not in the manifest'}")
            elif a != b:
                out.append(f"{part} {name}: {a} where {b} was stored")
    return out


def entry_files(location: Path, run: dict) -> dict:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in (location / run["entry"]).iterdir()}


def test_the_fixture_is_of_this_numerics_version():
    assert MANIFEST["numerics_version"] == store.NUMERICS_VERSION, "the fixture is of another numerics version"
    on_disk = {p.parent.relative_to(fixture.STORE).as_posix() for p in fixture.STORE.rglob(store.backend.SIDECAR_FILE)}
    assert on_disk == {run["entry"] for run in RUNS.values()}


@pytest.mark.parametrize("name", RUNS)
def test_the_same_call_builds_the_same_config_and_key(name):
    run = RUNS[name]
    config = built(run)
    assert config.to_dict() == run["config"], f"{run['factory']}(**{run['kwargs']}) builds another config"
    assert fixture.run_key(config.to_dict()) == run["key"]
    assert RunConfig.from_dict(run["config"]) == config
    assert RunConfig.from_dict(json.loads(json.dumps(run["config"]))).to_dict() == run["config"]
    assert json.loads(json.dumps(config.to_dict())) == config.to_dict()  # as JSON keeps it: no tuple, no NaN


@pytest.mark.parametrize("name", RUNS)
def test_the_store_serves_each_run_bit_for_bit_without_training(fixture_store, name):
    run = RUNS[name]
    config = built(run)
    assert store.is_cached(config)
    trained = []
    record = store.get_run(config, callback=lambda step, loss: trained.append(step))
    assert trained == []
    assert differences(fixture.digests(record), run) == []
    assert record.platform == run["platform"]
    shown = store.stored_run(RunConfig.from_dict(json.loads(json.dumps(run["config"]))))  # the dashboard's read
    assert shown is not None and differences(fixture.digests(shown), run) == []
    assert entry_files(fixture_store, run) == run["files"]  # served as stored, not rewritten


def test_the_listing_and_the_check_keep_every_run(fixture_store):
    listed = store.list_cached()
    assert sorted(json.dumps(s["config"], sort_keys=True) for s in listed) == sorted(
        json.dumps(run["config"], sort_keys=True) for run in RUNS.values()
    )
    for summary in listed:
        run = next(r for r in RUNS.values() if r["config"] == summary["config"])
        assert summary["final_loss"] == run["scalars"]["final_loss"]["value"]
        assert summary["test_loss"] == run["scalars"]["test_loss"]["value"]
    report = store.check_store(repair=True)  # what the dashboard runs at start
    assert (report["ok"], report["damaged"], report["unverified"]) == (len(RUNS), [], [])
    for run in RUNS.values():
        assert entry_files(fixture_store, run) == run["files"]


@pytest.mark.parametrize("name", COMMANDS)
def test_the_train_command_serves_each_run(fixture_store, capsys, name):
    run = RUNS[name]
    assert main(run["cli"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["config"] == run["config"] and printed["cached"] is True
    history = np.asarray(printed["loss_history"], dtype=run["arrays"]["loss_history"]["dtype"])
    assert fixture.array_digest(history) == run["arrays"]["loss_history"]
    for scalar, stored in run["scalars"].items():
        value = printed[scalar.rsplit(".", 1)[-1]]
        assert fixture.scalar_digest(value) == stored, f"{scalar}: {value} where {stored['value']} was stored"


def test_a_bundle_of_the_runs_is_the_same_bytes_and_imports_bit_for_bit(fixture_store, tmp_path):
    configs = [run["config"] for run in RUNS.values()]
    assert fixture.bundle_digest(fixture_store, configs) == MANIFEST["bundle_sha256"]
    path = tmp_path / "runs.zip"
    bundle.write_bundle(path, [RunConfig.from_dict(config) for config in configs], location=fixture_store)
    fresh = tmp_path / "fresh"
    assert bundle.import_bundle(path, location=fresh) == (len(RUNS), 0)
    for run in RUNS.values():
        served = store.get_run(built(run), location=fresh)
        assert differences(fixture.digests(served), run) == [], run["name"]


@pytest.mark.parametrize("name", RETRAINED)
def test_training_again_gives_the_same_bits(tmp_path, monkeypatch, name):
    run = RUNS[name]
    config = built(run)
    here = provenance.kernel_family(provenance.current(config.model.dtype))
    if here != run["blas"]["family"]:
        pytest.skip(f"trained on {run['blas']['family']} kernels, this machine has {here}: float32 rounds otherwise")
    monkeypatch.delenv(codec.KEY_VAR, raising=False)
    trained = []
    record = store.get_run(config, callback=lambda step, loss: trained.append(step), location=tmp_path / "fresh")
    assert len(trained) == config.train.steps
    assert differences(fixture.digests(record), run, skip=fixture.TIMINGS) == []
