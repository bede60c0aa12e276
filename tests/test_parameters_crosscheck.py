"""The Parameters page's live cross-check instantiates attncore models up to CROSSCHECK_LIMIT parameters only, so a
rerun's work stays small (benchmarks/parameters_page.py measures it); a larger model is counted, not instantiated."""

from __future__ import annotations

import pytest
from apptest_helpers import page, texts

from serving import parameters as calc

pytestmark = pytest.mark.slow  # AppTests


def test_a_model_past_the_limit_is_not_instantiated_on_a_rerun():
    at = page("parameters", par_preset="custom", par_d_model="464", par_d_ff="1856", par_n_heads="4")
    total = int(at.metric[0].value.replace(",", ""))
    assert calc.CROSSCHECK_LIMIT < total < 20_000_000  # instantiated on every rerun before
    assert "init_params" not in texts(at.success)
    assert f"up to {calc.CROSSCHECK_LIMIT:,} parameters" in texts(at.info)


def test_a_model_within_the_limit_is_cross_checked():
    at = page("parameters", par_preset="custom", par_d_model="272", par_d_ff="1088", par_n_heads="4")
    total = int(at.metric[0].value.replace(",", ""))
    assert total <= calc.CROSSCHECK_LIMIT
    assert f"{total:,} = attncore.model.init_params {total:,}" in texts(at.success)
