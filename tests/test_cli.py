"""The command line as a user runs it: `python -m attncore ...` in a subprocess, with its own cache directory.

Bad or dangerous input exits 2 with one line naming the flag, before anything is trained or stored; a closed
pipe exits quietly; a killed sweep takes its workers with it; the command line loads no store, joblib or pandas
until a command needs them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from attncore.config import ConfigError, make_run
from attncore.memory import parse_size, training_bytes
from lab import formats
from lab.store import backend as entries

REPO = Path(__file__).resolve().parents[1]


def env_for(cache: Path) -> dict:
    return os.environ | {"PYTHONPATH": str(REPO), "ATTNCORE_CACHE_DIR": str(cache)}


def attncore(cache: Path, *argv, **kwargs) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "attncore", *argv]
    kwargs = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE} | kwargs
    return subprocess.run(cmd, cwd=REPO, env=env_for(cache), text=True, timeout=120, **kwargs)


def stored(cache: Path) -> list[Path]:
    """Every stored run's file under the cache directory (the store writes record.npz and record.json per run;
    joblib's own output.pkl counts too, so a regression to pickles is seen)."""
    names = (entries.RECORD_FILE, entries.SIDECAR_FILE, "output.pkl")
    return [p for p in cache.rglob("*") if p.is_file() and p.name.startswith(names)]


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SMALL = ["--length", "4", "--steps", "5"]
HUGE = ["--d", "4096", "--layers", "64", "--d-ff", "65536", "--batch", "65536"]
SEEDS_1000 = ["--seed", *map(str, range(1000))]

BAD_INPUT = {
    "jobs 0": (["sweep", *SMALL, "--jobs", "0"], "--jobs", "-1 (all cores) or from 1 to 256"),
    "jobs 100000": (["sweep", *SMALL, "--jobs", "100000"], "--jobs", "from 1 to 256"),
    "csv under a file": (["sweep", *SMALL, "--csv", "{tmp}/a-file/out"], "--csv", "directory"),
    "csv is a file": (["sweep", *SMALL, "--csv", "{tmp}/a-file"], "--csv", "directory"),
    "unreachable scheduler": (
        ["sweep", *SMALL, "--backend", "dask", "--scheduler", "tcp://127.0.0.1:{port}"],
        "--scheduler",
        "no dask scheduler answered",
    ),
    "malformed scheduler": (["sweep", *SMALL, "--backend", "dask", "--scheduler", "tcp//x"], "--scheduler", "tcp://"),
    "no scheduler": (["sweep", *SMALL, "--backend", "dask"], "--scheduler", "address"),
    "kv-cache head-dim 0": (
        ["kv-cache", "--layers", "24", "--kv-heads", "8", "--head-dim", "0"],
        "--head-dim",
        "from 1",
    ),
    "kv-cache kv-heads 0": (
        ["kv-cache", "--layers", "24", "--kv-heads", "0", "--head-dim", "64"],
        "--kv-heads",
        "from 1",
    ),
    "kv-cache heads 0": (["kv-cache", "--layers", "2", "--heads", "0", "--head-dim", "64"], "--heads", "from 1"),
    "kv-cache window 0": (
        ["kv-cache", "--layers", "2", "--kv-heads", "2", "--head-dim", "8", "--window", "0"],
        "--window",
        "from 1",
    ),
    "params kv-heads 0": (["params", "--kv-heads", "0"], "--kv-heads", "from 1"),
    "params vocab 0": (["params", "--vocab", "0"], "--vocab", "from 1"),
    "gpu-gb inf": (["kv-cache", "--preset", "gpt2", "--gpu-gb", "inf"], "--gpu-gb", "finite"),
    "gpu nan": (["kv-cache", "--preset", "gpt2", "--gpu", "nan"], "--gpu", "size in GB"),
    "reserve nan": (["kv-cache", "--preset", "gpt2", "--reserve", "nan"], "--reserve", "finite"),
    "lr inf": (["train", *SMALL, "--lr", "inf"], "--lr", "finite"),
    "lr nan in a sweep": (["sweep", *SMALL, "--lr", "0.01", "nan"], "--lr", "finite"),
    "train beyond memory": (["train", *SMALL, *HUGE], "--max-memory", "GiB"),
    "sweep beyond memory": (["sweep", *SMALL, *HUGE, "--jobs", "1"], "--max-memory", "GiB"),
    "train over the cap": (["train", *SMALL, "--max-memory", "1M"], "--max-memory", "estimated"),
    "bad cap": (["train", *SMALL, "--max-memory", "lots"], "--max-memory", "512M"),
    "evaluate at length 0": (["evaluate", *SMALL, "--test-lengths", "0", "3"], "--test-lengths", "from 1 to 64"),
    "evaluate at length 65": (["evaluate", *SMALL, "--test-lengths", "65"], "--test-lengths", "from 1 to 64"),
    "evaluate at 17 lengths": (
        ["evaluate", *SMALL, "--test-lengths", *map(str, range(1, 18))],
        "--test-lengths",
        "1 to 16 lengths",
    ),
    "evaluate at a word": (["evaluate", *SMALL, "--test-lengths", "six"], "--test-lengths", "from 1 to 64"),
    "1,000-run grid": (["sweep", *SMALL, *SEEDS_1000, "--lr", "0.01", "0.02"], "--yes", "2,000 runs"),
    "1,000,000-run grid": (
        ["sweep", "--steps", "5", *SEEDS_1000, "--length", *map(str, range(1, 11)), "--lr"]
        + [f"{k / 1000:g}" for k in range(1, 101)],
        "--yes",
        "1,000,000 runs",
    ),
    "group-by unknown": (["sweep", *SMALL, "--group-by", "colour"], "--group-by", "'task', 'length', 'position'"),
    "group-by with another factor varied": (
        ["sweep", *SMALL, "--task", "copy", "sort", "--group-by", "position"],
        "--group-by",
        "it also varies --task",
    ),
    "scaling and no-scaling": (["sweep", *SMALL, "--scaling", "on", "--no-scaling"], "--scaling", "not both"),
    "scaling maybe": (["sweep", *SMALL, "--scaling", "maybe"], "--scaling", "'on', 'off'"),
    # each message names the flag typed and its real range
    "train-lengths 1 0": (["train", "--train-lengths", "1", "0"], "--train-lengths", "from 1 to 64 with MIN <= MAX"),
    "train-lengths and a typed --length": (
        ["train", "--train-lengths", "1", "8", "--length", "6"],
        "--train-lengths",
        "sets L = MAX = 8; drop --length 6",
    ),
    "sweep train-lengths and a typed --length": (
        ["sweep", "--train-lengths", "1", "8", "--length", "6", "--steps", "5"],
        "--train-lengths",
        "drop --length 6",
    ),
    "max-memory -1G": (["train", *SMALL, "--max-memory", "-1G"], "--max-memory", "more than 0 bytes"),
    "window-layers -1": (
        ["kv-cache", "--preset", "mistral-7b-v0.1", "--engine", "vllm", "--gpu", "h100-80gb", "--window-layers", "-1"],
        "--window-layers",
        "from 0 to 32, got -1",
    ),
    "window-layers 33": (
        ["kv-cache", "--preset", "mistral-7b-v0.1", "--engine", "vllm", "--gpu", "h100-80gb", "--window-layers", "33"],
        "--window-layers",
        "from 0 to 32, got 33",
    ),
    "max-mb 1e-9": (["cache", "import", "{tmp}/a-file", "--max-mb", "1e-9"], "--max-mb", "from 1 to 100,000 MB"),
    "max-memory 1": (["train", *SMALL, "--max-memory", "1"], "--max-memory", "more than the 1 byte --max-memory cap"),
    "max-memory 1500": (["train", *SMALL, "--max-memory", "1500"], "--max-memory", "the 1.46 KiB --max-memory cap"),
    # ASCII digits only, in every flag (Python's int() and float() read other scripts' digits)
    "regimes seeds in Arabic-Indic digits": (["regimes", "depth", "--seeds", "٣"], "--seeds", "from 1 to 16, got '٣'"),
    "min-lr-ratio in Arabic-Indic digits": (
        ["train", *SMALL, "--decay", "cosine", "--min-lr-ratio", "١"],
        "--min-lr-ratio",
        "must be a number (digits 0-9), got '١'",
    ),
    "steps in Devanagari digits": (["train", "--steps", "५"], "--steps", "must be an integer (digits 0-9)"),
    "lr in Arabic-Indic digits": (["sweep", *SMALL, "--lr", "٠.٠١"], "--lr", "must be a number (digits 0-9)"),
    "warm-up with an underscore": (["train", *SMALL, "--warmup", "1_0"], "--warmup", "must be an integer"),
    "regimes depths in full-width digits": (["regimes", "depth", "--depths", "２"], "--depths", "digits 0-9"),
    "explain permutations in Arabic-Indic digits": (
        ["explain", *SMALL, "--permutations", "١٠"],
        "--permutations",
        "from 1 to 10,000",
    ),
    "kv-cache context in Thai digits": (["kv-cache", "--preset", "gpt2", "--context", "๑๒"], "--context", "digits"),
    "kv-cache gpu in Arabic-Indic digits": (["kv-cache", "--preset", "gpt2", "--gpu", "٨٠"], "--gpu", "unknown '٨٠'"),
    "cache export seed in Arabic-Indic digits": (
        ["cache", "export", "{tmp}/out.zip", "--seed", "٣"],
        "--seed",
        "must be an integer (digits 0-9)",
    ),
}


@pytest.mark.slow
def test_stored_sees_a_trained_run(tmp_path):
    """The 'nothing was stored' checks below can fail: a run that trains leaves files stored() finds."""
    cache = tmp_path / "cache"
    assert attncore(cache, "train", "--steps", "10", "--json").returncode == 0
    assert {p.name for p in stored(cache)} >= {entries.RECORD_FILE, entries.SIDECAR_FILE}


@pytest.mark.slow
@pytest.mark.parametrize("argv, flag, allowed", BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_input_exits_2_with_one_line_before_training(tmp_path, argv, flag, allowed):
    (tmp_path / "a-file").write_text("not a directory")
    argv = [a.format(tmp=tmp_path, port=closed_port()) for a in argv]
    cache = tmp_path / "cache"
    r = attncore(cache, *argv)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"error: {flag}: ") and allowed in lines[0]
    assert r.stdout == ""
    assert stored(cache) == []


def typed_flags(parser, path=()):
    """(command path, flag, argparse action) of every flag with a `type`, in every command and subcommand."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from typed_flags(sub, (*path, name))
        elif action.type is not None:
            yield path, (action.option_strings or [action.dest])[0], action


NOT_ASCII_NUMBERS = ("٣", "١.٥", "٣e٢", "1_000", "３", "߃", " 3", "3\u00a0")  # other scripts, underscores, spaces


def test_every_typed_flag_reads_ascii_digits_only():
    """One parser for every number a flag takes (cli.flags.integer and number, or a type built on
    them): a new flag with type=int or float (which read '٣' as 3) fails here."""
    from cli.main import build_parser

    flags = list(typed_flags(build_parser()))
    assert len(flags) > 60  # every command's flags were walked
    for path, flag, action in flags:
        for text in NOT_ASCII_NUMBERS:
            with pytest.raises((argparse.ArgumentTypeError, ValueError)):
                action.type(text)
                pytest.fail(f"{' '.join(path)} {flag} took {text!r}")


@pytest.mark.slow
def test_train_text_names_the_held_out_test_loss_and_labels_the_last_batch(tmp_path):
    cache = tmp_path / "cache"
    flags = ["--length", "3", "--steps", "20"]
    summary = json.loads(attncore(cache, "train", *flags, "--json").stdout)
    text = attncore(cache, "train", *flags).stdout
    assert f"test loss {formats.loss(summary['test_loss'])}" in text
    assert f"last-batch loss {formats.loss(summary['final_loss'])}" in text and "final loss" not in text


@pytest.mark.slow
def test_train_json_prints_the_snapshots_and_evaluate_matches_it_at_the_trained_length(tmp_path):
    from attncore.snapshots import snapshot_steps

    cache = tmp_path / "cache"
    flags = ["--length", "4", "--steps", "40"]
    trained = json.loads(attncore(cache, "train", *flags, "--json").stdout)
    assert [s["step"] for s in trained["snapshots"]] == snapshot_steps(40)
    assert all(s.keys() == {"step", "token_accuracy", "sequence_accuracy"} for s in trained["snapshots"])
    r = attncore(cache, "evaluate", *flags, "--test-lengths", "2", "4", "9", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["config"] == trained["config"]
    short, own, past = out["lengths"]
    assert [x["length"] for x in out["lengths"]] == [2, 4, 9]
    assert (own["token_accuracy"], own["sequence_accuracy"]) == (
        trained["token_accuracy"],
        trained["sequence_accuracy"],
    )
    assert own["note"] is None and short["note"] is None and 0 <= short["sequence_accuracy"] <= 1
    # learned positions (a table of 2L + 1 = 9 rows): L = 9 needs 18 positions, no number and a note saying why
    assert past["token_accuracy"] is None and past["sequence_accuracy"] is None
    assert "learned" in past["note"] and "9 rows" in past["note"]
    # the text: a note column only when a length has a note (it was once printed empty)
    plain = attncore(cache, "evaluate", *flags, "--test-lengths", "2", "4").stdout.splitlines()
    assert plain[1].split() == ["test", "L", "per-token", "per-sequence"]
    noted = attncore(cache, "evaluate", *flags, "--test-lengths", "2", "9").stdout.splitlines()
    assert noted[1].split()[-1] == "note" and "9 rows" in noted[-1]
    rope = json.loads(attncore(cache, "evaluate", *flags, "--position", "rope", "--test-lengths", "9", "--json").stdout)
    (far,) = rope["lengths"]
    assert far["note"] is None and 0 <= far["sequence_accuracy"] <= 1 and 0 <= far["token_accuracy"] <= 1
    text = attncore(cache, "evaluate", *flags, "--test-lengths", "4", "9")
    assert text.returncode == 0 and "per-sequence" in text.stdout and "cannot reach past its rows" in text.stdout


@pytest.mark.slow
def test_a_big_grid_with_yes_shows_its_count_first(tmp_path):
    cache = tmp_path / "cache"
    r = attncore(cache, "sweep", *SMALL, *SEEDS_1000, "--lr", "0.01", "0.02", "--yes", "--max-memory", "1K")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert lines[0] == "2,000 runs in the grid"
    assert lines[-1].startswith("error: --max-memory: ")
    assert stored(cache) == []


@pytest.mark.slow
def test_no_command_prints_usage(tmp_path):
    r = attncore(
        tmp_path,
    )
    assert r.returncode == 2 and r.stderr.startswith("usage: python -m attncore") and r.stdout == ""
    assert "sweep" in r.stderr and "kv-cache" in r.stderr


@pytest.mark.slow
def test_the_library_checks_jobs_too():
    from lab.sweep import run_sweep

    for n_jobs in (0, -2, 257, 10**5, 1.5):
        with pytest.raises(ConfigError) as e:
            run_sweep([make_run(steps=5)], n_jobs=n_jobs)
        assert e.value.field == "jobs"


# --- pipes -------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv",
    [["params", "--preset", "list"], ["cache", "list"], ["sweep", "--preset", "smoke", "--steps", "5", "--jobs", "1"]],
    ids=["params", "cache", "sweep"],
)
def test_output_into_a_closed_pipe_exits_quietly(tmp_path, argv):
    read, write = os.pipe()
    os.close(read)  # like `| head -1` once head has its line: every write fails
    try:
        r = attncore(tmp_path / "cache", *argv, stdout=write, stderr=subprocess.PIPE)
    finally:
        os.close(write)
    assert r.returncode == 141, r.stderr
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr


# --- imports -----------------------------------------------------------------------


@pytest.mark.slow
def test_the_command_line_loads_no_store_joblib_or_pandas_until_a_command_needs_them():
    code = """
import json, sys
HEAVY = ("lab.store", "lab.sweep", "joblib", "pandas")
import cli.main
after_import = sorted(m for m in HEAVY if m in sys.modules)
cli.main.main(["params", "--preset", "gpt2", "--json"])
after_params = sorted(m for m in HEAVY if m in sys.modules)
import cli.sweep
print(json.dumps([after_import, after_params, "joblib" in sys.modules]))
"""
    r = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
    )
    after_import, after_params, joblib_after_sweep = json.loads(r.stdout.splitlines()[-1])
    assert after_import == [] and after_params == []
    assert not joblib_after_sweep  # cli.sweep loads joblib only inside its commands


# --- memory estimate -----------------------------------------------------------------

PEAK = """
import json, sys, tracemalloc
from attncore.config import make_run
from attncore.memory import training_bytes
from lab.store import compute_run

run = make_run(*json.loads(sys.argv[1]), steps=2, **json.loads(sys.argv[2]))
tracemalloc.start()
compute_run(run)
print(json.dumps([tracemalloc.get_traced_memory()[1], training_bytes(run)]))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "task, settings",
    [
        (("copy", 6), {}),  # the article's model: evaluation on 500 sequences dominates
        (("copy", 8), {"batch_size": 1024}),  # training activations dominate
        (("sort", 12), {"d_model": 128, "n_heads": 8, "d_ff": 1024, "batch_size": 64, "position": "rope"}),
        (("copy", 4), {"d_model": 256, "n_layers": 3, "batch_size": 8, "dtype": "float64"}),  # weights dominate
    ],
)
def test_memory_estimate_is_within_2x_of_the_measured_peak(task, settings):
    # a fresh process per run: layers.py keeps a zeros array per shape, which a warm process already has
    r = subprocess.run(
        [sys.executable, "-c", PEAK, json.dumps(task), json.dumps(settings)],
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
    )
    peak, estimate = json.loads(r.stdout)
    assert peak <= estimate <= 2 * peak, (peak, estimate)


def test_memory_estimate_grows_with_every_shape():
    base = training_bytes(make_run())
    for change in ({"batch_size": 4096}, {"d_model": 512}, {"n_layers": 16}, {"d_ff": 8192}, {"dtype": "float64"}):
        assert training_bytes(make_run(**change)) > base, change
    assert training_bytes(make_run(d_model=4096, n_layers=64, d_ff=65536, batch_size=65536)) > 2**40


def test_parse_size():
    assert parse_size("512M") == 512 * 2**20 and parse_size("1.5GiB") == 3 * 2**29 and parse_size("100") == 100
    for bad in ("", "0", "-1G", "lots", "1X", "nan"):
        with pytest.raises(ValueError):
            parse_size(bad)


# --- a killed sweep ----------------------------------------------------------------


def command_line(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())
    except psutil.Error:  # gone meanwhile
        return ""


@pytest.mark.slow
def test_a_killed_sweep_takes_its_workers_with_it(tmp_path):
    argv = ["sweep", "--length", "4", "--seed", "0", "1", "2", "3", "--steps", "20000", "--jobs", "2"]
    cmd = [sys.executable, "-m", "attncore", *argv]
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env_for(tmp_path / "cache"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    sweep = psutil.Process(proc.pid)
    children: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 60
        while True:  # two workers busy training: each has spent a second of CPU (imports take less)
            assert proc.poll() is None and time.monotonic() < deadline, "the sweep never started two workers"
            children = sweep.children(recursive=True)
            workers = [c for c in children if "popen_loky" in command_line(c)]
            with contextlib.suppress(psutil.Error):
                if len(workers) == 2 and all(sum(w.cpu_times()[:2]) > 1.0 for w in workers):
                    break
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        gone, alive = psutil.wait_procs(children, timeout=30)
        assert alive == [], f"still running 30 s after the sweep was killed: {[command_line(p) for p in alive]}"
    finally:
        for child in children:
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass


@pytest.mark.slow
def test_sweep_group_by_prints_groups_and_paired_comparisons_as_json(tmp_path):
    """--group-by scaling over seeds 0-2: one group per level, each metric's mean/min/max over the seeds as the
    runs' own summaries give them, and one comparison per metric against the first level, paired by seed."""
    cache = tmp_path / "cache"
    argv = ["sweep", *SMALL, "--seed", "0", "1", "2", "--scaling", "off", "on", "--jobs", "1"]
    runs = json.loads(attncore(cache, *argv, "--json").stdout)  # the plain sweep: one summary per run
    r = attncore(cache, *argv, "--group-by", "scaling", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [(g["factor"], g["level"], g["value"], g["n"]) for g in out["groups"]] == [
        ("scaling", "off", False, 3),
        ("scaling", "on", True, 3),
    ]
    by = {(run["config"]["model"]["scaling"], run["config"]["train"]["seed"]): run for run in runs}
    for g in out["groups"]:
        for m in ("test_loss", "token_accuracy", "sequence_accuracy"):
            values = [by[(g["value"], seed)][m] for seed in (0, 1, 2)]
            assert g[m] == pytest.approx({"mean": sum(values) / 3, "min": min(values), "max": max(values)})
    assert [(c["level"], c["baseline"], c["metric"]) for c in out["comparisons"]] == [
        ("on", "off", m) for m in ("test_loss", "token_accuracy", "sequence_accuracy")
    ]
    for c in out["comparisons"]:
        deltas = [by[(True, seed)][c["metric"]] - by[(False, seed)][c["metric"]] for seed in (0, 1, 2)]
        assert (c["delta_mean"], c["delta_min"], c["delta_max"]) == pytest.approx(
            (sum(deltas) / 3, min(deltas), max(deltas))
        )
        differ = sum(d != 0 for d in deltas)  # a seed on which both score the same carries no sign
        assert c["n"] == 3 and c["n_nonzero"] == differ
        assert c["p_floor"] == (2 / 2**differ if differ else 1.0) and c["p_value"] >= 0.25
        assert (c["ci_low"], c["ci_high"]) == ("-inf", "inf")  # 3 seeds: the sign-flip test rejects no shift
        assert c["t_low"] is None or c["t_low"] <= c["delta_mean"] <= c["t_high"]
        assert c["verdict"] in ("too few seeds", "identical on every seed")  # 3 seeds can show nothing
    printed = attncore(cache, *argv, "--group-by", "scaling").stdout
    assert max(len(line) for line in printed.splitlines()) <= 120  # the tables were once ~230 wide
    text = " ".join(printed.split())  # paragraphs wrap
    assert "Runs grouped by scaling" in text and "Each scaling against off, paired by seed" in text
    assert "a difference can be shown once 6 seeds differ" in text and "These runs have 3 seeds" in text
    assert "t_interval" in text and "differ" in text and "sequence_accuracy_max" in text  # every column, in blocks
    assert "too few seeds" in text and "+0.0000" not in text


@pytest.mark.slow
def test_sweep_no_scaling_still_works_and_scaling_on_off_is_a_grid_flag(tmp_path):
    cache = tmp_path / "cache"
    off = json.loads(attncore(cache, "sweep", *SMALL, "--no-scaling", "--json").stdout)
    both = json.loads(attncore(cache, "sweep", *SMALL, "--scaling", "on", "off", "--json").stdout)
    assert [r["config"]["model"]["scaling"] for r in off] == [False]
    assert [r["config"]["model"]["scaling"] for r in both] == [True, False]
    assert both[1]["cached"] and both[1]["final_loss"] == off[0]["final_loss"]


# --- training on a range, randomized positions, ALiBi, reverse ---------------------------------------------


@pytest.mark.slow
def test_train_lengths_and_randomized_positions_reach_the_json_config(tmp_path):
    args = ("--task", "reverse", "--position", "alibi", "--train-lengths", "2", "5", "--steps", "20")
    out = attncore(
        tmp_path, "evaluate", *args, "--randomized-positions", "16", "--test-lengths", "2", "5", "9", "--json"
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    task, train = result["config"]["task"], result["config"]["train"]
    assert task == {"name": "reverse", "length": 5, "train_lengths": [2, 5]}
    assert train["randomized_positions"] == 16 and result["config"]["model"]["position"] == "alibi"
    assert [r["length"] for r in result["lengths"]] == [2, 5, 9]
    assert all(r["sequence_accuracy"] is not None for r in result["lengths"])  # ALiBi: no table to run past


@pytest.mark.slow
def test_the_default_config_has_no_range_fields(tmp_path):
    out = attncore(tmp_path, "train", "--steps", "10", "--json")
    config = json.loads(out.stdout)["config"]
    assert "train_lengths" not in config["task"] and "randomized_positions" not in config["train"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (("--train-lengths", "1", "8", "--length", "5"), "--train-lengths"),
        (("--train-lengths", "0", "8"), "--train-lengths"),
        (("--randomized-positions", "4"), "--randomized-positions"),  # below 2L = 12
        (("--mixed-lengths",), "--mixed-lengths"),
    ],
)
def test_bad_range_flags_exit_2_naming_the_flag(tmp_path, argv, flag):
    out = attncore(tmp_path, "train", *argv)
    assert out.returncode == 2 and out.stderr.startswith(f"error: {flag}:"), out.stderr
    assert not stored(tmp_path)


@pytest.mark.slow
def test_evaluate_on_randomized_positions(tmp_path):
    args = ("--position", "rope", "--length", "3", "--randomized-positions", "12", "--steps", "20", "--json")
    ordered = json.loads(attncore(tmp_path, "evaluate", *args, "--test-lengths", "2", "3").stdout)
    out = attncore(tmp_path, "evaluate", *args, "--test-lengths", "2", "3", "7", "--eval-positions", "randomized")
    assert out.returncode == 0, out.stderr
    randomized = json.loads(out.stdout)
    assert randomized["eval_positions"] == "randomized" and ordered["eval_positions"] == "ordered"
    assert randomized["lengths"][2]["sequence_accuracy"] is None  # 2·7 = 14 positions > N_MAX = 12
    refused = attncore(tmp_path, "evaluate", "--steps", "20", "--test-lengths", "2", "--eval-positions", "randomized")
    assert refused.returncode == 2 and refused.stderr.startswith("error: --eval-positions:"), refused.stderr


@pytest.mark.slow
def test_help_shows_every_default(tmp_path):
    """`train --help` shows each flag's default (none for unset or off flags)."""
    r = attncore(tmp_path, "train", "--help")
    text = " ".join(r.stdout.split())  # argparse wraps the help column
    for shown in ("--steps STEPS (default: 1500)", "--length L (default: 6)", "--lr LR (default: 0.003)",
                  "--batch BATCH (default: 32)"):  # fmt: skip
        assert shown in text, shown
    task = text[text.index("--task {copy,sort,reverse,induction,bigram_backcopy,modular} ") :]  # its help: each summary
    help_text, default = task.split("(default:", 1)
    assert help_text.count(":") == 6 and default.startswith(" copy)")  # six tasks' summaries, then the default
    assert "(default: None)" not in text and "(default: False)" not in text
    sweep = " ".join(attncore(tmp_path, "sweep", "--help").stdout.split())
    assert "--seed SEED [SEED ...] (default: 0)" in sweep


def test_a_sweep_counts_what_it_trained_and_names_its_base_by_the_varied_factor(tmp_path, monkeypatch, capsys):
    """A sweep whose runs another process stored while it ran says they came from the cache (its
    start-time check saw none); a sweep varying only the position names its base 'learned position'."""
    from cli.main import main
    from lab import store
    from lab import sweep as lab_sweep

    monkeypatch.setenv("ATTNCORE_CACHE_DIR", str(tmp_path))
    argv = ["sweep", "--position", "learned", "rope", "--train-lengths", "2", "4", "--steps", "5", "--jobs", "1"]
    assert main(argv) == 0
    first = capsys.readouterr()
    assert "2 runs (0 from the cache)" in first.err
    assert "(diff: to 'learned position')" in first.out and "full" not in first.out
    # as if another sweep had stored both runs after this one checked the store
    monkeypatch.setattr(store, "is_cached", lambda run, **kw: False)
    monkeypatch.setattr(lab_sweep, "is_cached", lambda run, **kw: False)
    assert main(argv) == 0
    assert "2 runs (2 from the cache)" in capsys.readouterr().err
