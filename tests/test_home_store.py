"""Home after an action that changes the store (reproduce, upload, ATTNLAB_BUNDLE): every figure in the same view."""

from __future__ import annotations

import re

import pytest
from apptest_helpers import metric, texts
from test_app import STEPS, app

import lab.presets
from attncore import make_run
from lab import bundle, store

pytestmark = pytest.mark.slow  # AppTests of Home over stores the tests train

SHORT = [make_run("copy", 4, s, steps=STEPS) for s in (0, 1)] + [make_run("copy", 4, 0, steps=STEPS, scaling=False)]


@pytest.fixture
def empty_store(tmp_path, monkeypatch):
    """An empty run store, the article's preset cut to three 30-step runs, uploads allowed."""
    monkeypatch.setenv(store.ENV_VAR, str(tmp_path / "cache"))
    monkeypatch.setattr(lab.presets, "preset", lambda name: SHORT)
    monkeypatch.setenv("ATTNLAB_BUNDLE_UPLOAD", "1")
    return tmp_path


@pytest.fixture
def bundle_file(tmp_path, monkeypatch):
    """A bundle of the three runs, made in a store of its own."""
    monkeypatch.setenv(store.ENV_VAR, str(tmp_path / "source"))
    for run in SHORT:
        store.get_run(run)
    path = tmp_path / "runs.zip"
    assert bundle.export_bundle(path) == 3
    return path


def expander_label(at) -> str:
    return next(e.label for e in at.expander if e.label.startswith("What is cached"))


def assert_shows_three_runs(at) -> None:
    assert metric(at, "Runs in the cache") == "3"
    assert metric(at, "Article runs cached") == "3 of 3"
    assert not [b for b in at.button if b.key == "reproduce"]
    assert expander_label(at) == "What is cached (3 runs)"
    accuracy = at.dataframe[0].value
    assert accuracy[["task", "length", "seeds"]].values.tolist() == [["copy", 4, 2]]


def test_reproduce_updates_every_figure_in_the_same_view(empty_store):
    at = app()
    assert metric(at, "Runs in the cache") == "0" and metric(at, "Article runs cached") == "0 of 3"
    assert expander_label(at) == "What is cached (0 runs)"
    at.button(key="reproduce").click().run()
    assert not at.exception
    assert_shows_three_runs(at)


def test_uploading_a_bundle_updates_every_figure_in_the_same_view(bundle_file, empty_store):
    at = app()
    assert metric(at, "Article runs cached") == "0 of 3"
    at.file_uploader(key="bundle_upload").set_value(("runs.zip", bundle_file.read_bytes(), "application/zip")).run()
    assert not at.exception
    assert "Loaded 3 runs" in texts(at.success)
    assert_shows_three_runs(at)
    steps = []
    assert store.get_run(SHORT[0], lambda step, loss: steps.append(step)).config == SHORT[0] and steps == []


def test_a_hostile_upload_is_one_message_and_changes_nothing(empty_store):
    at = app()
    at.file_uploader(key="bundle_upload").set_value(("x.zip", b"[click](https://evil.example)", "application/zip"))
    at.run()
    assert not at.exception
    assert texts(at.error) == "The bundle was not loaded: not a bundle: the file is not a zip archive"
    assert metric(at, "Runs in the cache") == "0"


def test_uploads_can_be_switched_off_and_download_is_offered_once_there_are_runs(empty_store, monkeypatch):
    monkeypatch.setenv("ATTNLAB_BUNDLE_UPLOAD", "0")
    at = app()
    assert not at.file_uploader
    assert not [b for b in at.button if b.key == "bundle_prepare"]  # an empty store: nothing to download (18.3)
    assert "Download all runs is offered once the store holds a run." in texts(at.caption)
    store.get_run(SHORT[0])
    at = app()
    assert [b.label for b in at.button if b.key == "bundle_prepare"] == ["Prepare Download all runs"]


def test_a_shipped_bundle_makes_a_fresh_server_start_warm(bundle_file, empty_store, monkeypatch):
    monkeypatch.setenv("ATTNLAB_BUNDLE", str(bundle_file))
    at = app()
    assert_shows_three_runs(at)
    assert not at.warning


def test_a_damaged_entry_cannot_leave_home_stuck_at_two_of_three(empty_store):
    for run in SHORT:
        store.get_run(run)
    (store._Entry(SHORT[1]).path / "record.json").write_text("{damaged")
    at = app()  # the server's first view checks the store (cache check --repair) once
    assert metric(at, "Article runs cached") == "2 of 3"
    # two stored runs of the same size measure the third's time
    cost = r"(about [0-9]+ s|under a second) here, (.+ s|under a second) of computing"
    assert re.fullmatch(rf"Reproduce the article: train 1 run, {cost}", at.button(key="reproduce").label)
    at.button(key="reproduce").click().run()
    assert_shows_three_runs(at)


def test_home_says_when_stored_runs_came_from_another_kernel_family(empty_store):
    """A run computed elsewhere (its record names OpenBLAS Zen kernels) and one of this machine's: Home counts
    and names the foreign one; with only this machine's runs it says nothing."""
    import dataclasses

    from lab import provenance

    here = store.get_run(SHORT[0])
    at = app()
    assert "another BLAS kernel family" not in texts(at.info)
    elsewhere = store.compute_run(SHORT[1])
    store.put_run(dataclasses.replace(elsewhere, platform=elsewhere.platform | {"blas_kernel": "Zen"}))
    at = app()
    said = texts(at.info)
    assert "1 stored run came from another BLAS kernel family than this machine's" in said
    assert "openblas Zen (1)" in said.replace("\\", "") and provenance.kernel_family(here.platform) in said


def test_home_tables_name_the_seeds_they_hold_and_the_run_list_only_what_varies(empty_store):
    for run in SHORT:
        store.get_run(run)
    at = app()
    assert "Mean and minimum over seeds 0, 1:" in texts(at.caption)  # the store's seeds, not a typed 0, 1, 2
    assert "button says how long" not in texts(at.caption)  # nothing is missing: no button to describe
    listed = at.main.dataframe[-1].value
    assert "scaling" in listed.columns and "d_model" not in listed.columns and "lr" not in listed.columns
    shared = f"Every stored run has learned position, pre-LN, lr 3e-3, {STEPS:,} steps, batch 32, d=32, 4 heads"
    assert shared in texts(at.caption)


def test_after_a_partial_loss_the_accuracy_caption_names_each_rows_own_seeds(empty_store, monkeypatch):
    """Regression: a row of one seed stood under 'mean and minimum over seeds 0, 1, 2'."""
    partial = [*SHORT[:2], make_run("copy", 6, 0, steps=STEPS)]  # copy L = 6 kept only its seed 0
    monkeypatch.setattr(lab.presets, "preset", lambda name: partial)
    for run in partial:
        store.get_run(run)
    at = app()
    assert "Mean and minimum over seeds 0, 1 (copy L = 6: seed 0):" in texts(at.caption)
    assert "(2 blocks by default; the Regimes page's depth experiment goes to 8)" in texts(at.markdown)
    accuracy = at.dataframe[0].value
    assert accuracy[["task", "length", "seeds"]].values.tolist() == [["copy", 4, 2], ["copy", 6, 1]]


def test_a_changed_key_keeps_every_run_and_home_says_how_many_it_affects(empty_store, monkeypatch, capsys):
    """The server's startup `cache check --repair` under another ATTNCORE_CACHE_KEY deletes nothing;
    Home counts only the runs it can verify, and says why the others are not served and what to do."""
    from lab.store import codec

    monkeypatch.setenv(codec.KEY_VAR, "the old key")
    for run in SHORT:
        store.get_run(run)
    func_dir = store._Entry(SHORT[0]).func_dir
    before = sorted(p for p in func_dir.rglob("*") if p.is_file())
    monkeypatch.setenv(codec.KEY_VAR, "a new key")
    at = app()  # a fresh server: checks the store once
    assert sorted(p for p in func_dir.rglob("*") if p.is_file()) == before
    log = capsys.readouterr().err
    assert "deleted a damaged entry" not in log and "run store: kept 3 runs not signed with ATTNCORE_CACHE_KEY" in log
    assert metric(at, "Runs in the cache") == "0"
    said = texts(at.warning)
    assert "3 stored runs are not signed with this server's ATTNCORE_CACHE_KEY" in said
    assert "cache sign" in said and "--drop-unverified" in said
    assert store.sign_store()["signed"] == 3
    at = app()
    assert metric(at, "Runs in the cache") == "3" and "not signed" not in texts(at.warning)
