"""The learning-rate schedule on the command line: --warmup, --decay and --min-lr-ratio on every command that
builds a run, several values each in `sweep`, and --group-by warmup / decay."""

from __future__ import annotations

import json

import pytest
from test_cli import SMALL, attncore, stored

from cli.main import build_parser
from cli.sweep import sweep_runs

BAD = {
    "warm-up below 0": (["train", *SMALL, "--warmup", "-1"], "--warmup", "from 0 to 5"),
    "warm-up beyond the steps": (["train", *SMALL, "--warmup", "6"], "--warmup", "from 0 to 5"),
    "unknown decay": (["train", *SMALL, "--decay", "step"], "--decay", "'cosine'"),
    "ratio above 1": (["train", *SMALL, "--decay", "cosine", "--min-lr-ratio", "2"], "--min-lr-ratio", "[0, 1]"),
    "ratio without a decay": (["train", *SMALL, "--min-lr-ratio", "0.1"], "--min-lr-ratio", "linear or cosine"),
    "sweep ratio without a decay": (["sweep", *SMALL, "--min-lr-ratio", "0.1"], "--min-lr-ratio", "linear or cosine"),
    "evaluate with a long warm-up": (
        ["evaluate", *SMALL, "--warmup", "9", "--test-lengths", "4"],
        "--warmup",
        "from 0 to 5",
    ),
}


@pytest.mark.parametrize("argv, flag, allowed", BAD.values(), ids=BAD.keys())
def test_a_bad_schedule_exits_2_naming_the_flag_before_training(tmp_path, argv, flag, allowed):
    cache = tmp_path / "cache"
    r = attncore(cache, *argv)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {flag}: ") and allowed in lines[0], r.stderr
    assert stored(cache) == []


def sweep_args(*argv):
    return build_parser(["sweep", *argv]).parse_args(["sweep", *argv])


def test_sweep_takes_several_values_of_each_schedule_flag():
    runs = sweep_runs(sweep_args(*SMALL, "--seed", "0", "1", "--warmup", "0", "2", "--decay", "none", "cosine"))
    assert len(runs) == len(set(runs)) == 8
    got = {(r.train.warmup, r.train.decay, r.train.seed) for r in runs}
    assert got == {(w, d, s) for w in (0, 2) for d in ("none", "cosine") for s in (0, 1)}
    ratio = sweep_runs(sweep_args(*SMALL, "--decay", "none", "linear", "--min-lr-ratio", "0.1"))
    assert {(r.train.decay, r.train.min_lr_ratio) for r in ratio} == {("none", 0.0), ("linear", 0.1)}
    assert sweep_runs(sweep_args(*SMALL))[0].to_dict()["train"].keys().isdisjoint({"warmup", "decay"})


@pytest.mark.slow
def test_train_json_carries_the_schedule_and_sweep_groups_by_warm_up(tmp_path):
    cache = tmp_path / "cache"
    r = attncore(cache, "train", *SMALL, "--warmup", "2", "--decay", "linear", "--json")
    assert r.returncode == 0, r.stderr
    train = json.loads(r.stdout)["config"]["train"]
    assert (train["warmup"], train["decay"], train.get("min_lr_ratio", 0.0)) == (2, "linear", 0.0)
    r = attncore(cache, "sweep", *SMALL, "--seed", "0", "1", "--warmup", "0", "2", "--group-by", "warmup", "--json")
    assert r.returncode == 0, r.stderr
    groups = json.loads(r.stdout)["groups"]
    assert [(g["level"], g["value"], g["n"]) for g in groups] == [("0", 0, 2), ("2", 2, 2)]
    r = attncore(cache, "sweep", *SMALL, "--warmup", "0", "2", "--decay", "none", "cosine", "--group-by", "decay")
    assert r.returncode == 2 and "it also varies --warmup" in r.stderr
