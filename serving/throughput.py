"""An upper bound on decode throughput: one decode step reads at least the weights a token uses and the batch's
cache, so tokens/s <= batch x memory bandwidth / bytes read per step (per GPU, the slowest pipeline stage).

It is a bound, not a prediction: kernels reach a fraction of the datasheet bandwidth, and communication, the
scheduler and sampling are left out. A measured efficiency (the user's own ratio of achieved to peak bandwidth)
scales it, labelled as resting on that figure.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, replace

from attncore.checks import ConfigError
from serving import pipeline
from serving.decoder import Decoder
from serving.kvcache import DTYPE_BITS, kv_cache_for
from serving.state import elements
from serving.weights import WeightFormat

GB = 10**9


@dataclass(frozen=True)
class DecodeBound:
    """Bytes one decode step reads on the busiest GPU, and the bound it sets; `kinds` labels each figure."""

    bandwidth_gbs: float  # per GPU, the datasheet's peak
    batch: int  # sequences decoded together (split into pp micro-batches)
    micro_batch: int
    context: int  # tokens each sequence has cached
    weights_bytes: int  # per GPU per step: the weights a token uses (MoE: its active experts), the embedding aside
    kv_bytes: int  # per GPU per step: the micro-batch's cache in the layers this GPU holds
    state_bytes: int  # per GPU per step: a hybrid model's state layers' per-sequence state
    step_bytes: int
    tokens_per_s: float  # bound
    step_ms: float  # bound: the least time a step takes
    spread_tokens_per_s: float | None  # MoE: the bound when the batch's tokens use distinct experts
    efficiency: float | None
    efficient_tokens_per_s: float | None
    kinds: dict

    def to_dict(self) -> dict:
        return asdict(self)


def check_efficiency(value) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ConfigError("efficiency", f"must be a number from 0 (excluded) to 1, got {value!r}")
    if not 0 < value <= 1:
        raise ConfigError("efficiency", f"must be from 0 (excluded) to 1 (your measured share of the bandwidth), "
                          f"got {value:g}")  # fmt: skip


def _active(a: Decoder, experts: int) -> Decoder:
    """The model as a step reads it: `experts` routed experts a layer (all of them on a dense model)."""
    return replace(a, n_experts=experts) if a.n_experts else a


def _state_bytes(stage: Decoder, tp: int, model_bytes: int) -> int:
    """One sequence's state over the stage's state layers (conv and temporal in the model's dtype; Kimi's delta
    attention keeps float32)."""
    if stage.mixer is None:
        return 0
    n = stage.layer_kinds.count("state")
    width = 4 if stage.mixer.kind == "kda" else model_bytes
    return n * width * sum(elements(shape) for shape in stage.mixer.shapes(tp))


def _kv_share(a: Decoder, tp: int) -> float:
    """The share of a layer's cache one tensor-parallel rank holds: its KV heads (replicated below one a rank);
    a latent (MLA) is not split."""
    return 1.0 if a.kv_lora_rank else max(1, a.kv_heads // tp) / a.kv_heads


def _kv_bytes(stage: Decoder, context: int, micro: int, kv_dtype: str) -> int:
    """The micro-batch's cache in the stage's attention layers (full ones at the context, windowed ones up to their
    window; state layers keep none)."""
    kinds = pipeline.layer_kinds(stage)
    attention = len(kinds) - kinds.count("state")
    if not attention:
        return 0
    full = kinds.count("full")
    only = replace(stage, n_layers=attention, full_layers=full if stage.sliding_window else 0, layer_kinds=(),
                   mixer=None)  # fmt: skip
    return kv_cache_for(only, context, micro, kv_dtype, weight_params=0).bytes


def _step_bytes(a, experts, *, context, micro, kv_dtype, weights, model_bytes, tp, pp, parts) -> tuple[int, int, int]:
    """(weights, cache, state) bytes the busiest stage's GPU reads in one micro-step."""
    active = _active(a, experts)
    worst, start = (0, 0, 0), 0
    for i, n in enumerate(parts):
        end, first, last = start + n, i == 0, i == pp - 1
        stage = pipeline.stage_model(active, start, end) if pp > 1 else active
        params, outside = pipeline.stage_params(active, stage, first, last, pp)
        stored = pipeline.stage_bytes(active, stage, params, outside, weights)
        if first:  # a step reads its tokens' rows of the embedding, not the table (a tied head on one stage: whole)
            skip = sum(t.size for t in pipeline.outside_tensors(active) if t.name in ("tok_emb", "pos_emb"))
            if active.tied_embeddings and last:
                skip -= active.vocab_size * active.d_model
            stored -= skip * DTYPE_BITS[weights.dtype] // 8
        if a.n_experts:  # the router scores every expert: its rows for the experts not read are read all the same
            moe_layers = stage.n_layers - stage.n_dense_layers
            rows = (a.n_experts - experts) * (a.d_model + a.router_bias) * moe_layers
            stored += rows * DTYPE_BITS[weights.dtype] // 8
        state = micro * _state_bytes(stage, tp, model_bytes)
        parts_bytes = (stored // tp, round(_kv_bytes(stage, context, micro, kv_dtype) * _kv_share(a, tp)), state)
        if sum(parts_bytes) > sum(worst):
            worst = parts_bytes
        start = end
    return worst


def decode_bound(
    a: Decoder,
    bandwidth_gbs: float,
    *,
    context: int,
    batch: int = 1,
    kv_dtype: str = "bf16",
    weights: WeightFormat | None = None,
    model_dtype: str = "bf16",
    tp: int = 1,
    pp: int = 1,
    layer_partition: tuple[int, ...] | None = None,
    efficiency: float | None = None,
) -> DecodeBound:
    """tokens/s <= micro-batch x bandwidth / the busiest GPU's bytes per micro-step. With pp stages vLLM runs pp
    micro-batches (virtual engines) of batch / pp sequences, each stage busy with one of them: the slowest stage
    sets the pace. A step reads the weights a token uses (MoE: experts_per_token experts a layer, the fewest a step
    can read; `spread_tokens_per_s` with min(experts, batch x experts_per_token) when the tokens route apart), the
    micro-batch's cache at `context` tokens (each layer up to its window) and a hybrid's state."""
    check_efficiency(efficiency)
    if isinstance(bandwidth_gbs, bool) or not isinstance(bandwidth_gbs, numbers.Real) or not 0 < bandwidth_gbs <= 1e6:
        raise ConfigError("bandwidth_gbs", f"must be a bandwidth in GB/s from 0 (excluded) to 1000000, got "
                          f"{bandwidth_gbs!r}")  # fmt: skip
    if batch < 1 or context < 1:
        raise ConfigError("batch" if batch < 1 else "context", "must be at least 1")
    parts = pipeline.partition(a.n_layers, pp, layer_partition)
    weights = weights or WeightFormat(dtype=model_dtype)
    micro = -(-batch // pp)
    model_bytes = DTYPE_BITS[model_dtype] // 8
    common = dict(context=context, micro=micro, kv_dtype=kv_dtype, weights=weights, model_bytes=model_bytes, tp=tp,
                  pp=pp, parts=parts)  # fmt: skip
    w, kv, state = _step_bytes(a, a.experts_per_token, **common)
    bw = bandwidth_gbs * GB
    step = w + kv + state
    spread = None
    if a.n_experts and min(a.n_experts, micro * a.experts_per_token) > a.experts_per_token:
        sw, skv, sst = _step_bytes(a, min(a.n_experts, micro * a.experts_per_token), **common)
        spread = micro * bw / (sw + skv + sst)
    bound = micro * bw / step
    kinds = {"bandwidth_gbs": "datasheet", "step_bytes": "exact", "tokens_per_s": "bound"}
    if efficiency is not None:
        kinds["efficient_tokens_per_s"] = "estimate (your measured efficiency)"
    return DecodeBound(
        bandwidth_gbs, batch, micro, context, w, kv, state, step, bound, 1000 * step / bw, spread, efficiency,
        bound * efficiency if efficiency is not None else None, kinds,
    )  # fmt: skip
