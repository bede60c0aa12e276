"""Hybrid models read exactly: each family's shipped config.json parses, its layer kinds follow the family's own rule
(as transformers' configuration class derives them), its parameter total is transformers' own count, its state per
sequence is vLLM's MambaStateShapeCalculator's at tensor-parallel 1 and 2, Infinity is read where transformers writes
it and refused elsewhere, and a hostile file is one line with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from attncore.checks import ConfigError
from cli.main import main
from serving import hf_config
from serving.kvcache import fit, kv_cache_for
from serving.parameters import count_parameters, param_inventory
from serving.presets import CONFIGS, PRESETS
from serving.state import StateMixer, cache_layers, state_bytes, state_dtypes

REPO = Path(__file__).resolve().parents[1]

# Each total is transformers 5.25's AutoModelForCausalLM.from_config on the meta device, built from the shipped file
# (test_totals_against_transformers repeats it where transformers is installed); beside it the total the model's
# card or Hugging Face page rounds to, and which count it rounds (the name's "48B" of Kimi Linear is without its
# embedding and head, 0.755B).
TOTALS = {  # name: (transformers' count, the card's figure, in units of, which count it rounds)
    "qwen3-next-80b-a3b": (79_674_391_296, 80, 1e9, "total"),  # Qwen3-Next-80B-A3B model card: 80B total
    "qwen3.5-35b-a3b": (34_660_610_688, 35, 1e9, "total"),  # Qwen3.5-35B-A3B: 35B total
    "nemotron-h-8b-base-8k": (8_100_852_736, 8, 1e9, "total"),  # Nemotron-H-8B-Base-8K: 8B
    "jamba-v0.1": (51_570_323_328, 52, 1e9, "total"),  # AI21's Jamba announcement: 52B total (HF page: 51.6B)
    "falcon-h1-tiny-90m": (91_131_072, 9, 1e7, "total"),  # Falcon-H1-Tiny-90M: 90M
    "granite-4.0-h-tiny": (6_939_037_248, 7, 1e9, "total"),  # IBM Granite 4.0 H Tiny: 7B total
    "lfm2-350m": (354_483_968, 35, 1e7, "total"),  # LFM2-350M: 350M
    "kimi-linear-48b-a3b": (49_133_074_464, 48, 1e9, "non_embedding"),  # Kimi-Linear-48B-A3B: 48B
}
HYBRIDS = list(TOTALS)


def read(name: str):
    return hf_config.read_config((CONFIGS / f"{name}.json").read_bytes())


@pytest.mark.parametrize("name", HYBRIDS)
def test_each_family_parses_and_counts_transformers_total(name):
    model = read(name)
    count = count_parameters(model.arch)
    total, card, unit, which = TOTALS[name]
    assert count.total == total == PRESETS[name].published
    figure = count.total if which == "total" else count.non_embedding
    assert round(figure / unit) == card, (name, figure)
    assert count.breakdown["mixer"] > 0 and count.breakdown["attention"] > 0
    assert sum(t.size for t in param_inventory(model.arch)) == count.total  # the layer-by-layer inventory agrees


def test_totals_against_transformers():
    """The independent count, where transformers is installed (its configuration classes and modeling files)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    for name in HYBRIDS:
        data = json.loads((CONFIGS / f"{name}.json").read_text())
        text = data.get("text_config", data)
        cfg = transformers.AutoConfig.for_model(**text)
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(cfg)
        assert sum(p.numel() for p in model.parameters()) == TOTALS[name][0], name


NEMOTRON_PATTERN = json.loads((CONFIGS / "nemotron-h-8b-base-8k.json").read_text())["hybrid_override_pattern"]
# each family's other options on a shipped file, with transformers 5.25's from_config count of the changed file
VARIANTS = {
    "nemotron MoE layers": ("nemotron-h-8b-base-8k", {"hybrid_override_pattern": NEMOTRON_PATTERN.replace("-", "E", 20),
                            "n_routed_experts": 8, "moe_intermediate_size": 1024, "num_experts_per_tok": 2,
                            "moe_shared_expert_intermediate_size": 2048}, 6_256_014_336),
    "granite dense": ("granite-4.0-h-tiny", {"num_local_experts": 0}, 895_307_328),
    "falcon gated norm and biases": ("falcon-h1-tiny-90m", {"mamba_rms_norm": True, "mamba_proj_bias": True,
                                     "projectors_bias": True}, 91_202_304),
    "lfm2 conv bias": ("lfm2-350m", {"conv_bias": True}, 354_535_168),
    "qwen3-next dense first layers": ("qwen3-next-80b-a3b", {"mlp_only_layers": [0, 1]}, 76_507_687_680),
    "kimi mlp_layer_types first": ("kimi-linear-48b-a3b", {"first_k_dense_replace": 3}, 49_133_074_464),
    "kimi first_k_dense_replace": ("kimi-linear-48b-a3b", {"first_k_dense_replace": 3, "mlp_layer_types": None},
                                   45_621_262_368),
    "jamba one expert: dense": ("jamba-v0.1", {"num_experts": 1}, 9_290_690_432),
}  # fmt: skip


def variant(name: str) -> dict:
    base, change, _ = VARIANTS[name]
    data = json.loads((CONFIGS / f"{base}.json").read_text()) | change
    return {k: v for k, v in data.items() if v is not None}


@pytest.mark.parametrize("name", VARIANTS)
def test_each_familys_options_count_as_transformers(name):
    assert count_parameters(hf_config.from_dict(variant(name)).arch).total == VARIANTS[name][2]


def test_variants_against_transformers():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    for name in VARIANTS:
        with torch.device("meta"):
            model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**variant(name)))
        assert sum(p.numel() for p in model.parameters()) == VARIANTS[name][2], name


def test_active_parameters_match_the_cards():
    """Jamba: 12B active (AI21); Qwen3-Next: 3B activated, without embedding and head (3.25B)."""
    jamba = count_parameters(read("jamba-v0.1").arch)
    assert round(jamba.active / 1e9) == 12
    qwen = count_parameters(read("qwen3-next-80b-a3b").arch)
    embedding_and_head = 2 * 151_936 * 2048
    assert round((qwen.active - embedding_and_head) / 1e9) == 3


# --- layer kinds, each family's rule ---------------------------------------------------------------------------


def kinds(name):
    return read(name).layer_kinds


def test_layer_kinds_follow_each_familys_rule():
    # Qwen3-Next and Qwen3.5: full_attention_interval 4 -> layers 3, 7, 11, ... full
    assert kinds("qwen3-next-80b-a3b") == tuple("full" if (i + 1) % 4 == 0 else "state" for i in range(48))
    assert kinds("qwen3.5-35b-a3b") == tuple("full" if (i + 1) % 4 == 0 else "state" for i in range(40))
    # Jamba: attention where i % attn_layer_period (8) == attn_layer_offset (4)
    assert kinds("jamba-v0.1") == tuple("full" if i % 8 == 4 else "state" for i in range(32))
    # Nemotron-H: one kind per character of hybrid_override_pattern
    pattern = json.loads((CONFIGS / "nemotron-h-8b-base-8k.json").read_text())["hybrid_override_pattern"]
    assert kinds("nemotron-h-8b-base-8k") == tuple({"M": "state", "*": "full", "-": "ffn"}[c] for c in pattern)
    assert (pattern.count("M"), pattern.count("*"), pattern.count("-")) == (24, 4, 24)
    # Falcon-H1: attention and Mamba2 side by side in every layer
    assert kinds("falcon-h1-tiny-90m") == ("parallel",) * 24
    # Granite 4.0: layer_types as given
    types = json.loads((CONFIGS / "granite-4.0-h-tiny.json").read_text())["layer_types"]
    assert kinds("granite-4.0-h-tiny") == tuple("full" if t == "attention" else "state" for t in types)
    # LFM2: full_attn_idxs
    assert kinds("lfm2-350m") == tuple("full" if i in (2, 5, 8, 10, 12, 14) else "state" for i in range(16))
    # Kimi Linear without linear_attn_config: transformers' default, every fourth layer from the fifth full
    assert kinds("kimi-linear-48b-a3b") == tuple("full" if i and i % 4 == 0 else "state" for i in range(27))


def test_other_spellings_of_the_pattern():
    nemotron = json.loads((CONFIGS / "nemotron-h-8b-base-8k.json").read_text())
    listed = {k: v for k, v in nemotron.items() if k != "hybrid_override_pattern"} | {
        "layers_block_type": ["mamba" if c == "M" else "attention" if c == "*" else "mlp"
                              for c in nemotron["hybrid_override_pattern"]]}  # fmt: skip
    assert hf_config.from_dict(listed).layer_kinds == kinds("nemotron-h-8b-base-8k")
    listed.pop("num_hidden_layers")  # transformers 5 writes none: the list's length is the count
    assert hf_config.from_dict(listed).arch == read("nemotron-h-8b-base-8k").arch
    kimi = json.loads((CONFIGS / "kimi-linear-48b-a3b.json").read_text())
    kimi.pop("layer_types")
    kimi["linear_attn_config"] = {
        "full_attn_layers": [4, 8, 12, 16, 20, 24, 27],
        "head_dim": 128,
        "num_heads": 32,
        "short_conv_kernel_size": 4,
        "kda_layers": [i for i in range(1, 28) if i not in (4, 8, 12, 16, 20, 24, 27)],
    }
    read_kimi = hf_config.from_dict(kimi)
    assert [i for i, k in enumerate(read_kimi.layer_kinds) if k == "full"] == [3, 7, 11, 15, 19, 23, 26]
    qwen = json.loads((CONFIGS / "qwen3-next-80b-a3b.json").read_text())
    every_other = hf_config.from_dict(qwen | {"full_attention_interval": 2}).layer_kinds
    assert every_other == ("state", "full") * 24
    flat = json.loads((CONFIGS / "qwen3.5-35b-a3b.json").read_text())["text_config"] | {"model_type": "qwen3_5_moe"}
    assert hf_config.from_dict(flat).arch == read("qwen3.5-35b-a3b").arch  # a flat file reads as its text model


# --- state per sequence: vLLM's formulas ----------------------------------------------------------------------


def vllm_shapes(m: StateMixer, tp: int, spec: int = 0):
    """MambaStateShapeCalculator (vllm/model_executor/layers/mamba/mamba_utils.py), written out again."""
    if m.kind == "gated_deltanet":
        conv_dim = m.k_head_dim * m.k_heads * 2 + m.head_dim * m.heads
        return [(m.conv_kernel - 1 + spec, conv_dim // tp), (m.heads // tp, m.head_dim, m.k_head_dim)]
    if m.kind == "mamba2":
        groups = m.n_groups if m.n_groups % tp == 0 else tp  # extra_groups_for_head_shards: tp - n_groups more
        conv_dim = m.inner + 2 * groups * m.state_size
        return [(m.conv_kernel - 1 + spec, conv_dim // tp), (m.heads // tp, m.head_dim, m.state_size)]
    if m.kind == "mamba":
        return [(m.conv_kernel - 1, m.inner // tp), (m.inner // tp, m.state_size)]
    if m.kind == "short_conv":
        return [(m.conv_kernel - 1, m.inner // tp)]
    conv_dim = m.heads * m.head_dim * 3  # kda: proj + 2 key projections of the same size
    return [(m.conv_kernel - 1 + spec, conv_dim // tp), (m.heads // tp, m.head_dim, m.head_dim)]


@pytest.mark.parametrize("name", HYBRIDS)
@pytest.mark.parametrize("tp", [1, 2])
def test_state_shapes_are_vllms(name, tp):
    mixer = read(name).arch.mixer
    assert [tuple(s) for s in mixer.shapes(tp)] == vllm_shapes(mixer, tp)
    assert [tuple(s) for s in mixer.shapes(tp, num_spec=2)] == vllm_shapes(mixer, tp, 2)


def test_state_bytes_by_hand():
    """Qwen3-Next, bf16: conv (3, 8,192) and temporal (32, 128, 128) per layer and sequence; at tp 2 half."""
    mixer = read("qwen3-next-80b-a3b").arch.mixer
    one = (3 * 8192 + 32 * 128 * 128) * 2
    assert state_bytes(mixer, ("bfloat16", "bfloat16")) == one
    assert state_bytes(mixer, ("bfloat16", "bfloat16"), tp=2) == one // 2
    # Falcon-H1 Tiny at tp 2: its one group is replicated to two, so the conv width is (768 + 2·2·64) / 2
    falcon = read("falcon-h1-tiny-90m").arch.mixer
    assert falcon.shapes(2)[0] == (3, (768 + 2 * 2 * 64) // 2)


def test_state_dtypes_follow_vllms_calculator():
    qwen35 = read("qwen3.5-35b-a3b").arch.mixer  # the config's mamba_ssm_dtype float32
    assert state_dtypes(qwen35, "bfloat16") == ("bfloat16", "float32")
    assert state_dtypes(qwen35, "bfloat16", ssm_dtype="bfloat16") == ("bfloat16", "bfloat16")  # the flag wins
    assert state_dtypes(qwen35, "bfloat16", cache_dtype="float32") == ("float32", "float32")
    jamba = read("jamba-v0.1").arch.mixer
    assert state_dtypes(jamba, "bfloat16") == ("bfloat16", "bfloat16")
    assert state_dtypes(jamba, "bfloat16", cache_dtype="float16") == ("float16", "float16")  # auto: the conv's
    kimi = read("kimi-linear-48b-a3b").arch.mixer
    assert state_dtypes(kimi, "bfloat16", ssm_dtype="bfloat16") == ("bfloat16", "float32")  # KDA: always float32
    assert state_dtypes(read("lfm2-350m").arch.mixer, "float16") == ("float16",)  # a short convolution: conv only
    with pytest.raises(ConfigError, match="mamba_ssm_dtype"):
        state_dtypes(jamba, "bfloat16", ssm_dtype="fp8")


# --- the cache beside the state -------------------------------------------------------------------------------


def test_cache_by_kind_counts_kv_per_token_and_state_per_sequence():
    arch = read("qwen3.5-35b-a3b").arch
    cache = kv_cache_for(arch, 32_768, 4, "bf16")
    kv_per_token = 10 * 2 * 2 * 256 * 2  # 10 full layers, K and V, 2 KV heads of 256, bf16
    state = 30 * ((3 * (128 * 16 * 2 + 128 * 32)) * 2 + 32 * 128 * 128 * 4)  # bf16 conv, float32 temporal
    full, states = cache.by_kind()
    assert (full["kind"], full["layers"], full["bytes_per_token"]) == ("full", 10, kv_per_token)
    assert (states["kind"], states["layers"], states["bytes_per_sequence"]) == ("state", 30, state)
    assert cache.bytes == kv_per_token * 32_768 * 4 + state * 4 == full["bytes"] + states["bytes"]
    longer = kv_cache_for(arch, 65_536, 4, "bf16")
    assert longer.state_total == cache.state_total and longer.kv_bytes == 2 * cache.kv_bytes  # state: no growth
    assert cache_layers(arch.layer_kinds) == {"full": 10, "state": 30}
    assert cache_layers(read("falcon-h1-tiny-90m").layer_kinds) == {"full": 24, "state": 24}
    assert cache_layers(read("nemotron-h-8b-base-8k").layer_kinds) == {"full": 4, "state": 24}  # MLP layers: none


def test_the_fit_reserves_the_states_first():
    cache = kv_cache_for(read("jamba-v0.1").arch, 8192, 16, "bf16")
    plain = fit(cache, 141)
    assert plain.tokens_that_fit == (plain.budget_bytes - cache.state_total) // cache.bytes_per_token
    assert plain.max_batch == plain.budget_bytes // cache.bytes_per_sequence


def test_kv_cache_json_and_text_name_each_kind(capsys):
    args = ["kv-cache", "--preset", "nemotron-h-8b-base-8k", "--context", "8192", "--batch", "2"]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["kind"]: r for r in out["by_kind"]}
    assert set(rows) == {"full", "state"} and rows["state"]["layers"] == 24 and out["n_layers"] == 4
    assert rows["full"]["bytes"] + rows["state"]["bytes"] == out["bytes"] and out["state_total"] > 0
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "4 attention layers and 24 state layers" in text and "state (mamba2)" in text
    assert f"{rows['state']['bytes_per_sequence']:,} B a sequence (float16 + float16)" in text


# --- Infinity, and hostile files -------------------------------------------------------------------------------


def test_infinity_is_read_where_transformers_writes_it():
    """time_step_limit (0.0, inf): transformers' to_json_string writes it as [0.0, Infinity]."""
    for name in ("nemotron-h-8b-base-8k", "falcon-h1-tiny-90m"):
        raw = (CONFIGS / f"{name}.json").read_text()
        assert "Infinity" in raw and hf_config.read_config(raw).arch.mixer.kind == "mamba2"
    text = json.loads((CONFIGS / "nemotron-h-8b-base-8k.json").read_text()) | {"mamba_dt_limit": "SENTINEL"}
    wrapped = json.dumps({"model_type": "wrapper", "text_config": text}).replace('"SENTINEL"', "[-Infinity, NaN]")
    assert hf_config.read_config(wrapped).wrapper == "wrapper"  # inside a text_config, and its other spelling


@pytest.mark.parametrize("key, value", [("hidden_size", "Infinity"), ("rms_norm_eps", "NaN"),
                                        ("time_step_max", "-Infinity"), ("mamba_num_heads", "NaN")])  # fmt: skip
def test_infinity_elsewhere_is_refused_naming_the_field(key, value):
    raw = (CONFIGS / "nemotron-h-8b-base-8k.json").read_text()
    data = json.loads(raw)
    data[key] = "SENTINEL"
    text = json.dumps(data).replace('"SENTINEL"', value)
    with pytest.raises(ConfigError) as e:
        hf_config.read_config(text)
    assert e.value.field == key and value in str(e.value) and "\n" not in str(e.value)


def hostile(name: str, **changes) -> dict:
    data = json.loads((CONFIGS / f"{name}.json").read_text())
    return data | changes


HOSTILE = [
    (hostile("nemotron-h-8b-base-8k", hybrid_override_pattern="M-M*"), "hybrid_override_pattern", "52 characters"),
    (hostile("nemotron-h-8b-base-8k", hybrid_override_pattern="X" * 52), "hybrid_override_pattern", "M, *"),
    (hostile("nemotron-h-8b-base-8k", mamba_num_heads=10**12), "mamba_num_heads", "from 1 to"),
    (hostile("jamba-v0.1", attn_layer_offset=9), "attn_layer_offset", "from 0 to 7"),
    (hostile("jamba-v0.1", mamba_d_state="16"), "mamba_d_state", "whole number"),
    (
        {k: v for k, v in hostile("jamba-v0.1", attn_layer_period=2).items() if k != "attn_layer_offset"},
        "attn_layer_offset",
        "below its period",
    ),
    (hostile("granite-4.0-h-tiny", layer_types=["mamba"] * 3), "layer_types", "40 entries"),
    (hostile("granite-4.0-h-tiny", mamba_d_head=65), "mamba_d_head", "Mamba width"),
    (hostile("lfm2-350m", full_attn_idxs=[99]), "full_attn_idxs", "layer indices"),
    (hostile("qwen3-next-80b-a3b", linear_num_key_heads=7), "linear_num_key_heads", "must divide"),
    (hostile("qwen3-next-80b-a3b", layer_types=["linear_attention"] * 47 + ["sliding"]), "layer_types", "entry 47"),
    (hostile("falcon-h1-tiny-90m", projectors_bias=True), "projectors_bias", "mamba_proj_bias"),
    (hostile("kimi-linear-48b-a3b", hidden_size=10**9), "hidden_size", "from 1 to"),
    (hostile("nemotron-h-8b-base-8k", mamba_num_heads=999_999, mamba_head_dim=999_999), "mamba_head_dim", "at most"),
    (
        hostile("jamba-v0.1", mamba_expand=1000, hidden_size=999_936, num_attention_heads=1, num_key_value_heads=1),
        "mamba_expand",
        "Mamba width",
    ),
    (hostile("qwen3-next-80b-a3b", shared_expert_intermediate_size=10**8), "shared_expert_intermediate_size", "to"),
    (hostile("kimi-linear-48b-a3b", mlp_layer_types=["sparse", "dense"] * 13 + ["dense"]), "mlp_layer_types", "first"),
]


@pytest.mark.parametrize("data, field, words", HOSTILE)
def test_a_hostile_file_is_one_line_naming_the_field(data, field, words):
    with pytest.raises(ConfigError) as e:
        hf_config.from_dict(data)
    assert e.value.field == field and words in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_hostile_file_on_the_command_line_exits_2():
    data = json.dumps(hostile("nemotron-h-8b-base-8k", hybrid_override_pattern="M*"))
    done = subprocess.run([sys.executable, "-m", "attncore", "kv-cache", "--config", "-"], cwd=REPO,
                          capture_output=True, input=data.encode())  # fmt: skip
    err = done.stderr.decode().strip()
    assert done.returncode == 2 and "hybrid_override_pattern" in err and len(err.splitlines()) == 1, err


def test_the_state_dtype_flags_reach_the_simple_fit():
    """--mamba-cache-dtype and --mamba-ssm-dtype (cli/engine.py's flags) size the state; not given: auto."""
    import argparse

    from cli.calc import state_dtype_flags

    assert state_dtype_flags(argparse.Namespace()) == {"mamba_cache_dtype": "auto", "mamba_ssm_dtype": "auto"}
    given = state_dtype_flags(argparse.Namespace(mamba_cache_dtype="float32", mamba_ssm_dtype=None))
    arch = read("jamba-v0.1").arch
    auto, wide = kv_cache_for(arch, 1024, 1, "bf16"), kv_cache_for(arch, 1024, 1, "bf16", **given)
    assert wide.state_dtypes == ("float32", "float32") and wide.state_bytes == 2 * auto.state_bytes
    assert wide.kv_bytes == auto.kv_bytes  # the attention layers' cache keeps its own element type


def test_a_hybrid_without_a_formula_caches_its_attention_layers_only():
    """hf_generic.py: a model_type no family reads, whose layer_types name state layers: the KV cache counts its
    attention layers, and a note says the state is not sized; none at all is refused in one line."""
    from serving import hf_generic

    types = ["linear_attention"] * 3 + ["full_attention"] + ["mamba"] * 3 + ["full_attention"]
    base = {"model_type": "newhybrid", "hidden_size": 2048, "num_hidden_layers": 8, "num_attention_heads": 16,
            "num_key_value_heads": 4, "layer_types": types}  # fmt: skip
    model = hf_generic.read_attention(base)
    assert model.arch.n_layers == 2 and any("6 of 8 layers are not attention" in n for n in model.notes)
    assert kv_cache_for(model.arch, 1000, weight_params=1).bytes == 2 * 2 * 4 * 128 * 1000 * 2  # fp16
    with pytest.raises(ConfigError) as e:
        hf_generic.read_attention({"model_type": "w", "text_config": base | {"layer_types": ["mamba"] * 8}})
    assert e.value.field == "text_config.layer_types" and "no attention layer" in str(e.value)
