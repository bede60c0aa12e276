"""The serving engine's fit (serving.engine) against published vLLM startup logs, each cited, and the
engine's rules (defaults, block sizes, grouping, startup check) written out by hand. Where the model cannot
match a log, the test says by how much and why. Figures in a log are rounded to 0.01 GiB, hence the 3 %."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from attncore.config import ConfigError
from cli.main import main
from serving.engine import (
    GIB,
    EngineSettings,
    activation_estimate,
    deductions,
    default_batch,
    engine_fit,
    log_estimated,
    log_lines,
)
from serving.parameters import Decoder, count_parameters
from serving.presets import CARDS, PRESETS
from serving.validation import DEEPSEEK_R1, LOGS, QWEN25_32B, activation_errors, error_sentence

REPO = Path(__file__).resolve().parents[1]
LLAMA3_8B = PRESETS["llama-3-8b"].arch
STYLE = dict(ffn="swiglu", bias="none", norm="rmsnorm", tied_embeddings=False, position="rope", max_len=0)
# Shapes from the models' config.json (serving.validation holds Qwen2.5-32B and DeepSeek-R1; the count of
# Qwen2.5-32B, 32,763,876,352, is checked below. Qwen3-0.6B: hidden 1024, 28 layers, 16 heads, 8 KV heads of 128,
# FFN 3072, vocab 151936, tied.)
QWEN3_06B = Decoder(d_model=1024, n_layers=28, n_heads=16, n_kv_heads=8, head_dim=128, vocab_size=151936,
                    d_ff=3072, **(STYLE | {"tied_embeddings": True}))  # fmt: skip


def near(value, expected, tol=0.03):
    return abs(value - expected) <= tol * abs(expected)


# --- vLLM #12330: Meta-Llama-3-8B on an A100-40GB ---------------------------------------------------------------

# vLLM #12330 (https://github.com/vllm-project/vllm/issues/12330), vLLM 0.6.6 (V0), util 0.90, bf16 cache:
LLAMA3_8B_A100_LOG = [
    "the current vLLM instance can use total_gpu_memory (39.50GiB) x gpu_memory_utilization (0.90) = 35.55GiB",
    "model weights take 14.96GiB; non_torch_memory takes 0.10GiB; PyTorch activation peak memory takes 9.37GiB; "
    "the rest of the memory reserved for KV Cache is 11.12GiB.",
]  # then "# GPU blocks: 5691, # CPU blocks: 2048" and "Maximum concurrency for 8192 tokens per request: 11.12x"


def test_llama_3_8b_a100_log_with_the_logs_measured_figures():
    s = EngineSettings(version="v0", max_model_len=8192, non_torch_gib=0.10, activation_gib=9.37)
    f = engine_fit(LLAMA3_8B, CARDS["a100-40gb"].total_gib, s, gpu="a100-40gb")
    assert log_lines(f)[:2] == LLAMA3_8B_A100_LOG  # the weights are counted (8,030,261,248 × 2 B), not typed
    assert f.block_bytes == 32 * 16 * 2 * 8 * 128 * 2  # layers × block × K and V × heads × head dim × bf16
    assert near(f.num_blocks, 5691) and near(f.tokens, 91_056) and near(f.concurrency, 11.12)
    assert f.cpu_blocks == 2048  # 4 GiB of swap space in 2 MiB blocks
    assert f.starts and f.longest_max_model_len == f.tokens
    # the lab's old fit (weights + a flat 10 % of 40·10⁹ B) claimed 152,126 tokens: two thirds too many
    assert 152_126 / f.tokens > 1.6


def test_llama_3_8b_a100_estimated_peak_misses_by_more_than_eight_tenths():
    """The activation estimate cannot give 9.37 GiB from default settings: at 8,192 batched tokens and 256
    sequences the widest point of the profiling run is the sampler (the forward's hidden states, the logits in bf16
    and 30 B of float32 sort work per logit: 1.04 GiB), and the same model with the same defaults logged 1.26 GiB on
    an H100 (vLLM PR 10511, below). The 9.37 GiB came from launch flags the issue does not show, or from 0.6.6's
    profiler; so the fit with the estimate claims 75 % more concurrency than the log."""
    f = engine_fit(LLAMA3_8B, 39.50, EngineSettings(version="v0", max_model_len=8192), gpu="a100-40gb")
    assert (f.max_num_batched_tokens, f.max_num_seqs) == (8192, 256)  # V0: max(max_model_len, 2048), 256
    assert f.activation_parts["mlp"] == 8192 * 2 * (2 * 4096 + 3 * 14336)  # 0.78 GiB, the widest forward phase
    assert f.activation_bytes == 8192 * 4096 * 2 + 256 * 128256 * (2 + 30)  # the sampler phase is wider
    assert f.activation_bytes / GIB < 0.12 * 9.37
    assert 1.7 < f.concurrency / 11.12 < 1.8


def test_pr_10511_same_model_h100_estimate_is_low_by_a_sixth():
    """vLLM PR 10511 (https://github.com/vllm-project/vllm/pull/10511, 2024-12-14, V0 ≈0.6.5, defaults):
    total_gpu_memory 79.22GiB, weights 14.96GiB, PyTorch activation peak memory 1.26GiB. The forward's widest
    tensors are 0.78 GiB (−38 %); the sampler's top-k/top-p sort over 256 rows of 128,256 logits brings the
    estimate to 1.04 GiB (−17 %); workspaces and the allocator's rounding are not modelled."""
    f = engine_fit(LLAMA3_8B, CARDS["h100-80gb"].total_gib, EngineSettings(version="v0"), gpu="h100-80gb")
    assert 0.80 < f.activation_bytes / (1.26 * GIB) < 0.86
    assert 0.55 < f.activation_parts["mlp"] / (1.26 * GIB) < 0.70  # the forward alone, as before the sampler
    assert near(f.weights_bytes / GIB, 14.96, 0.001)


def test_validation_errors_are_computed_from_the_model_before_and_after_the_sampler():
    """The page's and the script's per-log errors come from serving.validation: the sampler brings the two
    logs launched with known defaults at full prefill (PR 10511, #15815) within 20 %, and the OCI log, whose
    0.22 GiB has no room for any sampler work, goes far over; each is said, none hidden."""
    rows = {r["name"]: r for r in activation_errors()}
    assert set(rows) == {log.name for log in LOGS} and len(rows) == 5
    for r in rows.values():
        assert r["error"] == pytest.approx(r["estimate_gib"] / r["logged_gib"] - 1)
        assert r["before_error"] == pytest.approx(r["before_gib"] / r["logged_gib"] - 1)
    assert -0.40 < rows["PR 10511"]["before_error"] < -0.36 and -0.20 < rows["PR 10511"]["error"] < -0.15
    assert -0.25 < rows["vLLM #15815"]["before_error"] < -0.22 and abs(rows["vLLM #15815"]["error"]) < 0.01
    assert -0.12 < rows["OCI doc"]["before_error"] < -0.10 and rows["OCI doc"]["error"] > 3
    assert not rows["vLLM #12330"]["flags_known"]
    sentence = error_sentence()
    assert (
        all(f"({name})" in sentence for name in rows)
        and "−17 % (PR 10511)" in sentence
        and "-" not in sentence.replace("DeepSeek-R1", "")
    )


# --- three more published logs: other models, cards, MLA, tensor parallelism, fp8 -------------------------------


def test_llama_31_8b_on_a_22_gib_card_does_not_start_at_131072():
    """OCI AI Quick Actions troubleshooting doc (oracle-samples/oci-data-science-ai-samples, ai-quick-actions),
    vLLM 0.7 V0, Llama-3.1-8B, total_gpu_memory (22.07GiB) x 0.90 = 19.86GiB; weights 14.99GiB; non_torch 0.05GiB;
    activation 0.22GiB; KV 4.60GiB; "# CUDA blocks: 2356"; "Maximum concurrency for 131072 tokens per request:
    0.29x", then the error below. Chunked prefill is on above 32,768 tokens, so the profile runs 2,048 tokens."""
    log = dict(weights_gib=14.99, non_torch_gib=0.05, activation_gib=0.22)
    f = engine_fit(LLAMA3_8B, 22.07, EngineSettings(version="v0", max_model_len=131072, **log))
    assert f.num_blocks == 2356 and f.tokens == 37_696 and f"{f.concurrency:.2f}" == "0.29"
    assert not f.starts and f.error == (
        "The model's max seq len (131072) is larger than the maximum number of tokens that can be stored in KV "
        "cache (37696). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing "
        "the engine."
    )
    assert f.longest_max_model_len == 37_696
    estimated = engine_fit(LLAMA3_8B, 22.07, EngineSettings(version="v0", max_model_len=131072))
    assert estimated.max_num_batched_tokens == 2048 and estimated.max_num_seqs == 256
    assert near(estimated.activation_parts["mlp"] / GIB, 0.22, 0.15)  # the forward alone matches the log...
    # ...but the sampler's float32 work over 256 rows of logits (0.99 GiB) does not appear in it: 17 % fewer blocks
    assert estimated.activation_bytes == 2048 * 4096 * 2 + 256 * 128256 * (2 + 30)
    assert 0.80 < estimated.num_blocks / 2356 < 0.85 and not estimated.starts


def test_qwen25_32b_tp2_on_l40s():
    """vLLM #15815 (https://github.com/vllm-project/vllm/issues/15815), vLLM 0.7 V0, 2x L40S, TP 2,
    max_model_len 10000: total_gpu_memory (44.42GiB) x 0.90 = 39.98GiB; weights 30.71GiB; non_torch 0.30GiB;
    activation 1.26GiB; KV 7.71GiB; "# CUDA blocks: 3947" (the concurrency line is cut off in the issue)."""
    assert count_parameters(QWEN25_32B).total == 32_763_876_352
    log = dict(weights_gib=30.71, non_torch_gib=0.30, activation_gib=1.26)
    s = EngineSettings(version="v0", max_model_len=10000, tensor_parallel_size=2)
    f = engine_fit(QWEN25_32B, CARDS["l40s"].total_gib, EngineSettings(**(vars(s) | log)))
    assert f.page_bytes == 2 * 16 * 4 * 128 * 2  # 8 KV heads split over 2 GPUs
    assert near(f.num_blocks, 3947) and near(f.concurrency, 3947 * 16 / 10000)
    # Estimated: weights 30.51 GiB (the count ÷ 2; the log's 0.20 GiB more is replicated norms and padding),
    # activation 1.256 GiB against 1.26 (the sampler over the gathered 152,064 logits of 256 sequences): the cache
    # comes out 2.6 % too large, all of it from the weights.
    est = engine_fit(QWEN25_32B, 44.42, s)
    assert near(est.weights_bytes / GIB, 30.71, 0.01) and near(est.activation_bytes / GIB, 1.26, 0.01)
    assert est.activation_bytes == 10000 * 5120 * 2 + 256 * 152064 * (2 + 30)
    assert 1.02 < est.num_blocks / 3947 < 1.03


def test_deepseek_r1_mla_tp8_on_h200_needs_v0s_256_byte_alignment():
    """Third-party DeepSeek-R1 deployment notes (nvidia-smi 'NVIDIA H200 143771MiB'), vLLM 0.7 V0, TP 8, util 0.85,
    max_model_len 128000: total_gpu_memory (139.81GiB) x 0.85 = 118.84GiB; weights 83.88GiB; non_torch 7.16GiB;
    activation 6.37GiB; KV 21.43GiB; "# cuda blocks: 18418, # CPU blocks: 3437"; "Maximum concurrency for 128000
    tokens per request: 2.30x". MoE routing buffers and FP8 scales are not modelled: the figures are the log's."""
    log = dict(weights_gib=83.88, non_torch_gib=7.16, activation_gib=6.37)
    s = EngineSettings(version="v0", gpu_memory_utilization=0.85, max_model_len=128000, tensor_parallel_size=8)
    f = engine_fit(DEEPSEEK_R1, CARDS["h200"].total_gib, EngineSettings(**(vars(s) | log)))
    assert f.page_bytes == 16 * 1280  # 512 + 64 = 576 bf16 = 1,152 B, padded to 1,280; not split over ranks
    assert near(f.num_blocks, 18418, 0.001) and f"{f.concurrency:.2f}" == "2.30" and near(f.cpu_blocks, 3437, 0.001)
    v1 = engine_fit(DEEPSEEK_R1, 139.81, EngineSettings(**(vars(s) | log | {"version": "v1"})))
    assert v1.page_bytes == 16 * 1152 and near(v1.num_blocks / f.num_blocks, 1280 / 1152, 0.001)  # V1 does not pad


def test_qwen3_06b_v1_log_from_the_available_memory():
    """vLLM PR 24577 (https://github.com/vllm-project/vllm/pull/24577), V1 ≈0.10.2, A100, max_model_len 4096:
    "Available KV cache memory: 69.66 GiB", "GPU KV cache size: 652,144 tokens", "Maximum concurrency for 4,096
    tokens per request: 159.21x". The card's total is not printed, so the available memory is given, as vLLM's
    --kv-cache-memory-bytes would."""
    f = engine_fit(QWEN3_06B, 79.15, EngineSettings(max_model_len=4096, kv_cache_memory_gib=69.66))
    assert f.block_bytes == 28 * 16 * 2 * 8 * 128 * 2
    assert near(f.tokens, 652_144, 0.001) and near(f.concurrency, 159.21, 0.001) and f.starts


def test_fp8_cache_v1_log_and_its_startup_error():
    """vLLM #25350 (https://github.com/vllm-project/vllm/issues/25350), V1 ≈0.10, kv-cache-dtype fp8:
    at --max-model-len 100000 "Available KV cache memory: 10.55 GiB", "GPU KV cache size: 230,528 tokens",
    "Maximum concurrency for 100,000 tokens per request: 2.31x"; at 221000 the error below with 5.59 GiB. The
    model is not named; 48 layers x 4 KV heads of 128 (Qwen3-30B-A3B) is inferred from its 49,152 B per token,
    so this checks the fp8 byte count, the startup check and its estimated length, not the shape."""
    arch = Decoder(d_model=2048, n_layers=48, n_heads=32, n_kv_heads=4, head_dim=128, vocab_size=151936, d_ff=6144,
                   n_experts=128, experts_per_token=8, moe_d_ff=768, **STYLE)  # fmt: skip
    f = engine_fit(arch, 79.22, EngineSettings(max_model_len=100000, kv_cache_dtype="fp8", kv_cache_memory_gib=10.55))
    assert f.block_bytes == 48 * 16 * 2 * 4 * 128 * 1
    assert near(f.tokens, 230_528) and near(f.concurrency, 2.31) and f.starts
    s = EngineSettings(max_model_len=221000, kv_cache_dtype="fp8", kv_cache_memory_gib=5.59)
    bad = engine_fit(arch, 79.22, s)
    assert not bad.starts and near(bad.longest_max_model_len, 122_080)
    assert bad.error == (
        "To serve at least one request with the models's max seq len (221000), (10.12 GiB KV cache is needed, "
        "which is larger than the available KV cache memory (5.59 GiB). Based on the available memory, the "
        f"estimated maximum model length is {bad.longest_max_model_len}. Try increasing `gpu_memory_utilization` "
        "or decreasing `max_model_len` when initializing the engine."
    )


def test_interleaved_sliding_window_concurrency_ratio_of_olmo3():
    """vLLM PR 29796 (https://github.com/vllm-project/vllm/pull/29796), V1 ≈0.11, Olmo-3 (3 sliding-window layers
    to 1 full, window 4096): with 57.18 GiB available, "Maximum concurrency for 6,144 tokens per request: 23.73x"
    and for 34,048 tokens 11.12x. Their ratio depends only on the grouping (3 window groups of cdiv(4096 - 1 +
    2048, 16) + 1 = 385 blocks, 1 full group) and not on the layer widths, which are not checked here."""
    arch = Decoder(d_model=4096, n_layers=32, n_heads=32, vocab_size=100278, d_ff=11008, sliding_window=4096, **STYLE)
    fits = [engine_fit(arch, 79.22, EngineSettings(max_model_len=n, window_layers=24, max_num_batched_tokens=2048,
                                                   kv_cache_memory_gib=57.18)) for n in (6144, 34048)]  # fmt: skip
    assert fits[0].groups == (("full", 1), ("sliding", 3)) and fits[0].group_size == 8
    assert fits[0].blocks_per_request == 3 * 385 + 6144 // 16
    assert near(fits[0].concurrency / fits[1].concurrency, 23.73 / 11.12, 0.005)


# --- the engine's rules ---------------------------------------------------------------------------------------


def test_default_batch_follows_each_version():
    assert default_batch(EngineSettings(version="v0", max_model_len=1024), 40) == (2048, 256)
    assert default_batch(EngineSettings(version="v0", max_model_len=32769), 40) == (2048, 256)  # chunked prefill
    assert default_batch(EngineSettings(), 79.22, "h100-80gb") == (8192, 1024)
    assert default_batch(EngineSettings(), 79.15, "a100-80gb") == (2048, 256)  # A100s keep the small defaults
    assert default_batch(EngineSettings(max_num_batched_tokens=100), 20) == (100, 100)  # V1: seqs <= tokens


def test_v1_groups_gemma_style_layers_and_windows_cap_every_request():
    gemma = Decoder(d_model=2560, n_layers=36, n_heads=8, n_kv_heads=4, head_dim=256, vocab_size=262208,
                    d_ff=10240, sliding_window=1024, **STYLE)  # fmt: skip
    s = EngineSettings(max_model_len=32768, window_layers=30, max_num_batched_tokens=2048, kv_cache_memory_gib=10)
    f = engine_fit(gemma, 79.22, s)
    assert f.groups == (("full", 1), ("sliding", 5)) and f.group_size == 6  # 5 windowed : 1 full
    assert f.num_blocks == 10 * GIB // (f.page_bytes * 6) and f.tokens == f.num_blocks // 6 * 16
    windowed = -(-(1024 - 1 + 2048) // 16) + 1
    assert f.blocks_per_request == 5 * windowed + 32768 // 16
    every = engine_fit(gemma, 79.22, EngineSettings(max_model_len=32768, kv_cache_memory_gib=10))
    assert every.longest_max_model_len is None and every.starts  # every layer windowed: any length fits
    v0 = engine_fit(gemma, 79.22, EngineSettings(version="v0", max_model_len=32768))
    assert v0.group_size == 36 and v0.window_layers == 0  # V0 pages every layer in full


def test_v1_longest_length_is_the_largest_that_passes_the_check():
    f = engine_fit(LLAMA3_8B, 39.50, EngineSettings(max_model_len=10**6), gpu="a100-40gb")
    n, page = f.longest_max_model_len, f.page_bytes
    assert 32 * -(-n // 16) * page <= f.kv_bytes < 32 * -(-(n + 16) // 16) * page and n % 16 == 0
    assert f"the estimated maximum model length is {n}." in f.error


def test_no_room_for_blocks_says_so():
    f = engine_fit(PRESETS["llama-3-70b"].arch, 79.22, EngineSettings())
    assert f.kv_bytes < 0 and f.num_blocks == 0 and not f.starts and f.longest_max_model_len == 0
    assert f.error.startswith("No available memory for the cache blocks.")


def test_activation_estimate_terms():
    parts = activation_estimate(LLAMA3_8B, tokens=1000, seqs=10, tp=2)
    assert parts["mlp"] == 1000 * 2 * (2 * 4096 + 3 * 14336 // 2)
    assert parts["attention"] == 1000 * 2 * (2 * 4096 + (16 + 2 * 4) * 128 + 16 * 128)
    assert parts["logits"] == 10 * 128256 * (2 + 4) and parts["peak"] == parts["mlp"]
    assert parts["sampler"] == 1000 * 4096 * 2 + 10 * 128256 * (2 + 12)  # V1: FlashInfer's float32 work
    v0 = activation_estimate(LLAMA3_8B, tokens=2048, seqs=256, version="v0")
    assert v0["sampler"] == 2048 * 4096 * 2 + 256 * 128256 * (2 + 30) == v0["peak"] > v0["mlp"]


def test_deductions_add_up_and_say_what_is_estimated():
    f = engine_fit(LLAMA3_8B, 39.50, EngineSettings(activation_gib=1.0), gpu="a100-40gb")
    rows = {r["term"]: r for r in deductions(f)}
    assert sum(r["gib"] for t, r in rows.items() if t != "KV cache") == pytest.approx(rows["KV cache"]["gib"])
    assert rows["activation peak"]["kind"] == "measured" and rows["weights"]["kind"] == "estimate"
    assert rows["weights"]["numbers"] == "8,030,261,248 × 2 B ÷ 1" and rows["budget"]["numbers"] == "39.50 GiB × 0.90"


@pytest.mark.parametrize(
    "field, value",
    [("gpu_memory_utilization", 1.5), ("gpu_memory_utilization", 0), ("block_size", 0), ("kv_cache_dtype", "fp4"),
     ("version", "v2"), ("activation_gib", -1.0), ("max_num_seqs", 0)],
)  # fmt: skip
def test_settings_name_the_bad_field(field, value):
    with pytest.raises(ConfigError) as e:
        EngineSettings(**{field: value})
    assert e.value.field == field


def test_cards_report_gib_with_a_source():
    assert CARDS["a100-40gb"].total_gib == 39.50 and CARDS["h100-80gb"].total_gib == 79.22
    assert set(CARDS) >= {"l4", "a10g", "a100-40gb", "a100-80gb", "h100-80gb", "h200", "rtx-4090", "l40s"}
    for card in CARDS.values():
        # the "GB" a card is sold by is nearer GiB of memory chips; the driver and ECC keep some of it
        assert card.source and 0.9 < card.total_gib / float(card.sold.split()[0]) < 1
        if card.logged:  # a vLLM startup log on a card it names
            assert "vLLM startup log" in card.source and ("vLLM #" in card.source or "PR" in card.source or "H200" in
                                                          card.source)  # fmt: skip
        else:  # says what it rests on instead
            assert any(w in card.source for w in ("estimate", "out-of-memory", "A10-class")), card.source


# --- the command line -----------------------------------------------------------------------------------------


def test_cli_engine_json_and_text(capsys):
    argv = ["kv-cache", "--preset", "llama-3-8b", "--engine", "vllm", "--engine-version", "v0", "--gpu", "a100-40gb"]
    assert main([*argv, "--context", "8192", "--non-torch-gib", "0.1", "--activation-gib", "9.37", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (
        out["log"][:2] == LLAMA3_8B_A100_LOG
        and near(out["num_blocks"], 5691)
        and out["measured"] == ["non_torch", "activation"]
    )
    assert main([*argv, "--max-model-len", "200000", "--allow-long-max-model-len"]) == 0  # past 8,192: vLLM's override
    text = capsys.readouterr().out
    assert "39.50 GiB as torch reports; sold as 40 GB" in text and "does NOT start at max_model_len 200,000" in text
    assert "The model's max seq len (200000) is larger than" in text and "estimate" in text


@pytest.mark.slow
@pytest.mark.parametrize(
    "extra, flag",
    [
        (["--gpu", "a100-40gb", "--gpu-memory-utilization", "1.2"], "--gpu-memory-utilization"),
        (["--gpu", "a100-40gb", "--block-size", "0"], "--block-size"),
        (["--gpu", "a100-40gb", "--max-num-seqs", "-3"], "--max-num-seqs"),
        (["--gpu", "a100-40gb", "--tp", "0"], "--tp"),
        (["--gpu", "a100-40gb", "--activation-gib", "-1"], "--activation-gib"),
        (["--gpu-gib", "0"], "--gpu-gib"),
        (["--gpu", "a100"], "--gpu"),
        (["--gpu", "a100-40gb", "--kv-cache-dtype", "fp4"], "--kv-cache-dtype"),
    ],
)
def test_cli_engine_rejects_bad_values_in_one_line(extra, flag):
    argv = ["kv-cache", "--preset", "llama-3-8b", "--engine", "vllm", *extra]
    r = subprocess.run([sys.executable, "-m", "attncore", *argv], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert flag in r.stderr and ("from" in r.stderr or "one of" in r.stderr or "choice" in r.stderr), r.stderr


# --- what each figure rests on ------------------------------------------------------------------------------

FIGURES = ("budget", "weights", "non_torch", "activation", "kv", "blocks", "tokens", "concurrency")


def test_a_figure_computed_from_an_estimate_is_an_estimate():
    f = engine_fit(LLAMA3_8B, 39.50, EngineSettings(version="v0", non_torch_gib=0.1, activation_gib=9.37),
                   gpu="a100-40gb")  # fmt: skip
    assert tuple(f.kinds) == FIGURES and f.kinds["budget"] == "measured"  # a card's total from a published log
    assert f.kinds["non_torch"] == f.kinds["activation"] == "measured" and f.kinds["weights"] == "estimate"
    assert {f.kinds[k] for k in ("kv", "blocks", "tokens", "concurrency")} == {"estimate"}  # the weights are
    rows = {r["term"]: r["kind"] for r in deductions(f)}
    assert rows["KV cache"] == "estimate" and log_estimated(f)
    assert rows["budget"] == "measured (published log)"  # not "exact", it multiplies a logged total
    typed = engine_fit(LLAMA3_8B, 39.50, EngineSettings(version="v0"))  # a total typed in: the arithmetic is exact
    assert typed.kinds["budget"] == "exact" and deductions(typed)[0]["kind"] == "exact"
    logged = engine_fit(LLAMA3_8B, 39.50, EngineSettings(version="v0", weights_gib=14.96, non_torch_gib=0.1,
                                                         activation_gib=9.37), gpu="a100-40gb")  # fmt: skip
    assert logged.kinds["kv"] == logged.kinds["concurrency"] == "measured" and not log_estimated(logged)
    assert engine_fit(LLAMA3_8B, 22.05, EngineSettings(), gpu="l4").kinds["budget"] == "estimate"  # no log names it
    v1 = engine_fit(QWEN3_06B, 79.15, EngineSettings(max_model_len=4096, kv_cache_memory_gib=69.66))
    assert v1.kinds["kv"] == v1.kinds["tokens"] == "measured" and v1.kinds["activation"] == "estimate"
    assert not log_estimated(v1)  # V1's log lines rest on the given cache memory alone


def test_cli_json_gives_each_figures_kind_and_labels_the_log_estimated(capsys):
    argv = ["kv-cache", "--preset", "llama-3-8b", "--engine", "vllm", "--gpu", "h100-80gb"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert tuple(out["kinds"]) == FIGURES and out["kinds"]["budget"] == "measured"  # H100: a published log
    assert {out["kinds"][k] for k in FIGURES[1:]} == {"estimate"}
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "would log, ESTIMATED" in text and "blocks, " in text and "(PR 10511)" in text
    # one multiplication sign outside the engine's own log lines, and no '(32 layers)' after '32 layers'
    ours = [line for line in text.splitlines() if not line.startswith("    ")]  # the log lines are indented 4
    assert not any(" x " in line or "x:" in line for line in ours), ours
    assert "× 32 layers sharing a block = " in text and "concurrency" in text and "(32 layers)" not in text
    assert "  weights           −" in text  # the lab's minus sign on a deduction
    logged = ["--engine-version", "v0", "--max-model-len", "8192", "--weights-gib", "14.96", "--non-torch-gib", "0.1",
              "--activation-gib", "9.37"]  # fmt: skip
    assert main([*argv[:-1], "a100-40gb", *logged]) == 0
    text = capsys.readouterr().out
    assert "would log, from your log's figures" in text and "Maximum concurrency for 8192 tokens per request" in text
    assert "ESTIMATED" not in text and "(PR 10511)" not in text  # no activation estimate: its errors not quoted


@pytest.mark.slow
@pytest.mark.parametrize("flag, value", [("--gpu-gib", "1e-10"), ("--gpu-gb", "1e-10"), ("--gpu-gib", "0.0005")])
def test_cli_engine_a_tiny_gpu_is_refused_with_its_range(flag, value):
    argv = ["kv-cache", "--preset", "llama-3-8b", "--engine", "vllm", flag, value]
    r = subprocess.run([sys.executable, "-m", "attncore", *argv], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert flag in r.stderr and "to 100000" in r.stderr, r.stderr
    with pytest.raises(ConfigError) as e:
        engine_fit(LLAMA3_8B, 1e-10)
    assert e.value.field == "total_gib"


@pytest.mark.slow
def test_one_card_list_for_both_fits_and_the_help():
    from serving.presets import GPUS

    assert list(GPUS) == list(CARDS) and {"l4", "a10g", "rtx-a6000"} <= set(CARDS)
    assert all(GPUS[n] == int(c.sold.split()[0]) for n, c in CARDS.items())
    r = subprocess.run([sys.executable, "-m", "attncore", "kv-cache", "--help"], cwd=REPO, capture_output=True,
                       text=True, env={"COLUMNS": "400", "PATH": "/usr/bin:/bin"})  # fmt: skip
    listed = r.stdout.split("a card (", 1)[1].split(")", 1)[0].split(", ")
    assert listed == list(CARDS)
    for name in CARDS:  # every card listed is accepted by --engine
        assert main(["kv-cache", "--preset", "llama-3-8b", "--engine", "vllm", "--gpu", name, "--json"]) == 0
