"""AppTest of the KV-cache page's engine fit with LoRA adapters, a drafter and CUDA-graph profiling
(ui/adapters_form.py): each comes out of the cache as the engine's own fit computes it, from the page's link."""

from __future__ import annotations

import pytest
from apptest_helpers import page, texts

from serving.engine import EngineSettings, engine_fit
from serving.lora import LoraSettings
from serving.presets import PRESETS
from serving.speculative import Speculative

pytestmark = pytest.mark.slow  # AppTests of the pages

ENGINE = dict(kv_mode="vllm", kv_e_gpu="h100-80gb")  # Llama-3-8B, the page's default preset, at 8,192 tokens


def cache(at) -> str:
    return next(m.value for m in at.metric if m.label.startswith("Available KV cache memory"))


def test_lora_a_drafter_and_graphs_from_the_link():
    at = page("kv_cache", **ENGINE, kv_e_lora="true", kv_e_loras="4", kv_e_rank="64", kv_e_spec="eagle",
              kv_e_spec_k="3", kv_e_graphs="true", kv_e_graph_on="true", kv_e_graph_gib="0.36")  # fmt: skip
    assert not at.exception and not at.error
    settings = EngineSettings(max_model_len=8192, lora=LoraSettings(4, 64), speculative=Speculative("eagle", 3),
                              cuda_graph_profiling=True, cuda_graph_gib=0.36)  # fmt: skip
    fit = engine_fit(PRESETS["llama-3-8b"].arch, 79.22, settings, gpu="h100-80gb")
    assert cache(at) == f"{fit.kv_bytes / 2**30:.2f} GiB"
    formula = texts(at.markdown)
    assert "**LoRA buffers**" in formula and "**1.25 GiB** _(exact)_" in formula and "**CUDA graphs**" in formula
    assert "Estimated CUDA graph memory: 0.36 GiB total" in at.code[0].value
    assert "the head shares the target's embeddings and head" in texts(at.caption)


def test_a_bad_mix_is_an_error_message_not_a_traceback():
    at = page("kv_cache", **ENGINE, kv_e_spec="mtp", kv_e_mtp="2", kv_e_spec_k="3")  # 3 is not a multiple of 2
    assert not at.exception and "num_speculative_tokens" in texts(at.error)


def test_a_named_release_from_0_21_profiles_cuda_graphs_unless_the_link_says_not_as_the_command_line_does():
    """`kv-cache --vllm-version 0.24` subtracts the CUDA-graph estimate by default (0.21 on); the page at that release
    does too, 0.19 does not, and a link's kv_e_graphs=false turns it off."""
    on = page("kv_cache", **ENGINE, kv_e_release="0.24")
    before = page("kv_cache", **ENGINE, kv_e_release="0.19")
    off = page("kv_cache", **ENGINE, kv_e_release="0.24", kv_e_graphs="false")
    assert not (on.exception or before.exception or off.exception)
    assert on.toggle(key="kv_e_graphs").value and not before.toggle(key="kv_e_graphs").value
    assert not off.toggle(key="kv_e_graphs").value
    assert "CUDA graph memory profiling is enabled" in on.code[0].value
    assert "CUDA graph" not in off.code[0].value and "CUDA graph" not in before.code[0].value
