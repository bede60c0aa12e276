"""How the dashboard's tables write their numbers (ui.tables): one rule per quantity, from lab.formats."""

from __future__ import annotations

import pandas as pd

from lab import formats
from ui import tables


def test_losses_of_one_column_follow_one_rule_and_keep_their_numbers():
    frame = pd.DataFrame({"variant": ["a", "b", "c"], "final_loss_mean": [0.0002, 0.000197, 2.3]})
    styler = tables.styled(frame)
    html = styler.to_html()
    assert "2.00e-04" in html and "1.97e-04" in html and "2.30" in html
    assert "0.0002<" not in html and "0.000197" not in html  # printf's %g wrote both
    assert styler.data["final_loss_mean"].tolist() == [0.0002, 0.000197, 2.3]  # sorting still by the numbers


def test_loss_differences_are_signed_and_missing_values_a_dash():
    frame = pd.DataFrame({"final_loss_diff": [-3.1e-5, 0.012, float("nan")]})
    html = tables.styled(frame).to_html()
    assert formats.signed_loss(-3.1e-5) in html and formats.signed_loss(0.012) in html and "–" in html


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
