"""A fit that does not start says what would start it, and where vLLM's own error advises raising
gpu_memory_utilization and no utilization up to 1 would start it, says so beside vLLM's words (kept as it prints them).

Llama 4 Scout on one 80 GB H100: its bf16 weights alone are about 2.5× the card, so no gpu_memory_utilization
helps; a tensor-parallel size or a 4-bit checkpoint does. The cache's negative size keeps its sign everywhere: the
metric, the breakdown, the command line's text and its JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

from cli.main import main
from lab import formats
from serving import engine_advice
from serving.engine import GIB, EngineSettings, engine_fit
from serving.presets import CARDS, PRESETS

SCOUT = Path(__file__).resolve().parent / "configs" / "llama-4-scout-17b-16e-instruct.json"
H100 = CARDS["h100-80gb"].total_gib
LLAMA_70B, LLAMA_8B = PRESETS["llama-3-70b"].arch, PRESETS["llama-3-8b"].arch


def test_weights_larger_than_the_card_are_not_advised_a_higher_utilization():
    f = engine_fit(LLAMA_70B, H100, EngineSettings())
    assert f.weights_bytes > f.total_bytes and not f.starts
    assert f.error.startswith("No available memory for the cache blocks.")  # vLLM's words kept
    assert "cannot start it" in f.advice_note and "the weights alone" in f.advice_note
    assert not engine_fit(LLAMA_70B, H100, EngineSettings(gpu_memory_utilization=1.0)).starts
    assert not any("gpu_memory_utilization" in line for line in f.advice)


def test_the_advised_tensor_parallel_size_is_the_least_that_starts():
    f = engine_fit(LLAMA_70B, H100, EngineSettings())
    (line,) = [line for line in f.advice if line.startswith("tensor-parallel size")]
    tp = int(line.split()[2])
    assert engine_fit(LLAMA_70B, H100, EngineSettings(tensor_parallel_size=tp)).starts
    smaller = [t for t in range(2, tp) if LLAMA_70B.n_heads % t == 0]
    assert not any(engine_fit(LLAMA_70B, H100, EngineSettings(tensor_parallel_size=t)).starts for t in smaller)
    at = engine_fit(LLAMA_70B, H100, EngineSettings(tensor_parallel_size=tp))
    assert f"{at.kv_bytes / GIB:.2f} GiB for the cache" in line


def test_the_advised_weight_format_starts_and_a_larger_one_does_not():
    f = engine_fit(LLAMA_70B, H100, EngineSettings())
    named = [line for line in f.advice if line.startswith("weights in")]
    assert len(named) == 1
    dtype = named[0].split()[2]
    assert engine_fit(LLAMA_70B, H100, EngineSettings(), weight_dtype=dtype).starts
    larger = [d for d, bits, _ in engine_advice.SMALLER_FORMATS if bits > {"fp8": 8, "int4": 4}[dtype]]
    assert not any(engine_fit(LLAMA_70B, H100, EngineSettings(), weight_dtype=d).starts for d in larger)


def longest(util: float) -> int:
    settings = EngineSettings(max_model_len=2**24, gpu_memory_utilization=util)
    return engine_fit(LLAMA_8B, 39.5, settings, gpu="a100-40gb").longest_max_model_len


def test_where_a_higher_utilization_starts_it_vllms_advice_stays_and_names_the_least():
    length = longest(0.9) + 16  # past what 0.9 holds, within what 1.0 holds
    assert length <= longest(1.0)
    f = engine_fit(LLAMA_8B, 39.5, EngineSettings(max_model_len=length), gpu="a100-40gb")
    assert not f.starts and "Try increasing `gpu_memory_utilization`" in f.error and f.advice_note is None
    (util,) = [line for line in f.advice if line.startswith("gpu_memory_utilization")]
    u = float(util.split()[1])
    assert u > 0.9
    assert engine_fit(
        LLAMA_8B, 39.5, EngineSettings(max_model_len=length, gpu_memory_utilization=u), gpu="a100-40gb"
    ).starts
    lower = EngineSettings(max_model_len=length, gpu_memory_utilization=round(u - 0.01, 2))
    assert not engine_fit(LLAMA_8B, 39.5, lower, gpu="a100-40gb").starts
    assert any(line.startswith(f"max_model_len {f.longest_max_model_len:,} or less") for line in f.advice)


def test_where_no_utilization_holds_the_length_vllms_advice_to_raise_it_is_answered():
    length = longest(1.0) + 16
    f = engine_fit(LLAMA_8B, 39.5, EngineSettings(max_model_len=length), gpu="a100-40gb")
    assert not f.starts and "Try increasing `gpu_memory_utilization`" in f.error  # vLLM's words
    assert f.advice_note == "raising gpu_memory_utilization cannot start it: even at 1.00 the cache is too small"
    assert not any(line.startswith("gpu_memory_utilization") for line in f.advice)


def test_a_fit_that_starts_has_no_advice():
    f = engine_fit(PRESETS["llama-3-8b"].arch, H100, EngineSettings(max_model_len=8192))
    assert f.starts and f.advice == () and f.error is None and f.advice_note is None


def test_scout_on_one_h100_signs_agree_and_the_advice_can_work(capsys):

    argv = ["kv-cache", "--config", str(SCOUT), "--engine", "vllm", "--gpu", "h100-80gb"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    kv = out["kv_bytes"]
    assert kv < 0 and out["weights_bytes"] > 2 * out["total_bytes"] and not out["starts"]
    assert "cannot start it" in out["advice_note"]
    assert any(a.startswith("tensor-parallel size") for a in out["advice"])
    assert any(a.startswith("weights in int4") for a in out["advice"])
    shown = formats.with_spec(kv / GIB, ".2f")  # the lab's minus sign
    assert shown.startswith("−")
    assert main(argv) == 0
    text = capsys.readouterr().out
    (row,) = [line for line in text.splitlines() if line.strip().startswith("KV cache")]
    assert shown in row
    assert f"Available KV cache memory: {kv / GIB:.2f} GiB" in text  # vLLM's own format, its sign
    assert "    but raising gpu_memory_utilization cannot start it: the weights alone" in text
    assert "would start: tensor-parallel size" in text

    tp = int(next(a for a in out["advice"] if a.startswith("tensor-parallel")).split()[2])
    assert main([*argv, "--tp", str(tp), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["starts"]


def test_the_page_shows_the_cache_with_its_sign():
    from ui.charts import calculators as cc

    f = engine_fit(LLAMA_70B, H100, EngineSettings())
    shown = formats.with_spec(f.kv_bytes / GIB, ".2f")
    assert shown.startswith("−")
    (metric,) = [m for m in cc.engine_metrics(f) if m[0] == "Available KV cache memory"]
    assert metric[1] == f"{shown} GiB"
    (line,) = [line for line in cc.engine_formula(f) if line.startswith("**KV cache**")]
    assert f"**{shown} GiB**" in line
