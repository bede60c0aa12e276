"""What a serving engine deducts beyond the model's own weights and activations: LoRA buffers (lora.py), a drafter's
weights and KV layers (speculative.py) and, in the releases that profile them, CUDA graphs (cuda_graphs.py).

engine.engine_fit calls `extras` once and subtracts `deducted` from the KV budget. The LoRA buffers and the
drafter are allocated while the model loads, so a logged weights figure ("Model loading took X GiB") already holds
them: with --weights-gib they are not deducted again. With --kv-cache-memory-bytes nothing is profiled or deducted.
"""

from __future__ import annotations

from dataclasses import dataclass

from serving.cuda_graphs import GraphMemory, graph_memory
from serving.decoder import Decoder
from serving.lora import LoraBuffers, LoraSettings, lora_buffers
from serving.speculative import Drafter, Speculative, drafter


@dataclass(frozen=True)
class Extras:
    lora: LoraBuffers | None
    drafter: Drafter | None
    draft_bytes: int  # the drafter's weights on one rank
    graphs: GraphMemory | None
    deducted: int  # what comes out of the KV budget
    rows: tuple[dict, ...]  # deduction rows: term, formula, numbers, bytes (negative), kind
    kinds: dict  # lora / draft / cuda_graph -> exact | measured | estimate (only those present)
    notes: tuple[str, ...]

    def to_dict(self) -> dict:
        return {
            "lora": self.lora.to_dict() if self.lora else None,
            "drafter": self.drafter.to_dict() | {"bytes": self.draft_bytes} if self.drafter else None,
            "cuda_graphs": self.graphs.to_dict() if self.graphs else None,
            "deducted": self.deducted,
            "notes": list(self.notes),
        }


NONE = Extras(None, None, 0, None, 0, (), {}, ())


def extras(
    a: Decoder,
    *,
    lora: LoraSettings | None,
    speculative: Speculative | None,
    cuda_graphs: bool,
    cuda_graph_gib: float | None,
    tp: int,
    model_bytes: int,
    bytes_per_param: float,
    weights_measured: bool,
    kv_given: bool,
    total_bytes: int,
    utilization: float,
    max_num_seqs: int,
    forward_bytes,
) -> Extras:
    """The deductions for these settings; `forward_bytes(tokens)` the forward's widest tensors at that many tokens
    (for the CUDA-graph estimate), `bytes_per_param` the target's stored bytes per parameter (the drafter is
    stored alike)."""
    if lora is None and speculative is None and not cuda_graphs:
        return NONE
    rows, kinds, notes, deducted = [], {}, [], 0
    skip = "in your logged weights" if weights_measured else "not profiled (--kv-cache-memory-bytes)"

    def weights_row(key: str, term: str, formula: str, numbers: str, size: int, kind: str) -> int:
        """A deduction loaded with the weights: vLLM's "Model loading took" holds it (measured), and
        --kv-cache-memory-bytes skips the profiling that would subtract it. The bytes it takes from the cache."""
        kinds[key] = "measured" if weights_measured else kind
        counted = 0 if weights_measured or kv_given else size
        rows.append({"term": term, "formula": formula, "numbers": numbers if counted else f"{numbers}: {skip}",
                     "bytes": -counted, "kind": kinds[key]})  # fmt: skip
        return counted

    buffers = lora_buffers(a, lora, tp, model_bytes) if lora is not None else None
    if buffers is not None:
        numbers = f"{lora.max_loras} × rank {lora.max_lora_rank} over {', '.join(lora.modules)}"
        deducted += weights_row("lora", "LoRA buffers", "A and B stacked per wrapped layer ÷ tp as sharded", numbers,
                                buffers.bytes, "exact")  # fmt: skip
        notes += buffers.notes
    spec = drafter(a, speculative) if speculative is not None else None
    draft_bytes = 0
    if spec is not None:
        draft_bytes = round(spec.params * bytes_per_param) // tp
        numbers = f"{spec.params:,} parameters ({spec.method}) × {bytes_per_param:.3g} B ÷ {tp}"
        deducted += weights_row("draft", "drafter weights", "the drafter's own parameters × bytes ÷ tp", numbers,
                                draft_bytes, "estimate")  # fmt: skip
        notes += spec.notes
    graphs = None
    if cuda_graphs:
        graphs = graph_memory(total_bytes, utilization, max_num_seqs, forward_bytes, cuda_graph_gib)
        kinds["cuda_graph"] = graphs.kind
        counted = 0 if kv_given else graphs.bytes
        how = (
            "from your log"
            if graphs.kind == "measured"
            else (f"lower bound: the forward at {graphs.largest} tokens + 1 MiB × {graphs.graphs - 1} further graphs")
        )
        rows.append({"term": "CUDA graphs", "formula": "profiled before the cache (vLLM 0.21 on)", "numbers": how,
                     "bytes": -counted, "kind": graphs.kind})  # fmt: skip
        deducted += counted
    return Extras(buffers, spec, draft_bytes, graphs, deducted, tuple(rows), kinds, tuple(notes))
