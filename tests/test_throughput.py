"""The decode-throughput bound (serving/throughput.py): tokens/s <= batch x bandwidth / bytes read per step."""

import pytest

from attncore.checks import ConfigError
from serving.kvcache import kv_cache_for
from serving.parameters import count_parameters
from serving.presets import CARDS, get_preset
from serving.throughput import decode_bound
from serving.weights import WeightFormat, stored_weights

LLAMA = get_preset("llama-3-8b").arch


def test_the_bound_is_bandwidth_over_the_weights_a_token_reads_and_the_cache():
    """Worked by hand: Llama 3 8B in bf16 reads every weight but the embedding table (one row a token) and its
    cache of batch x context tokens."""
    embedding = LLAMA.vocab_size * LLAMA.d_model
    weights = 2 * (count_parameters(LLAMA).total - embedding)
    cache = kv_cache_for(LLAMA, 4096, 8, "bf16", weight_params=0).bytes
    b = decode_bound(LLAMA, 3350, context=4096, batch=8)
    assert (b.weights_bytes, b.kv_bytes, b.state_bytes) == (weights, cache, 0)
    assert b.tokens_per_s == pytest.approx(8 * 3350e9 / (weights + cache))
    assert b.kinds["tokens_per_s"] == "bound" and b.efficient_tokens_per_s is None


def test_the_bound_rises_with_the_batch_falls_with_the_context_and_tp_splits_the_reads():
    one, many = (decode_bound(LLAMA, 3350, context=2048, batch=n).tokens_per_s for n in (1, 64))
    assert 10 < many / one < 64  # the weights are shared by the batch, the cache is not
    short, long = (decode_bound(LLAMA, 3350, context=t, batch=32).tokens_per_s for t in (512, 32768))
    assert short > 2 * long
    tp1, tp2 = (decode_bound(LLAMA, 3350, context=1024, batch=4, tp=tp) for tp in (1, 2))
    assert tp2.step_bytes == pytest.approx(tp1.step_bytes / 2, rel=1e-6)


def test_moe_reads_its_active_experts_only():
    mixtral = get_preset("mixtral-8x7b").arch  # 46.7B in all, 12.9B a token (2 of 8 experts)
    b = decode_bound(mixtral, 3350, context=1, batch=1)
    c = count_parameters(mixtral)
    embedding = mixtral.vocab_size * mixtral.d_model
    assert b.weights_bytes == 2 * (c.active - embedding)
    assert b.spread_tokens_per_s is None  # one token: its two experts
    spread = decode_bound(mixtral, 3350, context=1, batch=8)  # 16 choices: up to all 8 experts read
    assert spread.spread_tokens_per_s < spread.tokens_per_s


def test_a_quantised_checkpoint_reads_fewer_bytes_and_efficiency_scales_the_bound():
    f = WeightFormat("bf16", "nvfp4", 4, 16)
    b16, b4 = decode_bound(LLAMA, 300, context=1, batch=1), decode_bound(LLAMA, 300, context=1, batch=1, weights=f)
    assert b4.weights_bytes < stored_weights(LLAMA, f).bytes < b16.weights_bytes
    assert b4.tokens_per_s > 2.5 * b16.tokens_per_s
    e = decode_bound(LLAMA, CARDS["l4"].bandwidth_gbs, context=1, batch=1, efficiency=0.6)
    assert e.efficient_tokens_per_s == pytest.approx(0.6 * e.tokens_per_s)
    assert "measured" in e.kinds["efficient_tokens_per_s"]


def test_pipeline_stages_run_micro_batches_and_the_slowest_stage_sets_the_pace():
    one = decode_bound(LLAMA, 3350, context=1024, batch=8)
    two = decode_bound(LLAMA, 3350, context=1024, batch=8, pp=2)
    assert two.micro_batch == 4
    assert one.step_bytes / 2 < two.step_bytes < one.step_bytes  # the head's stage reads a little more than half


@pytest.mark.parametrize("value", [0, 1.5, -0.2, float("nan"), True, "0.6"])
def test_an_efficiency_outside_0_to_1_is_refused_naming_the_field(value):
    with pytest.raises(ConfigError) as e:
        decode_bound(LLAMA, 3350, context=1, efficiency=value)
    assert e.value.field == "efficiency"


def test_every_card_has_a_datasheet_bandwidth():
    for card in CARDS.values():
        assert card.bandwidth_gbs > 100 and ("datasheet" in card.bandwidth_source or "specifications" in
                                             card.bandwidth_source)  # fmt: skip
        assert "GB/s" in card.bandwidth_source or "TB/s" in card.bandwidth_source


def test_a_hybrid_reads_its_state_layers_state_and_its_attention_layers_cache():
    from serving.decoder import Decoder
    from serving.state import StateMixer, elements

    mixer = StateMixer("gated_deltanet", conv_kernel=4, heads=32, head_dim=128, k_heads=16, k_head_dim=128)
    kinds = ("state", "state", "state", "full") * 12
    a = Decoder(2048, 48, 16, 151_936, 5120, n_kv_heads=2, head_dim=256, ffn="swiglu", bias="none",
                norm="rmsnorm", position="rope", tied_embeddings=False, layer_kinds=kinds, mixer=mixer)  # fmt: skip
    b = decode_bound(a, 3350, context=4096, batch=4)
    per_sequence = sum(elements(s) for s in mixer.shapes()) * 2  # bf16 conv (3 x 8,192) and temporal (32x128x128)
    assert b.state_bytes == 4 * 36 * per_sequence
    assert b.kv_bytes == 2 * 12 * 2 * 256 * 4096 * 4 * 2  # K and V, 12 full layers, 2 heads of 256, bf16
