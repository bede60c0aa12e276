"""`kv-cache --engine vllm` with pipeline stages (--pp, --pp-layer-partition), the grid of TP x PP (--plan-grid) and
the decode-throughput bound (--efficiency): serving.pipeline, serving.plan and serving.throughput on the command
line, text and JSON. Bad values raise ConfigError under the flag's name (one line, exit code 2)."""

from __future__ import annotations

import json
import re

from attncore.config import ConfigError
from cli.flags import integer, number
from serving import plan, throughput
from serving.kvcache import GIB
from serving.pipeline import PipelineFit, pipeline_fit
from serving.presets import CARDS

FLAG_OF = {"pipeline_parallel_size": "--pp", "pp_layer_partition": "--pp-layer-partition", "max_gpus": "--plan-grid",
           "efficiency": "--efficiency", "weights_gib": "--weights-gib"}  # fmt: skip


def add_plan_args(k) -> None:
    k.add_argument("--pp", type=integer, help="pipeline-parallel stages (vLLM --pipeline-parallel-size)")
    k.add_argument("--pp-layer-partition", metavar="N,N,...",
                   help="layers per stage, as VLLM_PP_LAYER_PARTITION (must sum to the layers)")  # fmt: skip
    k.add_argument("--plan-grid", type=integer, nargs="?", const=8, metavar="GPUS",
                   help="the grid of TP x PP up to GPUS in all (default 8), a verdict per cell")  # fmt: skip
    k.add_argument("--efficiency", type=number,
                   help="your measured share of the bandwidth (0-1): scales the decode bound")  # fmt: skip


def wanted(a) -> bool:
    return any(getattr(a, f, None) is not None for f in ("pp", "pp_layer_partition", "plan_grid", "efficiency"))


def layer_partition(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    if not re.fullmatch(r"[0-9]{1,6}(,[0-9]{1,6}){0,1023}", text):
        raise ConfigError("--pp-layer-partition", f"must be layer counts separated by commas (10,10,12), got {text!r}")
    return tuple(int(n) for n in text.split(","))


def run(a, arch, name: str, label: str, card: str | None, total: float, settings, weights, model_dtype, limit) -> int:
    """Print the pipeline fit (or the grid) and the decode bound; return the exit code."""
    parts = layer_partition(a.pp_layer_partition)
    pp = a.pp if a.pp is not None else (len(parts) if parts else 1)
    try:
        throughput.check_efficiency(a.efficiency)
        if a.plan_grid is not None:
            cells = plan.plan_grid(arch, total, settings, max_gpus=a.plan_grid, weights=weights,
                                   model_dtype=model_dtype, gpu=card, limit=limit)  # fmt: skip
            return print_grid(a, cells, name, label, settings)
        fit = pipeline_fit(arch, total, settings, pp=pp, layer_partition=parts, weights=weights,
                           model_dtype=model_dtype, gpu=card, limit=limit)  # fmt: skip
        bound = decode_bound(a, arch, card, settings, weights, model_dtype, pp, parts)
    except ConfigError as e:
        raise ConfigError(FLAG_OF.get(e.field, e.field), e.message) from None
    if a.json:
        out = {"name": name, "gpu": label} | fit.to_dict() | {"decode_bound": bound.to_dict() if bound else None}
        print(json.dumps(out))
        return 0
    print_pipeline(fit, name, label)
    print_bound(bound, card)
    return 0


def decode_bound(a, arch, card, settings, weights, model_dtype, pp, parts):
    """The bound at the command's --batch and --context on a card whose bandwidth is known (None elsewhere)."""
    if card is None or not CARDS[card].bandwidth_gbs:
        if a.efficiency is not None:
            raise ConfigError("--efficiency", "needs a card of --gpu (its datasheet bandwidth) for the decode bound")
        return None
    kv = {"auto": model_dtype}.get(settings.kv_cache_dtype, settings.kv_cache_dtype)
    kv = "fp8" if kv.startswith("fp8") else kv
    return throughput.decode_bound(
        arch, CARDS[card].bandwidth_gbs, context=a.context, batch=a.batch, kv_dtype=kv, weights=weights,
        model_dtype=model_dtype, tp=settings.tensor_parallel_size, pp=pp, layer_partition=parts,
        efficiency=a.efficiency,
    )  # fmt: skip


def print_pipeline(f: PipelineFit, name: str, gpu: str) -> None:
    stages = f"{f.pipeline_parallel_size} pipeline stage{'s' * (f.pipeline_parallel_size > 1)}"
    print(f"{name} on {f.gpus} × {gpu}: {stages} of tensor-parallel size {f.tensor_parallel_size}, layers "
          f"{'+'.join(map(str, f.partition))}   (GiB = 2³⁰ B)")  # fmt: skip
    print("  stage  layers    kinds                   holds       weights/GPU  activation  KV cache   blocks")
    for st in f.stages:
        w = st.fit
        kinds = ", ".join(f"{n} {k}" for k, n in st.kinds.items())
        holds = "+".join(x for x, on in (("embed", st.embeddings), ("head", st.head)) if on) or "-"
        mark = "  <- fewest" if st.index == f.bottleneck and f.pipeline_parallel_size > 1 else ""
        gib = " ".join(f"{n / GIB:>8.2f} GiB" for n in (w.weights_bytes, w.activation_bytes, w.kv_bytes))
        print(f"  {st.index:>5}  {st.start:>3}-{st.end - 1:<4} {kinds:<23} {holds:<11} {gib} {w.num_blocks:>8,}{mark}")
    print(f"  every worker keeps the fewest: {f.num_blocks:,} blocks, {f.tokens:,} tokens, concurrency "
          f"{f.concurrency:.2f}× ({f.kind})")  # fmt: skip
    if f.starts:
        print(f"  starts at max_model_len {f.stages[0].fit.max_model_len:,}")
    else:
        print(f"  does NOT start: {f.error}")


def print_bound(b, card: str | None) -> None:
    if b is None:
        print("  decode bound: choose a card (--gpu NAME) for its datasheet bandwidth")
        return
    print(f"  decode bound at batch {b.batch:,} ({b.micro_batch:,} a micro-batch), context {b.context:,}: "
          f"<= {b.tokens_per_s:,.0f} tokens/s (a BOUND: {b.bandwidth_gbs:,.0f} GB/s datasheet bandwidth of "
          f"{card} ÷ {b.step_bytes / 1e9:.2f} GB read per step on the busiest GPU)")  # fmt: skip
    print(f"    per step: weights {b.weights_bytes / 1e9:.2f} GB, KV cache {b.kv_bytes / 1e9:.2f} GB, state "
          f"{b.state_bytes / 1e9:.2f} GB")  # fmt: skip
    if b.spread_tokens_per_s is not None:
        print(f"    with the batch's tokens routed to distinct experts: <= {b.spread_tokens_per_s:,.0f} tokens/s")
    if b.efficient_tokens_per_s is not None:
        print(f"    at your measured efficiency {b.efficiency:g}: about {b.efficient_tokens_per_s:,.0f} tokens/s "
              "(an estimate resting on your figure)")  # fmt: skip


def print_grid(a, cells, name: str, gpu: str, settings) -> int:
    if a.json:
        print(json.dumps({"name": name, "gpu": gpu, "max_model_len": settings.max_model_len,
                          "cells": [c.to_dict() for c in cells]}))  # fmt: skip
        return 0
    print(f"{name} on {gpu}, max_model_len {settings.max_model_len:,}: TP × PP (GPUs = TP × PP)")
    for c in cells:
        print(f"  TP {c.tp:>2} × PP {c.pp:>2} = {c.gpus:>2} GPUs: {'FITS' if c.fits else 'no  '}  {c.reason}")
    return 0
