"""Length generalisation: trained weights evaluated by greedy generation at other lengths."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from attncore.config import ConfigError, RunConfig, make_run
from attncore.evaluate import evaluate, evaluate_lengths, run_at_length
from attncore.train import train

L = 4  # trained length; make_run gives learned and sinusoidal tables of 2L + 1 = 9 rows


@pytest.fixture(scope="module")
def trained():
    """position -> (run, trained weights): short runs, enough for numbers that are not at init."""
    out = {}
    for position in ("learned", "sinusoidal", "rope", "none"):
        run = make_run("copy", L, steps=60, position=position)
        out[position] = run, train(run, snapshots=False).params
    return out


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "rope", "none"])
def test_at_the_trained_length_the_numbers_equal_the_runs_own_evaluation(trained, position):
    run, params = trained[position]
    (result,) = evaluate_lengths(params, run, [L])
    own = evaluate(params, run)
    assert result.length == L and result.note is None
    assert (result.token_accuracy, result.sequence_accuracy) == (own.token_accuracy, own.sequence_accuracy)


def test_learned_positions_past_their_table_give_no_number_and_say_why(trained):
    run, params = trained["learned"]
    short, own, long = evaluate_lengths(params, run, [2, L, L + 1])
    assert long.length == L + 1
    assert long.token_accuracy is None and long.sequence_accuracy is None
    assert "learned" in long.note and "9 rows" in long.note and "0-9" in long.note  # L=5 needs 0..9
    assert short.note is None and 0.0 <= short.sequence_accuracy <= 1.0
    assert own.token_accuracy is not None
    assert long.to_dict() == {"length": L + 1, "token_accuracy": None, "sequence_accuracy": None, "note": long.note}


def test_learned_rows_that_training_never_reached_are_evaluated_with_a_note(trained):
    run, params = trained["learned"]
    wide = RunConfig(dataclasses.replace(run.model, max_len=12), run.train, run.task)  # rows 0..11, trained 0..7
    wider_params = params | {"pos_emb": np.concatenate([params["pos_emb"], np.zeros((3, run.model.d_model), "f4")])}
    (result,) = evaluate_lengths(wider_params, wide, [6])
    assert result.sequence_accuracy is not None and "8-11" in result.note


@pytest.mark.parametrize(
    "position,length", [("rope", 9), ("rope", 2), ("sinusoidal", 2), ("sinusoidal", 9), ("none", 12)]
)
def test_rope_sinusoidal_and_none_give_numbers_at_other_lengths(trained, position, length):
    run, params = trained[position]
    (result,) = evaluate_lengths(params, run, [length])
    assert result.length == length and result.note is None
    assert 0.0 <= result.token_accuracy <= 1.0 and 0.0 <= result.sequence_accuracy <= 1.0
    at, _ = run_at_length(run, length)
    assert at.task.length == length  # scored on that length's own fixed test set
    direct = evaluate(params, at)
    assert (result.token_accuracy, result.sequence_accuracy) == (direct.token_accuracy, direct.sequence_accuracy)


def test_a_sinusoidal_table_is_extended_only_past_its_rows(trained):
    run, _ = trained["sinusoidal"]
    assert run_at_length(run, 3)[0].model == run.model
    assert run_at_length(run, 9)[0].model.max_len == 18  # positions 0..17
    assert run_at_length(run, L)[0] is run


@pytest.mark.parametrize(
    "lengths", [[0], [65], [-1], [2.5], ["3"], [True], [], list(range(1, 18)), [3, 3], "3 4", 5, None]
)
def test_bad_test_lengths_are_rejected_naming_the_field_and_the_range(trained, lengths):
    run, params = trained["rope"]
    with pytest.raises(ConfigError) as err:
        evaluate_lengths(params, run, lengths)
    assert err.value.field == "test_lengths"
    assert "test_lengths" in str(err.value)


def test_the_range_is_in_the_message(trained):
    run, params = trained["rope"]
    with pytest.raises(ConfigError, match="from 1 to 64"):
        evaluate_lengths(params, run, [3, 65])


def test_the_verdicts_past_the_range_read_as_sentences():
    """Regression: the per-token verdicts opened their sentence in lower case ('... (−∞, +∞)). per token, ...')."""
    from lab.compare import LENGTH_METRICS, paired_differences
    from ui.length_view import verdicts_text

    def group(offset: float) -> list[dict]:
        return [{"config": {"train": {"seed": s}}} | {m: 0.1 * s + offset for m in LENGTH_METRICS} for s in range(3)]

    comparisons = paired_differences({"none": group(0.0), "RoPE": group(0.05)}, metrics=LENGTH_METRICS)
    text = verdicts_text(comparisons, 16)
    assert "): per sequence, RoPE" in text and ". Per token, RoPE" in text and ". per token" not in text


@pytest.mark.slow
def test_the_sidebar_tab_of_a_task_tested_at_one_length_says_so_not_a_traceback(tmp_path, monkeypatch):
    """Regression: with the induction task in the sidebar the tab evaluated its run at T = 1 and raised ConfigError."""
    from apptest_helpers import texts
    from streamlit.testing.v1 import AppTest

    from lab.store import get_run

    monkeypatch.setenv("ATTNCORE_CACHE_DIR", str(tmp_path))
    from attncore import task as tasks

    defaults = tasks.get("induction").defaults  # the sidebar's run for ?task=induction&steps=20
    run = make_run(
        "induction", defaults["length"], 0, **{k: v for k, v in defaults.items() if k != "length"} | {"steps": 20}
    )
    get_run(run)  # stored: the tab goes on to test it
    at = AppTest.from_file("../dashboard.py", default_timeout=120)
    at.query_params.update({"task": "induction", "steps": "20"})
    at.run()
    at.switch_page("app_pages/lengths.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert "The induction task is tested at its own T only" in texts(at.info)
