"""Llama 4 (text model) by formula: interleaved MoE layers with a shared expert, dense layers of
intermediate_size_mlp, chunked local attention on the RoPE layers and global NoPE layers.

tests/configs/llama-4-scout-17b-16e-instruct.json and llama-4-maverick-17b-128e-instruct.json hold the released
config.json files of meta-llama/Llama-4-Scout-17B-16E-Instruct and meta-llama/Llama-4-Maverick-17B-128E-Instruct
(the multimodal Llama4ForConditionalGeneration, its language model in text_config beside a vision_config), as
public copies give them; they leave no_rope_layers and moe_layers to transformers' Llama4TextConfig, which derives
them from no_rope_layer_interval (4) and interleave_moe_layer_step (1 and 2). Scout's base checkpoint
(Llama-4-Scout-17B-16E) has the same tensors as the Instruct one.

Published figures: Meta's model cards give Scout 17B active / 109B total (16 experts) and Maverick 17B active /
400B total (128 experts), text and vision together. The Hub's safetensors metadata (its API's
safetensors.parameters, BF16) gives Scout-17B-16E-Instruct 108,641,793,536 and Maverick-17B-128E-Instruct
401,583,781,376, both quoted in public repositories; each is the text model counted here plus the same vision
tower and projector, 871,932,416 (34 ViT layers of width 1408 with biases and LayerNorms, its patch, class and
position embeddings, the vision adapter and the projector, counted by hand below from the vision_config).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_hub import checkpoint_of, serve

from attncore.config import ConfigError
from cli.main import main
from serving import engine, kvcache
from serving.hf_config import from_dict, read_config
from serving.parameters import count_parameters

CONFIGS = Path(__file__).resolve().parent / "configs"
SCOUT, MAVERICK = "llama-4-scout-17b-16e-instruct", "llama-4-maverick-17b-128e-instruct"


def read(name: str):
    return read_config((CONFIGS / f"{name}.json").read_bytes())


def data(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


D, L, V = 5120, 48, 202048
ATTENTION = 2 * D * D + 2 * D * 8 * 128  # q and o 40 heads × 128 = 5120; k and v 8 KV heads × 128; no biases
SWIGLU = 3 * D * 8192  # one expert, the shared expert: gate, up, down of intermediate_size 8192
DENSE = 3 * D * 16384  # a dense layer's FFN of intermediate_size_mlp
NORMS = 2 * D  # two RMSNorms a layer; use_qk_norm is an L2 norm without parameters
OUTSIDE = 2 * V * D + D  # embedding and untied head, the final norm


def moe(experts: int) -> int:
    return experts * SWIGLU + SWIGLU + D * experts  # routed experts, the shared one, a router without bias


SCOUT_TEXT = L * (ATTENTION + NORMS + moe(16)) + OUTSIDE  # every layer MoE (interleave_moe_layer_step 1)
MAVERICK_TEXT = L * (ATTENTION + NORMS) + 24 * DENSE + 24 * moe(128) + OUTSIDE  # every second layer MoE
# the vision tower: 34 layers of q, k, v, o (1408² + 1408 each), fc1 and fc2 (1408 · 5632 + bias each), two
# LayerNorms; class embedding, positions (577 · 1408), patch (588 · 1408), pre and post LayerNorms, the adapter
# (5632 · 4096, 4096 · 4096) and the projector to the text width (4096 · 5120)
VISION_LAYER = 4 * (1408**2 + 1408) + 2 * 1408 * 5632 + 5632 + 1408 + 4 * 1408
VISION = 34 * VISION_LAYER + 1408 + 577 * 1408 + 588 * 1408 + 4 * 1408 + 5632 * 4096 + 4096 * 4096 + 4096 * 5120
HUB = {SCOUT: 108_641_793_536, MAVERICK: 401_583_781_376}  # the Hub's safetensors metadata, BF16


def test_the_text_models_land_on_the_hubs_counts_less_the_vision_tower():
    assert VISION == 871_932_416
    for name, by_hand in ((SCOUT, SCOUT_TEXT), (MAVERICK, MAVERICK_TEXT)):
        count = count_parameters(read(name).arch)
        assert count.total == by_hand == HUB[name] - VISION, name
    assert (SCOUT_TEXT, MAVERICK_TEXT) == (107_769_861_120, 400_711_848_960)


def test_the_cards_rounded_figures_active_and_total():
    scout, maverick = (count_parameters(read(n).arch) for n in (SCOUT, MAVERICK))
    assert f"{(scout.total + VISION) / 1e9:.0f}B" == "109B"  # the card's 109B, text and vision
    assert round((maverick.total + VISION) / 1e11) * 100 == 400  # the card's 400B: 401.6B to the hundred billion
    # a token uses one routed expert and the shared one in each MoE layer
    assert scout.active == scout.total - 15 * SWIGLU * 48 and round(scout.active / 1e9) == 17
    assert maverick.active == maverick.total - 127 * SWIGLU * 24 and round(maverick.active / 1e9) == 17


def test_what_the_file_says_and_what_it_does_not_count():
    scout = read(SCOUT)
    assert (scout.model_type, scout.wrapper) == ("llama4_text", "llama4")
    assert scout.layer_kinds == ("chunked", "chunked", "chunked", "full") * 12
    assert scout.pattern() == "36 chunked-attention layers (8,192) and 12 full: C C C F repeated"
    assert any("vision tower and its projector are not counted" in n for n in scout.notes)
    assert any("L2 norm" in n and "without parameters" in n for n in scout.notes)
    arch = scout.arch
    assert (arch.window_kind, arch.sliding_window, arch.full_layers) == ("chunked", 8192, 12)
    assert (arch.n_experts, arch.n_shared_experts, arch.moe_d_ff, arch.d_ff) == (16, 1, 8192, 16384)
    assert not arch.router_bias and arch.qk_norm == "none" and not arch.tied_embeddings
    assert scout.limit.tokens == 10_485_760  # rope_type llama3 already counts its factor
    maverick = read(MAVERICK)
    assert maverick.arch.n_dense_layers == 24 and any("interleaved" in n for n in maverick.notes)


def test_the_text_config_alone_and_the_explicit_lists():
    text = data(MAVERICK)["text_config"]
    alone = from_dict(text)
    assert count_parameters(alone.arch).total == MAVERICK_TEXT and alone.wrapper is None
    listed = text | {"moe_layers": list(range(1, 48, 2)), "no_rope_layers": [1, 1, 1, 0] * 12}
    assert from_dict(listed).arch == alone.arch
    nope_every_other = from_dict(text | {"no_rope_layers": [1, 0] * 24})
    assert nope_every_other.layer_kinds == ("chunked", "full") * 24
    assert from_dict(text | {"layer_types": ["full_attention"] * 48}).arch.sliding_window is None
    assert from_dict(text | {"attention_chunk_size": None}).layer_kinds == ("full",) * 48
    all_dense = from_dict(text | {"moe_layers": []}).arch
    assert all_dense.n_experts == 0 and count_parameters(all_dense).total == L * (ATTENTION + NORMS + DENSE) + OUTSIDE


@pytest.mark.parametrize(
    "change, field",
    [({"no_rope_layers": [1, 0]}, "text_config.no_rope_layers"), ({"no_rope_layers": [2] * 48},
     "text_config.no_rope_layers"), ({"moe_layers": [0, 0]}, "text_config.moe_layers"),
     ({"moe_layers": [48]}, "text_config.moe_layers"), ({"interleave_moe_layer_step": 0},
     "text_config.interleave_moe_layer_step"), ({"attention_chunk_size": 0}, "text_config.attention_chunk_size")],
)  # fmt: skip
def test_a_pattern_it_cannot_read_is_refused_naming_the_field(change, field):
    wrapped = data(SCOUT)
    wrapped["text_config"] |= change
    with pytest.raises(ConfigError) as e:
        from_dict(wrapped)
    assert e.value.field == field


def test_the_chunked_layers_cache_at_most_a_chunk_at_long_contexts(capsys):
    arch = read(SCOUT).arch
    per_layer_token = 2 * 8 * 128 * 2  # keys and values, 8 KV heads of 128, bf16
    for context in (4096, 8192, 131_072, 10_485_760):
        cache = kvcache.kv_cache_for(arch, context, dtype="bf16")
        assert cache.bytes == per_layer_token * (12 * context + 36 * min(context, 8192))
    rows = {r["kind"]: r for r in kvcache.kv_cache_for(arch, 131_072, dtype="bf16").by_kind()}
    assert set(rows) == {"full", "chunked"} and rows["chunked"]["tokens_per_layer"] == 8192
    assert rows["full"]["tokens_per_layer"] == 131_072 and rows["chunked"]["layers"] == 36
    argv = ["kv-cache", "--config", str(CONFIGS / f"{SCOUT}.json"), "--context", "1048576"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["window_kind"] == "chunked" and out["bytes"] == per_layer_token * (12 * 1_048_576 + 36 * 8192)
    assert [(k["kind"], k["layers"], k["tokens_per_layer"]) for k in out["by_kind"]] == [
        ("full", 12, 1_048_576), ("chunked", 36, 8192)]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "chunks of 8,192 on 36 layers" in text and "sliding" not in text.split("KV cache")[0].split("GB)")[-1]


def test_the_engine_pages_chunked_layers_as_vllm_does():
    """vLLM V1 disables its hybrid KV-cache manager for chunked local attention unless
    VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 (vllm/config/vllm.py), and then sizes a chunked layer's
    request at cdiv(min(chunk + max_num_batched_tokens, max_model_len), block_size) blocks
    (ChunkedLocalAttentionSpec). A published deployment note (Llama-4-Scout-17B-16E-Instruct, vLLM 0.12, 8x H200,
    tensor parallel 8, the variable set, max_model_len 8,388,608) logs 'Available KV cache memory: 89.71 GiB',
    'GPU KV cache size: 3,919,664 tokens' and 1.86x; at 5,242,880, 2.96x with the variable and 0.75x without."""
    arch = read(SCOUT).arch

    def fit(length, hybrid):
        s = engine.EngineSettings(max_model_len=length, tensor_parallel_size=8, kv_cache_memory_gib=89.71,
                                  allow_chunked_hybrid=hybrid)  # fmt: skip
        return engine.engine_fit(arch, 139.81, s, gpu="h200")

    on = fit(8_388_608, True)
    assert on.groups == (("full", 1), ("chunked", 3)) and on.group_size == 12 and not on.paging_note
    assert abs(on.tokens / 3_919_664 - 1) < 1e-4  # the logged GiB is rounded to 0.01
    assert f"{on.concurrency:.2f}" == "1.86" and f"{fit(5_242_880, True).concurrency:.2f}" == "2.96"
    off = fit(5_242_880, False)
    assert off.groups == (("full", 1),) and off.group_size == 48 and "VLLM_ALLOW_CHUNKED_LOCAL_ATTN" in off.paging_note
    assert f"{off.concurrency:.2f}" == "0.75"


def test_by_its_hub_id_the_difference_is_the_vision_tower(monkeypatch, tmp_path, capsys):
    from fake_hub import FakeHub

    arch = read(SCOUT).arch
    vision = {"vision_model.model.layers": ("BF16", (34, VISION_LAYER)),
              "vision_model.vision_adapter.rest": ("BF16", (VISION - 34 * VISION_LAYER - 4096 * 5120,)),
              "multi_modal_projector.linear_1.weight": ("BF16", (4096, 5120))}  # fmt: skip
    hub = FakeHub()
    hub.add("meta-llama/Llama-4-Scout-17B-16E-Instruct", data(SCOUT), checkpoint_of(arch, shards=3, extra=vision))
    server, url = serve(hub)
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    try:
        assert main(["params", "--model", "meta-llama/Llama-4-Scout-17B-16E-Instruct", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["checkpoint_total"] == HUB[SCOUT] and out["total"] == SCOUT_TEXT
        assert main(["params", "--model", "meta-llama/Llama-4-Scout-17B-16E-Instruct"]) == 0
        text = capsys.readouterr().out
    finally:
        server.shutdown()
    assert "the checkpoint holds +871,932,416" in text and "which explains all of it" in text
    assert "vision_model.model.* 809,467,648" in text and "multi_modal_projector.linear_1.* 20,971,520" in text


def test_an_architecture_without_a_formula_caches_its_chunked_layers_by_the_chunk():
    """Read for its attention fields alone (hf_generic.py): layer_types' chunked_attention with attention_chunk_size."""
    from serving import hf_generic

    types = ["chunked_attention"] * 3 + ["full_attention"]
    base = {"model_type": "newchunked", "hidden_size": 2048, "num_hidden_layers": 8, "num_attention_heads": 16,
            "num_key_value_heads": 4, "attention_chunk_size": 1024, "layer_types": types * 2}  # fmt: skip
    model = hf_generic.read_attention(base)
    assert model.pattern() == "6 chunked-attention layers (1,024) and 2 full: C C C F repeated"
    cache = kvcache.kv_cache_for(model.arch, 8192, weight_params=1)
    assert [(r["kind"], r["layers"], r["tokens_per_layer"]) for r in cache.by_kind()] == [
        ("full", 2, 8192), ("chunked", 6, 1024)]  # fmt: skip
    with pytest.raises(ConfigError, match="attention_chunk_size"):
        hf_generic.read_attention(base | {"attention_chunk_size": None, "sliding_window": 512})


@pytest.mark.slow  # AppTests of the pages
def test_the_pages_read_llama4_and_say_chunked_and_a_link_keeps_it():
    from apptest_helpers import page, texts

    def paste(at, prefix):
        at.text_area(key=f"{prefix}file_text").input((CONFIGS / f"{SCOUT}.json").read_text())
        at = at.button(key=f"{prefix}file_read").click().run()
        assert not at.exception, [e.message for e in at.exception]
        return at

    at = paste(page("parameters"), "par_")
    assert next(m.value for m in at.metric if m.label.startswith("Total parameters")) == f"{SCOUT_TEXT:,}"
    assert "36 chunked-attention layers (8,192) and 12 full" in texts(at.success)
    query = dict(at.query_params.items())
    assert query["par_window_kind"] == "chunked"
    again = page("parameters", **query)  # a new session: the fields from the link, not the file
    assert "36 chunked-attention layers (8,192) and 12 full" in texts(again.info)
    kv = paste(page("kv_cache", kv_context="131072"), "kv_")
    assert "the 36 chunked-attention layers keep 8,192 tokens each, the 12 full ones all 131,072" in texts(kv.caption)
    engine = page("kv_cache", **dict(kv.query_params.items()), kv_mode="vllm", kv_e_gpu="h200", kv_e_tp="8")
    assert "paged as full ones" in texts(engine.caption)
    hybrid = page("kv_cache", **dict(kv.query_params.items()), kv_mode="vllm", kv_e_gpu="h200", kv_e_tp="8",
                  kv_e_chunked="true")  # fmt: skip
    assert not hybrid.exception and "paged as full ones" not in texts(hybrid.caption)
