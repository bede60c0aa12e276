"""The per-sequence state of a hybrid model's linear-attention, Mamba and short-convolution layers.

Such a layer keeps no key-value pair per token: each sequence holds a convolution state (the last kernel - 1 inputs of
its causal 1-D convolution, plus one row per speculative token) and, except for a short convolution, a temporal state
of fixed size. Shapes per tensor-parallel rank as vLLM computes them (model_executor/layers/mamba/mamba_utils.py,
MambaStateShapeCalculator): Gated DeltaNet (Yang et al. 2024, arXiv:2412.06464; Qwen3-Next, Qwen3.5), Mamba2 (Dao and
Gu 2024, arXiv:2405.21060; Nemotron-H, Falcon-H1, Granite 4), Mamba (Gu and Dao 2023, arXiv:2312.00752; Jamba), short
convolution (LFM2) and Kimi Delta Attention (Kimi Linear, arXiv:2510.26692).
"""

from __future__ import annotations

from dataclasses import dataclass

from attncore.checks import ConfigError, check_choice, check_int

MIXERS = ("gated_deltanet", "mamba2", "mamba", "short_conv", "kda")
# a layer's kind in Decoder.layer_kinds: attention over every token, a window, a chunk, or a state layer
LAYER_KINDS = ("full", "sliding", "chunked", "state")


def _divide(field: str, n: int, tp: int) -> int:
    if n % tp:
        raise ConfigError("tensor_parallel_size", f"must divide the {field} ({n}), got {tp}")
    return n // tp


@dataclass(frozen=True)
class StateMixer:
    """A state layer's dimensions, unsharded, as its config.json gives them.

    heads/head_dim: the value heads and their width (Gated DeltaNet n_v and d_v; Mamba2 heads and head_dim; KDA);
    k_heads/k_head_dim: Gated DeltaNet's and KDA's key heads; state_size: Mamba's d_state; n_groups: Mamba2's B/C
    groups; inner: Mamba's and Mamba2's intermediate width, a short convolution's channels.
    """

    kind: str
    conv_kernel: int
    heads: int = 0
    head_dim: int = 0
    k_heads: int = 0
    k_head_dim: int = 0
    state_size: int = 0
    n_groups: int = 0
    inner: int = 0

    def __post_init__(self):
        check_choice("mixer", self.kind, MIXERS)
        check_int("conv_kernel", self.conv_kernel, 1, 1024)
        for name in ("heads", "head_dim", "k_heads", "k_head_dim", "state_size", "n_groups", "inner"):
            check_int(name, getattr(self, name), 0, 10_000_000)

    def shapes(self, tp: int = 1, num_spec: int = 0) -> tuple[tuple[int, ...], ...]:
        """The state tensors of one sequence in one layer on one rank: (conv shape, temporal shape) (a short
        convolution: conv only), as vLLM's MambaStateShapeCalculator gives them."""
        rows = self.conv_kernel - 1 + num_spec
        if self.kind == "gated_deltanet":
            conv_dim = self.k_head_dim * self.k_heads * 2 + self.head_dim * self.heads
            return (rows, _divide("conv width", conv_dim, tp)), (
                _divide("value heads", self.heads, tp),
                self.head_dim,
                self.k_head_dim,
            )
        if self.kind == "mamba2":
            groups = self.n_groups + (0 if self.n_groups % tp == 0 else tp - self.n_groups)  # replicated to tp
            conv_dim = self.inner + 2 * groups * self.state_size
            return (rows, _divide("conv width", conv_dim, tp)), (
                _divide("heads", self.heads, tp),
                self.head_dim,
                self.state_size,
            )
        if self.kind == "mamba":
            inner = _divide("intermediate size", self.inner, tp)
            return (self.conv_kernel - 1, inner), (inner, self.state_size)
        if self.kind == "short_conv":
            return ((self.conv_kernel - 1, _divide("conv width", self.inner, tp)),)
        k_heads, k_dim = self.k_heads or self.heads, self.k_head_dim or self.head_dim  # kda
        conv_dim = self.heads * self.head_dim + 2 * k_heads * k_dim
        return (rows, _divide("conv width", conv_dim, tp)), (
            _divide("heads", self.heads, tp),
            self.head_dim,
            self.head_dim,
        )


def elements(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
