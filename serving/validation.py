"""Published vLLM startup logs that print the activation peak, and how far the engine model's estimate of it lands.

Each log is cited with its launch settings; tests/test_engine.py checks the rest of each log's accounting. The
errors are computed here, so a page or a script that quotes them cannot drift from the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from serving.engine import GIB, EngineSettings, engine_fit
from serving.parameters import Decoder
from serving.presets import PRESETS

LLAMA3_8B = PRESETS["llama-3-8b"].arch  # Llama-3.1-8B has the same shape and count
_STYLE = dict(ffn="swiglu", bias="none", norm="rmsnorm", tied_embeddings=False, position="rope", max_len=0)
# Shapes from the models' config.json. Qwen2.5-32B: hidden 5120, 64 layers, 40 heads, 8 KV heads, FFN 27648,
# vocab 152064, q/k/v biases. DeepSeek-R1 (= DeepSeek-V3): 61 layers, MLA latent 512 + RoPE key 64, 256 routed
# experts of 2048 (8 per token) and 1 shared, the first 3 layers dense (18432).
QWEN25_32B = Decoder(d_model=5120, n_layers=64, n_heads=40, n_kv_heads=8, vocab_size=152064, d_ff=27648,
                     **(_STYLE | {"bias": "qkv"}))  # fmt: skip
DEEPSEEK_R1 = Decoder(
    d_model=7168, n_layers=61, n_heads=128, vocab_size=129280, d_ff=18432, head_dim=128, kv_lora_rank=512,
    q_lora_rank=1536, rope_head_dim=64, v_head_dim=128, n_experts=256, n_shared_experts=1, experts_per_token=8,
    moe_d_ff=2048, n_dense_layers=3, **_STYLE,
)  # fmt: skip


@dataclass(frozen=True)
class LoggedPeak:
    """One startup log's 'PyTorch activation peak memory takes X GiB' with the settings it was launched with."""

    name: str
    source: str
    arch: Decoder
    total_gib: float
    settings: EngineSettings
    activation_gib: float  # as logged
    gpu: str | None = None
    note: str = ""
    flags_known: bool = True  # False: the log's launch flags are not all shown
    extra: dict = field(default_factory=dict)


LOGS = (
    LoggedPeak("PR 10511", "vLLM PR 10511: Llama-3-8B, H100 80 GB, V0 about 0.6.5, defaults", LLAMA3_8B,
               79.22, EngineSettings(version="v0"), 1.26, gpu="h100-80gb"),
    LoggedPeak("vLLM #12330", "vLLM #12330: Llama-3-8B, A100-40GB, V0 0.6.6", LLAMA3_8B, 39.50,
               EngineSettings(version="v0"), 9.37, gpu="a100-40gb", flags_known=False,
               note="the same model and defaults logged 1.26 GiB on an H100: flags the issue does not show"),
    LoggedPeak("OCI doc", "OCI AI Quick Actions troubleshooting doc: Llama-3.1-8B, 24 GB A10-class card, V0 0.7",
               LLAMA3_8B, 22.07, EngineSettings(version="v0", max_model_len=131072), 0.22,
               note="0.22 GiB is about the forward alone: its sampler's float32 work (about 1 GiB at 256 "
                    "sequences) does not show in the log"),
    LoggedPeak("vLLM #15815", "vLLM #15815: Qwen2.5-32B, 2x L40S, tensor parallel 2, V0 0.7", QWEN25_32B, 44.42,
               EngineSettings(version="v0", max_model_len=10000, tensor_parallel_size=2), 1.26, gpu="l40s"),
    LoggedPeak("DeepSeek-R1 notes", "third-party DeepSeek-R1 deployment notes: 8x H200, tensor parallel 8, V0 0.7",
               DEEPSEEK_R1, 139.81, EngineSettings(version="v0", gpu_memory_utilization=0.85, max_model_len=128000,
                                                   tensor_parallel_size=8), 6.37, gpu="h200",
               note="MoE routing buffers and FP8 weight scales are not modelled"),
)  # fmt: skip


def activation_errors() -> list[dict]:
    """Per log: the logged peak, the estimate and its relative error, and the same for the estimate before the
    sampler was modelled (the forward's widest tensors and the logits in the model's dtype and float32 only)."""
    rows = []
    for log in LOGS:
        p = engine_fit(log.arch, log.total_gib, log.settings, gpu=log.gpu).activation_parts
        before = max(p["mlp"], p["attention"], p["logits"])
        rows.append({
            "name": log.name, "source": log.source, "logged_gib": log.activation_gib, "note": log.note,
            "flags_known": log.flags_known, "estimate_gib": p["peak"] / GIB,
            "error": p["peak"] / GIB / log.activation_gib - 1, "before_gib": before / GIB,
            "before_error": before / GIB / log.activation_gib - 1,
        })  # fmt: skip
    return rows


def percent(x: float) -> str:
    """A signed relative error: '+352 %', '−17 %', '−0.4 %' (a true minus sign)."""
    pct = abs(x) * 100
    return f"{'−' if x < 0 else '+'}{pct:.0f} %" if pct >= 1 else f"{'−' if x < 0 else '+'}{pct:.1f} %"


def error_sentence(rows: list[dict] | None = None, key: str = "error") -> str:
    """'−17 % (PR 10511), +352 % (OCI doc), …': the estimate's error per validated log, for a caption."""
    rows = activation_errors() if rows is None else rows
    return ", ".join(f"{percent(r[key])} ({r['name']})" for r in rows)
