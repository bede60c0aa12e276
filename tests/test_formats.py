"""lab.formats: one text format per quantity, for the pages and the command line."""

from __future__ import annotations

import pytest

from lab import formats


@pytest.mark.parametrize(
    ("x", "text"),
    [(2.3026, "2.30"), (0.04123, "0.0412"), (0.5, "0.500"), (3.1e-05, "3.10e-05"), (12.18, "12.2"), (0.0, "0")],
)
def test_losses_keep_significant_digits_and_never_read_zero(x, text):
    assert formats.loss(x) == text


def test_a_tiny_loss_difference_keeps_its_sign_and_digits():
    assert formats.signed_loss(-3.1e-05) == "−3.10e-05"
    assert formats.signed_loss(0.012) == "+0.0120"


def test_accuracies_have_fixed_decimals_and_shares_one_decimal():
    assert [formats.accuracy(x) for x in (1, 0.98765, 0.2)] == ["1.000", "0.988", "0.200"]
    assert [formats.share(x) for x in (0.702, 0.70204, 0, 1)] == ["70.2%", "70.2%", "0%", "100%"]
    assert [formats.share(x) for x in (0.0004, 0.0005, 0.9996)] == ["<0.1%", "0.1%", ">99.9%"]  # never a false 0


def test_counts_have_separators_and_plurals_are_right():
    assert formats.count(27253) == "27,253"
    assert [formats.count(n, "run") for n in (0, 1, 18)] == ["0 runs", "1 run", "18 runs"]
    assert formats.count(2, "series", "series") == "2 series"


def test_bytes_name_their_unit_iec_or_si():
    assert formats.size(80 * 10**9, "si") == "80.0 GB"
    assert formats.size(80 * 10**9) == "74.5 GiB"
    assert formats.size(0.516 * 2**30) == "528 MiB"
    assert formats.size(512) == "512 B"
    with pytest.raises(ValueError, match="unit"):
        formats.size(1, "binary")


def test_learning_rates_in_one_notation():
    assert [formats.learning_rate(x) for x in (0.003, 3e-3, 1e-2, 0.01, 2.5e-4, 0.1)] == [
        "3e-3",
        "3e-3",
        "1e-2",
        "1e-2",
        "2.5e-4",
        "1e-1",
    ]


def test_seconds_and_durations_are_rounded():
    assert formats.seconds(13.857248) == "13.9 s"
    assert formats.seconds(0.4213) == "0.42 s"
    assert formats.duration(42.4) == "42 s" and formats.duration(185) == "3 min 05 s"
    assert formats.duration(179.6) == "3 min 00 s" and formats.duration(89.4) == "89 s"  # rounded once, not per part
    assert formats.duration(4 * 3600) == "4 h 00 min" and formats.duration(5399) == "89 min 59 s"


def test_significant_keeps_three_digits_and_trailing_zeros():
    from lab.formats import significant

    assert [significant(v) for v in (16.06, 1.0737, 72.0, 0.5, 1234.4, 0)] == [
        "16.1",
        "1.07",
        "72.0",
        "0.500",
        "1,234",
        "0",
    ]


def test_a_column_has_one_format_for_all_its_values():
    """Never '1.87e-04' beside '0.471', nor '0.007812' beside '0.25'."""
    assert formats.column([0.471, 1.87e-4]) == ["4.71e-01", "1.87e-04"]
    assert formats.column([0.471, 2.3]) == ["0.471", "2.300"]
    assert formats.column([-0.03, 0.431, float("nan")], signed=True) == ["−0.0300", "+0.4310", "–"]
    assert formats.p_values([0.007812, 0.03906, 0.25]) == ["0.00781", "0.03906", "0.25000"]
    assert formats.p_values([0.25, 1]) == ["0.250", "1.000"] and formats.p_values([3e-5, 1])[0] == "3.00e-05"
    assert formats.signed_accuracy(-0.5) == "−0.500"


def test_cli_tables_write_a_loss_column_in_one_format():
    import pandas as pd

    frame = pd.DataFrame({"final_loss": [1.87e-4, 0.471], "final_loss_diff": [-0.2, 0.0004]})
    rules = formats.table_formatters(frame.columns, frame)
    assert [rules["final_loss"](v) for v in frame["final_loss"]] == ["1.87e-04", "4.71e-01"]
    assert [rules["final_loss_diff"](v) for v in frame["final_loss_diff"]] == ["−2.00e-01", "+4.00e-04"]
