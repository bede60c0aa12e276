"""AppTest of the Parameters and KV-cache pages on a hybrid preset: the mixer's parameters in the breakdown, the
cache by layer kind (attention per token, state per sequence), and the link that reopens it."""

from __future__ import annotations

import pytest
from apptest_helpers import page

from serving.kvcache import human_bytes, kv_cache_for
from serving.parameters import count_parameters
from serving.presets import PRESETS

pytestmark = pytest.mark.slow  # AppTests of the pages


def test_parameters_page_counts_a_hybrids_mixers():
    at = page("parameters", par_preset="qwen3-next-80b-a3b")
    count = count_parameters(PRESETS["qwen3-next-80b-a3b"].arch)
    table = at.dataframe[0].value
    mixer = table[table["component"] == "mixer"]["params"].iloc[0]
    assert int(str(mixer).replace(",", "")) == count.breakdown["mixer"] > 0
    assert any("gated_deltanet state layers" in c.value and "M M M F repeated" in c.value for c in at.caption)


def test_kv_cache_page_shows_state_beside_kv_and_its_link_reopens_it():
    at = page("kv_cache", kv_preset="qwen3.5-35b-a3b", kv_context="32768", kv_batch="4", kv_dtype="bf16")
    cache = kv_cache_for(PRESETS["qwen3.5-35b-a3b"].arch, 32_768, 4, "bf16")
    rows = at.dataframe[0].value
    assert list(rows["layer kind"]) == ["full", "state (gated_deltanet)"] and list(rows["layers"]) == [10, 30]
    assert f"{cache.by_kind()[1]['bytes_per_sequence']:,} B a sequence (bfloat16 + float32)" in list(
        rows["one sequence"])  # fmt: skip
    assert any("10 attention layers" in c.value and human_bytes(cache.state_total) in c.value for c in at.caption)
    assert at.number_input(key="kv_n_layers").disabled  # a hybrid's layers follow its pattern
    again = page("kv_cache", **dict(at.query_params))  # the link the page wrote
    assert again.dataframe[0].value.equals(rows)


def test_a_hybrids_layer_count_is_its_patterns():
    at = page("parameters", par_preset="jamba-v0.1", par_n_layers="33")
    assert "layers follow its layer pattern" in at.error[0].value and not at.exception
