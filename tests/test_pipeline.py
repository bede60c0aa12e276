"""Pipeline stages (serving/pipeline.py) and the NVFP4 format (kvcache, weights, the engine's nvfp4 cache).

The partition is vLLM's get_pp_indices (vllm/distributed/utils.py): L // P layers a stage, the remainder one each
from the second-to-last stage backwards; VLLM_PP_LAYER_PARTITION must give one count per stage summing to L.
"""

from dataclasses import replace

import pytest

from attncore.checks import ConfigError
from serving import engine, pipeline
from serving.kvcache import kv_cache
from serving.parameters import count_parameters
from serving.presets import CARDS, get_preset
from serving.weights import WeightFormat, matrix_bytes, stored_weights

L4 = CARDS["l4"].total_gib


@pytest.mark.parametrize(
    "layers, pp, parts",
    [(80, 3, (27, 27, 26)), (32, 5, (6, 6, 7, 7, 6)), (10, 4, (2, 3, 3, 2)), (32, 4, (8, 8, 8, 8)), (5, 1, (5,))],
)
def test_default_partition_adds_the_remainder_from_the_second_to_last_stage_backwards(layers, pp, parts):
    assert pipeline.default_partition(layers, pp) == parts


def test_a_given_partition_must_sum_to_the_layers_and_name_one_count_per_stage():
    assert pipeline.partition(32, 3, (10, 10, 12)) == (10, 10, 12)
    with pytest.raises(ConfigError, match="sum to the model's 32 layers, got 30") as e:
        pipeline.partition(32, 3, (10, 10, 10))
    assert e.value.field == "pp_layer_partition"
    with pytest.raises(ConfigError, match="must give 3 layer counts"):
        pipeline.partition(32, 3, (16, 16))
    with pytest.raises(ConfigError, match="pipeline_parallel_size"):
        pipeline.partition(32, 33)


def test_stage_parameters_add_up_to_the_model_with_a_tied_head_copied_on_the_last_stage():
    untied = get_preset("llama-3-8b").arch
    fit = pipeline.pipeline_fit(untied, 79.22, pp=4)
    assert sum(s.params for s in fit.stages) == count_parameters(untied).total
    assert [s.embeddings for s in fit.stages] == [True, False, False, False]
    assert [s.head for s in fit.stages] == [False, False, False, True]
    tied = get_preset("llama-3.2-1b").arch
    fit = pipeline.pipeline_fit(tied, 79.22, pp=2)
    embedding = tied.vocab_size * tied.d_model
    assert sum(s.params for s in fit.stages) == count_parameters(tied).total + embedding


def test_quantised_stage_bytes_add_up_to_the_checkpoint():
    a = get_preset("llama-3-8b").arch
    for f in (WeightFormat("bf16", "awq", 4, 128), WeightFormat("bf16", "nvfp4", 4, 16)):
        fit = pipeline.pipeline_fit(a, 79.22, pp=3, weights=f)
        assert sum(s.stored_bytes for s in fit.stages) == stored_weights(a, f).bytes


def test_every_worker_keeps_the_fewest_blocks_and_the_heavy_end_stages_set_it():
    a = get_preset("llama-3-70b").arch
    s = engine.EngineSettings(max_model_len=4096)
    fit = pipeline.pipeline_fit(a, L4, s, pp=8, gpu="l4")
    blocks = [st.fit.num_blocks for st in fit.stages]
    assert fit.num_blocks == min(blocks)
    assert fit.bottleneck in (0, 7)  # the embeddings' stage or the head's (and sampler's)
    assert min(blocks[1:7]) > 1.5 * fit.num_blocks  # the middle stages would hold far more
    # moving a layer off each end stage to the middle raises every worker's blocks
    moved = pipeline.pipeline_fit(a, L4, s, pp=8, layer_partition=(9, 10, 10, 11, 11, 10, 10, 9), gpu="l4")
    assert moved.num_blocks > fit.num_blocks
    assert fit.tokens == fit.num_blocks * 16 and fit.concurrency == pytest.approx(fit.num_blocks / 256)


def test_one_stage_is_the_engine_fit_and_only_the_last_stage_samples():
    a = get_preset("llama-3-8b").arch
    s = engine.EngineSettings(max_model_len=8192)
    one = pipeline.pipeline_fit(a, 39.5, s, pp=1, gpu="a100-40gb")
    assert one.num_blocks == engine.engine_fit(a, 39.5, s, gpu="a100-40gb").num_blocks
    two = pipeline.pipeline_fit(a, 39.5, s, pp=2, gpu="a100-40gb")
    first, last = (st.fit.activation_parts for st in two.stages)
    assert first["sampler"] == 0 and last["sampler"] > 0


def test_a_stage_counts_the_kinds_of_the_layers_it_holds():
    gemma = get_preset("gemma-3-1b")  # 26 layers, a global one closing each group of six
    a = pipeline.with_pattern(gemma.arch, gemma.model.layer_kinds)
    fit = pipeline.pipeline_fit(a, 22.05, pp=2)
    assert [st.kinds for st in fit.stages] == [{"full": 2, "sliding": 11}, {"full": 2, "sliding": 11}]
    fit = pipeline.pipeline_fit(a, 22.05, pp=2, layer_partition=(12, 14))
    assert [st.kinds for st in fit.stages] == [{"full": 2, "sliding": 10}, {"full": 2, "sliding": 12}]
    g2 = get_preset("gemma-2-9b").arch  # counts only: alternation assumed, a full layer closing each pair
    assert pipeline.layer_kinds(g2)[:4] == ("sliding", "full", "sliding", "full")


def test_the_json_lists_each_stage_with_its_layers_weights_and_blocks():
    out = pipeline.pipeline_fit(get_preset("llama-3-8b").arch, 22.05, pp=2).to_dict()
    stages = out["pipeline_stages"]
    assert [st["layers"] for st in stages] == [[0, 16], [16, 32]]
    assert all(st["weights_bytes"] > 0 and st["num_blocks"] >= out["num_blocks"] for st in stages)


def test_a_logged_weights_figure_is_refused_with_stages():
    s = engine.EngineSettings(weights_gib=10.0)
    with pytest.raises(ConfigError, match="one worker's figure") as e:
        pipeline.pipeline_fit(get_preset("llama-3-8b").arch, 22.05, s, pp=2)
    assert e.value.field == "weights_gib"


# --- NVFP4 -------------------------------------------------------------------


def test_nvfp4_cache_page_is_vllms_packed_head():
    """vLLM's nvfp4 cache packs each head vector as head_size/2 bytes of E2M1 and head_size/16 FP8 scales: at
    head_size 128, 8 KV heads, blocks of 16 a page is 18,432 bytes against 65,536 in bf16 (the figures vLLM's NVFP4
    KV-cache pull request gives)."""
    a = get_preset("llama-3-8b").arch
    s = engine.EngineSettings(kv_cache_dtype="nvfp4")
    fit = engine.engine_fit(a, 79.22, s)
    assert fit.page_bytes == 18_432
    assert engine.engine_fit(a, 79.22).page_bytes == 65_536
    with pytest.raises(ConfigError, match="nvfp4 needs the V1 engine"):
        engine.engine_fit(a, 79.22, replace(s, version="v0"))
    with pytest.raises(ConfigError, match="latent attention"):
        engine.engine_fit(get_preset("deepseek-v2-lite").arch, 79.22, s)


def test_nvfp4_stores_four_bits_and_an_fp8_scale_per_16():
    c = kv_cache(n_layers=32, kv_heads=8, head_dim=128, context=1024, dtype="nvfp4")
    assert c.bits_per_element == pytest.approx(4.5)
    f = WeightFormat("bf16", "nvfp4", 4, 16)
    assert matrix_bytes(4096, 4096, f) == 4096 * 2048 + 4096 * 256 + 8  # + weight_scale_2 and input_scale (FP32)
    a = get_preset("llama-3-8b").arch
    nv, awq = stored_weights(a, f).bytes, stored_weights(a, WeightFormat("bf16", "awq", 4, 128)).bytes
    assert 0.5 * stored_weights(a, WeightFormat("bf16")).bytes > nv > awq  # a byte per 16 against 4 per 128


def test_a_hybrid_stage_keeps_its_own_state_layers_and_mixer():
    """A Qwen3-Next-like pattern, three Gated DeltaNet layers for each full one: a stage holding only a full layer
    has no state mixer; the others count their own kinds."""
    from serving.decoder import Decoder
    from serving.state import StateMixer

    mixer = StateMixer("gated_deltanet", conv_kernel=4, heads=32, head_dim=128, k_heads=16, k_head_dim=128)
    kinds = ("state", "state", "state", "full") * 12
    a = Decoder(2048, 48, 16, 151_936, 5120, n_kv_heads=2, head_dim=256, ffn="swiglu", bias="none",
                norm="rmsnorm", position="rope", tied_embeddings=False, layer_kinds=kinds, mixer=mixer)  # fmt: skip
    assert pipeline.stage_model(a, 3, 4).mixer is None and pipeline.stage_model(a, 3, 4).layer_kinds == ("full",)
    first = pipeline.stage_model(a, 0, 10)
    assert first.mixer == mixer and first.layer_kinds.count("state") == 8
    assert [pipeline.layer_kinds(pipeline.stage_model(a, s, e)).count("full") for s, e in ((0, 24), (24, 48))] == [6, 6]
