"""vLLM's accounting of hybrid models by release (serving/vllm_hybrid.py), checked line for line against published
startup logs; each model is built by hand from its released config.json's numbers, each log cited where it is used.

Where a thread quotes no "Available KV cache memory" line, its two printed figures (tokens and concurrency) pin
the block count: no other count prints both. The test then fits both ends of that block count's memory range
(n × block bytes and (n + 1) × block bytes − 1), so every available memory the log could have had prints them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from attncore.checks import ConfigError
from cli.engine import print_fit
from serving.decoder import Decoder
from serving.engine import EngineSettings, engine_fit, log_lines, tokens_formula
from serving.kvcache import GIB
from serving.state import StateMixer
from serving.vllm_hybrid import capacity_sentence, group_layers


def every_fourth_full(n_layers: int) -> tuple[str, ...]:
    """Qwen3-Next / Qwen3.5's pattern: full_attention_interval 4, the others Gated DeltaNet."""
    return tuple("full" if (i + 1) % 4 == 0 else "state" for i in range(n_layers))


def qwen35(d_model, n_layers, n_heads, v_heads, d_ff, vocab=248_320) -> Decoder:
    """Qwen3.5 / 3.6 dense: 4 KV heads of 256, Gated DeltaNet with 16 key heads of 128 and v_heads value heads
    of 128, kernel 4 (config.json: linear_num_key_heads, linear_num_value_heads, linear_*_head_dim,
    linear_conv_kernel_dim); the temporal state in float32 (the config's mamba_ssm_dtype)."""
    return Decoder(
        d_model=d_model, n_layers=n_layers, n_heads=n_heads, n_kv_heads=4, head_dim=256, vocab_size=vocab,
        d_ff=d_ff, ffn="swiglu", bias="none", norm="rmsnorm", position="rope", tied_embeddings=False,
        layer_kinds=every_fourth_full(n_layers),
        mixer=StateMixer("gated_deltanet", 4, heads=v_heads, head_dim=128, k_heads=16, k_head_dim=128,
                         ssm_dtype="float32"),
    )  # fmt: skip


QWEN35_27B = qwen35(5120, 64, 24, 48, 17_408)  # Qwen3.5-27B and Qwen3.6-27B: 16 full layers of 64
QWEN35_4B = qwen35(2560, 32, 16, 32, 9216)  # Qwen3.5-4B: 8 full layers of 32
# NVIDIA-Nemotron-3-Nano-30B-A3B's config.json: hybrid_override_pattern of 23 Mamba2 (M), 23 MoE (E) and
# 6 attention (*) layers (their order changes no figure here); 2 KV heads of 128; mamba_num_heads 64 of
# mamba_head_dim 64, n_groups 8, ssm_state_size 128, conv_kernel 4; mamba_ssm_cache_dtype float32. Here and above,
# d_model, query heads, d_ff and vocabulary feed only the weights and activation estimates, which a given cache
# memory (--kv-cache-memory-gib) leaves out of the lines checked.
NEMOTRON_30B = Decoder(
    d_model=2688, n_layers=52, n_heads=32, n_kv_heads=2, head_dim=128, vocab_size=131_072, d_ff=1856,
    ffn="swiglu", bias="none", norm="rmsnorm", position="none", tied_embeddings=False,
    layer_kinds=("state",) * 23 + ("ffn",) * 23 + ("full",) * 6,
    mixer=StateMixer("mamba2", 4, heads=64, head_dim=64, state_size=128, n_groups=8, inner=4096,
                     ssm_dtype="float32"),
)  # fmt: skip

# NVIDIA-Nemotron-Nano-9B-v2's config.json: 56 layers, 27 Mamba2, 25 MLP and 4 attention (hybrid_override_pattern);
# 8 KV heads of 128; mamba_num_heads 128 of mamba_head_dim 80, n_groups 8, ssm_state_size 128, conv_kernel 4; no
# temporal dtype of its own (the conv state's, bf16).
NEMOTRON_NANO_9B = Decoder(
    d_model=4480, n_layers=56, n_heads=40, n_kv_heads=8, head_dim=128, vocab_size=131_072, d_ff=15_680,
    ffn="swiglu", bias="none", norm="rmsnorm", position="none", tied_embeddings=False,
    layer_kinds=("state",) * 27 + ("ffn",) * 25 + ("full",) * 4,
    mixer=StateMixer("mamba2", 4, heads=128, head_dim=80, state_size=128, n_groups=8, inner=10_240),
)  # fmt: skip


def fit_lines(a: Decoder, blocks: int, *, end: int = 0, **settings) -> list[str]:
    """The lines the fit prints with the available memory at the start (end=0) or the last byte (end=1) of
    `blocks` blocks' range."""
    probe = engine_fit(a, 200, EngineSettings(kv_cache_memory_gib=1.0, **settings), advise=False)
    block = probe.page_bytes * probe.group_size
    kv = blocks * block + end * (block - 1)
    fit = engine_fit(a, 200, EngineSettings(kv_cache_memory_gib=kv / GIB, **settings), advise=False)
    return log_lines(fit)


@pytest.mark.parametrize("end", [0, 1])
def test_qwen35_27b_on_0_19_prints_the_undercounted_token_line(end):
    # vLLM #40691 (vLLM 0.19.0, H20): `vllm serve Qwen3.5-27B --max-model-len 32768
    # --max-num-seqs 16 --max-num-batched-token 16384`, no prefix-caching flag, prints
    # "GPU KV cache size: 290,864 tokens" and "Maximum concurrency for 32,768 tokens per request: 33.04x";
    # 1,487 blocks is the only count that prints both (4 groups: 1,487 // 4 × 784; 1,487 / (42 + 3)).
    lines = fit_lines(QWEN35_27B, 1487, end=end, vllm_version="0.19", max_model_len=32768, max_num_seqs=16,
                      max_num_batched_tokens=16384)  # fmt: skip
    assert "GPU KV cache size: 290,864 tokens" in lines
    assert "Maximum concurrency for 32,768 tokens per request: 33.04x" in lines
    # the same pool as 0.24 prints it: int(33.04... × 32,768), the figure that thread asked for
    later = fit_lines(QWEN35_27B, 1487, end=end, vllm_version="0.24", max_model_len=32768, max_num_seqs=16,
                      max_num_batched_tokens=16384)  # fmt: skip
    assert f"GPU KV cache size: {int(1487 / 45 * 32768):,} tokens" in later


@pytest.mark.parametrize("release", ["0.19", "0.24"])
def test_block_size_lines_of_qwen_checkpoints(release):
    # vLLM #47430 (vLLM 0.23.0, Qwen3.6-27B): "Setting attention block size to 784 tokens to ensure that attention
    # page size is >= mamba page size."; vLLM #40696 (vLLM 0.19.1, Qwen3.5-4B): 528 tokens.
    for model, block in ((QWEN35_27B, 784), (QWEN35_4B, 528)):
        lines = fit_lines(model, 100, vllm_version=release)
        assert lines[0] == (
            f"Setting attention block size to {block} tokens to ensure that attention page size is >= mamba page size."
        )
        assert lines[1].startswith("Padding mamba page size by ")


@pytest.mark.parametrize(("model", "tp", "block", "pct"), [(QWEN35_27B, 4, 784, "0.13"), (QWEN35_4B, 1, 528, "0.76")])
def test_block_and_padding_lines_as_printed_together(model, tp, block, pct):
    # Logs that print both lines without naming the checkpoint in the thread: 1CatAI/1Cat-vLLM #237 (four tensor-
    # parallel ranks, each "784 tokens" and "0.13%") and vLLM #37467 ("528 tokens" and "0.76%", a Qwen3.5 test).
    # The checkpoints whose block sizes the threads above name give both lines, digit for digit.
    lines = fit_lines(model, 100, vllm_version="0.24", tensor_parallel_size=tp)
    assert lines[:2] == [
        f"Setting attention block size to {block} tokens to ensure that attention page size is >= mamba page size.",
        f"Padding mamba page size by {pct}% to ensure that mamba page size and attention page size are exactly equal.",
    ]


@pytest.mark.parametrize("end", [0, 1])
def test_qwen36_27b_tp2_fp8_mtp_prefix_caching_on_the_concurrency_release(end):
    # noonghunna/club-3090 #295 (2× RTX 3090): qwen3.6-27b, tensor_parallel_size 2, dtype float16,
    # kv_cache_dtype fp8_e5m2, enable_prefix_caching, max_model_len 262144, max_num_batched_tokens 8192,
    # max_num_seqs 2, MTP with num_speculative_tokens 3; it prints "GPU KV cache size: 620,944 tokens" and
    # "Maximum concurrency for 262,144 tokens per request: 2.37x": 424 blocks of 1,600 tokens, 164 attention
    # pages and 3 state groups of 2 + 3 pages a request.
    lines = fit_lines(QWEN35_27B, 424, end=end, vllm_version="0.24", tensor_parallel_size=2, kv_cache_dtype="fp8",
                      prefix_caching=True, num_speculative_tokens=3, max_model_len=262144,
                      max_num_batched_tokens=8192, max_num_seqs=2)  # fmt: skip
    assert lines[0].startswith("Setting attention block size to 1600 tokens")
    assert "GPU KV cache size: 620,944 tokens" in lines
    assert "Maximum concurrency for 262,144 tokens per request: 2.37x" in lines


@pytest.mark.parametrize("end", [0, 1])
def test_nemotron_h_block_padding_layers_and_pool(end):
    # vLLM #53749, engine A (vLLM v0.27.1, one H200, TP 1): a NemotronH 30B-A3B checkpoint,
    # --max-model-len 32768 --max-num-batched-tokens 16384 --mamba-cache-mode align --enable-prefix-caching;
    # auto-selected attention block size 2096, KV pool 7,035,562 tokens. 5,153 blocks (1 attention group, 4 state
    # groups of 6 with one padding layer): 16 + 4 × 2 pages a request.
    lines = fit_lines(NEMOTRON_30B, 5153, end=end, vllm_version="0.24", prefix_caching=True, max_model_len=32768,
                      max_num_batched_tokens=16384)  # fmt: skip
    assert lines[0].startswith("Setting attention block size to 2096 tokens")
    assert "Add 1 padding layers, may waste at most 4.35% KV cache memory" in lines
    assert "GPU KV cache size: 7,035,562 tokens" in lines


def test_groups_follow_the_fewest_layers_and_the_1_5_rule():
    assert group_layers({"full": 16, "state": 48}) == (16, (("full", 1), ("state", 3)), ())
    size, groups, padding = group_layers({"state": 23, "full": 6})
    assert (size, groups) == (6, (("state", 4), ("full", 1))) and padding[0][:2] == ("state", 1)
    assert group_layers({"full": 13, "state": 12})[0] == 13  # 13 < 1.5 × 12: the most


def test_prefix_caching_and_speculative_tokens_cost_state_pages():
    base = dict(vllm_version="0.24", max_model_len=32768, kv_cache_memory_gib=60.0)
    plain = engine_fit(QWEN35_27B, 200, EngineSettings(**base), advise=False).hybrid
    cached = engine_fit(QWEN35_27B, 200, EngineSettings(**base, prefix_caching=True), advise=False).hybrid
    spec = engine_fit(QWEN35_27B, 200, EngineSettings(**base, num_speculative_tokens=2), advise=False).hybrid
    assert plain.pages_per_request["state"] == 3 and cached.pages_per_request["state"] == 6  # 3 groups × (1 | 2)
    assert spec.pages_per_request["state"] == 3 * 3
    assert spec.state_page_bytes > plain.state_page_bytes  # two more conv rows
    assert cached.concurrency < plain.concurrency and cached.num_blocks == plain.num_blocks


def test_the_capacity_sentence_names_the_real_line_and_the_shortest_prefix():
    s = EngineSettings(vllm_version="0.19", max_model_len=32768, kv_cache_memory_gib=71.2)
    fit = engine_fit(QWEN35_27B, 200, s, advise=False)
    text = capacity_sentence(fit.hybrid)
    assert "concurrency line is the real capacity" in text and "one block, 784 tokens" in text
    assert "an undercount" in text and text.count(". ") == 0
    as_json = json.loads(json.dumps(fit.to_dict()))
    assert as_json["capacity"] == text and as_json["log"] == log_lines(fit)
    assert as_json["hybrid"]["block_size"] == 784


def test_attention_only_models_keep_todays_figures():
    llama = Decoder(d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8, vocab_size=128_256, d_ff=14_336,
                    ffn="swiglu", bias="none", norm="rmsnorm", position="rope", tied_embeddings=False)  # fmt: skip
    today = engine_fit(llama, 39.5, EngineSettings(max_model_len=8192))
    old = engine_fit(llama, 39.5, EngineSettings(max_model_len=8192, vllm_version="0.19"))
    new = engine_fit(llama, 39.5, EngineSettings(max_model_len=8192, vllm_version="0.24"))
    assert today.hybrid is None and "hybrid" not in today.to_dict()
    assert (old.tokens, old.num_blocks, old.concurrency) == (today.tokens, today.num_blocks, today.concurrency)
    assert new.tokens == int(today.concurrency * 8192) and new.num_blocks == today.num_blocks


def test_bad_settings_name_their_field():
    with pytest.raises(ConfigError) as e:
        EngineSettings(version="v0", vllm_version="0.19")
    assert e.value.field == "vllm_version"
    for field, value in (("vllm_version", "0.5"), ("num_speculative_tokens", -1), ("mamba_ssm_dtype", "int8"),
                         ("prefix_caching", "yes")):  # fmt: skip
        with pytest.raises(ConfigError) as e:
            EngineSettings(**{field: value})
        assert e.value.field == field
    with pytest.raises(ConfigError) as e:
        engine_fit(QWEN35_27B, 80, EngineSettings(version="v0"))
    assert e.value.field == "version"
    with pytest.raises(ConfigError):  # 48 value heads do not split over 5 ranks
        engine_fit(QWEN35_27B, 80, EngineSettings(tensor_parallel_size=5, kv_cache_memory_gib=10.0))


def test_a_short_pool_refuses_to_start_with_the_longest_length():
    s = EngineSettings(vllm_version="0.24", max_model_len=262_144, kv_cache_memory_gib=2.0)
    fit = engine_fit(QWEN35_27B, 200, s, advise=False)
    assert not fit.starts and 0 < fit.longest_max_model_len < 262_144
    assert engine_fit(QWEN35_27B, 200, replace(s, max_model_len=fit.longest_max_model_len), advise=False).starts


def test_cli_flags_reach_the_fit_and_bad_ones_exit_2():
    base = [sys.executable, "-m", "attncore", "kv-cache", "--preset", "llama-3-8b", "--engine", "vllm",
            "--gpu", "a100-40gb", "--max-model-len", "8192"]  # fmt: skip
    out = subprocess.run([*base, "--vllm-version", "0.24", "--json"], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["engine"].startswith("vLLM 0.24")
    bad = subprocess.run([*base, "--vllm-version", "0.19", "--engine-version", "v0"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--vllm-version" in bad.stderr and "Traceback" not in bad.stderr


def test_the_text_output_prints_the_state_page_the_lines_and_the_capacity(capsys):
    s = EngineSettings(vllm_version="0.19", max_model_len=32768, max_num_seqs=16, max_num_batched_tokens=16384,
                       kv_cache_memory_gib=71.18)  # fmt: skip
    fit = engine_fit(QWEN35_27B, 95, s)
    print_fit(fit, "qwen3.5-27b", "95 GiB (typed)")
    out = capsys.readouterr().out
    assert "state page 3,207,168 B per layer, padded to the attention page of 784 tokens × 4,096 B" in out
    assert "groups: 1 full, 3 state" in out
    assert "GPU KV cache size: 290,864 tokens" in out and "33.04x" in out
    assert "The concurrency line is the real capacity" in out and "one block, 784 tokens" in out


def test_advice_skips_tensor_parallel_sizes_the_state_does_not_split_into():
    # 24 query heads allow tp 3, but the conv width 10,240 does not split in 3: the advice names 4 (tp 2 too small)
    s = EngineSettings(max_model_len=262_144, weights_gib=100.0, non_torch_gib=0.1, activation_gib=1.0)
    fit = engine_fit(QWEN35_27B, 60, s)
    assert not fit.starts
    tp = [line for line in fit.advice if line.startswith("tensor-parallel size")]
    assert tp and not tp[0].startswith("tensor-parallel size 3 ")


def test_the_token_formula_follows_the_release():
    s = EngineSettings(vllm_version="0.19", max_model_len=32768, kv_cache_memory_gib=71.18)
    old = engine_fit(QWEN35_27B, 95, s, advise=False)
    assert tokens_formula(old) == "blocks ÷ 4 groups × smallest block size = 1,487 ÷ 4 × 784"
    new = engine_fit(QWEN35_27B, 95, replace(s, vllm_version="0.24"), advise=False)
    assert tokens_formula(new) == "int(concurrency × max_model_len) = int(33.0444 × 32,768)"
    assert new.tokens == int(1487 / 45 * 32768)
    short = engine_fit(QWEN35_27B, 95, replace(s, max_model_len=512), advise=False)  # a state block of 512 < 784
    assert tokens_formula(short).endswith(" × 512") and short.tokens == short.num_blocks // 4 * 512


def test_nemotron_nano_9b_v2_block_size():
    # vLLM #24280 (a maintainer's feature request): hybrid page alignment "might cause large attention page sizes
    # (672 tokens for nvidia/NVIDIA-Nemotron-Nano-9B-v2)"; with the state padded, 4 attention and 27 Mamba layers
    # make 1 full group and 7 state groups of 4 (one padding layer).
    lines = fit_lines(NEMOTRON_NANO_9B, 100, vllm_version="0.19")
    assert lines[0].startswith("Setting attention block size to 672 tokens")
    assert "Add 1 padding layers, may waste at most 3.70% KV cache memory" in lines


def test_a_named_release_from_0_21_profiles_cuda_graphs_and_a_hybrid_logs_it_around_the_available_memory():
    """vLLM 0.21 on subtracts its CUDA-graph estimate by default (gpu_worker.py's "CUDA graph memory profiling is
    enabled (default since v0.21.0)"): a named release that does prints it, a hybrid's lines too, and the flag
    turns it off."""
    base = [sys.executable, "-m", "attncore", "kv-cache", "--preset", "qwen3.5-35b-a3b", "--engine", "vllm",
            "--gpu", "h100-80gb", "--json"]  # fmt: skip

    def log(*flags):
        out = subprocess.run([*base, *flags], capture_output=True, text=True, check=True)
        return json.loads(out.stdout)["log"]

    on = log("--vllm-version", "0.24")
    graph = [i for i, line in enumerate(on) if line.startswith("CUDA graph memory profiling is enabled")]
    available = next(i for i, line in enumerate(on) if line.startswith("Available KV cache memory"))
    assert graph == [available + 1] and on[available - 1].startswith("Estimated CUDA graph memory")
    off = log("--vllm-version", "0.24", "--no-cuda-graph-profiling")
    assert not any("CUDA graph" in line for line in off)
    assert on[0] == off[0]  # the block size line: the graphs change the memory, not the paging


def test_an_mtp_layer_joins_the_full_attention_layers_groups():
    """Qwen3.5/3.6's MTP layer is a full-attention decoder layer (vLLM's qwen3_5_mtp.py) with its own KV in the same
    pool: with it the full layers are 17, the group size 17, and the 48 state layers fill 3 groups of 17 (3 padding
    layers), where without it 16 full layers make groups of 16 and no padding."""
    from serving.speculative import Speculative

    def fit(spec):
        s = EngineSettings(vllm_version="0.24", tensor_parallel_size=2, kv_cache_dtype="fp8", prefix_caching=True,
                           num_speculative_tokens=3, max_model_len=262144, max_num_batched_tokens=8192,
                           max_num_seqs=2, speculative=spec)  # fmt: skip
        return engine_fit(QWEN35_27B, 24, s)

    alone, mtp = fit(None), fit(Speculative("mtp", 3, None, 1, None))
    assert (alone.group_size, mtp.group_size) == (16, 17) and mtp.groups == alone.groups
    assert not any("padding layers" in line for line in log_lines(alone))
    assert "Add 3 padding layers, may waste at most 6.25% KV cache memory" in log_lines(mtp)
    assert mtp.hybrid.block_size == alone.hybrid.block_size  # the page is the target's: the alignment is unchanged


def test_an_nvfp4_cache_pages_a_hybrid_from_the_same_attention_page_as_an_attention_only_model():
    """The attention page of one token is the engine's own (keys and values packed as nvfp4: head_dim/2 bytes of E2M1
    values and head_dim/16 FP8 scales per head), not a whole number of bytes per element."""
    s = EngineSettings(vllm_version="0.24", kv_cache_dtype="nvfp4", max_model_len=32768)
    fit = engine_fit(QWEN35_27B, 95, s)
    assert fit.hybrid.token_bytes == 2 * 4 * (256 // 2 + 256 // 16)  # 4 KV heads of 256
    assert fit.hybrid.page_bytes == fit.hybrid.block_size * fit.hybrid.token_bytes
    bf16 = engine_fit(QWEN35_27B, 95, replace(s, kv_cache_dtype="auto"))
    assert bf16.hybrid.token_bytes == 2 * 4 * 256 * 2
