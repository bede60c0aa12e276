"""How the dashboard's tables write their numbers (ui.tables): one rule per quantity, from lab.formats."""

from __future__ import annotations

import pandas as pd

from lab import formats
from ui import tables


def test_losses_of_one_column_follow_one_rule_and_keep_their_numbers():
    frame = pd.DataFrame({"variant": ["a", "b", "c"], "final_loss_mean": [0.0002, 0.000197, 2.3]})
    styler = tables.styled(frame)
    html = styler.to_html()
    assert "2.00e-04" in html and "1.97e-04" in html and "2.30e+00" in html  # one format for the whole column
    assert "0.0002<" not in html and "0.000197" not in html  # printf's %g wrote both
    assert styler.data["final_loss_mean"].tolist() == [0.0002, 0.000197, 2.3]  # sorting still by the numbers


def test_loss_differences_are_signed_and_missing_values_a_dash():
    frame = pd.DataFrame({"final_loss_diff": [-3.1e-5, 0.012, float("nan")]})
    html = tables.styled(frame).to_html()
    assert "−3.10e-05" in html and "+1.20e-02" in html and "–" in html  # the column's one format, signed
    assert ">+0.0120<" not in html


def test_a_page_can_name_more_columns_and_a_frame_without_them_is_left_alone():
    frame = pd.DataFrame({"head": ["L0H0"], "L back": [0.2376], "median TVD shuffled": [0.00009]})
    html = tables.styled(frame, {"L back": formats.accuracy}).to_html()
    assert "0.238" in html and formats.loss(0.00009) in html
    plain = pd.DataFrame({"seeds": [3]})
    assert tables.styled(plain) is plain


def test_a_column_already_text_is_left_as_it_is():
    levels = pd.DataFrame({"lr": ["1e-3", "3e-3"], "final_loss_mean": [0.5, None]})  # Compare's levels: labels
    html = tables.styled(levels).to_html()
    assert "1e-3" in html and "3e-3" in html and "0.500" in html and "–" in html
    assert "3e-3" in tables.styled(pd.DataFrame({"lr": [0.003]})).to_html()


def test_a_loss_column_never_mixes_scientific_with_fixed_nor_decimals():
    """Issue 29.6: '1.87e-04' above '0.471' (final loss), the Masks trap table's '0.00231' / '4.95e-04' / '10.9'."""
    trap = pd.DataFrame({"seq 1": [0.00231, 4.95e-4, 10.9], "final_loss": [0.471, 2.3, 0.0412]})
    html = tables.styled(trap, {"seq 1": formats.loss}).to_html()
    assert "2.31e-03" in html and "4.95e-04" in html and "1.09e+01" in html
    assert ">0.4710<" in html and ">2.3000<" in html and ">0.0412<" in html  # 3 digits of the smallest, for all


def test_accuracy_differences_carry_the_labs_minus_sign():
    html = tables.styled(pd.DataFrame({"drop": [-0.134, 0.842]})).to_html()
    assert "−0.134" in html and "+0.842" in html and "-0.134" not in html
