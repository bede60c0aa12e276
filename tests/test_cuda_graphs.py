"""CUDA-graph profiling (serving.cuda_graphs) in the engine's fit: the release that starts it, the capture sizes,
and the line vLLM 0.21 on logs, reproduced from published logs' own figures (rounded as they print them)."""

from __future__ import annotations

import json

import pytest

from attncore.config import ConfigError
from cli.main import main
from serving.cuda_graphs import capture_sizes, graph_memory, profiles, release
from serving.engine import GIB, EngineSettings, engine_fit, log_lines
from serving.presets import PRESETS

LLAMA3_8B = PRESETS["llama-3-8b"].arch
# Published vLLM logs: (gpu_memory_utilization, "Estimated CUDA graph memory: X GiB total", the logged equivalent
# and suggested utilizations). Both are 24 GB GeForce cards (RTX 3090), which torch reports as 23.5 to 24 GiB.
LOGS = {
    "noonghunna/club-3090 #127 (TP 4)": (0.92, 0.17, 0.9129, 0.9271),
    "noonghunna/club-3090 #91 (TP 2)": (0.92, 0.11, 0.9153, 0.9247),
    "gpustack/runner #251 (TP 2)": (0.82, 0.36, 0.8048, 0.8352),
}


def test_releases_from_0_21_profile_their_graphs():
    assert profiles("0.21.0") and profiles("v0.29.1") and profiles("1.0")
    assert not profiles("0.20.2") and not profiles("0.11.0")
    assert release("0.21") == (0, 21, 0)
    for bad in ("", "latest", "0.21.0.1", "9" * 30, None):
        with pytest.raises(ConfigError, match="vllm_version"):
            release(bad)


def test_capture_sizes_are_vllms_defaults():
    assert capture_sizes(1024) == (1, 2, 4, *range(8, 256, 8), *range(256, 513, 16)) and len(capture_sizes(256)) == 51
    assert capture_sizes(8) == (1, 2, 4, 8, 16)  # up to 2 · max_num_seqs


@pytest.mark.parametrize("name", LOGS)
def test_the_logged_equivalent_utilization_is_reproduced(name):
    util, est, equivalent, suggested = LOGS[name]
    assert round(equivalent + suggested, 4) == round(2 * util, 4)  # the log's own symmetry, which the model has
    # every total and estimate the log's rounding allows bound the figures it prints: the logged ones lie inside
    corners = [
        graph_memory(round(t * GIB), util, 256, None, e) for t in (23.5, 24.0) for e in (est - 0.005, est + 0.005)
    ]
    assert (
        min(g.equivalent_utilization for g in corners) <= equivalent <= max(g.equivalent_utilization for g in corners)
    )
    assert min(g.suggested_utilization for g in corners) <= suggested <= max(g.suggested_utilization for g in corners)
    total = round(est / (util - equivalent) * GIB)  # the card these figures imply: the line word for word
    line = graph_memory(total, util, 256, None, est).log_lines(util)[1]
    assert line == (
        f"CUDA graph memory profiling is enabled (default since v0.21.0). The current --gpu-memory-utilization="
        f"{util:.4f} is equivalent to --gpu-memory-utilization={equivalent:.4f} without CUDA graph memory profiling. "
        f"To maintain the same effective KV cache size as before, increase --gpu-memory-utilization to "
        f"{suggested:.4f}. To disable, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0."
    )


def test_the_profiled_estimate_comes_out_of_the_kv_budget():
    base = engine_fit(LLAMA3_8B, 79.22, EngineSettings(), gpu="h100-80gb")
    logged = engine_fit(LLAMA3_8B, 79.22, EngineSettings(cuda_graph_profiling=True, cuda_graph_gib=0.36))
    assert base.kv_bytes - logged.kv_bytes == round(0.36 * GIB) and logged.kinds["cuda_graph"] == "measured"
    lines = log_lines(logged)
    assert lines[0] == "Estimated CUDA graph memory: 0.36 GiB total" and lines[1].startswith("Available KV cache")
    assert "equivalent to --gpu-memory-utilization=0.8955" in lines[2]  # 0.9 − 0.36/79.22
    estimated = engine_fit(LLAMA3_8B, 79.22, EngineSettings(cuda_graph_profiling=True), gpu="h100-80gb")
    cut = base.kv_bytes - estimated.kv_bytes
    assert cut >= 50 * 2**20 and estimated.kinds["cuda_graph"] == estimated.kinds["kv"] == "estimate"  # ≥ 1 MiB a graph
    given = EngineSettings(cuda_graph_profiling=True, kv_cache_memory_gib=40.0)  # no profiling at all
    assert engine_fit(LLAMA3_8B, 79.22, given).kv_bytes == round(40 * GIB)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(cuda_graph_gib=0.3), "cuda_graph_gib"),
        (dict(cuda_graph_profiling=True, cuda_graph_gib=-1), "cuda_graph_gib"),
        (dict(cuda_graph_profiling="yes"), "cuda_graph_profiling"),
    ],
)
def test_settings_name_the_bad_field(kwargs, field):
    with pytest.raises(ConfigError) as e:
        EngineSettings(**kwargs)
    assert e.value.field == field


def test_v0_has_no_graph_profiling():
    with pytest.raises(ConfigError) as e:
        engine_fit(LLAMA3_8B, 79.22, EngineSettings(version="v0", cuda_graph_profiling=True))
    assert e.value.field == "cuda_graph_profiling"


def test_cli_flags(capsys):
    argv = ["kv-cache", "--preset", "llama-3-8b", "--engine", "vllm", "--gpu", "h100-80gb"]
    assert main([*argv, "--cuda-graph-profiling", "--cuda-graph-gib", "0.36", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["extras"]["cuda_graphs"]["kind"] == "measured" and out["log"][0].startswith("Estimated CUDA graph")
    assert main([*argv, "--no-cuda-graph-profiling", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["extras"] is None
    assert main([*argv, "--cuda-graph-gib", "0.36"]) == 2
    assert capsys.readouterr().err.startswith("error: --cuda-graph-gib: ")
