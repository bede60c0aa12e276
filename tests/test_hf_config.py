"""The config.json reader (serving.hf_config): real released configs to their published totals, every
refusal in one line naming its field, garbage of every kind refused and never raised past, the weights' bytes as
the checkpoints store them.

Each total is written out here with the figure it rests on: the Hugging Face model page's safetensors parameter
count (or the checkpoint's model.safetensors.index.json total_size in bytes, as its repository publishes it), and
independently transformers 5.24's AutoModelForCausalLM.from_config on the meta device (the same count, run again by
test_totals_against_transformers wherever transformers is installed; it is not a requirement of the lab).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from attncore.config import ConfigError
from serving import hf_config, hf_families, hf_hybrid
from serving.parameters import count_parameters
from serving.presets import CONFIGS, PRESETS
from serving.validation import DEEPSEEK_R1
from serving.weights import WeightFormat, matrix_bytes, stored_weights

TEST_CONFIGS = Path(__file__).resolve().parent / "configs"

# file -> (total parameters, what the figure rests on). The files are the models' config.json as released, fetched
# from the model pages named (huggingface.co/<model>/blob/main/config.json) or from public repositories that vendor
# them; every count below was also reproduced by transformers 5.24 from_config on the meta device.
TOTALS = {
    # Llama 3.x, tied: meta-llama/Llama-3.2-1B, page: 1.24B params; transformers 1,235,814,400
    "llama-3.2-1b": 1_235_814_400,
    # Llama 3.x, untied: meta-llama/Llama-3.1-8B, page: 8.03B; transformers 8,030,261,248
    "llama-3.1-8b": 8_030_261_248,
    # Qwen2.5, q/k/v biases, use_sliding_window false: Qwen/Qwen2.5-7B, card: 7.61B (6.53B non-embedding)
    "qwen2.5-7b": 7_615_616_512,
    # Qwen3, q_norm/k_norm, head_dim given: Qwen/Qwen3-8B, card: 8.2B (6.95B non-embedding); transformers
    "qwen3-8b": 8_190_735_360,
    # Gemma 2, four norms a layer, head_dim 256 != 3584 / 16, alternating 4,096 windows: google/gemma-2-9b 9.24B
    "gemma-2-9b": 9_241_705_984,
    "gemma-2-2b": 2_614_341_888,  # google/gemma-2-2b, page: 2.61B; transformers
    # Gemma 3, q/k norms, 5 local : 1 global: google/gemma-3-1b-pt, page: 1,000M; transformers 999,885,952
    "gemma-3-1b": 999_885_952,
    # Mixtral, experts with routers, sliding_window null: mistralai/Mixtral-8x7B-v0.1, page 46.7B; its index
    # total_size 93,405,585,408 B in bf16 = 2 B x 46,702,792,704 (checked below); transformers
    "mixtral-8x7b": 46_702_792_704,
    # Phi-3, fused qkv and gate_up: microsoft/Phi-3-mini-4k-instruct, page: 3.82B; transformers
    "phi-3-mini-4k": 3_821_079_552,
    # DeepSeek MLA + MoE: deepseek-ai/DeepSeek-V2-Lite, page 15.7B, card 2.4B activated; transformers
    "deepseek-v2-lite": 15_706_484_224,
    # OLMo 2, post-norms and q/k norms over the projection: allenai/OLMo-2-1124-13B, its index total_size
    # 54,864,793,600 B in float32 = 4 B x 13,716,198,400 (checked below); transformers
    "olmo-2-13b": 13_716_198_400,
    # GPT-OSS, sinks, router biases, MXFP4 experts: openai/gpt-oss-20b, card 20.9B total; transformers
    # 20,914,757,184; its index total_size 13,761,264,768 B (checked below)
    "gpt-oss-20b": 20_914_757_184,
}


def read(name: str) -> hf_config.ModelFile:
    path = CONFIGS / f"{name}.json" if (CONFIGS / f"{name}.json").exists() else TEST_CONFIGS / f"{name}.json"
    return hf_config.read_config(path.read_bytes())


def config(name: str) -> dict:
    path = CONFIGS / f"{name}.json" if (CONFIGS / f"{name}.json").exists() else TEST_CONFIGS / f"{name}.json"
    return json.loads(path.read_text())


# one line: the longest refusal names the 33 model types read (323 characters), the fields a count needs and a
# model_type's first 24 characters
LINE = 640


def refusal(data) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        hf_config.read_config(data if isinstance(data, str | bytes) else json.dumps(data))
    assert "\n" not in str(e.value) and len(str(e.value)) < LINE, str(e.value)
    return e.value


# --- published totals ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, total", TOTALS.items())
def test_released_configs_land_on_their_published_totals(name, total):
    assert count_parameters(read(name).arch).total == total


def test_published_details_beyond_the_totals():
    qwen3 = count_parameters(read("qwen3-8b").arch)
    assert round(qwen3.non_embedding / 1e9, 2) == 6.95  # "Number of Parameters (Non-Embedding): 6.95B"
    gemma = read("gemma-2-9b").arch
    assert (gemma.d_head, gemma.d_model // gemma.n_heads) == (256, 224)  # head_dim given, not d / h
    oss = count_parameters(read("gpt-oss-20b").arch)
    assert round(oss.total / 1e9, 1) == 20.9  # "21B parameters with 3.6B active": the head counted, not the embedding
    assert round((oss.active - oss.breakdown["embeddings"]) / 1e9, 2) == 3.61
    lite = count_parameters(read("deepseek-v2-lite").arch)
    assert 2.4e9 <= lite.active - lite.breakdown["embeddings"] < 2.5e9  # "2.4B activated"


@pytest.mark.parametrize("name, stored", [("gpt-oss-20b", 13_761_264_768), ("olmo-2-13b", 54_864_793_600),
                                          ("mixtral-8x7b", 93_405_585_408)])  # fmt: skip
def test_checkpoint_bytes_equal_the_published_index_total_size(name, stored):
    """model.safetensors.index.json's total_size (the bytes of every tensor) as each model repository publishes it:
    MXFP4 experts (4-bit values, an 8-bit exponent per 32) and bf16 elsewhere; float32; bf16."""
    model = read(name)
    assert stored_weights(model.arch, model.weights).bytes == stored


def test_qwen3_06b_ties_its_head_though_its_files_store_a_copy():
    """Qwen/Qwen3-0.6B: card 0.6B (0.44B non-embedding); transformers 596,049,920. The Hub's safetensors count,
    751,632,384, is higher by one 151,936 x 1,024 matrix: the files keep lm_head.weight although it is tied."""
    count = count_parameters(read("qwen3-0.6b").arch)
    assert count.total == 596_049_920 == 751_632_384 - 151_936 * 1024
    assert round(count.non_embedding / 1e9, 2) == 0.44 and read("qwen3-0.6b").arch.d_head == 128 != 1024 // 16


def test_a_wrapper_is_read_from_its_text_config():
    """google/gemma-3-12b-it wraps Gemma3ForCausalLM (text_config) with a SigLIP tower: the language model is
    counted (transformers from_config of the text_config: 11,766,034,176), the tower named in a note; the wrapper's
    torch_dtype (bf16) wins over text_config's float32, as vLLM reads it."""
    model = read("gemma-3-12b-it")
    assert (model.model_type, model.wrapper) == ("gemma3_text", "gemma3")
    assert count_parameters(model.arch).total == 11_766_034_176 and model.weights.dtype == "bf16"
    assert any("vision_config" in n for n in model.notes) and "mm_tokens_per_image" in model.ignored
    assert "text_config.rope_theta" in model.ignored and "text_config.hidden_size" not in model.ignored


def test_gemma3_defaults_fill_what_a_wrapper_leaves_out():
    """A gemma3_text config without heads or vocabulary gets Gemma3TextConfig's defaults (8 heads, 4 KV heads,
    head_dim 256, vocabulary 262,208, a window every layer but each sixth), each listed as a default."""
    model = hf_config.from_dict({"model_type": "gemma3", "text_config": {
        "hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text", "num_hidden_layers": 34,
        "sliding_window": 1024}})  # fmt: skip
    a = model.arch
    assert (a.n_heads, a.kv_heads, a.d_head, a.vocab_size, a.windowed_layers) == (8, 4, 256, 262_208, 29)
    assert {d.split(" =")[0] for d in model.defaults} >= {"num_attention_heads", "num_key_value_heads", "vocab_size"}


def test_deepseek_v3_is_the_validation_models_shape_with_its_score_correction_bias():
    """deepseek-ai/DeepSeek-V3: the shape serving.validation writes out for DeepSeek-R1, plus the
    e_score_correction_bias of each MoE layer (topk_method noaux_tc): transformers counts 671,026,404,352 parameters
    and keeps the 58 x 256 biases as buffers; the checkpoint stores them."""
    model = read("deepseek-v3")
    assert model.arch == replace(DEEPSEEK_R1, n_kv_heads=128, router_bias=True)
    assert count_parameters(model.arch).total == 671_026_404_352 + 58 * 256
    assert any("num_nextn_predict_layers" in n for n in model.notes)


def test_every_preset_is_its_shipped_config_read_by_the_reader():
    for name, preset in PRESETS.items():
        assert preset.model == hf_config.read_config((CONFIGS / f"{name}.json").read_bytes()), name
    assert sorted(p.stem for p in CONFIGS.glob("*.json")) == sorted(PRESETS)


def test_totals_against_transformers():
    """The independent count: transformers' own model built from each file on the meta device (no memory)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    for name, total in [*TOTALS.items(), ("qwen3-0.6b", 596_049_920), ("gemma-3-12b-it", 11_766_034_176)]:
        data = config(name)
        data.pop("quantization_config", None)
        data = data.get("text_config", data)
        cfg = transformers.AutoConfig.for_model(**data)
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(cfg)
        assert sum(p.numel() for p in model.parameters()) == total == count_parameters(read(name).arch).total, name


# --- the attention pattern ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, sliding, full, window",
    [("gemma-2-9b", 21, 21, 4096), ("gemma-3-1b", 22, 4, 512), ("gemma-3-12b-it", 40, 8, 1024),
     ("gpt-oss-20b", 12, 12, 128), ("mistral-7b-v0.1", 32, 0, 4096), ("phi-3-mini-4k", 32, 0, 2047),
     ("qwen2.5-7b", 0, 28, None), ("mixtral-8x7b", 0, 32, None), ("llama-3.1-8b", 0, 32, None)],
)  # fmt: skip
def test_each_layer_read_by_its_kind(name, sliding, full, window):
    model = read(name)
    assert (model.layer_kinds.count("sliding"), model.layer_kinds.count("full")) == (sliding, full)
    assert model.arch.sliding_window == window and model.arch.windowed_layers == sliding


def test_the_patterns_order_follows_the_file():
    assert read("gemma-2-9b").layer_kinds[:3] == ("sliding", "full", "sliding")  # layer 0 local
    assert read("gemma-3-1b").layer_kinds[:6] == ("sliding",) * 5 + ("full",)
    assert read("gemma-3-1b").pattern() == "22 sliding-window layers (512) and 4 full: S S S S S F repeated"
    qwen = dict(config("qwen2.5-7b"), use_sliding_window=True, max_window_layers=21)
    assert hf_config.from_dict(qwen).layer_kinds == ("full",) * 21 + ("sliding",) * 7  # layers >= 21 slide
    types = ["full_attention"] * 3 + ["sliding_attention"]
    mixed = hf_config.from_dict(
        dict(
            config("llama-3.2-1b")
            | {"model_type": "olmo3", "num_hidden_layers": 4, "layer_types": types, "sliding_window": 8}
        )
    )
    assert mixed.layer_kinds == ("full", "full", "full", "sliding")


# --- refusals, one line each -----------------------------------------------------------------------------------

BASES = {  # one valid config per model_type (a released one where the lab ships it)
    "llama": "llama-3.1-8b", "mistral": "mistral-7b-v0.1", "mixtral": "mixtral-8x7b", "qwen2": "qwen2.5-7b",
    "qwen3": "qwen3-8b", "phi3": "phi-3-mini-4k", "olmo2": "olmo-2-13b", "gemma2": "gemma-2-9b",
    "gemma3_text": "gemma-3-1b", "deepseek_v2": "deepseek-v2-lite", "deepseek_v3": "deepseek-v3",
    "gpt_oss": "gpt-oss-20b", "gpt2": "gpt2", "attncore": "attncore", "olmoe": "olmoe-1b-7b-0924",
    "phimoe": "phi-3.5-moe-instruct", "starcoder2": "starcoder2-3b", "falcon": "falcon-7b",
    "granite": "granite-3.0-8b-base", "cohere": "c4ai-command-r-v01", "qwen3_next": "qwen3-next-80b-a3b",
    "nemotron_h": "nemotron-h-8b-base-8k", "jamba": "jamba-v0.1", "falcon_h1": "falcon-h1-tiny-90m",
    "granitemoehybrid": "granite-4.0-h-tiny", "lfm2": "lfm2-350m", "kimi_linear": "kimi-linear-48b-a3b",
}  # fmt: skip
QWEN35_MOE = config("qwen3.5-35b-a3b")["text_config"]
QWEN35_MOE_KEYS = ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size")
SYNTHETIC = {  # the model_types no shipped file shows, on a released shape of the family
    "gemma": config("gemma-2-2b") | {"model_type": "gemma"},
    "olmo3": config("olmo-2-13b") | {"model_type": "olmo3"},
    "qwen3_moe": config("qwen3-8b") | {"model_type": "qwen3_moe", "num_experts": 128, "num_experts_per_tok": 8,
                                       "moe_intermediate_size": 768},
    "llama4_text": config("llama-4-scout-17b-16e-instruct")["text_config"],  # the language model of the wrapper
    "qwen3_5_moe_text": QWEN35_MOE,  # the language model of the shipped wrapper
    "qwen3_5_text": {k: v for k, v in QWEN35_MOE.items() if k not in QWEN35_MOE_KEYS}
    | {"model_type": "qwen3_5_text", "intermediate_size": 6144},  # dense, on the same shape
}  # fmt: skip


def base_config(model_type: str) -> dict:
    return dict(SYNTHETIC[model_type]) if model_type in SYNTHETIC else config(BASES[model_type])


def required_fields():
    for mt in hf_families.KNOWN:
        need = {"gpt2": hf_families.GPT2_REQUIRED, "attncore": hf_families.ATTNCORE_REQUIRED,
                "falcon": hf_families.FALCON_REQUIRED} | hf_hybrid.NEEDS  # fmt: skip
        for key in need.get(mt) or hf_families.FAMILIES[mt].required:
            yield mt, key


def test_every_model_type_has_a_valid_base():
    assert set(hf_families.KNOWN) == set(BASES) | set(SYNTHETIC)
    for mt in hf_families.KNOWN:
        assert hf_config.from_dict(base_config(mt)).model_type == mt


@pytest.mark.parametrize("model_type, key", list(required_fields()))
def test_a_missing_required_field_is_named(model_type, key):
    data = base_config(model_type)
    del data[key]
    e = refusal(data)
    assert e.field == key and str(e).startswith(f"{key}: missing; model_type {model_type} needs ")


def test_a_missing_field_inside_a_wrapper_names_its_path():
    e = refusal({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text", "hidden_size": 64}})
    assert e.field == "text_config.num_hidden_layers"


@pytest.mark.parametrize(
    "text, field, words",
    [("{not json", "config.json", "not JSON (line 1, column 2)"), ("[1, 2]", "config.json", "must be a JSON object"),
     ('"llama"', "config.json", "got a str"), ("", "config.json", "empty"), ("{}", "model_type", "missing"),
     ('{"model_type": NaN}', "model_type", "must be a finite number, got NaN"),
     ('{"hidden_size": Infinity}', "hidden_size", "must be a finite number, got Infinity"),
     ("[" * 100_000, "config.json", "nested too deeply"), ('{"a": 1' + "0" * 5000 + "}", "config.json", "not JSON")],
)  # fmt: skip
def test_text_that_is_no_config_is_refused(text, field, words):
    e = refusal(text)
    assert e.field == field and words in str(e), str(e)


def test_bytes_that_are_no_text_and_files_over_1_mb():
    assert "not UTF-8" in str(refusal(b"\xff\xfe\x00garbage"))
    big = json.dumps(config("llama-3.1-8b") | {"padding": "x" * hf_config.MAX_BYTES})
    e = refusal(big)
    assert e.field == "config.json" and "over 1 MB" in str(e) and f"{len(big):,}" in str(e)
    assert hf_config.read_config(b"\xef\xbb\xbf" + json.dumps(config("gpt2")).encode()).model_type == "gpt2"  # BOM


def test_an_unknown_model_type_is_named_with_the_ones_the_lab_reads_and_the_fields_it_would_need():
    e = refusal({"model_type": "bert", "hidden_size": 768})
    assert e.field == "model_type" and "'bert' is not one the lab reads" in str(e)
    assert all(mt in str(e) for mt in hf_families.KNOWN) and "num_key_value_heads" in str(e)
    assert "this one" in str(refusal({"model_type": "x" * 500}))  # a long name is not echoed


@pytest.mark.parametrize(
    "change, field, words",
    [({"num_hidden_layers": "32"}, "num_hidden_layers", "whole number from 1 to 10,000, got '32'"),
     ({"num_hidden_layers": 0}, "num_hidden_layers", "from 1 to 10,000, got 0"),
     ({"hidden_size": 4096.0}, "hidden_size", "whole number"), ({"hidden_size": True}, "hidden_size", "got true"),
     ({"num_key_value_heads": 5}, "num_key_value_heads", "must divide num_attention_heads=32, got 5"),
     ({"num_key_value_heads": 64}, "num_key_value_heads", "from 1 to 32"),
     ({"num_attention_heads": 31, "num_key_value_heads": 1}, "num_attention_heads", "must divide hidden_size=4,096"),
     ({"tie_word_embeddings": "yes"}, "tie_word_embeddings", "true or false"),
     ({"vocab_size": None}, "vocab_size", "got null"), ({"vocab_size": 10**40}, "vocab_size", "got 1" + "0" * 36),
     ({"torch_dtype": "int8"}, "torch_dtype", "one of bfloat16"),
     ({"quantization_config": [1]}, "quantization_config", "a JSON object"),
     ({"mlp_bias": True}, "mlp_bias", "without the attention's")],
)  # fmt: skip
def test_a_wrong_type_or_range_is_named_with_its_range(change, field, words):
    e = refusal(config("llama-3.1-8b") | change)
    assert e.field == field and words in str(e), str(e)


@pytest.mark.parametrize(
    "name, change, field",
    [("gemma-2-9b", {"layer_types": ["full_attention"] * 3}, "layer_types"),
     ("gemma-2-9b", {"layer_types": ["chunked_attention"] * 42}, "layer_types"),
     ("gemma-2-9b", {"sliding_window": None}, "sliding_window"),
     ("deepseek-v2-lite", {"moe_layer_freq": 2}, "moe_layer_freq"),
     ("deepseek-v2-lite", {"attention_bias": True}, "attention_bias"),
     ("deepseek-v2-lite", {"num_experts_per_tok": 65}, "num_experts_per_tok"),
     ("deepseek-v2-lite", {"first_k_dense_replace": 28}, "first_k_dense_replace"),
     ("deepseek-v3", {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 64]}},
      "quantization_config.weight_block_size"),
     ("qwen2.5-0.5b-instruct-awq", {"quantization_config": {"quant_method": "awq", "bits": 16}},
      "quantization_config.bits"),
     ("gpt2", {"n_head": 7}, "n_head"), ("attncore", {"n_heads": 5}, "n_heads"),
     ("gemma-3-12b-it", {"text_config": "gemma"}, "text_config"),
     ("llama-3.2-1b", {"quantization_config": {"quant_method": "mxfp4"}}, "quantization")],
)  # fmt: skip
def test_family_rules_refuse_what_they_cannot_express(name, change, field):
    assert refusal(config(name) | change).field == field


def test_ignored_keys_are_listed_once_and_read_keys_never():
    model = read("llama-3.1-8b")
    assert len(model.ignored) == len(set(model.ignored))
    assert {"rope_theta", "bos_token_id", "architectures"} <= set(model.ignored)
    assert not {"hidden_size", "num_key_value_heads", "torch_dtype", "model_type"} & set(model.ignored)
    assert "quantization_config.fmt" in read("deepseek-v3").ignored


# --- garbage never escapes as anything but a ConfigError -------------------------------------------------------


def random_json(rng: np.random.Generator, depth: int = 0):
    kind = rng.integers(0, 8 if depth < 4 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return bool(rng.integers(0, 2))
    if kind == 2:
        return int(rng.choice([0, -1, 1, 7, 2**31, 10**20, -(10**12), int(rng.integers(-1000, 100_000))]))
    if kind == 3:
        return float(rng.choice([0.5, -2.0, 1e308, 4096.0, float(rng.normal())]))
    if kind == 4:
        return str(rng.choice(["", "llama", "sliding_attention", "full_attention", "bfloat16", "fp8", "awq", "\x00é"]))
    if kind == 5:
        return [random_json(rng, depth + 1) for _ in range(int(rng.integers(0, 5)))]
    keys = [*json.loads(json.dumps(config("gpt-oss-20b")))][:20] + ["text_config", "quantization_config", "x"]
    return {str(rng.choice(keys)): random_json(rng, depth + 1) for _ in range(int(rng.integers(0, 6)))}


def assert_reads_or_refuses(payload) -> None:
    try:
        model = hf_config.read_config(payload)
    except ConfigError as e:
        assert "\n" not in str(e) and len(str(e)) < LINE
    else:
        assert model.arch.n_layers == len(model.layer_kinds)


@pytest.mark.slow
def test_fuzzed_values_in_released_configs_are_read_or_refused():
    """Every field of every shipped config replaced by random JSON, one field at a time and several at once."""
    rng = np.random.default_rng(35)
    names = [*PRESETS, "qwen2.5-0.5b-instruct-awq", "gemma-3-12b-it", "deepseek-v3", "llama-2-7b-gptq"]
    for name in names:
        base = config(name)
        for key in base:
            assert_reads_or_refuses(json.dumps(base | {key: random_json(rng)}))
        for _ in range(20):
            keys = rng.choice(list(base), size=min(4, len(base)), replace=False)
            assert_reads_or_refuses(json.dumps(base | {str(k): random_json(rng) for k in keys}))


def test_random_json_and_random_bytes_are_read_or_refused():
    rng = np.random.default_rng(0)
    for _ in range(400):
        assert_reads_or_refuses(json.dumps(random_json(rng)))
        fields = {str(k): random_json(rng, 3) for k in rng.choice(list(config("qwen3-8b")), size=8)}
        typed = {"model_type": str(rng.choice(hf_families.KNOWN))} | fields
        assert_reads_or_refuses(json.dumps(typed if rng.integers(0, 2) else {"model_type": "gemma3",
                                                                             "text_config": typed}))  # fmt: skip
        assert_reads_or_refuses(bytes(rng.integers(0, 256, size=int(rng.integers(0, 300)), dtype=np.uint8)))
    text = json.dumps(config("gemma-2-9b"))
    for _ in range(300):  # truncated and corrupted text
        cut = int(rng.integers(0, len(text)))
        assert_reads_or_refuses(text[:cut])
        assert_reads_or_refuses(text[:cut] + chr(int(rng.integers(1, 0x3000))) + text[cut + 1 :])


# --- the weights as stored -------------------------------------------------------------------------------------

# Qwen/Qwen2.5-0.5B-Instruct-AWQ, layer 0: the checkpoint's tensor shapes as a public repository binds them by
# SHA-256 (int32 qweight and qzeros, fp16 scales and biases): (in, out/8), (in/128, out/8), (in/128, out).
AWQ_LAYER0 = {
    "q_proj": [(896, 112), (7, 112), (7, 896)], "k_proj": [(896, 16), (7, 16), (7, 128)],
    "v_proj": [(896, 16), (7, 16), (7, 128)], "o_proj": [(896, 112), (7, 112), (7, 896)],
    "gate_proj": [(896, 608), (7, 608), (7, 4864)], "up_proj": [(896, 608), (7, 608), (7, 4864)],
    "down_proj": [(4864, 112), (38, 112), (38, 896)],
}  # fmt: skip
AWQ_SHAPES = {"q_proj": (896, 896), "k_proj": (896, 128), "v_proj": (896, 128), "o_proj": (896, 896),
              "gate_proj": (896, 4864), "up_proj": (896, 4864), "down_proj": (4864, 896)}  # fmt: skip


def test_awq_matrices_match_a_released_checkpoints_tensors():
    fmt = read("qwen2.5-0.5b-instruct-awq").weights
    assert (fmt.method, fmt.bits, fmt.group_size, fmt.dtype) == ("awq", 4, 128, "fp16")
    for name, ((qw, qz, sc), (d_in, d_out)) in {k: (AWQ_LAYER0[k], AWQ_SHAPES[k]) for k in AWQ_LAYER0}.items():
        real = 4 * math.prod(qw) + 4 * math.prod(qz) + 2 * math.prod(sc)
        assert matrix_bytes(d_in, d_out, fmt) == real, name


def test_awq_model_bytes_add_the_unquantised_rest_in_fp16():
    model = read("qwen2.5-0.5b-instruct-awq")
    layer = sum(4 * math.prod(a) + 4 * math.prod(b) + 2 * math.prod(c) for a, b, c in AWQ_LAYER0.values())
    rest = 151_936 * 896 + 24 * (896 + 128 + 128 + 2 * 896) + 896  # tied embedding, q/k/v biases, norms, final
    assert stored_weights(model.arch, model.weights).bytes == 24 * layer + 2 * rest


def test_gptq_and_fp8_matrices_by_hand():
    gptq = read("llama-2-7b-gptq").weights
    assert (gptq.method, gptq.bits, gptq.group_size) == ("gptq", 4, 128)
    # AutoGPTQ: qweight (4096·4/32, 11008) int32, qzeros (32, 11008·4/32) int32, scales (32, 11008) fp16, g_idx int32
    assert matrix_bytes(4096, 11008, gptq) == 4 * 512 * 11008 + 4 * 32 * 1376 + 2 * 32 * 11008 + 4 * 4096
    fp8 = read("deepseek-v3").weights
    assert (fp8.method, fp8.group_size, fp8.quantised) == ("fp8", 128, ("attention", "ffn", "experts"))
    assert matrix_bytes(7168, 2048, fp8) == 7168 * 2048 + 56 * 16 * 4  # a float32 scale per 128 x 128 block
    assert matrix_bytes(7168, 2048, WeightFormat("bf16", "fp8", 8, 0)) == 7168 * 2048 + 4  # one per tensor


def test_deepseek_v3_fp8_bytes_are_the_released_files_less_the_mtp_layer():
    """deepseek-ai/DeepSeek-V3's files hold 688,586,727,753 B; without its multi-token-prediction layer (about an
    eleventh MoE layer, its own embedding and head copies) and the files' headers the lab's count is 2.2 % less."""
    model = read("deepseek-v3")
    stored = stored_weights(model.arch, model.weights)
    assert 0.975 < stored.bytes / 688_586_727_753 < 0.98 and stored.quantised_params > 0.99 * 671e9


def test_an_unread_quantisation_is_counted_in_its_dtype_with_a_note():
    model = hf_config.from_dict(config("llama-3.1-8b") | {"quantization_config": {"quant_method": "bitsandbytes"}})
    assert model.weights == WeightFormat("bf16") and any("'bitsandbytes' is not read" in n for n in model.notes)


def test_modules_not_converted_leave_their_layers_in_16_bits():
    kept = config("qwen2.5-0.5b-instruct-awq")
    kept["quantization_config"] = kept["quantization_config"] | {"modules_to_not_convert": ["self_attn"]}
    model = hf_config.from_dict(kept)
    assert model.weights.quantised == ("ffn", "experts")
    assert stored_weights(model.arch, model.weights).bytes > stored_weights(*(lambda m: (m.arch, m.weights))(
        read("qwen2.5-0.5b-instruct-awq"))).bytes  # fmt: skip


@pytest.mark.slow
def test_the_benchmarks_config_is_just_under_the_limit_and_read_whole():
    """benchmarks/config_reader.py times the reader on this file: 999,999 bytes, 10,000 layers, read (not refused)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import config_reader

    text = config_reader.big_config()
    model = hf_config.read_config(text.encode())
    assert len(text.encode()) == hf_config.MAX_BYTES - 1 and model.arch.n_layers == 10_000
    assert model.layer_kinds.count("sliding") == 5_000 and "id2label" in model.ignored
    assert count_parameters(model.arch).per_layer[0] == count_parameters(read("gemma-2-9b").arch).per_layer[0]
