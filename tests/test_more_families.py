"""Families read by formula beyond the presets': OLMoE, Phi-3.5-MoE, StarCoder2, Falcon (parallel attention and
multi-query), Granite, Command-R. Each config.json in tests/configs/ holds the released file's fields that the
count reads (Phi-3.5-MoE's rope_scaling without its long and short factor lists, which change no count); each
total is worked out by hand below from those fields, independently of parameters.py, and lands on the total the
Hub shows for the model's safetensors (rounded there to three figures) or its card states."""

from __future__ import annotations

from pathlib import Path

import pytest

from attncore.config import ConfigError
from serving.hf_config import from_dict, read_config
from serving.parameters import count_parameters

CONFIGS = Path(__file__).resolve().parent / "configs"


def read(name: str):
    return read_config((CONFIGS / f"{name}.json").read_bytes())


# name: (the count by hand, the Hub's safetensors figure for the repository, its source)
TOTALS = {
    # 16 layers × (q, k, v, o 4 · 2048² + q/k norms 2 · 2048 + 2 norms · 2048 + 64 experts × 3 · 2048 · 1024 + router
    # 2048 · 64) + embedding and head 2 · 50304 · 2048 + final norm 2048
    "olmoe-1b-7b-0924": (16 * (4 * 2048**2 + 4 * 2048 + 64 * 3 * 2048 * 1024 + 2048 * 64) + 2 * 50304 * 2048 + 2048,
                         "6.92B", "allenai/OLMoE-1B-7B-0924 (paper: 6.9B total, 1.3B active)"),
    # 32 layers × (q, o 4096² + 4096 each; k, v 4096 · 1024 + 1024 each; 16 experts × 3 · 4096 · 6400; router
    # 4096 · 16; 2 LayerNorms 2 · 2 · 4096) + embedding and head 2 · 32064 · 4096 + head bias 32064 + final LayerNorm
    "phi-3.5-moe-instruct": (32 * (2 * (4096**2 + 4096) + 2 * (4096 * 1024 + 1024) + 16 * 3 * 4096 * 6400
                                   + 4096 * 16 + 4 * 4096) + 2 * 32064 * 4096 + 32064 + 2 * 4096,
                             "41.9B", "microsoft/Phi-3.5-MoE-instruct (model card: 42B total, 6.6B active)"),
    # 30 layers × (q, o 3072² + 3072; k, v 3072 · 256 + 256; FFN 2 · 3072 · 12288 + 12288 + 3072; 2 LayerNorms) +
    # tied embedding 49152 · 3072 + final LayerNorm
    "starcoder2-3b": (30 * (2 * (3072**2 + 3072) + 2 * (3072 * 256 + 256) + 2 * 3072 * 12288 + 12288 + 3072
                            + 4 * 3072) + 49152 * 3072 + 2 * 3072, "3.03B", "bigcode/starcoder2-3b"),
    "starcoder2-7b": (32 * (2 * (4608**2 + 4608) + 2 * (4608 * 512 + 512) + 2 * 4608 * 18432 + 18432 + 4608
                            + 4 * 4608) + 49152 * 4608 + 2 * 4608, "7.17B", "bigcode/starcoder2-7b"),
    # 32 layers × (fused q/k/v 4544 · (4544 + 2 · 64), dense 4544², FFN 2 · 4544 · 18176, one LayerNorm 2 · 4544) +
    # tied embedding 65024 · 4544 + final LayerNorm
    "falcon-7b": (32 * (4544 * (4544 + 128) + 4544**2 + 2 * 4544 * 18176 + 2 * 4544) + 65024 * 4544 + 2 * 4544,
                  "6.92B", "tiiuae/falcon-7b"),
    # 40 layers × (q, o 4096²; k, v 4096 · 1024; SwiGLU 3 · 4096 · 12800; 2 RMSNorms) + tied embedding + final norm
    "granite-3.0-8b-base": (40 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 12800 + 2 * 4096) + 49155 * 4096 + 4096,
                            "8.17B", "ibm-granite/granite-3.0-8b-base"),
    # 40 layers × (q, k, v, o 4 · 8192²; SwiGLU 3 · 8192 · 22528; one norm 8192) + tied embedding 256000 · 8192 + norm
    "c4ai-command-r-v01": (40 * (4 * 8192**2 + 3 * 8192 * 22528 + 8192) + 256000 * 8192 + 8192, "35B",
                           "CohereForAI/c4ai-command-r-v01 (model card: 35 billion parameters)"),
}  # fmt: skip


@pytest.mark.parametrize("name", TOTALS)
def test_each_family_lands_on_its_published_total(name):
    by_hand, shown, source = TOTALS[name]
    total = count_parameters(read(name).arch).total
    assert total == by_hand, source
    assert f"{total / 1e9:.3g}B" == shown, f"the Hub shows {shown} for {source}"


def test_active_counts_of_the_mixtures_match_their_cards():
    assert f"{count_parameters(read('phi-3.5-moe-instruct').arch).active / 1e9:.1f}" == "6.6"
    assert f"{count_parameters(read('olmoe-1b-7b-0924').arch).active / 1e9:.1f}" == "1.3"


def test_what_each_family_fixes():
    falcon = read("falcon-7b").arch
    assert (falcon.kv_heads, falcon.norm_placement, falcon.ffn, falcon.bias) == (1, "parallel", "gelu", "none")
    phimoe = read("phi-3.5-moe-instruct")
    assert phimoe.arch.head_bias and phimoe.arch.bias == "attention" and phimoe.arch.norm == "layernorm"
    assert read("olmoe-1b-7b-0924").arch.qk_norm == "projection" and read("starcoder2-3b").arch.bias == "all"
    assert read("starcoder2-3b").pattern() == "every layer a sliding window of 4,096"
    cohere = read("c4ai-command-r-v01").arch
    assert (cohere.norm_placement, cohere.tied_embeddings, cohere.qk_norm) == ("parallel", True, "none")


def test_falcons_new_architecture_has_kv_groups_and_two_norms():
    """Falcon 40B's shape (new_decoder_architecture, num_kv_heads 8): fused q/k/v of 8192 + 2 · 8 · 64, two
    LayerNorms a layer (ln_attn, ln_mlp)."""
    data = {"model_type": "falcon", "hidden_size": 8192, "num_attention_heads": 128, "num_hidden_layers": 60,
            "new_decoder_architecture": True, "num_kv_heads": 8, "vocab_size": 65024}  # fmt: skip
    arch = from_dict(data).arch
    block = 8192 * (8192 + 2 * 8 * 64) + 8192**2 + 2 * 8192 * 32768 + 2 * 2 * 8192
    assert (arch.kv_heads, arch.norm_placement) == (8, "pre")
    assert count_parameters(arch).total == 60 * block + 65024 * 8192 + 2 * 8192


def test_the_refusal_lists_every_field_a_faithful_count_needs_and_the_modern_flags():
    with pytest.raises(ConfigError) as e:
        from_dict({"model_type": "rwkv", "hidden_size": 4096})  # llama4_text and jamba, the examples before, are read
    for needed in ("num_key_value_heads", "head_dim", "tie_word_embeddings", "FFN, norms, biases, experts,"
                   " windows", "--ffn swiglu --norm rmsnorm --bias none --position rope --no-tied-embeddings "
                   "--no-head-bias"):  # fmt: skip
        assert needed in e.value.message
    for needed in ("positions", "q/k norms", "MLA", "sinks"):  # with biases and norms, the rest a count reads
        assert needed in e.value.message
