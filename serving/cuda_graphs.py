"""CUDA-graph memory in vLLM's KV budget: the releases that profile it before sizing the cache (0.21 on, where
VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 1), the estimate they subtract, and the line they log.

vllm/v1/worker/gpu_worker.py determine_available_memory, as those releases have it: the runner's
profile_cudagraph_memory() captures graphs on a small dummy cache, and the KV cache gets requested memory − non-KV
memory − that estimate. The log then says what the estimate did to gpu_memory_utilization: "The current
--gpu-memory-utilization=U is equivalent to --gpu-memory-utilization=U − e/total without CUDA graph memory
profiling. ... increase --gpu-memory-utilization to U + e/total" (four decimals; published logs of 0.21 to 0.29 bear
the symmetry out: the two figures always add up to 2·U). Before 0.21 the graphs were captured after the cache was
sized and lived in the 1 − utilization kept free (vLLM PR 30515 added the estimate, off by default).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from attncore.checks import ConfigError

FIRST_RELEASE = (0, 21)  # "CUDA graph memory profiling is enabled (default since v0.21.0)"
MAX_CAPTURE = 512  # vLLM's largest default capture size: min(2 · max_num_seqs, 512)
PER_GRAPH_FLOOR = 1 << 20  # the estimator's least memory per further graph (max(sample, 1 MiB))
RELEASE = re.compile(r"v?(\d{1,3})\.(\d{1,3})(?:\.(\d{1,4}))?")


def release(text: str) -> tuple[int, int, int]:
    """A vLLM release number, '0.21.0' or 'v0.21' (ConfigError naming vllm_version otherwise)."""
    m = RELEASE.fullmatch(text.strip()) if isinstance(text, str) and len(text) <= 20 else None
    if m is None:
        raise ConfigError("vllm_version", f"must be a release number such as 0.21.0, got {str(text)[:20]!r}")
    return int(m[1]), int(m[2]), int(m[3] or 0)


def profiles(version: str) -> bool:
    """Whether this release subtracts its CUDA-graph estimate from the KV budget by default."""
    return release(version)[:2] >= FIRST_RELEASE


def capture_sizes(max_num_seqs: int) -> tuple[int, ...]:
    """vLLM's default cudagraph_capture_sizes (config/compilation.py): 1, 2, 4, then every 8 to 248, then every 16,
    up to min(2 · max_num_seqs, 512)."""
    largest = min(2 * max_num_seqs, MAX_CAPTURE)
    sizes = [1, 2, 4, *range(8, 256, 8), *range(256, MAX_CAPTURE + 1, 16)]
    return tuple(n for n in sizes if n <= largest)


@dataclass(frozen=True)
class GraphMemory:
    """The CUDA-graph estimate subtracted from the KV budget, and what the engine logs about it."""

    bytes: int
    kind: str  # "measured" (your log's "Estimated CUDA graph memory") or "estimate"
    graphs: int  # capture sizes profiled
    largest: int  # the largest capture size
    equivalent_utilization: float  # gpu_memory_utilization without the profiling
    suggested_utilization: float  # what keeps the cache of the releases before it

    def log_lines(self, utilization: float) -> list[str]:
        return [
            f"Estimated CUDA graph memory: {self.bytes / 2**30:.2f} GiB total",
            f"CUDA graph memory profiling is enabled (default since v0.21.0). The current --gpu-memory-utilization="
            f"{utilization:.4f} is equivalent to --gpu-memory-utilization={self.equivalent_utilization:.4f} without "
            "CUDA graph memory profiling. To maintain the same effective KV cache size as before, increase "
            f"--gpu-memory-utilization to {self.suggested_utilization:.4f}. To disable, set "
            "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0.",
        ]

    def to_dict(self) -> dict:
        return {"bytes": self.bytes, "kind": self.kind, "graphs": self.graphs, "largest": self.largest,
                "equivalent_utilization": self.equivalent_utilization,
                "suggested_utilization": self.suggested_utilization}  # fmt: skip


def graph_memory(total_bytes: int, utilization: float, max_num_seqs: int, forward_bytes, measured_gib=None):
    """The estimate for a card of total_bytes at this utilization: measured_gib from your log, else a lower bound of
    vLLM's estimator, the forward's widest tensors at the largest capture size (`forward_bytes(tokens)`: the graph
    pool keeps them) and 1 MiB for each further graph (the estimator's floor per graph)."""
    sizes = capture_sizes(max_num_seqs)
    if measured_gib is not None:
        n, kind = round(measured_gib * 2**30), "measured"
    else:
        n, kind = forward_bytes(sizes[-1]) + (len(sizes) - 1) * PER_GRAPH_FLOOR, "estimate"
    share = n / total_bytes
    return GraphMemory(n, kind, len(sizes), sizes[-1], utilization - share, utilization + share)
