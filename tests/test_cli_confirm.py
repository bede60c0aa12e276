"""Every command that can start long work says what it costs here first and asks for --yes past the rule sweep's grid
set (more than 1,000 runs), or past an hour of estimated computing (cli.confirm); light work is neither estimated
nor asked about. The cost model is a fixed one here (no probes timed), so the figures are the test's own."""

from __future__ import annotations

import numpy as np
import pytest

from cli import confirm
from cli.main import main
from lab import cost_model

PER_MULTIPLY_ADD = 1e-9  # the test's machine: a nanosecond a multiply-add, a millisecond a step besides


@pytest.fixture
def fixed_costs(cache, monkeypatch):
    fixed = cost_model.CostModel(np.array([1e-3, 0.0, PER_MULTIPLY_ADD, PER_MULTIPLY_ADD, PER_MULTIPLY_ADD]), (), 0.0)
    asked = []
    monkeypatch.setattr(cost_model, "model", lambda workers=1, *args, **kwargs: asked.append(workers) or fixed)
    monkeypatch.setattr(cost_model, "slowdown", lambda workers, *args, **kwargs: 1.0)
    return asked


def refused(capsys, argv) -> tuple[str, str]:
    """(the estimate line, the refusal line) of a command refused for want of --yes."""
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith("error: --yes: ") and "add --yes" in lines[-1], lines
    return lines[-2], lines[-1]


def test_an_induction_grid_of_5120_runs_says_its_cost_and_asks(fixed_costs, capsys):
    argv = ["induction", "--layers", *map(str, range(1, 65)), "--position", "learned", "sinusoidal", "rope", "alibi",
            "none", "--seeds", *map(str, range(16))]  # fmt: skip
    estimate, refusal = refused(capsys, argv)
    assert estimate.startswith("induction: 5,120 runs, 5,120 to train: about ") and "of computing" in estimate
    assert refusal == "error: --yes: the grid has 5,120 runs, more than 1,000; add --yes to run them all"


def test_norms_at_a_large_batch_says_its_cost_and_asks(fixed_costs, capsys):
    estimate, refusal = refused(capsys, ["norms", "--d", "256", "--layers", "12", "--heads", "16", "--batch", "1024"])
    assert estimate.startswith("norms: 1 run, 1 to train: about ") and "of computing, more than 60 min" in refusal
    estimate, refusal = refused(capsys, ["norms", "--d", "256", "--layers", "12", "--heads", "16", "--batch", "1024",
                                         "--steps", "10", "--init-only"])  # fmt: skip
    assert estimate.startswith("norms: 48 steps' work: about ") and "of computing, more than 60 min" in refusal


@pytest.mark.parametrize("command", ["train", "evaluate", "patch", "lens", "heads", "sweep"])
def test_one_long_run_is_estimated_and_asked_about_by_every_command_that_trains(fixed_costs, capsys, command):
    argv = [command, "--d", "128", "--layers", "4", "--batch", "256", "--steps", "100000"]
    argv += ["--test-lengths", "6"] if command == "evaluate" else []
    estimate, refusal = refused(capsys, argv)
    assert estimate.startswith(f"{command}: 1 run, 1 to train: about "), estimate
    assert refusal.startswith(f"error: --yes: {command} would take about ")
    assert "of computing, more than 60 min" in refusal


def test_light_work_is_neither_estimated_nor_asked_about(fixed_costs):
    from attncore.config import make_run

    assert confirm.light([make_run()]) and confirm.light([make_run(seed=s) for s in range(6)])
    assert confirm.ask(type("Flags", (), {"yes": False})(), "train", [make_run()]) is None
    assert fixed_costs == []  # no cost model was asked for (a real one times its probes first)


def test_yes_lets_it_start():
    yes, no = type("Flags", (), {"yes": True})(), type("Flags", (), {"yes": False})()
    confirm.check(yes, "induction", 5_120, 10**6)
    with pytest.raises(Exception, match="more than 1,000"):
        confirm.check(no, "induction", 5_120, 1.0)
    confirm.check(no, "train", 1, confirm.CONFIRM_COMPUTING_SECONDS)  # at the rule, not past it


@pytest.mark.parametrize("command", ["sinks", "grokking"])
def test_the_experiments_commands_ask_past_the_rule_too(fixed_costs, capsys, command):
    """sinks and grokking plan their sweep as regimes does (cli.regimes.plan): the estimate first, then --yes past
    an hour of computing; --estimate alone trains nothing and asks nothing."""
    estimate, refusal = refused(capsys, [command, "--steps", "1000000"])
    assert estimate.startswith(f"{command}: ") and "of computing" in estimate
    assert refusal.startswith(f"error: --yes: {command} would take about ")
    assert "of computing, more than 60 min" in refusal
    assert main([command, "--steps", "1000000", "--estimate", "--json"]) == 0
    assert capsys.readouterr().out.startswith('{"experiment": "' + command + '"')
