"""AppTest for the Parameters and KV-cache pages: each renders, loads presets, follows its inputs, restores them
from the URL and shows bad input as an error message, not a traceback. Expected figures are written out by hand
(published totals, the parameter-count and KV-cache arithmetic) so that a page wired to the wrong number cannot pass."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from apptest_helpers import charts, page, texts
from streamlit.testing.v1 import AppTest
from test_urls import assert_no_live_markdown

pytestmark = pytest.mark.slow  # AppTests of the pages

GPT2 = 124_439_808
LLAMA3_8B = 8_030_261_248


def metric(at: AppTest, label: str):
    """(value, the small line under it) of the metric whose label starts with `label`."""
    m = next(m for m in at.metric if m.label.startswith(label))
    return m.value, m.proto.delta


def rerun(element) -> AppTest:
    """Run the app again after an interaction (an AppTest or a widget whose value was set)."""
    at = element.run()
    assert not at.exception, [e.message for e in at.exception]
    return at


# --- Parameters ----------------------------------------------------------------------------------


def test_parameters_renders_gpt2_with_its_published_total():
    at = page("parameters")
    assert at.title[0].value == "Parameters" and at.caption
    assert metric(at, "Total parameters") == (f"{GPT2:,}", "124M")
    assert metric(at, "Published (gpt2)") == (f"{GPT2:,}", "✓ equals the count")
    table = at.dataframe[0].value
    assert list(table["component"]) == ["embeddings", "position", "attention", "mixer", "ffn", "norms", "output_head"]
    assert table["params"].sum() == GPT2 and table.set_index("component")["params"]["position"] == 1024 * 768
    assert len(charts(at)) == 1
    assert "attncore builds" in texts(at.info)  # a tied head: not a model attncore builds


@pytest.mark.parametrize(
    "name, total, d_model",
    [("llama-3-8b", LLAMA3_8B, 4096), ("qwen2.5-7b", 7_615_616_512, 3584), ("deepseek-v2-lite", 15_706_484_224, 2048)],
)
def test_choosing_a_preset_loads_its_fields_and_shows_its_published_total(name, total, d_model):
    at = page("parameters")
    rerun(at.selectbox(key="par_preset").set_value(name))
    assert at.number_input(key="par_d_model").value == d_model
    assert metric(at, "Total parameters")[0] == f"{total:,}"
    assert metric(at, f"Published ({name})") == (f"{total:,}", "✓ equals the count")


def test_changing_an_input_changes_the_total_and_the_crosscheck_follows():
    at = page("parameters", par_preset="attncore")
    assert metric(at, "Total parameters")[0] == "27,253"
    assert "27,253 = attncore.model.init_params 27,253" in texts(at.success)
    at.number_input(key="par_d_model").set_value(64)
    rerun(at.number_input(key="par_d_ff").set_value(256))
    # 12d² + 13d per block, then embeddings (21 x 64), 13 positions, the final LayerNorm, head with bias
    total = 2 * (12 * 64**2 + 13 * 64) + 21 * 64 + 13 * 64 + 2 * 64 + (64 * 21 + 21)
    assert metric(at, "Total parameters")[0] == f"{total:,}"
    assert metric(at, "Published (attncore)")[1] == f"{total - 27_253:+,} after your changes"
    assert f"{total:,} = attncore.model.init_params {total:,}" in texts(at.success)
    assert set(at.dataframe[1].value["equal"]) == {"✓"}


def test_parameters_query_params_restore_preset_and_overrides():
    at = page("parameters", par_preset="llama-3-8b", par_n_kv_heads="32")
    assert at.selectbox(key="par_preset").value == "llama-3-8b"
    assert at.selectbox(key="par_n_kv_heads").value == 32 and at.number_input(key="par_d_ff").value == 14336
    assert "0" not in at.selectbox(key="par_n_kv_heads").label  # no magic zero in a label
    mha = LLAMA3_8B + 32 * 2 * 4096 * (4096 - 1024)  # K and V grow from 8 to 32 heads of 128 in every layer
    assert metric(at, "Total parameters")[0] == f"{mha:,}"
    assert metric(at, "Published (llama-3-8b)")[1] == f"{mha - LLAMA3_8B:+,} after your changes"


def test_derived_fields_are_named_choices_not_magic_zeros():
    at = page("parameters", par_preset="gpt2")
    kv, head = at.selectbox(key="par_n_kv_heads"), at.selectbox(key="par_head_dim")
    assert (kv.value, kv.format_func(kv.value)) == (0, "= query heads")
    assert head.format_func(head.value) == "d ÷ heads"  # short enough for its select at 1,280 px
    rerun(kv.set_value(4))  # GQA: 12 query heads share 4 KV heads
    assert at.selectbox(key="par_n_kv_heads").value == 4 and not at.exception


def test_custom_keeps_the_fields_as_they_are():
    at = page("parameters", par_preset="gpt2-medium")
    rerun(at.selectbox(key="par_preset").set_value("custom"))
    assert metric(at, "Total parameters")[0] == "354,823,168"
    assert metric(at, "Published")[0] == "—"
    rerun(at.toggle(key="par_tied_embeddings").set_value(False))
    assert metric(at, "Total parameters")[0] == f"{354_823_168 + 50257 * 1024:,}"


@pytest.mark.parametrize("field, value, message", [("n_heads", 5, "n_heads"), ("d_model", 0, "d_model")])
def test_parameters_invalid_input_shows_an_error(field, value, message):
    at = page("parameters", par_preset="attncore")
    rerun(at.number_input(key=f"par_{field}").set_value(value))
    assert "Not a valid architecture" in texts(at.error) and message in texts(at.error)
    assert not at.metric


# --- KV cache ------------------------------------------------------------------------------------


def test_kv_cache_renders_llama_3_8b_and_its_fit_on_an_h100():
    at = page("kv_cache")
    assert at.title[0].value == "KV cache" and at.caption
    assert metric(at, "KV cache, binary")[0] == "1.00 GiB"  # 2 · 32 · 8 · 128 · 8192 · 2 B = 2^30 B
    assert metric(at, "KV cache, decimal")[0] == "1.07 GB"
    assert metric(at, "Per token")[0] == "131,072 B"
    assert metric(at, "Weights in fp16") == ("16.1 GB", "8.03B parameters")  # a note that fits its column
    budget = 72_000_000_000 - 2 * LLAMA3_8B  # 80 GB less 10%, less the fp16 weights
    assert metric(at, "Cached tokens that fit")[0] == f"{budget // 131_072:,}"
    assert metric(at, "Largest batch") == (f"{budget // (131_072 * 8192):,}", "at context 8,192, estimate")
    assert "Fits" in texts(at.success)
    curves = charts(at)
    assert len(curves) == 3  # the GPU split, memory against context, the element types
    assert "Press **Measure**" in texts(at.info)


def test_kv_cache_simple_fit_counts_the_gpu_in_the_unit_chosen():
    at = page("kv_cache", kv_unit="GiB")  # an H100 as the driver reports it: 79.22 GiB, not 80 GB
    assert at.selectbox(key="kv_gpu_gib").value == "h100-80gb"
    budget = round(round(79.22 * 2**30) * 0.9) - 2 * LLAMA3_8B
    assert metric(at, "Cached tokens that fit")[0] == f"{budget // 131_072:,}"
    assert metric(at, "Left for the cache")[1] == "of 79.22 GiB, estimate"
    assert "71.3 GiB usable (79.22 GiB less 10% reserved)" in texts(at.success)
    typed = page("kv_cache", kv_unit="GiB", kv_gpu_gib="other", kv_gpu_gb="40")
    assert typed.number_input(key="kv_gpu_gb").label == "GPU memory (GiB = 2³⁰ B)"
    assert metric(typed, "Left for the cache")[1] == "of 40 GiB, estimate"
    sold = page("kv_cache", kv_gpu="other", kv_gpu_gb="40")
    assert metric(sold, "Left for the cache")[1] == "of 40 GB, estimate" and "36.0 GB usable" in texts(sold.success)


def test_kv_cache_presets_load_their_geometry():
    at = page("kv_cache", kv_context="32768")
    rerun(at.selectbox(key="kv_preset").set_value("mistral-7b-v0.1"))
    assert at.number_input(key="kv_window").value == 4096
    assert metric(at, "KV cache, binary")[0] == "512 MiB"  # the window keeps 4096 of 32768 tokens
    rerun(at.selectbox(key="kv_preset").set_value("deepseek-v2-lite"))
    assert at.number_input(key="kv_kv_lora_rank").value == 512 and at.toggle(key="kv_mla_on").value
    assert not at.toggle(key="kv_window_on").value  # no window: a switch off, not a magic 0
    assert metric(at, "Per token")[0] == f"{27 * (512 + 64) * 2:,} B"  # one latent + RoPE key, no factor 2
    assert metric(at, "Cache / weights")[1] == "MLA cache"


def test_kv_cache_inputs_change_the_answer():
    at = page("kv_cache")
    rerun(at.number_input(key="kv_batch").set_value(4))
    assert metric(at, "KV cache, binary")[0] == "4.00 GiB"
    rerun(at.selectbox(key="kv_dtype").set_value("int4"))
    # int4 with an fp16 scale per 64: a 128-vector takes 64 + 2 · 2 = 68 bytes
    assert metric(at, "Per token")[0] == f"{32 * 2 * 8 * 68:,} B"
    rerun(at.number_input(key="kv_kv_heads").set_value(1))
    assert metric(at, "Cache / weights")[1] == "MQA cache"


def test_kv_cache_query_params_restore_the_articles_worked_example():
    # the article's worked example: 24 layers, 8 KV heads of 64, 8192 tokens, batch 4, fp16 = 1,610,612,736 B = 1.5 GiB
    query = dict(kv_preset="custom", kv_n_layers="24", kv_n_heads="8", kv_kv_heads="8", kv_head_dim="64")
    at = page("kv_cache", **query, kv_context="8192", kv_batch="4", kv_gpu="rtx-4090")
    assert at.number_input(key="kv_n_layers").value == 24 and at.selectbox(key="kv_gpu").value == "rtx-4090"
    assert metric(at, "KV cache, binary")[0] == "1.50 GiB"
    assert "1,610,612,736 B" in texts(at.caption)
    assert metric(at, "Weights in fp16")[0] == "not counted"
    assert metric(at, "Cached tokens that fit")[0] == f"{21_600_000_000 // 49_152:,}"  # 24 GB less 10%


def test_kv_cache_says_when_the_weights_alone_do_not_fit():
    at = page("kv_cache", kv_preset="llama-3-70b")
    assert "weights alone" in texts(at.error) and not at.success
    rerun(at.selectbox(key="kv_wdtype").set_value("int4"))
    assert "Fits" in texts(at.success)


@pytest.mark.parametrize("key, value", [("kv_kv_heads", 7), ("kv_n_layers", 0)])
def test_kv_cache_invalid_input_shows_an_error(key, value):
    at = page("kv_cache")
    rerun(at.number_input(key=key).set_value(value))
    assert "Not a valid workload" in texts(at.error) and not at.metric


def test_kv_cache_measure_keeps_its_result_per_input():
    small = dict(kv_m_layers="1", kv_m_d="64", kv_m_heads="2", kv_m_new="16", kv_m_repeats="1")
    at = page("kv_cache", **small)
    n_charts = len(charts(at))
    rerun(at.button(key="kv_measure").click())
    assert metric(at, "Same tokens")[0] == "✓ identical"
    assert float(metric(at, "Max |logit deviation|")[0]) < 1e-10
    assert metric(at, "Cache (formula)")[0] == "48.0 KiB"  # 2 · 1 layer · 2 heads · 32 · (32 + 16) positions · 8 B
    assert len(charts(at)) == n_charts + 1
    rerun(at)  # a rerun without the button keeps the measurement
    assert metric(at, "Speed-up at 16 tokens")[1] == "recompute ÷ cached"
    rerun(at.selectbox(key="kv_m_new").set_value(32))  # other inputs: not measured yet
    assert "Press **Measure**" in texts(at.info)


def test_kv_cache_caption_names_only_the_curves_its_preset_draws():
    def curves_caption(at) -> str:
        return next(c.value for c in at.caption if c.value.startswith("Same layers and head size"))

    at = page("kv_cache")  # llama-3-8b: GQA, no latent cache, no sliding window
    llama = curves_caption(at)
    assert "GQA one pair per group" in llama and "MLA" not in llama and "sliding window" not in llama
    assert "tokens × batch 1, in each element type" in texts(at.markdown)
    assert "MLA one compressed latent" in curves_caption(page("kv_cache", kv_preset="deepseek-v2-lite"))


# --- KV cache, the serving engine's fit ----------------------------------------------------------

ENGINE = dict(kv_mode="vllm")  # Llama-3-8B (the page's default preset) at max_model_len = context 8,192
A100 = ENGINE | dict(kv_e_gpu="a100-40gb")  # the card of vLLM #12330 (the page starts on the simple fit's H100)


def test_engine_mode_with_the_logs_figures_reproduces_the_llama_3_8b_a100_log():
    # vLLM #12330: A100-40GB, V0, "total_gpu_memory (39.50GiB) x gpu_memory_utilization (0.90) = 35.55GiB",
    # non_torch 0.10GiB, activation 9.37GiB, KV 11.12GiB, 5,691 blocks, 11.12x for 8192 tokens
    at = page("kv_cache", **A100, kv_e_version="v0", kv_e_non_torch_gib="0.1", kv_e_activation_gib="9.37")
    assert metric(at, "Available KV cache memory")[0] == "11.12 GiB"
    assert abs(int(metric(at, "GPU blocks")[0].replace(",", "")) - 5691) <= 0.03 * 5691
    assert metric(at, "Maximum concurrency for 8,192 tokens per request")[0] == "11.12×"
    log = at.code[0].value.splitlines()
    assert log[0].endswith("total_gpu_memory (39.50GiB) x gpu_memory_utilization (0.90) = 35.55GiB")
    assert "PyTorch activation peak memory takes 9.37GiB" in log[1]
    formula = texts(at.markdown)
    assert "39.50 GiB × 0.90 = **35.55 GiB** _(measured (published log))_" in formula  # a logged card's total
    assert "8,030,261,248 × 2 B ÷ 1" in formula
    assert "**9.37 GiB** _(measured)_" in formula and "_(estimate)_" in formula  # the weights stay estimated
    blocks = int(metric(at, "GPU blocks")[0].replace(",", ""))
    assert metric(at, "Longest max_model_len that starts") == (f"{blocks * 16:,}", "✓ starts at 8,192")  # V0
    assert not at.error
    assert len(charts(at)) == 3  # the engine's split of the card, memory against context, the element types


def test_engine_mode_defaults_estimate_and_say_so():
    at = page("kv_cache", **A100)
    assert at.selectbox(key="kv_e_version").value == "v1"
    formula = texts(at.markdown)
    # V1 on a 40 GiB A100: 2,048 batched tokens and 256 sequences; the sampler's 2048 · 4096 · 2 + 256 · 128,256 ·
    # (2 + 12) B is the peak, wider than the MLP phase 2048 · 2 · (2 · 4096 + 3 · 14336) B
    sampler = 2048 * 4096 * 2 + 256 * 128256 * (2 + 12)
    assert sampler > 2048 * 2 * (2 * 4096 + 3 * 14336)
    assert f"**{sampler / 2**30:.2f} GiB** _(estimate)_" in formula
    assert "Available KV cache memory:" in at.code[0].value and "GPU KV cache size:" in at.code[0].value
    captions = texts(at.caption)
    assert "**Estimated**: what the engine would log" in captions
    # every figure resting on the estimated peak says so, never "exact"
    assert "blocks of 16 tokens _(estimate)_" in formula
    assert "_(exact)_" not in formula.split("**budget**")[1].split("\n", 1)[1]
    assert all(metric(at, label)[1].endswith("estimate") for label in ("Available KV", "GPU blocks", "GPU KV cache"))
    assert "max_num_batched_tokens (2,048)" in captions and "max_num_seqs (256)" in captions


def test_engine_mode_too_long_shows_the_engines_error():
    at = page("kv_cache", **A100, kv_e_len="300000", kv_e_long="true")  # past 8,192: vLLM's override set
    assert "To serve at least one request with the models's max seq len (300000)" in texts(at.error)
    assert metric(at, "Longest max_model_len that starts")[1] == "✗ does not start at 300,000"


def test_engine_mode_weights_larger_than_the_card_advise_what_can_work_and_keep_the_sign():
    """Llama 3 70B in bf16 on one 80 GB H100: the weights alone are larger than the card. The cache's minus sign
    is in the metric and the breakdown alike; vLLM's words are shown, a note says why raising
    gpu_memory_utilization cannot work, and the advice names a tensor-parallel size and a weight format."""
    at = page("kv_cache", **ENGINE, kv_preset="llama-3-70b", kv_e_gpu="h100-80gb")
    value = metric(at, "Available KV cache memory")[0]
    assert value.startswith("−") and value.endswith(" GiB")
    formula = texts(at.markdown)
    assert f"**KV cache** = budget − weights − non-torch − activation = **{value}**" in formula
    assert "No available memory for the cache blocks." in texts(at.error)
    assert "raising gpu_memory_utilization cannot start it: the weights alone" in texts(at.warning)
    assert "- tensor-parallel size " in formula and "- weights in " in formula


def test_engine_mode_refuses_past_the_models_derived_maximum_as_vllm_does():
    at = page("kv_cache", **A100, kv_e_len="32768")
    assert "vLLM refuses max_model_len 32,768 at startup: the model's derived maximum is 8,192" in texts(at.error)
    at = page("kv_cache", **A100, kv_e_len="32768", kv_e_long="true")
    assert "above the model's derived maximum 8,192" in texts(at.warning)
    assert "The model's derived maximum, checked first: 8,192" in texts(at.caption)


def test_engine_mode_typed_capacity_in_gb():
    at = page("kv_cache", **ENGINE, kv_e_gpu="other", kv_e_total="40", kv_e_unit="GB")
    assert "37.25 GiB × 0.90" in texts(at.markdown)  # 40 · 10⁹ B = 37.25 GiB
    at = page("kv_cache", **ENGINE, kv_e_gpu="other", kv_e_total="40", kv_e_unit="GiB")
    assert "40.00 GiB × 0.90" in texts(at.markdown)


def test_engine_mode_pages_a_windowed_model_and_a_custom_one():
    at = page("kv_cache", **ENGINE, kv_preset="mistral-7b-v0.1")
    assert at.number_input(key="kv_e_wlayers").value == 32
    assert metric(at, "Longest max_model_len that starts") == (
        "any",
        "✓ starts at 8,192",
    )  # every layer keeps 4,096 + batch
    at = page("kv_cache", **ENGINE, kv_preset="custom")
    assert at.number_input(key="kv_e_vocab").value == 128256 and metric(at, "GPU blocks")


def test_engine_mode_bad_setting_is_an_error_message():
    at = page("kv_cache", **ENGINE, kv_e_version="v0", kv_e_kv_cache_memory_gib="10")
    assert "Not a valid engine setting" in texts(at.error) and "kv_cache_memory_gib" in texts(at.error)


def test_engine_mode_a_figure_from_the_log_is_chosen_by_its_switch_not_by_a_magic_zero():
    """0 GiB typed with its switch on is a measured 0 (no estimate); a figure with its switch off is not used."""
    on = texts(page("kv_cache", **ENGINE, kv_e_non_torch_gib_on="true", kv_e_non_torch_gib="0").markdown)
    assert "**0.00 GiB** _(measured)_" in on
    off = texts(page("kv_cache", **ENGINE, kv_e_activation_gib_on="false", kv_e_activation_gib="9.37").markdown)
    assert "9.37 GiB" not in off and "_(measured)_" not in off


def test_kv_cache_optional_features_are_switches_not_magic_zeros():
    """A window is used only while its switch is on; a custom model's weights are counted only when asked."""
    windowed = page("kv_cache", kv_preset="mistral-7b-v0.1", kv_context="32768")
    full = page("kv_cache", kv_preset="mistral-7b-v0.1", kv_context="32768", kv_window_on="false")
    assert metric(windowed, "KV cache, binary")[0] == "512 MiB" and metric(full, "KV cache, binary")[0] == "4.00 GiB"
    (window,) = [n for n in full.number_input if n.key == "kv_window"]
    assert window.proto.disabled  # shown, greyed out
    custom = page("kv_cache", kv_preset="custom")
    assert "kv_weights" not in [n.key for n in custom.number_input]  # weights unknown: no number to type
    assert "kv_weights" in [n.key for n in page("kv_cache", kv_preset="custom", kv_weights_on="true").number_input]


def test_kv_cache_fit_sentence_writes_sizes_as_the_metrics_do():
    at = page("kv_cache")  # llama-3-8b on an 80 GB card
    weights = metric(at, "Weights in fp16")[0]
    cache = metric(at, "KV cache, decimal units")[0]
    assert f"weights {weights} + cache {cache}" in texts(at.success)  # '16.1 GB', '1.07 GB': one format


HUGE = dict(kv_context="100000000", kv_batch="100000")  # both inside the fields' ranges: a cache past 2⁶³ B


@pytest.mark.parametrize(
    "query",
    [
        HUGE,
        HUGE | dict(kv_dtype="int4", kv_batch="1000000"),
        HUGE | dict(kv_preset="llama-3-70b"),
        HUGE | dict(kv_unit="GiB", kv_gpu_gib="h200"),
        HUGE | ENGINE | dict(kv_e_long="true"),  # past the derived maximum: vLLM's override set
        HUGE | ENGINE | dict(kv_preset="deepseek-v2-lite", kv_e_version="v0", kv_e_long="true"),
        dict(kv_preset="custom", kv_n_layers="10000000", kv_n_heads="10000000", kv_kv_heads="10000000",
             kv_head_dim="10000000", kv_context="100000000", kv_batch="1000000"),
    ],
)  # fmt: skip
def test_kv_cache_charts_caches_of_any_size_in_range(query):
    at = page("kv_cache", **query)  # raised StreamlitDataframeConversionError: int too large to convert to C long
    if not at.error or "valid workload" not in texts(at.error):
        assert metric(at, "KV cache, binary")[0].endswith("B") and len(charts(at)) >= 2
        curves = next(c for c in charts(at) if "KV cache (GiB)" in str(c))
        assert "bytes_text" in str(curves)  # every digit in the tooltip, as text


def test_engine_mode_keeps_the_card_chosen_in_the_simple_fit():
    at = page("kv_cache", kv_gpu="rtx-4090")
    rerun(at.radio(key="kv_mode").set_value("vllm"))
    assert at.selectbox(key="kv_e_gpu").value == "rtx-4090"  # was a100-40gb whatever the simple fit showed
    assert page("kv_cache", **ENGINE).selectbox(key="kv_e_gpu").value == "h100-80gb"  # the simple fit's default
    typed = page("kv_cache", kv_gpu="other", kv_gpu_gb="40")
    rerun(typed.radio(key="kv_mode").set_value("vllm"))
    assert typed.selectbox(key="kv_e_gpu").value == "other"
    assert (typed.number_input(key="kv_e_total").value, typed.selectbox(key="kv_e_unit").value) == (40.0, "GB")


def test_engine_mode_shows_the_batch_limits_the_engine_will_use():
    def limits(at):
        return {n.label: (n.value, n.proto.disabled) for n in at.number_input if n.label.startswith("max_num")}

    # V1 picks 8,192 tokens and 1,024 sequences on an H100, 2,048 and 256 on an A100 (never shown as 0)
    assert limits(page("kv_cache", **ENGINE)) == {"max_num_batched_tokens": (8192, True), "max_num_seqs": (1024, True)}
    assert limits(page("kv_cache", **A100)) == {"max_num_batched_tokens": (2048, True), "max_num_seqs": (256, True)}
    own = page("kv_cache", **A100, kv_e_tokens="4096")  # a link that sets one turns the switch on
    assert own.toggle(key="kv_e_batch_on").value and limits(own)["max_num_batched_tokens"] == (4096, False)
    assert "at 4,096 batched tokens, 256 sequences" in texts(own.markdown)


def test_engine_mode_labels_the_log_block_by_what_it_rests_on():
    logged = dict(kv_e_version="v0", kv_e_weights_gib="14.96", kv_e_non_torch_gib="0.1", kv_e_activation_gib="9.37")
    at = page("kv_cache", **A100, **logged)
    captions = texts(at.caption)
    assert "from your log's figures" in captions and "**Estimated**" not in captions
    formula = texts(at.markdown)
    assert "_(estimate)_" not in formula and "blocks of 16 tokens _(measured)_" in formula
    assert metric(at, "GPU blocks")[1].endswith("measured")
    estimated = texts(page("kv_cache", **A100, kv_e_version="v0").caption)
    assert "**Estimated**: what the engine would log" in estimated and "(PR 10511)" in estimated


# --- a config.json read on the page ---------------------------------------------------------------------------

CONFIGS = Path(__file__).resolve().parents[1] / "serving" / "configs"
GEMMA2 = (CONFIGS / "gemma-2-9b.json").read_text()  # google/gemma-2-9b: 9,241,705,984 parameters (page: 9.24B)


def paste(at: AppTest, prefix: str, text: str) -> AppTest:
    at.text_area(key=f"{prefix}file_text").input(text)
    return rerun(at.button(key=f"{prefix}file_read").click())


def link(at: AppTest) -> dict:
    return {k: v for k, v in at.query_params.items()}


def test_parameters_reads_a_pasted_config_and_a_link_reopens_its_figures():
    at = paste(page("parameters"), "par_", GEMMA2)
    assert at.selectbox(key="par_preset").value == "config.json"
    assert metric(at, "Total parameters")[0] == "9,241,705,984"
    said = texts(at.success)
    assert "**Read from the pasted text** (gemma2): 42 layers, d_model 3,584, 16 query heads, 8 KV heads" in said
    assert "4 norms a layer" in said and "21 sliding-window layers (4,096) and 21 full" in said
    captions = texts(at.caption)
    assert "query_pre_attn_scalar 256" in captions and "Ignored (16 keys" in captions and "rope_theta" in captions
    assert "You changed fields since" not in captions
    query = link(at)
    assert "par_file_text" not in query and query["par_d_model"] == "3584" and query["par_norm_placement"] == "sandwich"
    again = page("parameters", **query)  # a new session: the fields from the link, not the file
    assert metric(again, "Total parameters")[0] == "9,241,705,984" and "Fields from the link" in texts(again.info)
    rerun(at.number_input(key="par_n_layers").set_value(21))
    assert "You changed fields since" in texts(at.caption)


@pytest.mark.parametrize(
    "name, pattern, window",
    [
        ("gemma-2-9b", "21 sliding-window layers (4,096) and 21 full", ("4096", "21")),
        ("mistral-7b-v0.1", "every layer a sliding window of 4,096", ("4096", None)),
    ],
)
def test_a_parameters_link_keeps_the_models_sliding_window(name, pattern, window):
    """A link to a config.json's model carries its window and its full layers: reopened, the page describes the
    same attention pattern (it said 'every layer full attention'), with the same counts."""
    at = paste(page("parameters"), "par_", (CONFIGS / f"{name}.json").read_text())
    assert pattern in texts(at.success)
    query = link(at)
    assert (query.get("par_sliding_window"), query.get("par_full_layers")) == window
    again = page("parameters", **query)
    said = texts(again.info)
    assert "Fields from the link" in said and pattern in said and "every layer full attention" not in said
    assert [m.value for m in again.metric] == [m.value for m in at.metric]


def test_a_quantised_config_shows_the_weights_as_stored():
    """Qwen/Qwen2.5-0.5B-Instruct-AWQ: 4-bit weights in groups of 128 (tests/test_hf_config.py checks the bytes against
    the checkpoint's tensors), fp16 elsewhere; a link carries the quantisation too."""
    text = (Path(__file__).resolve().parent / "configs" / "qwen2.5-0.5b-instruct-awq.json").read_text()
    at = paste(page("parameters"), "par_", text)
    assert metric(at, "Total parameters")[0] == "494,032,768" and metric(at, "Weights as stored")[1] == "AWQ 4-bit"
    again = page("parameters", **link(at))
    assert metric(again, "Weights as stored") == metric(at, "Weights as stored")


def test_kv_cache_reads_a_pasted_config_counting_each_layer_by_its_window():
    at = paste(page("kv_cache"), "kv_", GEMMA2)  # context 8,192: the local half keeps 4,096 tokens
    assert at.selectbox(key="kv_preset").value == "config.json" and at.number_input(key="kv_e_wlayers").value == 21
    per_layer = 2 * 8 * 256 * 2
    assert metric(at, "Per token")[0] == f"{42 * per_layer:,} B"
    assert f"{per_layer * (21 * 8192 + 21 * 4096):,} B" in texts(at.caption)
    assert "the 21 windowed layers keep 4,096 tokens each, the 21 full ones all 8,192" in texts(at.caption)
    assert metric(at, "Weights in bf16")[0] == "18.5 GB"  # the float32 checkpoint as vLLM serves it
    assert "You changed fields since" not in texts(at.caption)  # head_dim 256 typed, the file's own: the same model
    again = page("kv_cache", **link(at))
    assert [m.value for m in again.metric] == [m.value for m in at.metric]
    rerun(at.number_input(key="kv_a_d_ff").set_value(1024))
    assert "You changed fields since" in texts(at.caption)


def test_kv_cache_engine_fit_of_a_pasted_config_uses_its_stored_weights():
    at = paste(page("kv_cache", kv_mode="vllm"), "kv_", (CONFIGS / "gpt-oss-20b.json").read_text())
    formula = texts(at.markdown)
    assert "20,914,757,184 parameters stored as MXFP4 experts, bf16 rest ÷ 1 = **12.82 GiB**" in formula
    assert "⌊KV cache ÷ (page × 12 layers of one group)⌋" in formula  # 12 sliding, 12 full: two groups of 12
    again = page("kv_cache", **link(at))
    assert texts(again.markdown) == formula


@pytest.mark.parametrize("pg, prefix", [("parameters", "par_"), ("kv_cache", "kv_")])
def test_a_refused_file_changes_nothing_and_says_why_in_one_line(pg, prefix):
    at = page(pg)
    before = [m.value for m in at.metric]
    paste(at, prefix, '{"model_type": "llama", "hidden_size": 4096}')
    assert "**Not read, nothing changed:** the pasted text: num_hidden_layers: missing" in texts(at.error)
    assert [m.value for m in at.metric] == before and at.selectbox(key=f"{prefix}preset").value != "config.json"


@pytest.mark.parametrize("pg, prefix", [("parameters", "par_"), ("kv_cache", "kv_")])
def test_the_page_never_raises_on_pasted_garbage(pg, prefix):
    """Random JSON, random text and a released config cut short or corrupted: read or refused, never a traceback."""
    rng = np.random.default_rng(7)
    samples = ["", "null", "[]", '"x"', "{", "{" * 5000, '{"model_type": "gemma3", "text_config": []}']
    samples += [GEMMA2[: len(GEMMA2) // 2], GEMMA2.replace("4096", "-4096"), GEMMA2.replace('"gemma2"', '{"a": 1}')]
    samples += ["".join(chr(int(c)) for c in rng.integers(1, 0x2FFF, size=200)) for _ in range(3)]
    at = page(pg)
    for text in samples:
        paste(at, prefix, text)
        assert at.error or at.success, text[:40]
        assert_no_live_markdown(at)


def test_an_uploaded_file_is_read_like_a_pasted_one():
    at = page("kv_cache")
    at.file_uploader(key="kv_file_upload").upload("gemma-2-9b.json", GEMMA2.encode(), "application/json")
    rerun(at)
    assert (
        "**Read from gemma-2-9b.json** (gemma2)" in texts(at.success) and at.number_input(key="kv_n_layers").value == 42
    )
