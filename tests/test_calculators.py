"""Parameter and KV-cache calculators: the article's arithmetic to the byte, presets, the
attncore cross-check, the CLI."""

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attncore.config import POSITIONS, ConfigError, ModelConfig
from attncore.model import count_params, init_params, param_shapes
from cli.main import main
from serving import kvcache
from serving import parameters as calc
from serving.kvbench import benchmark_generation
from serving.presets import PRESETS, get_preset

REPO = Path(__file__).resolve().parents[1]

# Published totals, written out here so that an edited preset cannot pass by changing its own figure.
PUBLISHED = {
    "gpt2": 124_439_808,
    "gpt2-medium": 354_823_168,
    "llama-2-7b": 6_738_415_616,
    "llama-3-8b": 8_030_261_248,
    "mistral-7b-v0.1": 7_241_732_096,
    "qwen2.5-7b": 7_615_616_512,
    "deepseek-v2-lite": 15_706_484_224,
}


def attncore_configs():
    yield from (ModelConfig(position=p) for p in POSITIONS)
    yield ModelConfig(vocab_size=50, d_model=48, n_heads=3, n_layers=3, d_ff=100, max_len=20, norm="post")
    yield ModelConfig(d_model=64, n_heads=8, n_layers=1, d_ff=256, max_len=7, position="rope")


def component_of(name):
    """The test's own grouping of attncore tensor names."""
    if name == "tok_emb":
        return "embeddings"
    if name == "pos_emb":
        return "position"
    if name.startswith("head."):
        return "output_head"
    return {"attn": "attention", "ffn": "ffn"}.get(name.split(".")[2] if name.startswith("blocks.") else "", "norms")


# --- parameters --------------------------------------------------------------


@pytest.mark.parametrize("d, per_block", [(64, 49_984), (256, 789_760), (512, 3_152_384)])
def test_block_is_12d2_plus_13d_whatever_the_heads(d, per_block):
    assert per_block == 12 * d * d + 13 * d
    for heads in (1, 8):
        count = calc.count_parameters(calc.describe_attncore(ModelConfig(d_model=d, n_heads=heads, d_ff=4 * d)))
        assert count.per_layer == (per_block, per_block)


def test_default_experiment_model_has_27253_parameters():
    count = calc.count_parameters(calc.describe_attncore(ModelConfig()))
    assert count.total == 27_253 == count_params(ModelConfig())
    assert sum(count.breakdown.values()) == count.total and tuple(count.breakdown) == calc.COMPONENTS


@pytest.mark.parametrize("cfg", list(attncore_configs()), ids=lambda c: f"{c.position}-{c.norm}-d{c.d_model}")
def test_inventory_equals_attncore_tensor_by_tensor(cfg):
    shapes = param_shapes(cfg)
    inventory = {t.name: t.shape for t in calc.param_inventory(calc.describe_attncore(cfg))}
    for name, shape in shapes.items():
        if name.endswith("_qkv"):  # attncore fuses Q, K, V along the output axis
            parts = [inventory.pop(name.replace("qkv", x)) for x in "qkv"]
            assert {p[:-1] for p in parts} == {shape[:-1]} and sum(p[-1] for p in parts) == shape[-1], name
        else:
            assert inventory.pop(name) == shape, name
    assert inventory == {}, "tensors attncore does not have"
    grouped = dict.fromkeys(calc.COMPONENTS, 0)
    for name, shape in shapes.items():
        grouped[component_of(name)] += math.prod(shape)
    assert calc.count_parameters(calc.describe_attncore(cfg)).breakdown == grouped


def test_crosscheck_against_an_instantiated_model():
    cfg = ModelConfig(d_model=16, n_heads=2, d_ff=40, max_len=9)
    params = init_params(cfg, np.random.default_rng(1))
    rows = calc.crosscheck_attncore(cfg, params)
    assert all(r["equal"] for r in rows)
    assert rows[-1]["model"] == sum(a.size for a in params.values())


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_reproduces_its_published_total(name):
    preset = PRESETS[name]
    assert calc.count_parameters(preset.arch).total == preset.published
    assert preset.source


@pytest.mark.parametrize("name, figure", PUBLISHED.items())
def test_required_presets_against_their_figures(name, figure):
    assert get_preset(name).published == figure
    assert calc.count_parameters(get_preset(name).arch).total == figure


def test_preset_details_match_their_model_cards():
    qwen = calc.count_parameters(get_preset("qwen2.5-7b").arch)
    assert round(qwen.non_embedding / 1e9, 2) == 6.53  # "Number of Parameters (Non-Embedding): 6.53B"
    ds = calc.count_parameters(get_preset("deepseek-v2-lite").arch)
    assert 2.4e9 <= ds.active - ds.breakdown["embeddings"] < 2.5e9  # "2.4B activated"
    gpt2 = calc.count_parameters(get_preset("gpt2").arch)
    assert gpt2.breakdown["output_head"] == 0 and gpt2.breakdown["position"] == 1024 * 768  # tied head


def test_architecture_options_count_what_they_add():
    base = calc.Decoder(d_model=64, n_layers=2, n_heads=4, vocab_size=100, d_ff=256, bias="none", norm="rmsnorm")
    total = calc.count_parameters(base).total

    def count(**changes):
        return calc.count_parameters(dataclasses.replace(base, **changes)).total

    assert count(ffn="swiglu") - total == 2 * 64 * 256
    assert count(n_kv_heads=1) - total == -2 * 2 * 64 * 48  # K and V shrink from 4 heads of 16 to one
    assert count(bias="qkv") - total == 2 * 3 * 64
    assert count(bias="all") - total == 2 * (4 * 64 + 256 + 64)
    assert count(norm="layernorm") - total == 5 * 64
    assert count(tied_embeddings=False) - total == 64 * 100
    assert count(position="rope") - total == -1024 * 64
    assert count(head_bias=True) - total == 100
    assert count(final_norm=False) - total == -64


def test_attncore_config_recognises_what_attncore_builds():
    for cfg in attncore_configs():
        assert calc.attncore_config(calc.describe_attncore(cfg)) == dataclasses.replace(
            cfg, norm="pre", dtype="float32"
        )
    lab = calc.describe_attncore(ModelConfig())
    for change in ({"ffn": "swiglu"}, {"n_kv_heads": 2}, {"tied_embeddings": True}, {"norm": "rmsnorm"}):
        assert calc.attncore_config(dataclasses.replace(lab, **change)) is None, change
    assert calc.attncore_config(get_preset("gpt2").arch) is None


def test_form_values_round_trip_with_zero_for_derived_fields():
    for name in ("gpt2", "llama-3-8b", "deepseek-v2-lite"):
        arch = get_preset(name).arch
        values = calc.form_values(arch)
        assert calc.with_form_values(arch, values) == arch
        assert all(v is not None for v in values.values())
    gpt2 = calc.form_values(get_preset("gpt2").arch)
    assert gpt2["n_kv_heads"] == gpt2["head_dim"] == gpt2["sliding_window"] == 0
    assert calc.with_form_values(get_preset("gpt2").arch, {"n_kv_heads": 1}).attention == "MQA"
    with pytest.raises(ConfigError) as e:
        calc.with_form_values(get_preset("gpt2").arch, {"n_heads": 5})
    assert e.value.field == "n_heads"


def test_bad_architecture_names_the_field():
    with pytest.raises(ConfigError) as e:
        calc.Decoder(d_model=64, n_layers=2, n_heads=4, vocab_size=10, d_ff=8, n_kv_heads=3)
    assert e.value.field == "n_kv_heads"
    with pytest.raises(ConfigError) as e:
        calc.Decoder(d_model=64, n_layers=2, n_heads=4, vocab_size=10, d_ff=8, ffn="swish")
    assert e.value.field == "ffn"


# --- the KV cache: the article's worked examples ------------------------------


def test_worked_example_24_blocks_gqa_8192_tokens():
    weights = (
        24 * calc.count_parameters(calc.describe_attncore(ModelConfig(d_model=512, n_heads=8, d_ff=2048))).per_layer[0]
    )
    c = kvcache.kv_cache(24, 8, 64, 8192, 4, "fp16", weight_params=weights)
    assert c.bytes == 1_610_612_736 and c.gib == 1.5
    assert weights == 75_657_216 and round(c.weight_bytes / kvcache.MIB, 1) == 144.3
    assert round(c.ratio, 1) == 10.6
    mqa = kvcache.kv_cache(24, 1, 64, 8192, 4, "fp16")
    assert mqa.bytes == 1_610_612_736 // 8 and f"{mqa.gib:.3f}" == "0.188"


def test_worked_examples_32_layers_and_toy():
    assert kvcache.kv_cache(32, 32, 128, 4096, 1, "fp16").gib == 2.0
    assert f"{kvcache.kv_cache(32, 1, 128, 4096, 1, 'fp16').gib:.3f}" == "0.062"
    assert kvcache.kv_cache(4, 8, 32, 160, 1, "fp64").bytes / kvcache.MIB == 2.5


@pytest.mark.parametrize("dtype, size", [("fp64", 8), ("fp32", 4), ("bf16", 2), ("fp16", 2), ("fp8", 1)])
def test_formula_for_every_float_dtype(dtype, size):
    layers, kv, dh, t, b = 5, 3, 40, 777, 6
    c = kvcache.kv_cache(layers, kv, dh, t, b, dtype)
    assert c.bytes == 2 * layers * kv * dh * t * b * size
    assert c.bytes_per_token == 2 * layers * kv * dh * size and c.bits_per_element == 8 * size


def test_quantised_cache_with_and_without_scales():
    fp16 = kvcache.kv_cache(2, 2, 128, 10, 1, "fp16").bytes
    assert kvcache.kv_cache(2, 2, 128, 10, 1, "int8", group_size=0).bytes == fp16 // 2
    assert kvcache.kv_cache(2, 2, 128, 10, 1, "int4", group_size=0).bytes == fp16 // 4
    # int4, one fp16 scale per 64: a 128-vector is 64 B of data + 2 scales of 2 B = 68 B; K and V, 2 heads, 2 layers
    c = kvcache.kv_cache(2, 2, 128, 10, 1, "int4", group_size=64)
    assert c.bytes_per_token == 2 * 2 * 2 * 68 and c.bytes == 5440 and c.bits_per_element == 4.25
    assert kvcache.kv_cache(1, 1, 100, 1, 1, "int8", group_size=32).bytes == 2 * (100 + 4 * 2)  # 4 groups, last partial


def test_sliding_window_caps_tokens_per_layer():
    mistral = get_preset("mistral-7b-v0.1").arch
    long = kvcache.kv_cache_for(mistral, 32768, 2, "fp16")
    assert long.tokens_per_layer == 4096 and long.bytes == 2 * 32 * 8 * 128 * 4096 * 2 * 2
    assert kvcache.kv_cache_for(mistral, 1000, 2, "fp16").bytes == 2 * 32 * 8 * 128 * 1000 * 2 * 2
    assert kvcache.kv_cache_for(mistral, 32768, 1, "fp16", window=8192).tokens_per_layer == 8192


def test_latent_cache_of_deepseek_v2_lite():
    c = kvcache.kv_cache_for(get_preset("deepseek-v2-lite").arch, 4096, 2, "bf16")
    assert c.attention == "MLA" and c.latent_dim == 576
    assert c.bytes == 27 * (512 + 64) * 4096 * 2 * 2  # no factor 2 for K and V
    assert c.weight_bytes == 2 * 15_706_484_224
    int8 = kvcache.kv_cache_for(get_preset("deepseek-v2-lite").arch, 1, 1, "int8", group_size=64)
    assert int8.bytes == 27 * (576 + 9 * 2)


def test_workload_on_a_preset_recounts_its_weights():
    llama = get_preset("llama-3-8b").arch
    geometry = kvcache.cache_geometry(llama)
    same = kvcache.workload(llama, geometry, 8192, 4, "fp16")
    assert same == kvcache.kv_cache_for(llama, 8192, 4, "fp16")
    mha = kvcache.workload(llama, geometry | {"kv_heads": 32}, 8192, 4, "fp16", weight_dtype="int4")
    assert mha.bytes == 4 * same.bytes and mha.weight_dtype == "int4"
    assert mha.weight_params == 8_030_261_248 + 32 * 2 * 4096 * (4096 - 1024)
    bare = kvcache.workload(None, geometry | {"window": 1024}, 8192, 1, "bf16", weight_params=10**9)
    assert bare.tokens_per_layer == 1024 and bare.weight_bytes == 2 * 10**9
    assert kvcache.workload(None, geometry, 16, 1, "fp16").weight_bytes is None
    with pytest.raises(ConfigError) as e:
        kvcache.workload(llama, geometry | {"kv_heads": 7}, 16)
    assert e.value.field == "n_kv_heads"


def test_attention_kind_is_named():
    assert [kvcache.kv_cache(1, h, 8, 1, n_heads=8).attention for h in (8, 2, 1)] == ["MHA", "GQA", "MQA"]


@pytest.mark.parametrize(
    "kwargs, field",
    [({"n_layers": 0}, "n_layers"), ({"batch": -1}, "batch"), ({"dtype": "fp12"}, "dtype"), ({"window": 0}, "window")],
)
def test_bad_cache_values_name_the_field(kwargs, field):
    args = {"n_layers": 2, "kv_heads": 2, "head_dim": 8, "context": 16} | kwargs
    with pytest.raises(ConfigError) as e:
        kvcache.kv_cache(**args)
    assert e.value.field == field


# --- fit ---------------------------------------------------------------------


def test_fit_llama_3_8b_on_80_gb():
    c = kvcache.kv_cache_for(get_preset("llama-3-8b").arch, 8192, 4, "fp16")
    f = kvcache.fit(c, 80, 0.10)
    budget = 72_000_000_000 - 2 * 8_030_261_248
    per_token = 2 * 32 * 8 * 128 * 2
    assert f.usable_bytes == 72_000_000_000 and f.budget_bytes == budget
    assert f.tokens_that_fit == budget // per_token
    assert f.max_context == budget // (per_token * 4) and f.max_batch == budget // (per_token * 8192)
    assert f.fits and f.weights_fit


def test_fit_says_when_the_weights_alone_do_not_fit():
    arch = get_preset("llama-3-70b").arch
    f = kvcache.fit(kvcache.kv_cache_for(arch, 4096, 1, "fp16"), 80)
    assert not f.weights_fit and not f.fits and f.tokens_that_fit == 0 and "weights alone" in f.message
    assert kvcache.fit(kvcache.kv_cache_for(arch, 4096, 1, "fp16", weight_dtype="int4"), 80).fits


def test_fit_with_a_window_allows_any_context():
    f = kvcache.fit(kvcache.kv_cache_for(get_preset("mistral-7b-v0.1").arch, 65536, 1, "fp16"), 80)
    assert f.max_context is None and f.fits


@pytest.mark.parametrize("gpu_gb, reserve, field", [(0, 0.1, "gpu_gb"), (-4, 0.1, "gpu_gb"), (80, 1.0, "reserve")])
def test_bad_fit_values(gpu_gb, reserve, field):
    with pytest.raises(ConfigError) as e:
        kvcache.fit(kvcache.kv_cache(1, 1, 8, 8), gpu_gb, reserve)
    assert e.value.field == field


# --- chart series ------------------------------------------------------------


def test_cache_curves_for_gqa_model():
    contexts = kvcache.context_grid(5000)
    assert contexts == [256, 512, 1024, 2048, 4096, 5000]
    rows = kvcache.cache_curves(**kvcache.cache_geometry(get_preset("llama-3-8b").arch), contexts=contexts)
    by = {(r["attention"], r["context"]): r["bytes"] for r in rows}
    assert len(rows) == 3 * len(contexts)
    for t in contexts:
        assert by["MHA", t] == 4 * by["GQA", t] == 32 * by["MQA", t] == 2 * 32 * 32 * 128 * t * 2
    mla = kvcache.cache_curves(**kvcache.cache_geometry(get_preset("deepseek-v2-lite").arch), contexts=[100])
    assert {r["attention"] for r in mla} == {"MHA", "MQA", "MLA"}


def test_dtype_curves():
    rows = kvcache.dtype_curves(2, 4, 4, 16, [10, 20], group_size=0)
    by = {(r["dtype"], r["context"]): r["bytes"] for r in rows}
    assert by["fp32", 20] == 2 * by["fp16", 20] == 4 * by["int8", 20] == 8 * by["int4", 20] == 2 * by["fp32", 10]


# --- measured companion ------------------------------------------------------


def test_generation_with_and_without_cache_agree():
    b = benchmark_generation(n_layers=2, d_model=32, n_heads=4, prompt_len=6, n_new=10, repeats=1)
    assert b.identical_tokens and b.max_abs_deviation < 1e-10
    assert b.lengths == (1, 2, 5, 10) and len(b.rows()) == 8
    assert all(s > 0 for s in b.seconds_cached + b.seconds_recompute)
    assert b.cache_bytes == 2 * 2 * 4 * 8 * 16 * 8


def test_generation_benchmark_reports_progress():
    calls = []
    b = benchmark_generation(
        n_layers=1, d_model=16, n_heads=2, prompt_len=4, n_new=4, repeats=2, progress=lambda *c: calls.append(c)
    )
    assert b.lengths == (1, 2, 4) and calls == [(i, 12) for i in range(1, 13)]  # 3 lengths x 2 repeats x 2 modes


# --- command line ------------------------------------------------------------


def run_json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_params_json(capsys):
    out = run_json(capsys, "params", "--preset", "gpt2", "--json")
    assert out["total"] == 124_439_808 and sum(out["breakdown"].values()) == out["total"] and out["matches"]
    toy_style = ["--ffn", "relu", "--bias", "all", "--norm", "layernorm", "--d-ff", "2048"]  # the lab's choices: a
    # model typed with --d is otherwise a modern decoder (tests/test_typed_model.py)
    custom = run_json(capsys, "params", "--d", "512", "--layers", "3", "--heads", "8", *toy_style, "--json")
    assert custom["per_layer"] == [3_152_384] * 3


def test_cli_kv_cache_json(capsys):
    argv = ["kv-cache", "--layers", "24", "--kv-heads", "8", "--head-dim", "64", "--context", "8192", "--batch", "4"]
    out = run_json(capsys, *argv, "--dtype", "fp16", "--gpu-gb", "24", "--json")
    assert out["bytes"] == 1_610_612_736 and out["bytes_per_token"] == 49_152
    assert out["tokens_that_fit"] == 21_600_000_000 // 49_152  # no weights given: all of 24 GB less 10%
    preset = run_json(capsys, "kv-cache", "--preset", "llama-3-8b", "--gpu", "h100-80gb", "--json")
    assert preset["fit"]["usable_bytes"] == 72_000_000_000 and preset["weight_params"] == 8_030_261_248
    assert main(["kv-cache", "--preset", "llama-3-8b"]) == 0
    text = capsys.readouterr().out
    assert "GQA 8 KV heads × 128" in text and "context 4,096 × batch 1" in text and " x " not in text  # one sign


def test_cli_preset_list(capsys):
    assert main(["params", "--preset", "list"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert names == list(PRESETS)


def test_the_shipped_configs_are_found_beside_the_package_from_any_working_directory(tmp_path):
    """The presets are read by their path relative to serving/presets.py, not to the working directory: from an
    empty folder the package lists every shipped config.json as a preset."""
    code = "import json, serving.presets as p; print(json.dumps([str(p.CONFIGS), sorted(p.PRESETS)]))"
    env = {"PATH": "", "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    folder, names = json.loads(r.stdout)
    assert Path(folder) == REPO / "serving" / "configs"
    assert names == sorted(p.stem for p in (REPO / "serving" / "configs").glob("*.json")) == sorted(PRESETS)


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv, flag",
    [
        (["params", "--preset", "nope"], "--preset"),
        (["params", "--d", "-5"], "--d"),
        (["kv-cache", "--layers", "0", "--kv-heads", "8", "--head-dim", "64"], "--layers"),
        (["kv-cache", "--layers", "2", "--kv-heads", "8", "--head-dim", "64", "--batch", "0"], "--batch"),
        (["kv-cache", "--preset", "gpt2", "--dtype", "fp12"], "--dtype"),
        (["kv-cache", "--preset", "gpt2", "--gpu-gb", "-1"], "--gpu-gb"),
        (["kv-cache", "--preset", "unknown"], "--preset"),
    ],
)
def test_cli_rejects_bad_values_in_one_line(argv, flag):
    r = subprocess.run([sys.executable, "-m", "attncore", *argv], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert flag in r.stderr
