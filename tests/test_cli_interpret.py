"""The interventions on the command line: patch, lens, heads, explain with --json; bad input exits 2."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_cli import attncore

from attncore import make_run
from attncore.interpret import patching
from attncore.task import task_of

SHORT = ["--steps", "40"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.mark.slow
def test_patch_json_has_the_grid_and_by_position(cache, monkeypatch):
    r = attncore(cache, "patch", *SHORT, "--at", "2", "--symbol", "5", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert np.array(out["grid"]).shape == (2, 4) and np.array(out["by_position"]).shape == (2, 4, 12)
    from lab.store import get_run  # the run the command trained, from the same store

    run = make_run(steps=40)
    record = get_run(run, location=cache)
    expected = patching.patch(record.params, run, patching.contrast(run, task_of(run.task).probe(run.task), 2, 5))
    assert np.allclose(out["grid"], expected.head) and out["query"] == expected.contrast.query == 8


@pytest.mark.slow
def test_lens_heads_and_explain_json(cache):
    lens = json.loads(attncore(cache, "lens", *SHORT, "--json").stdout)
    assert np.array(lens["probe"]).shape == (3, 6) and lens["layers"][0] == "embed"
    heads = json.loads(attncore(cache, "heads", *SHORT, "--n-test", "10", "--json").stdout)
    assert set(heads["probe"]) == {"previous token", "same symbol earlier", "L back", "k-th smallest", "mirrored"}
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
        (["explain", "--permutations", "10001"], "--permutations"),  # a typo cannot cost an hour
        (["explain", "--restarts", "21"], "--restarts"),
        (["explain", "--search-steps", "2001"], "--search-steps"),
        (["explain", "--baseline-seeds", *map(str, range(11))], "--baseline-seeds"),
        (["explain", "--input", "\u0663 2 3 4 5 6"], "--input"),  # an Arabic-Indic three
        (["patch", "--input", "+1 2 3 4 5 6"], "--input"),
        (["patch", "--direction", "sideways"], "--direction"),
    ],
)
def test_bad_input_exits_2_with_one_line(cache, argv, flag):
    r = attncore(cache, *argv, *SHORT)
    assert r.returncode == 2 and r.stderr.startswith(f"error: {flag}") and len(r.stderr.strip().splitlines()) == 1


def test_explain_refuses_a_search_too_big_for_memory_before_training(tmp_path):
    """The estimate (1,000 shuffles in chunks: about 33 MiB) against --max-memory, which training's
    own estimate (about 22 MiB) passes: refused with the figure and the limit, and nothing trained."""
    from test_cli import stored

    r = attncore(tmp_path, "explain", *SHORT, "--permutations", "1000", "--max-memory", "30M")
    assert r.returncode == 2 and r.stderr.startswith("error: --max-memory: explaining needs about"), r.stderr
    assert "KiB a row), more than the 30 MiB --max-memory cap" in r.stderr  # a row is 292 KiB (it said "0 MiB")
    assert not stored(tmp_path)


def test_explain_refuses_work_estimated_over_its_limit_before_training(tmp_path):
    """Regression: `explain --permutations 10000 --d 256 --layers 4 --steps 10` ran for minutes (within memory)."""
    from test_cli import stored

    r = attncore(tmp_path, "explain", "--permutations", "10000", "--d", "256", "--layers", "4", "--steps", "10")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("error: --yes: explaining would take about 6.7e11 multiply-adds"), r.stderr
    for flag in ("--permutations", "--restarts", "--search-steps", "--d", "--layers", "3e11"):
        assert flag in r.stderr
    assert not stored(tmp_path)  # refused before the run was trained


@pytest.mark.slow
def test_the_explain_work_limit_passes_the_defaults_and_every_range_on_the_default_model():
    from argparse import Namespace

    from attncore.interpret import explain as ex
    from cli.interpret import MAX_EXPLAIN_WORK, MAX_PERMUTATIONS, MAX_RESTARTS, MAX_SEARCH_STEPS, check_work

    run = make_run()
    assert ex.work(run, MAX_PERMUTATIONS, MAX_RESTARTS, MAX_SEARCH_STEPS) < MAX_EXPLAIN_WORK
    assert ex.work(make_run(d_model=256, n_layers=4), 100, 5, 500) < MAX_EXPLAIN_WORK  # a wide model's defaults
    # linear in each count: a forward per shuffle, a forward and a backward (two forwards) per search pass
    assert ex.work(run, 200, 5, 500) - ex.work(run, 100, 5, 500) == 100 * ex.row_multiply_adds(run)
    assert ex.work(run, 100, 6, 500) - ex.work(run, 100, 5, 500) == 3 * 501 * ex.row_multiply_adds(run)
    wide = make_run(d_model=256, n_layers=4)
    flags = Namespace(permutations=10_000, restarts=5, search_steps=500, yes=True)
    check_work(wide, flags)  # --yes: the user asked for it
    with pytest.raises(Exception, match="--yes"):
        check_work(wide, Namespace(**vars(flags) | {"yes": False}))


@pytest.mark.slow
def test_explain_says_it_trains_and_numbers_restarts_as_the_page(tmp_path):
    """An untrained config says so on stderr (each run it trains), restarts are numbered 1..k as on
    the Explanations page; divergences in lab.formats (never 'JSD 0.000 to 0.000')."""
    r = attncore(tmp_path, "explain", *SHORT, "--layer", "0", "--head", "1", "--permutations", "10",
                 "--restarts", "2", "--search-steps", "20", "--baseline-seeds", "0", "1")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "training copy L=6 seed=0" in r.stderr and "training copy L=6 seed=1" in r.stderr
    assert "  restart 1: JSD " in r.stdout and "  restart 2: JSD " in r.stdout and "restart 0" not in r.stdout
    assert "0.000 to 0.000" not in r.stdout and "shuffles move it more than the search's bound" in r.stdout
    again = attncore(tmp_path, "explain", *SHORT, "--layer", "0", "--head", "1", "--permutations", "10",
                     "--restarts", "2", "--search-steps", "20", "--baseline-seeds", "0", "1")  # fmt: skip
    assert again.stdout == r.stdout and "training" not in again.stderr  # stored now


@pytest.mark.slow
def test_patch_prints_sep_and_offers_both_directions(cache):
    text = attncore(cache, "patch", *SHORT, "--at", "2", "--symbol", "5")
    assert text.returncode == 0, text.stderr
    assert "clean 17 3 0 12 7 9 SEP 17 3 0 12 7  ->  corrupted 17 3 5 12 7 9 SEP 17 3 0 12 7" in text.stdout
    assert "denoise: clean activations copied into the corrupted run" in text.stdout
    # no '−0.000', and the MLP figures and the grids' columns labelled
    assert "−0.000" not in text.stdout and "-0.000" not in text.stdout
    assert "each block's MLP output at every position: L0 " in text.stdout and "   L1 " in text.stdout
    lines = text.stdout.splitlines()
    heads = lines.index(next(line for line in lines if line.startswith("fraction restored, each head's")))
    assert lines[heads + 1].split() == ["H0", "H1", "H2", "H3"]
    assert len(lines[heads + 1]) == len(lines[heads + 2])  # the labels stand over their columns
    denoise = json.loads(attncore(cache, "patch", *SHORT, "--at", "2", "--symbol", "5", "--json").stdout)
    r = attncore(cache, "patch", *SHORT, "--at", "2", "--symbol", "5", "--direction", "noise", "--json")
    noise = json.loads(r.stdout)
    assert noise["direction"] == "noise" and denoise["direction"] == "denoise"
    # the changed input position carries the whole difference either way; nothing else does at the embedding
    assert noise["resid_by_position"][0][2] == pytest.approx(1.0, abs=1e-5)
    assert np.allclose(np.delete(noise["resid_by_position"][0], 2), 0.0, atol=1e-5)
    assert not np.allclose(noise["grid"], denoise["grid"])


def test_a_figure_that_rounds_to_zero_prints_without_a_sign():
    from cli.interpret import _fmt

    assert _fmt([-0.0001, 0.0004, -0.0006, float("nan")]).split() == ["0.000", "0.000", "−0.001", "nan"]


@pytest.mark.slow
def test_heads_scores_the_reverse_pattern(cache):
    heads = json.loads(attncore(cache, "heads", *SHORT, "--task", "reverse", "--n-test", "5", "--json").stdout)
    assert np.array(heads["probe"]["mirrored"]).shape == (2, 4)
