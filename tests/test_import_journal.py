"""An import killed midway (each run's entry is written whole or not at all) is reported at the next start: how many
of its runs came in, each whole; an import under way is left alone, and a finished one leaves nothing behind."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from attncore.config import make_run
from cli.main import main
from lab import bundle, store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from store_listing import fill_store  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
KILLED_AFTER_3 = textwrap.dedent("""
    import os, sys
    from lab import bundle, store
    real = store.put_runs
    def put_runs(records, **kwargs):
        for n, wrote in enumerate(real(records, **kwargs), 1):
            yield wrote
            if n == 3:
                os._exit(9)  # killed: no cleanup runs, as under SIGKILL
    store.put_runs = put_runs
    bundle.import_bundle(sys.argv[1])
""")


@pytest.fixture
def bundle_of_6(tmp_path) -> Path:
    source = tmp_path / "source"
    fill_store(source, 6, make_run())
    path = tmp_path / "six.zip"
    bundle.write_bundle(path, location=source)
    return path


def test_a_killed_import_is_reported_at_the_next_start_with_how_many_came_in(cache, bundle_of_6, capsys):
    env = os.environ | {store.ENV_VAR: str(cache)}
    done = subprocess.run([sys.executable, "-c", KILLED_AFTER_3, str(bundle_of_6)], cwd=REPO, env=env)
    assert done.returncode == 9 and len(store.list_cached()) == 3
    assert main(["cache", "list"]) == 0
    err = capsys.readouterr().err
    assert f"warning: an import of 6 runs from {bundle_of_6} (started " in err, err
    assert "was stopped before its end: 3 of them came in, each whole (every check passed), 3 did not" in err
    assert main(["cache", "list"]) == 0
    assert "an import" not in capsys.readouterr().err  # said once
    assert bundle.import_bundle(bundle_of_6) == (3, 3)  # the same bundle again brings in the rest


def test_an_import_under_way_is_left_alone_and_a_finished_one_leaves_nothing(cache, bundle_of_6):
    with bundle._journal(None, bundle_of_6, [make_run(seed=1)]):
        assert bundle.interrupted_imports() == [] and len(list((cache / bundle.IMPORTS).iterdir())) == 1
    assert bundle.import_bundle(bundle_of_6) == (6, 0)
    assert list((cache / bundle.IMPORTS).iterdir()) == [] and bundle.interrupted_imports() == []


def test_a_damaged_entry_is_not_counted_as_come_in(cache, bundle_of_6):
    bundle.import_bundle(bundle_of_6)
    keys = sorted(p.name for p in store._func_dir(cache).iterdir() if p.is_dir())
    assert len(keys) == 6 and store.whole_entries(keys) == 6
    victim = next((store._func_dir(cache) / keys[0]).glob("*.npz"))
    victim.write_bytes(b"not an array file")
    assert store.whole_entries(keys) == 5 and store.whole_entries(["../etc", "x/y"]) == 0
