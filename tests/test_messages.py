"""Messages that are plain and true: no field the user never gave is named (a counted weight total is not `--params`
or `weight_params`, a Qwen file's dense layers are not deepseek's `first_k_dense_replace`), one range for a sliding
window wherever it is checked, JSON's own words for a value that is no object, a paste the text area dropped is not
called empty, and a file just over 1 MB is refused with its size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from apptest_helpers import page, texts

from attncore.config import ConfigError
from cli.main import main
from serving import hf_config, kvcache
from serving.decoder import MAX_WINDOW

SMALL = {"model_type": "mistral", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 128, "vocab_size": 100}  # fmt: skip
QWEN_MOE = SMALL | {"model_type": "qwen3_moe", "num_experts": 4, "num_experts_per_tok": 2,
                    "moe_intermediate_size": 32}  # fmt: skip


def huge_deepseek() -> dict:
    """DeepSeek-V3's file with a million experts over 1,000 layers: more than 10^15 parameters, counted."""
    data = json.loads((Path(__file__).resolve().parent / "configs" / "deepseek-v3.json").read_text())
    return data | {"n_routed_experts": 1_000_000, "num_hidden_layers": 1000, "moe_intermediate_size": 100_000}


def refusal(data) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        hf_config.read_config(json.dumps(data))
    return e.value


def test_a_counted_weight_total_is_not_a_figure_the_user_gave(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(huge_deepseek()))
    assert main(["kv-cache", "--config", str(path)]) == 0  # was: error: --params: must be from 0 to 10^15
    assert "--params" not in capsys.readouterr().err
    model = hf_config.read_config(json.dumps(huge_deepseek()))
    assert kvcache.kv_cache_for(model.arch, 8192).weight_params > 10**15
    with pytest.raises(ConfigError, match="weight_params"):  # a figure the user gives is still bounded
        kvcache.kv_cache_for(model.arch, 8192, weight_params=10**15 + 1)


def test_a_qwen_files_dense_layers_are_named_by_its_own_key():
    e = refusal(QWEN_MOE | {"mlp_only_layers": [0, 1, 2]})
    assert e.field == "mlp_only_layers" and "first_k_dense_replace" not in str(e), str(e)


def test_one_range_for_a_sliding_window():
    assert hf_config.read_config(json.dumps(SMALL | {"sliding_window": 2_000_000_000})).arch.sliding_window
    from_file = str(refusal(SMALL | {"sliding_window": MAX_WINDOW + 1}))
    with pytest.raises(ConfigError) as from_fields:
        hf_config.read_config(json.dumps(SMALL)).arch.__class__(
            **{**hf_config.read_config(json.dumps(SMALL)).arch.__dict__, "sliding_window": MAX_WINDOW + 1}
        )
    with pytest.raises(ConfigError) as from_cache:
        kvcache.kv_cache(2, 4, 16, 8192, window=MAX_WINDOW + 1)
    allowed = f"from 1 to {MAX_WINDOW:,}"
    assert allowed in from_file and allowed in str(from_fields.value) and allowed in str(from_cache.value)


@pytest.mark.parametrize("text, said", [("null", "got null"), ("[1]", "got an array"), ('"x"', "got a string"),
                                        ("4", "got a number"), ("true", "got true")])  # fmt: skip
def test_a_value_that_is_no_object_is_named_in_jsons_words(text, said):
    with pytest.raises(ConfigError) as e:
        hf_config.read_config(text)
    assert said in str(e.value) and "NoneType" not in str(e.value), str(e.value)


def test_a_file_over_1_mb_is_refused_with_a_true_size():
    capped = b" " * (hf_config.MAX_BYTES + 1)  # all a reader capped at one past the limit took
    with pytest.raises(ConfigError, match=r"over 1 MB \(1,000,001 bytes or more; at most 1,000,000\)"):
        hf_config.read_config(capped)
    with pytest.raises(ConfigError, match=r"over 1 MB \(1,000,002 bytes; at most 1,000,000\)"):
        hf_config.read_config(b" " * (hf_config.MAX_BYTES + 2))


@pytest.mark.slow  # AppTests
@pytest.mark.parametrize("pg, prefix", [("parameters", "par_"), ("kv_cache", "kv_")])
def test_the_pages_say_why_a_paste_or_an_upload_was_not_read(pg, prefix):
    from ui.config_input import EMPTY_PASTE

    at = page(pg)
    at = at.button(key=f"{prefix}file_read").click().run()  # a paste over the text area's limit leaves it empty
    assert "keeps nothing of a longer paste" in texts(at.error) and EMPTY_PASTE.split(":")[0] in texts(at.error)
    at.file_uploader(key=f"{prefix}file_upload").upload("big.json", b" " * 1_000_001, "application/json")
    at = at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert "big.json: config.json: over 1 MB (1,000,001 bytes; at most 1,000,000)" in texts(at.error), texts(at.error)


@pytest.mark.slow  # an AppTest
def test_the_kv_page_sizes_a_model_past_10_to_the_15_without_naming_weight_params():
    at = page("kv_cache")
    at.file_uploader(key="kv_file_upload").upload("huge.json", json.dumps(huge_deepseek()).encode(), "application/json")
    at = at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert "weight_params" not in texts(at.error) and "Not a valid" not in texts(at.error), texts(at.error)
