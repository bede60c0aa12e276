"""Sealed but malformed sidecars: validated on read as bundles are on import, skipped and reported.

Anyone who can write an unkeyed store can seal any JSON; a sidecar whose types are wrong, whose keys are
missing or whose numbers are impossible (an accuracy of 1e308) must give no traceback anywhere it is read.
"""

from __future__ import annotations

import json
import warnings

import pytest
from test_store import STEPS

from attncore.config import make_run
from cli.main import main
from lab import store
from lab.store import backend, codec, index

GOOD, BAD = make_run(steps=STEPS), make_run(steps=STEPS, seed=1)


def _wrong_type(meta):
    meta["summary"]["token_accuracy"] = "high"


def _missing_key(meta):
    del meta["eval"]["n_distinct"]


def _huge_accuracy(meta):
    meta["eval"]["token_accuracy"] = meta["summary"]["token_accuracy"] = 1e308


def _summary_not_an_object(meta):
    meta["summary"] = ["not", "a", "summary"]


def _negative_test_loss(meta):
    meta["summary"]["test_loss"] = -1.0


MALFORMED = [_wrong_type, _missing_key, _huge_accuracy, _summary_not_an_object, _negative_test_loss]


def plant(change) -> None:
    """BAD's entry rewritten with a sealed (unkeyed) sidecar that `change` made malformed, arrays intact."""
    entry = store._Entry(BAD)
    meta = json.loads((entry.path / backend.SIDECAR_FILE).read_text())["meta"]
    change(meta)
    backend.write_entry(entry.path, meta, (entry.path / backend.RECORD_FILE).read_bytes())


def rebuilt_index(cache) -> None:
    (cache / index.INDEX_FILE).unlink(missing_ok=True)
    index._memo.clear()  # another process: reads the sidecars again


@pytest.mark.slow
@pytest.mark.parametrize("change", MALFORMED, ids=lambda f: f.__name__.strip("_"))
def test_a_malformed_sidecar_is_skipped_and_reported_everywhere_it_is_read(cache, tmp_path, capsys, change):
    store.get_run(GOOD), store.get_run(BAD)
    plant(change)
    rebuilt_index(cache)
    with pytest.warns(store.CacheWarning, match="left 1 damaged or malformed entry"):
        assert [s["config"] for s in store.list_cached()] == [GOOD.to_dict()]
    with pytest.warns(store.CacheWarning, match="failed its checks"):
        assert store.stored_run(BAD) is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", store.CacheWarning)
        assert main(["cache", "list"]) == 0
        assert capsys.readouterr().out.startswith("1 run in ")
        assert main(["cache", "list", "--json"]) == 0
        assert len(json.loads(capsys.readouterr().out)) == 1
        assert main(["cache", "export", str(tmp_path / "out.zip")]) == 0
        assert "exported 1 run" in capsys.readouterr().err
        assert main(["cache", "check"]) == 1
    assert "damaged, found" in capsys.readouterr().out
    assert not store.is_cached(BAD)
    with pytest.warns(store.CacheWarning, match="failed its checks"):
        assert store.get_run(BAD).config == BAD  # recomputed and rewritten whole


def test_a_malformed_line_in_a_sealed_index_rebuilds_the_index(cache):
    store.get_run(GOOD), store.get_run(BAD)
    body = json.loads(codec.unseal_bytes((cache / index.INDEX_FILE).read_bytes()))
    key = store._Entry(BAD).path.name
    body["entries"][key]["summary"]["sequence_accuracy"] = 1e308  # sealed again, as any writer can
    backend.write_atomic(cache / index.INDEX_FILE, codec.seal_bytes(json.dumps(body).encode()))
    index._memo.clear()
    listed = store.list_cached()  # the index is refused and rebuilt from the (whole) sidecars
    assert sorted(s["config"]["train"]["seed"] for s in listed) == [0, 1]
    assert all(s["sequence_accuracy"] <= 1 for s in listed)


@pytest.mark.slow
def test_the_run_pages_render_with_a_malformed_sidecar_in_the_store(cache):
    from test_app import STEPS as APP_STEPS
    from test_app import app

    runs = [make_run(steps=APP_STEPS), make_run(steps=APP_STEPS, position="none")]
    for run in runs:
        store.get_run(run)
    entry = store._Entry(runs[1])
    meta = json.loads((entry.path / backend.SIDECAR_FILE).read_text())["meta"]
    meta["summary"]["final_loss"] = {"not": "a number"}
    meta["eval"]["sequence_accuracy"] = meta["summary"]["sequence_accuracy"] = 1e308
    backend.write_entry(entry.path, meta, (entry.path / backend.RECORD_FILE).read_bytes())
    rebuilt_index(cache)
    for page in ("", "results", "compare", "ablations", "lengths"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", store.CacheWarning)
            at = app(page)  # asserts no exception
        assert not at.exception, page


@pytest.mark.slow
def test_cache_warnings_print_as_one_plain_line(cache):
    """No Python two-line warning format (file path, source line) on the CLI's stderr."""
    import subprocess
    import sys

    from test_store import subprocess_env

    store.get_run(GOOD), store.get_run(BAD)
    plant(_huge_accuracy)
    rebuilt_index(cache)
    done = subprocess.run(
        [sys.executable, "-m", "attncore", "cache", "list"],
        env=subprocess_env(cache),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"warning: left 1 damaged or malformed entry of {store._Entry(BAD).func_dir} out of the store's index; "
        "`python -m attncore cache check` names them, `--repair` deletes them"
    ]
