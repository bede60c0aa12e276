"""The interventions on the command line (issue 21): patch, lens, heads, explain with --json; bad input exits 2."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_cli import attncore

from attncore import make_run
from attncore.interpret import patching
from attncore.tasks import probe_sequence

SHORT = ["--steps", "40"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def test_patch_json_has_the_grid_and_by_position(cache, monkeypatch):
    r = attncore(cache, "patch", *SHORT, "--at", "2", "--symbol", "5", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert np.array(out["grid"]).shape == (2, 4) and np.array(out["by_position"]).shape == (2, 4, 12)
    import os

    from lab.store import get_run  # the run the command trained, from the same store

    os.environ["ATTNCORE_CACHE_DIR"] = str(cache)
    try:
        run = make_run(steps=40)
        expected = patching.patch(get_run(run).params, run, patching.contrast(run, probe_sequence(run.task), 2, 5))
    finally:
        del os.environ["ATTNCORE_CACHE_DIR"]
    assert np.allclose(out["grid"], expected.head) and out["query"] == expected.contrast.query == 8


def test_lens_heads_and_explain_json(cache):
    lens = json.loads(attncore(cache, "lens", *SHORT, "--json").stdout)
    assert np.array(lens["probe"]).shape == (3, 6) and lens["layers"][0] == "embed"
    heads = json.loads(attncore(cache, "heads", *SHORT, "--n-test", "10", "--json").stdout)
    assert set(heads["probe"]) == {"previous token", "same symbol earlier", "L back", "k-th smallest"}
    assert len(heads["steps"]) == len(heads["snapshots"]["L back"])
    r = attncore(cache, "explain", *SHORT, "--layer", "0", "--head", "1", "--query", "9", "--permutations", "10",
                 "--restarts", "2", "--search-steps", "20", "--baseline-seeds", "0", "1", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert len(out["permutation_tvd"]) == 10 and [set(a) >= {"jsd", "tvd"} for a in out["adversarial"]] == [1, 1]
    assert [s["seed"] for s in out["seed_jsd"]] == [1]  # the run's own seed is not its baseline
    assert out["finding"].startswith("At these settings")


@pytest.mark.parametrize(
    "argv,flag",
    [
        (["patch", "--at", "6"], "--at"),
        (["patch", "--symbol", "17"], "--symbol"),
        (["patch", "--symbol", "25"], "--symbol"),
        (["lens", "--input", "1 2 3"], "--input"),
        (["explain", "--layer", "3", "--head", "0"], "--layer"),
        (["explain", "--query", "2"], "--query"),
        (["explain", "--restarts", "0"], "--restarts"),
        (["heads", "--n-test", "501"], "--n-test"),
    ],
)
def test_bad_input_exits_2_with_one_line(cache, argv, flag):
    r = attncore(cache, *argv, *SHORT)
    assert r.returncode == 2 and r.stderr.startswith(f"error: {flag}") and len(r.stderr.strip().splitlines()) == 1
