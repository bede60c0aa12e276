"""The longest max_model_len vLLM starts with (serving.context_limit), as its ModelConfig derives it at
startup, and the engine fit's refusal above it; a config.json without torch_dtype says its dtype is assumed."""

from __future__ import annotations

import json

import pytest

from attncore.config import ConfigError
from cli.main import main
from serving.context_limit import derived_limit
from serving.engine import EngineSettings, engine_fit
from serving.hf_config import from_dict
from serving.presets import CARDS, PRESETS


@pytest.mark.parametrize(
    "name, tokens",
    [("llama-3-8b", 8192), ("gemma-2-9b", 8192), ("gpt2", 1024), ("llama-3.1-8b", 131072), ("gemma-3-1b", 32768)],
)
def test_presets_derived_maximum(name, tokens):
    """Llama 3.1's rope_type llama3 is not scaled again; GPT-2's n_positions is the key; Gemma 3 is already scaled."""
    assert PRESETS[name].model.limit.tokens == tokens


def test_rope_scaling_factor_scales_the_position_key_and_yarn_its_original():
    base = {"max_position_embeddings": 4096}
    linear = derived_limit(base | {"rope_scaling": {"type": "linear", "factor": 2.0}}, "llama")
    yarn = derived_limit(
        {"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                                               "original_max_position_embeddings": 32768}}, "qwen2"
    )  # fmt: skip
    assert (linear.tokens, yarn.tokens) == (8192, 131072) and "factor 4" in yarn.rule
    assert derived_limit({"max_position_embeddings": 8192, "seq_length": 4096}, "x").tokens == 4096  # the least
    assert derived_limit({"hidden_size": 8}, "x") is None
    assert derived_limit({"hidden_size": 8}, "falcon").tokens == 2048  # FalconConfig's default, as vLLM reads it


def test_engine_fit_refuses_past_the_maximum_unless_overridden():
    llama = PRESETS["llama-3-8b"].model
    settings = EngineSettings(max_model_len=32768)
    with pytest.raises(ConfigError, match="derived maximum is 8,192") as e:
        engine_fit(llama.arch, CARDS["a100-40gb"].total_gib, settings, gpu="a100-40gb", limit=llama.limit)
    assert e.value.field == "max_model_len" and "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in e.value.message
    allowed = EngineSettings(max_model_len=32768, allow_long_max_model_len=True)
    fit = engine_fit(llama.arch, CARDS["a100-40gb"].total_gib, allowed, gpu="a100-40gb", limit=llama.limit)
    assert fit.derived_max_model_len == 8192 and "never trained" in fit.max_model_len_warning
    within = engine_fit(llama.arch, 80, EngineSettings(max_model_len=8192), limit=llama.limit)
    assert within.max_model_len_warning is None


@pytest.mark.parametrize("preset, gpu", [("llama-3-8b", "a100-40gb"), ("gemma-2-9b", "h100-80gb")])
def test_cli_refuses_in_one_line_naming_the_limit(preset, gpu, capsys):
    argv = ["kv-cache", "--preset", preset, "--engine", "vllm", "--gpu", gpu, "--max-model-len", "32768"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "8,192" in err and "--allow-long-max-model-len" in err
    assert main([*argv, "--allow-long-max-model-len"]) == 0
    assert "warning: max_model_len 32,768 is above the model's derived maximum 8,192" in capsys.readouterr().out


def test_a_config_without_torch_dtype_says_its_dtype_is_assumed(tmp_path, capsys):
    gpt2 = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257}
    model = from_dict(gpt2)
    assert not model.dtype_stored and any("assumed" in n for n in model.notes)
    assert from_dict(gpt2 | {"torch_dtype": "float32"}).dtype_stored
    path = tmp_path / "config.json"
    path.write_text(json.dumps(gpt2))
    assert main(["params", "--config", str(path)]) == 0
    assert "no torch_dtype in the file, ASSUMED (bf16)" in capsys.readouterr().out
