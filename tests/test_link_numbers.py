"""Links read numbers as the flags do (attncore.checks' ASCII syntax): another script's digits, an underscore or
a space inside are refused with the usual notice, never read as a number (par_d_model=٤٠٩٦ was 4,096)."""

from __future__ import annotations

import argparse

import pytest

from attncore import ConfigError
from cli import flags
from ui import frames, urls

OTHER_DIGITS = ["٤٠٩٦", "४०९६", "４０９６", "4_096", "4 096", "٤٠٩٦.5", "1e٣"]


@pytest.mark.parametrize("raw", OTHER_DIGITS)
def test_a_link_refuses_what_a_flag_refuses(raw):
    with pytest.raises(urls.Rejected):
        urls.number(1, 10**6, integer=True)([raw])
    with pytest.raises(urls.Rejected):
        urls.number(0.0, 10**6, integer=False)([raw])
    with pytest.raises(argparse.ArgumentTypeError):
        flags.integer(raw)
    if " " not in raw:  # typed text: spaces separate the numbers
        with pytest.raises(ConfigError):
            frames.parse_ints(f"1 {raw}", "lengths")


def test_a_link_reads_every_spelling_a_flag_reads():
    for raw, value in [("4096", 4096), ("+4096", 4096), ("4096.0", 4096), ("4.096e3", 4096), (" 4096 ", 4096)]:
        assert urls.number(1, 10**6, integer=True)([raw]) == (value, str(value))
    assert urls.number(0.0, 1.0, integer=False)([".5"]) == (0.5, "0.5")
    for raw in ["inf", "nan", "1e309"]:
        with pytest.raises(urls.Rejected):
            urls.number(0.0, 1e9, integer=False)([raw])


def test_a_choice_by_number_takes_ascii_digits_only():
    options = [0.001, 0.003, 0.01]
    assert urls._matches("3e-3", options, ["1e-3", "3e-3 (default)", "1e-2"]) == [1]
    assert urls._matches("٣e-3", options, ["1e-3", "3e-3 (default)", "1e-2"]) == []


@pytest.mark.slow  # an AppTest
def test_the_parameters_page_refuses_a_link_of_other_digits_with_a_notice():
    from apptest_helpers import page, shown

    at = page("parameters", par_preset="custom", par_d_model="٤٠٩٦")
    notices = " ".join(shown(w.value) for w in at.warning)
    assert "URL parameter par_d_model=٤٠٩٦ ignored. Width d_model: a whole number from" in notices, notices
    assert at.number_input(key="par_d_model").value != 4096
