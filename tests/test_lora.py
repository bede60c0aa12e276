"""vLLM's LoRA buffers (serving.lora), written out by hand from create_lora_weights' shapes
(vllm/lora/layers/base_linear.py, column_parallel_linear.py, vocal_parallel_embedding.py, logits_processor.py), the
reading of a PEFT adapter_config.json, and what the buffers take from the engine's KV budget."""

from __future__ import annotations

import json
import math
import random

import pytest

from attncore.config import ConfigError
from cli.main import main
from serving.engine import EngineSettings, deductions, engine_fit
from serving.lora import LINEAR, LoraSettings, lora_buffers, read_adapter_config
from serving.presets import PRESETS

LLAMA3_8B = PRESETS["llama-3-8b"].arch  # d 4,096, 32 layers, 32 heads, 8 KV heads of 128, SwiGLU 14,336


def stacked(max_loras, rank, d_in, d_out):
    """One slice's lora_a_stacked (max_loras, 1, rank, d_in) and lora_b_stacked (max_loras, 1, d_out, rank)."""
    return math.prod((max_loras, 1, rank, d_in)) + math.prod((max_loras, 1, d_out, rank))


def test_llama_3_8b_buffers_are_create_lora_weights_shapes():
    L, r, H, layers = 4, 64, 4096, 32
    b = lora_buffers(LLAMA3_8B, LoraSettings(max_loras=L, max_lora_rank=r), tp=1, model_bytes=2)
    qkv = stacked(L, r, H, 32 * 128) + 2 * stacked(L, r, H, 8 * 128)  # MergedQKVParallelLinearWithLoRA: 3 slices
    gate_up = 2 * stacked(L, r, H, 14336)  # MergedColumnParallelLinearWithLoRA: 2 slices
    expected = {"qkv_proj": qkv, "o_proj": stacked(L, r, H, H), "gate_up_proj": gate_up,
                "down_proj": stacked(L, r, 14336, H)}  # fmt: skip
    assert b.by_module == {m: layers * n * 2 for m, n in expected.items()}
    assert b.bytes == sum(b.by_module.values()) == 1_342_177_280  # 1.25 GiB at 4 adapters of rank 64


def test_tensor_parallel_shards_each_layer_as_the_layer_is():
    one = lora_buffers(LLAMA3_8B, LoraSettings(max_lora_rank=16), tp=1).by_module
    two = lora_buffers(LLAMA3_8B, LoraSettings(max_lora_rank=16), tp=2).by_module
    L, r, H, n = 1, 16, 4096, 32
    # column-parallel (qkv, gate_up): B's output halves, A stays whole; row-parallel (o, down): A's input halves
    assert two["qkv_proj"] == n * 2 * (stacked(L, r, H, 16 * 128) + 2 * stacked(L, r, H, 4 * 128))
    assert two["o_proj"] == n * 2 * stacked(L, r, H // 2, H)
    assert all(one[m] > two[m] > one[m] / 2 for m in LINEAR)  # each keeps its unsharded half


def test_kv_heads_are_replicated_past_their_number():
    at_8 = lora_buffers(LLAMA3_8B, LoraSettings(), tp=8).by_module["qkv_proj"]
    at_16 = lora_buffers(LLAMA3_8B, LoraSettings(), tp=16).by_module["qkv_proj"]
    L, r, H = 1, 16, 4096
    assert at_16 == 32 * 2 * (stacked(L, r, H, 2 * 128) + 2 * stacked(L, r, H, 1 * 128)) < at_8  # 1 KV head a rank


def test_dtype_targets_and_the_vocabulary_layers():
    s = LoraSettings(max_loras=2, max_lora_rank=8, target_modules=("qkv_proj",))
    assert set(lora_buffers(LLAMA3_8B, s).by_module) == {"qkv_proj"}
    fp32 = lora_buffers(LLAMA3_8B, s, model_bytes=4)
    assert fp32.bytes == 2 * lora_buffers(LLAMA3_8B, s).bytes and fp32.dtype_bytes == 4  # auto: the model's dtype
    assert (
        lora_buffers(
            LLAMA3_8B, LoraSettings(target_modules=("qkv_proj",), lora_dtype="bf16"), model_bytes=4
        ).dtype_bytes
        == 2
    )
    V, H = 128256, 4096
    vocab = LoraSettings(max_loras=2, max_lora_rank=8, target_modules=("embed_tokens", "lm_head"))
    by = lora_buffers(LLAMA3_8B, vocab, tp=4).by_module  # neither is sharded
    assert by["embed_tokens"] == 2 * (2 * V * 8 + 2 * H * 8) and by["lm_head"] == 2 * (2 * 8 * H + 2 * V * 8)
    big = PRESETS["gemma-2-2b"].arch  # vocabulary 256,000: under the limit
    lora_buffers(big, LoraSettings(target_modules=("lm_head",)))
    with pytest.raises(ConfigError, match="258,048"):
        from dataclasses import replace

        lora_buffers(replace(big, vocab_size=262_144), LoraSettings(target_modules=("lm_head",)))


@pytest.mark.parametrize(
    "field, value",
    [("max_loras", 0), ("max_lora_rank", 17), ("max_lora_rank", True), ("target_modules", ("c_attn",)),
     ("lora_dtype", "fp8")],
)  # fmt: skip
def test_settings_name_the_bad_field(field, value):
    with pytest.raises(ConfigError) as e:
        LoraSettings(**{field: value})
    assert e.value.field in (field, "lora_target_modules")


def test_adapter_config_gives_rank_and_vllm_layers():
    a = read_adapter_config(json.dumps({"r": 24, "target_modules": ["q_proj", "v_proj", "down_proj"]}))
    assert a.r == 24 and a.max_lora_rank == 32 and a.modules == ("qkv_proj", "down_proj")
    a = read_adapter_config(json.dumps({"r": 8, "rank_pattern": {"q_proj": 100}, "target_modules": "all-linear"}))
    assert a.r == 100 and a.max_lora_rank == 128 and a.modules == LINEAR
    full = read_adapter_config(b'{"r": 8, "target_modules": ["model.layers.0.self_attn.o_proj", "lm_head"]}')
    assert full.modules == ("o_proj", "lm_head")


@pytest.mark.parametrize(
    "text, field",
    [
        ('{"r": 0, "target_modules": ["q_proj"]}', "r"),
        ('{"r": 1024, "target_modules": ["q_proj"]}', "r"),
        ('{"r": "8", "target_modules": ["q_proj"]}', "r"),
        ('{"r": 8, "target_modules": ".*q_proj"}', "target_modules"),
        ('{"r": 8, "target_modules": ["c_attn"]}', "target_modules"),
        ('{"r": 8, "target_modules": [1]}', "target_modules"),
        ('{"r": 8, "target_modules": []}', "target_modules"),
        ('{"r": 8, "target_modules": ["q_proj"], "rank_pattern": {"q_proj": -1}}', "rank_pattern"),
        ("[1, 2]", "config.json"),
        ("not json", "config.json"),
    ],
)
def test_a_bad_adapter_config_is_refused_naming_the_field(text, field):
    with pytest.raises(ConfigError) as e:
        read_adapter_config(text)
    assert e.value.field == field


def test_random_bytes_and_json_only_ever_raise_config_error():
    rng = random.Random(0)
    values = [None, 0, -1, 8, 2**70, 1.5, "q_proj", "all-linear", [], ["q_proj"], {}, True, ["x" * 1000]]
    for _ in range(300):
        doc = {k: rng.choice(values) for k in rng.sample(["r", "target_modules", "rank_pattern", "x"], 3)}
        for raw in (json.dumps(doc), bytes(rng.randrange(256) for _ in range(rng.randrange(40)))):
            try:
                read_adapter_config(raw)
            except ConfigError:
                pass


def test_buffers_come_out_of_the_kv_budget_unless_a_log_already_holds_them():
    s = LoraSettings(max_loras=4, max_lora_rank=64)
    base = engine_fit(LLAMA3_8B, 79.22, EngineSettings(), gpu="h100-80gb")
    fit = engine_fit(LLAMA3_8B, 79.22, EngineSettings(lora=s), gpu="h100-80gb")
    assert base.kv_bytes - fit.kv_bytes == 1_342_177_280 and fit.num_blocks < base.num_blocks
    assert fit.kinds["lora"] == "exact" and fit.extras["lora"]["bytes"] == 1_342_177_280
    row = next(r for r in deductions(fit) if r["term"] == "LoRA buffers")
    assert row["gib"] == -1.25 and "LoRA buffers" in deductions(fit)[-1]["formula"]
    logged = EngineSettings(weights_gib=16.2, lora=s)  # 'Model loading took' counts the buffers allocated with it
    assert (
        engine_fit(LLAMA3_8B, 79.22, logged).kv_bytes
        == engine_fit(LLAMA3_8B, 79.22, EngineSettings(weights_gib=16.2)).kv_bytes
    )


def test_cli_json_and_the_adapter_file(tmp_path, capsys):
    adapter = tmp_path / "adapter_config.json"
    adapter.write_text(json.dumps({"r": 64, "target_modules": ["q_proj", "v_proj"]}))
    argv = ["kv-cache", "--preset", "llama-3-8b", "--engine", "vllm", "--gpu", "h100-80gb", "--max-loras", "4"]
    assert main([*argv, "--adapter-config", str(adapter), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["lora_bytes"] == 1_342_177_280 and out["extras"]["lora"]["by_module"]["qkv_proj"] == 301_989_888
    assert main([*argv, "--adapter-config", str(adapter)]) == 0
    text = capsys.readouterr().out
    assert "LoRA buffers" in text and "--lora-target-modules qkv_proj would allocate 0.281 GiB" in text
    assert main([*argv, "--json"]) == 0 and json.loads(capsys.readouterr().out)["lora_bytes"] == 335_544_320  # rank 16
    assert main([*argv[:-2], "--json"]) == 0 and json.loads(capsys.readouterr().out)["lora_bytes"] is None


@pytest.mark.parametrize(
    "extra, flag",
    [
        (["--max-lora-rank", "17"], "--max-lora-rank"),
        (["--max-loras", "0"], "--max-loras"),
        (["--adapter-config", "{missing}"], "--adapter-config"),
        (["--adapter-config", "{bad}"], "--adapter-config"),
        (["--adapter-config", "{adapter}", "--max-lora-rank", "16"], "--max-lora-rank"),
    ],
)
def test_cli_refuses_bad_lora_flags_in_one_line(tmp_path, capsys, extra, flag):
    (tmp_path / "bad.json").write_text('{"r": 8, "target_modules": "q.*"}')
    (tmp_path / "adapter.json").write_text('{"r": 64, "target_modules": ["q_proj"]}')
    paths = {"missing": tmp_path / "none.json", "bad": tmp_path / "bad.json", "adapter": tmp_path / "adapter.json"}
    extra = [e.format(**paths) for e in extra]
    assert main(["kv-cache", "--preset", "llama-3-8b", "--engine", "vllm", "--gpu", "h100-80gb", *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {flag}: ") and err.count("\n") == 1
