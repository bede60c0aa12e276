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
# a layer's kind in Decoder.layer_kinds: attention over every token, a window, a chunk, or a state layer; "ffn": a
# layer with no sequence mixer and no cache (Nemotron-H's MLP and MoE layers, "-" and "E" in its pattern);
# "parallel": attention and a state mixer side by side in one layer, each with its cache (Falcon-H1)
LAYER_KINDS = ("full", "sliding", "chunked", "state", "ffn", "parallel")
STATE_DTYPES = ("auto", "float32", "bfloat16", "float16")  # vLLM's MambaDType: --mamba-cache-dtype, --mamba-ssm-dtype
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
CACHE_KINDS = ("full", "sliding", "chunked", "state")  # what a layer caches: cache_layers' keys


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
    # the mixer's own tensors (parameters.py counts them; no state shape depends on these)
    conv_bias: bool = False  # a bias on the causal convolution (Mamba's, Mamba2's use_conv_bias, LFM2's conv_bias)
    proj_bias: bool = False  # biases on the input and output projections (Mamba's and Mamba2's use_bias)
    dt_rank: int = 0  # Mamba's rank of the time-step projection (x_proj, dt_proj)
    gated_norm: bool = True  # Mamba2's gated RMSNorm of `inner` before out_proj (Falcon-H1: mamba_rms_norm)
    # what the hybrid model adds around its mixers that the Decoder's fields do not say
    attn_gate: bool = False  # the attention layers gate their output: q_proj is twice as wide (Qwen3-Next, Qwen3.5)
    one_sublayer: bool = False  # each layer is one norm and one sublayer: mixer, attention or FFN (Nemotron-H)
    shared_d_ff: int = 0  # the shared expert's width when it is not moe_d_ff (Qwen3-Next, Granite 4); 0: moe_d_ff
    shared_gate: bool = False  # a hidden -> 1 sigmoid gate on the shared expert (Qwen3-Next, Qwen3.5-MoE)
    # the temporal state's dtype the config asks for (Qwen3.5's mamba_ssm_dtype, Nemotron-H's mamba_ssm_cache_dtype):
    # vLLM's mamba_ssm_cache_dtype when its flag is "auto"; "auto" here: the conv state's
    ssm_dtype: str = "auto"

    def __post_init__(self):
        check_choice("mixer", self.kind, MIXERS)
        check_choice("ssm_dtype", self.ssm_dtype, STATE_DTYPES)
        check_int("conv_kernel", self.conv_kernel, 1, 1024)
        for name in ("heads", "head_dim", "k_heads", "k_head_dim", "state_size", "n_groups", "inner", "dt_rank",
                     "shared_d_ff"):  # fmt: skip
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


def state_dtypes(
    mixer: StateMixer, model_dtype: str, cache_dtype: str = "auto", ssm_dtype: str = "auto"
) -> tuple[str, ...]:
    """The dtype of each state tensor (as shapes() orders them), as vLLM's MambaStateDtypeCalculator picks them:
    the conv state in `cache_dtype` ("auto": the model's dtype); the temporal state in `ssm_dtype`, which "auto"
    leaves to the model's own default (mixer.ssm_dtype) and then to the conv state's; Kimi Delta Attention's
    temporal state is always float32. `model_dtype`: float32, bfloat16 or float16."""
    for field, value in (("mamba_cache_dtype", cache_dtype), ("mamba_ssm_dtype", ssm_dtype)):
        check_choice(field, value, STATE_DTYPES)
    check_choice("model dtype", model_dtype, tuple(DTYPE_BYTES))
    conv = model_dtype if cache_dtype == "auto" else cache_dtype
    if mixer.kind == "short_conv":
        return (conv,)
    if mixer.kind == "kda":
        return conv, "float32"
    temporal = ssm_dtype if ssm_dtype != "auto" else mixer.ssm_dtype
    return conv, conv if temporal == "auto" else temporal


def state_bytes(mixer: StateMixer, dtypes: tuple[str, ...], tp: int = 1, num_spec: int = 0) -> int:
    """Bytes of one sequence's state in one layer on one rank: each tensor of shapes() in its dtype."""
    shapes = mixer.shapes(tp, num_spec)
    return sum(elements(s) * DTYPE_BYTES[d] for s, d in zip(shapes, dtypes, strict=True))


def cache_layers(layer_kinds: tuple[str, ...]) -> dict[str, int]:
    """Layers per cache kind (CACHE_KINDS, those present): a "parallel" layer counts once as full attention and once
    as a state layer (vLLM registers both), an "ffn" layer caches nothing."""
    counts = dict.fromkeys(CACHE_KINDS, 0)
    for kind in layer_kinds:
        for cached in ("full", "state") if kind == "parallel" else () if kind == "ffn" else (kind,):
            counts[cached] += 1
    return {k: n for k, n in counts.items() if n}


def elements(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
