"""The KV-cache page's vLLM release (ui/gpu_fit.py): the release picked in the engine fit changes the token line as
that release prints it, and a release with V0 is refused as an error naming the field, not a traceback."""

from __future__ import annotations

from apptest_helpers import page, texts

A100 = dict(kv_mode="vllm", kv_e_gpu="a100-40gb")  # Llama-3-8B, the page's default preset, at 8,192 tokens


def log_of(at) -> str:
    return texts(at.code)


def test_the_release_sets_the_token_line():
    today = log_of(page("kv_cache", **A100))
    old = log_of(page("kv_cache", **A100, kv_e_release="0.19"))
    new = log_of(page("kv_cache", **A100, kv_e_release="0.24"))
    assert old == today  # an attention-only model: 0.19 prints blocks × block size, as today's V1
    concurrency = float(new.split("tokens per request: ")[1].split("x")[0])
    tokens = int(new.split("GPU KV cache size: ")[1].split(" tokens")[0].replace(",", ""))
    assert abs(tokens - concurrency * 8192) <= 0.005 * 8192 + 1  # int(concurrency × max_model_len)
    formula = texts(page("kv_cache", **A100, kv_e_release="0.24").markdown)
    assert "**tokens** = int(concurrency × max_model_len) = int(" in formula and f"**{tokens:,}**" in formula


def test_a_release_with_v0_is_an_error_naming_the_field():
    at = page("kv_cache", **A100, kv_e_release="0.19", kv_e_version="v0")
    assert "vllm_version" in texts(at.error) and "V1" in texts(at.error)


def test_a_hybrid_preset_shows_the_alignment_lines_and_the_capacity_sentence():
    base = dict(kv_mode="vllm", kv_e_gpu="h100-80gb", kv_preset="qwen3.5-35b-a3b", kv_context="32768")
    at = page("kv_cache", **base, kv_e_release="0.19")
    log = log_of(at)
    assert "Setting attention block size to 1056 tokens" in log and "Padding mamba page size by 0.76%" in log
    shown = texts(at.markdown)
    assert "The concurrency line is the real capacity" in shown and "one block, 1,056 tokens" in shown
    assert "(32 full + 3 state)" in shown
    # two speculative tokens: two more conv rows (a block of 1,072) and, with prefix caching, 2 + 2 pages a group
    at = page("kv_cache", **base, kv_e_release="0.19", kv_e_prefix="true", kv_e_stok="2")
    assert "Setting attention block size to 1072 tokens" in log_of(at)
    assert "(31 full + 12 state)" in texts(at.markdown)
    assert at.toggle(key="kv_e_prefix").value and at.number_input(key="kv_e_stok").value == 2


def test_hostile_release_and_state_parameters_are_named_and_ignored():
    at = page("kv_cache", kv_mode="vllm", kv_e_gpu="h100-80gb", kv_preset="qwen3.5-35b-a3b", kv_e_stok="99999",
              kv_e_release="<script>", kv_e_ssm="int8")  # fmt: skip
    warned = texts(at.warning)
    assert "kv_e_release" in warned and "kv_e_stok" in warned and "kv_e_ssm" in warned
    assert at.number_input(key="kv_e_stok").value == 0 and at.selectbox(key="kv_e_release").value == "none"
    assert "Setting attention block size to 1056 tokens" in log_of(at)  # the defaults' fit, drawn
