"""What would make a fit that does not start start: the changes engine.engine_fit tries (a higher
gpu_memory_utilization, a tensor-parallel size, a smaller weight format, a shorter max_model_len), each said with
the figures of the fit it gives. Pure: it asks a `refit` callable for each variant and imports nothing of engine.

vLLM's own error ends in "Try increasing `gpu_memory_utilization`"; where no utilization up to 1 starts the engine
(weights larger than the card, say) that advice cannot work, and `util_note` says why beside vLLM's words.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

GIB = 2**30
MAX_TP = 64  # the largest tensor-parallel size tried (eight nodes of eight GPUs)
SMALLER_FORMATS = (  # (weight dtype, its bits, how a checkpoint is served in it)
    ("fp8", 8, "fp8 (an FP8 checkpoint, or vLLM's --quantization fp8 on a 16-bit one)"),
    ("int4", 4, "int4 (an AWQ or GPTQ checkpoint, a scale per group of 128)"),
)
UTIL_ADVICE = "Try increasing `gpu_memory_utilization`"


@dataclass(frozen=True)
class Variant:
    """One change to try: EngineSettings fields and the weights' dtype (None: as given)."""

    settings: dict
    weight_dtype: str | None = None


def tp_sizes(n_heads: int, current: int) -> list[int]:
    """Tensor-parallel sizes above `current` that vLLM accepts for the model: divisors of its query heads."""
    return [tp for tp in range(current + 1, MAX_TP + 1) if n_heads % tp == 0]


def least_utilization(current: float) -> list[float]:
    """The utilizations above `current` to try, in steps of 0.01 up to 1 (vLLM's ceiling)."""
    start = int(round(current * 100)) + 1
    return [u / 100 for u in range(start, 101)]


def first_start(refit: Callable, variants) -> tuple[Variant, object] | None:
    """The first variant whose fit starts, with that fit (None: none of them)."""
    for v in variants:
        f = refit(v)
        if f.starts:
            return v, f
    return None


def remedies(fit, refit: Callable[[Variant], object], n_heads: int, weight_bits: float) -> tuple[str, ...]:
    """What would start the engine, one sentence each, with the figures of the fit each gives; `fit` does not
    start, `refit(variant)` fits the same model with the variant's changes, `weight_bits` the bits a parameter
    takes as the weights are stored now."""
    out = []
    util = first_start(refit, (Variant({"gpu_memory_utilization": u}) for u in least_utilization(_util(fit))))
    if util:
        (v, f) = util
        u = v.settings["gpu_memory_utilization"]
        out.append(f"gpu_memory_utilization {u:.2f} (the least that starts): {f.kv_bytes / GIB:.2f} GiB for the cache")
    tp = first_start(refit, (Variant(_tp_settings(fit, t)) for t in tp_sizes(n_heads, fit.tensor_parallel_size)))
    if tp:
        (v, f) = tp
        t = v.settings["tensor_parallel_size"]
        out.append(
            f"tensor-parallel size {t} (--tensor-parallel-size {t}, {t} GPUs): {f.weights_bytes / GIB:.2f} GiB of "
            f"weights a GPU, {f.kv_bytes / GIB:.2f} GiB for the cache"
        )
    for dtype, bits, how in SMALLER_FORMATS:
        if bits >= weight_bits:
            continue
        found = first_start(refit, [Variant({"weights_gib": None}, dtype)])
        if found:
            f = found[1]
            out.append(
                f"weights in {how}: {f.weights_bytes / GIB:.2f} GiB a GPU, {f.kv_bytes / GIB:.2f} GiB for the cache"
            )
            break  # the largest format that fits is the one to name
    longest = fit.longest_max_model_len
    if longest and longest < fit.max_model_len:
        out.append(f"max_model_len {longest:,} or less (the longest that starts here)")
    return tuple(out)


def util_note(error: str | None, fit, util_starts: bool) -> str | None:
    """Why vLLM's advice in `error` to raise gpu_memory_utilization cannot work here (no utilization up to 1
    starts the engine), or None where it can or the error does not give it. vLLM's words stay as it prints them."""
    if error is None or util_starts or UTIL_ADVICE not in error:
        return None
    weights, total = fit.weights_bytes, fit.total_bytes
    if weights >= total:
        return (
            f"raising gpu_memory_utilization cannot start it: the weights alone ({weights / GIB:.2f} GiB a GPU) are "
            f"{weights / total:.1f}× the GPU's {total / GIB:.2f} GiB, so loading them runs out of memory first"
        )
    if "kv_cache_memory" in fit.measured:
        return "raising gpu_memory_utilization cannot start it: the cache's size is given (--kv-cache-memory-bytes)"
    return "raising gpu_memory_utilization cannot start it: even at 1.00 the cache is too small"


def _util(fit) -> float:
    return fit.budget_bytes / fit.total_bytes


def _tp_settings(fit, tp: int) -> dict:
    """A tensor-parallel size; weights measured in a log for this size are scaled to the new one."""
    changes = {"tensor_parallel_size": tp}
    if "weights" in fit.measured:
        changes["weights_gib"] = fit.weights_bytes * fit.tensor_parallel_size / tp / GIB
    return changes
