"""A deployment plan: the grid of tensor-parallel x pipeline-parallel sizes (GPUs = tp x pp) for one model on one
card, each cell the engine's verdict (serving/pipeline.py) and why: the head counts TP must divide, the weights
each GPU holds, the cache one request of max_model_len needs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from attncore.checks import ConfigError, check_int
from serving.context_limit import ContextLimit
from serving.engine import EngineSettings
from serving.kvcache import GIB
from serving.parameters import Decoder
from serving.pipeline import PipelineFit, pipeline_fit
from serving.weights import WeightFormat

SIZES = (1, 2, 4, 8, 16, 32, 64)  # the sizes tried on each axis, up to max_gpus in all


@dataclass(frozen=True)
class Cell:
    tp: int
    pp: int
    fits: bool
    reason: str  # 'fits: ...', or why not, in one line
    fit: PipelineFit | None  # None when the engine would refuse the sizes before any memory is counted

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    def to_dict(self) -> dict:
        out = {"tp": self.tp, "pp": self.pp, "gpus": self.gpus, "fits": self.fits, "reason": self.reason}
        if self.fit is not None:
            out |= {"num_blocks": self.fit.num_blocks, "concurrency": self.fit.concurrency, "kind": self.fit.kind}
        return out


def refusal(a: Decoder, tp: int, pp: int) -> str | None:
    """Why vLLM refuses these sizes before it counts memory (ModelConfig.verify_with_parallel_config and the
    attention layer's KV-head split), or None."""
    if a.n_heads % tp:
        return f"TP must divide the {a.n_heads} query heads"
    kv = a.kv_heads
    if not a.kv_lora_rank and (kv % tp if kv >= tp else tp % kv):
        return f"TP and the {kv} KV heads: one must divide the other"
    if pp > a.n_layers:
        return f"PP over the {a.n_layers} layers"
    return None


def verdict(f: PipelineFit) -> tuple[bool, str]:
    """fits, or which limit it hits: the weights, no room for a cache, or the cache one request needs."""
    if f.starts:
        return True, f"fits: {f.concurrency:.2f}× requests of max_model_len, {f.tokens:,} tokens ({f.kind})"
    worst = f.stages[f.bottleneck].fit
    room = worst.budget_bytes - worst.non_torch_bytes - worst.activation_bytes
    if worst.weights_bytes >= room:
        return False, (f"weights: {worst.weights_bytes / GIB:.1f} GiB a GPU over the {room / GIB:.1f} GiB the budget "
                       "leaves them")  # fmt: skip
    if worst.kv_bytes <= 0 or f.num_blocks <= 0:
        return False, "no room for the cache after weights and activations"
    return False, f"KV for the context: {f.concurrency:.2f}× of one {worst.max_model_len:,}-token request"


def plan_grid(
    a: Decoder,
    total_gib: float,
    s: EngineSettings,
    *,
    max_gpus: int = 8,
    weights: WeightFormat | None = None,
    model_dtype: str = "bf16",
    gpu: str | None = None,
    limit: ContextLimit | None = None,
) -> tuple[Cell, ...]:
    """Every (tp, pp) of SIZES with tp x pp <= max_gpus, as the engine would see it with settings s."""
    check_int("max_gpus", max_gpus, 1, SIZES[-1])
    cells = []
    for tp in SIZES:
        for pp in SIZES:
            if tp * pp > max_gpus:
                continue
            why = refusal(a, tp, pp)
            if why:
                cells.append(Cell(tp, pp, False, why, None))
                continue
            try:
                f = pipeline_fit(a, total_gib, replace(s, tensor_parallel_size=tp), pp=pp, weights=weights,
                                 model_dtype=model_dtype, gpu=gpu, limit=limit)  # fmt: skip
            except ConfigError as e:  # a state layer's widths TP must divide, and the like
                cells.append(Cell(tp, pp, False, e.message, None))
                continue
            cells.append(Cell(tp, pp, *verdict(f), f))
    return tuple(cells)
