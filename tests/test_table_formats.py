"""How the dashboard's tables write their numbers (ui.tables): one rule per quantity, from lab.formats."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from lab import formats
from ui import tables
from ui.nav import PAGES


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
    """Regression: '1.87e-04' above '0.471' (final loss), the Masks trap table's '0.00231' / '4.95e-04' / '10.9'."""
    trap = pd.DataFrame({"seq 1": [0.00231, 4.95e-4, 10.9], "final_loss": [0.471, 2.3, 0.0412]})
    html = tables.styled(trap, {"seq 1": formats.loss}).to_html()
    assert "2.31e-03" in html and "4.95e-04" in html and "1.09e+01" in html
    assert ">0.4710<" in html and ">2.3000<" in html and ">0.0412<" in html  # 3 digits of the smallest, for all


def test_accuracy_differences_carry_the_labs_minus_sign():
    html = tables.styled(pd.DataFrame({"drop": [-0.134, 0.842]})).to_html()
    assert "−0.134" in html and "+0.842" in html and "-0.134" not in html


# --- every table every page renders ------------------------------------------------------------------------------

NUMBER = re.compile(r"^(?P<sign>[+\-−]?)(?P<body>.+)$")
SCIENTIFIC = re.compile(r"^\d(?:\.(\d+))?e([+\-−]?)(\d+)$")
FIXED = re.compile(r"^(?:\d{1,3}(?:,\d{3})+|\d+)\.(\d+)(%?)$")
INTEGER = re.compile(r"^(?:\d{1,3}(?:,\d{3})+|\d+)(%?)$")
INTERVAL = re.compile(r"^[\[(](.+?), (.+?)[\])](?: \(.*\))?$")  # a Holm level may follow: (97.5 %)
NOT_NUMBERS = {"–", "−∞", "+∞", "∞", "", "None", "nan", "NaN"}
EXACT = {"0", "0%", "100%"}  # exactly 0 (a Δ identical on every seed) and shares of 0 and 1: said exactly, not rounded


def format_class(text: str):
    """(class, minus sign) of a number's text: ('fixed', 3), ('sci', 2, exponent width), ('int',), ...; None for
    text that is not one number (a label, a dash, '<0.1%')."""
    text = text.strip()
    if text in NOT_NUMBERS or text in EXACT:
        return None
    sign, body = NUMBER.match(text).group("sign", "body")
    minus = sign if sign in "-−" and sign else None
    if m := SCIENTIFIC.match(body):
        mantissa, exponent = m.group(1), m.group(3)
        return ("sci", len(mantissa or ""), len(exponent) >= 2), minus  # '1e-06' is not '1e-6'

    if m := FIXED.match(body):
        return ("fixed", len(m.group(1)), m.group(2)), minus
    if m := INTEGER.match(body):
        return ("int", m.group(1)), minus
    return None


def cell_classes(text: str) -> list:
    """The classes of a cell: one number, or both ends of an interval '[−0.0391, +0.902]'."""
    if m := INTERVAL.match(text.strip()):
        return [c for c in (format_class(m.group(1)), format_class(m.group(2))) if c]
    c = format_class(text)
    return [c] if c else []


def frontend_text(value, fmt: str | None) -> str:
    """What Streamlit's table shows for a number without a Styler's text: the column's printf format, else up to
    4 decimals with trailing zeros dropped (as '2.4724', '2.204', '12.18' were shown beside each other)."""
    if value is None or (isinstance(value, float) and value != value):
        return "None"
    if isinstance(value, bool | np.bool_):
        return ""
    if isinstance(value, str):
        return value
    if fmt and fmt.startswith("%"):
        return fmt % value
    if isinstance(value, int | np.integer):
        return str(value)
    return f"{value:.4f}".rstrip("0").rstrip(".")


def shown_columns(element) -> dict[str, list[str]]:
    """{column label: the texts its cells show} of one st.dataframe, from its proto as the browser gets it."""
    from streamlit import dataframe_util

    proto = element.proto
    data = dataframe_util.convert_arrow_bytes_to_pandas_df(proto.arrow_data.data)
    display = None
    if proto.arrow_data.HasField("styler") and proto.arrow_data.styler.display_values:
        display = dataframe_util.convert_arrow_bytes_to_pandas_df(proto.arrow_data.styler.display_values)
    config = json.loads(proto.columns) if proto.columns else {}
    out = {}
    for i, column in enumerate(data.columns):
        conf = config.get(str(column)) or config.get(f"_pos:{i}") or {}
        fmt = (conf.get("type_config") or {}).get("format")
        label = conf.get("label") or str(column)
        values = data[column].tolist()
        styled = display is not None and [str(v) for v in display.iloc[:, i]] != [
            pd.io.formats.style_render._default_formatter(v, 6) for v in values
        ]
        out[label] = [str(v) for v in display.iloc[:, i]] if styled else [frontend_text(v, fmt) for v in values]
    return out


def mixed_columns(at) -> list[str]:
    """Every column of every table on the page whose numbers are written in more than one format (or with two
    minus signs): 'label: [texts]'."""
    found = []
    for element in at.dataframe:
        for label, texts in shown_columns(element).items():
            classes = [c for t in texts for c in cell_classes(t)]
            kinds, minus = {c for c, _ in classes}, {m for _, m in classes if m}
            if len(kinds) > 1 or len(minus) > 1:
                found.append(f"{label}: {texts}")
    return found


@pytest.fixture(scope="module")
def many_runs(tmp_path_factory):
    """A store with what the pages show by default, at 30 steps: the article's runs, the ablations over the
    seeds Ablations shows by default (ui.variants.DEFAULT_SEEDS), learned vs no position over seeds 0-5 (Compare),
    and the Masks page's padded-batch model."""
    from apptest_helpers import temporary_store

    from attncore import make_run
    from lab.presets import ablations, preset, with_settings
    from ui.variants import DEFAULT_SEEDS

    compare = [make_run(seed=s, position=p) for s in (3, 4, 5) for p in ("learned", "none")]
    ablated = [run for seed in range(1, DEFAULT_SEEDS) for run in ablations(seed=seed)]  # seed 0: the article's
    runs = [with_settings(r, steps=30) for r in preset("article") + ablated + compare]
    with temporary_store(tmp_path_factory, [*runs, make_run("copy", 6, train_min=1, mixed_lengths=True)]):
        yield


def test_the_format_classes_tell_mixed_columns_apart():
    same = [cell_classes(t) for t in ("0.471", "2.300", "−0.030")]
    assert len({c for cs in same for c, _ in cs}) == 1
    for a, b in (("1.87e-04", "0.471"), ("0.007812", "0.25"), ("1e-06", "1e-6"), ("2.4724", "2.204"), ("1", "0.5")):
        assert cell_classes(a)[0][0] != cell_classes(b)[0][0], (a, b)
    assert {m for t in ("−13.29", "-1.20") for _, m in cell_classes(t)} == {"−", "-"}
    assert len(cell_classes("[−0.0110, −0.00103]")) == 2


@pytest.mark.slow
@pytest.mark.parametrize("spec", PAGES, ids=lambda p: p.url_path or "home")
def test_every_table_of_a_page_writes_each_column_in_one_format(many_runs, spec):
    at = AppTest.from_file("../dashboard.py", default_timeout=180)
    at.query_params.update({"steps": "30"})
    at.run()
    if spec.url_path:
        at.switch_page(spec.path).run()
    assert not at.exception, [e.message for e in at.exception]
    assert not mixed_columns(at), mixed_columns(at)
