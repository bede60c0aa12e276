"""What a serving engine (vLLM) will see on a GPU: its memory budget, the activation peak of its profiling run,
the KV blocks left, and the concurrency and startup check it logs, modelled from the engine's source.

V1 follows vllm/v1 (gpu_worker.determine_available_memory, kv_cache_utils, kv_cache_interface) as of 0.11, and a
hybrid model (full and sliding-window layers) as the hybrid KV-cache manager of kv_cache_utils at commit 001cabc1
groups it (docs/serving.md); V0 follows vllm/worker/worker.py determine_num_available_blocks and cache_engine.py as
of 0.6.6-0.8. The weights, non-torch memory and activation peak are estimates unless figures measured in a log (or
the checkpoint's stored bytes, for the weights) are given.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, replace

from attncore.checks import ConfigError, check_choice, check_int
from serving import adapters, engine_advice, vllm_hybrid
from serving.context_limit import ContextLimit
from serving.kvcache import DTYPE_BITS, GB, GIB, NVFP4_BLOCK, weight_bytes
from serving.lora import LoraSettings
from serving.parameters import Decoder, count_parameters
from serving.presets import CARDS
from serving.releases import LATEST, RELEASES
from serving.speculative import Speculative

VERSIONS = {
    "v1": "vLLM V1 engine (0.11 source, hybrid models grouped as at commit 001cabc1; 0.8.5-0.10 the same for "
    "models without interleaved sliding windows)",
    "v0": "vLLM V0 engine (0.6.6-0.8 source, worker.py)",
}
KV_DTYPES = ("auto", "bf16", "fp16", "fp32", "fp8", "fp8_e4m3", "fp8_e5m2", "nvfp4")  # auto: the model's dtype
# nvfp4: vLLM releases after the 0.11 modelled here (CacheDType "nvfp4", V1 only, not MLA): each head's vector packed
# as head_size/2 bytes of E2M1 values and head_size/16 FP8 E4M3 scales (nvfp4_kv_cache_full_dim)
MODEL_DTYPES = ("bf16", "fp16", "fp32")  # what activations and an "auto" cache are stored in
SWAP_SPACE = 4 * GIB  # V0's --swap-space default: the CPU blocks it logs
NON_TORCH_GIB = {1: 0.10, 2: 0.30}  # estimate from logs: 0.03-0.10 GiB on one GPU, 0.16-0.30 GiB per GPU at TP 2
MLA_ALIGN = 256  # V0 pads each MLA cache entry to 256 bytes on CUDA (VLLM_CUDA_MEM_ALIGN_KV_CACHE=1)
LOGIT_BYTES = 4  # the sampler's float32 copy of each logit, beside the logits in the model's dtype
# Bytes per (sequence, vocabulary entry) alive at the widest point of the profiling run's sampler, beside the
# logits in the model's dtype. The dummy requests sample with top_p < 1 and top_k = vocab - 1, so:
# V0 (model_executor/layers/sampler.py, _apply_top_k_top_p): the float32 logits 4, logits.sort()'s values 4 and
# int64 indices 8, the top-k mask 1, softmax 4, cumsum 4, the top-p mask 1 and the scattered result 4 = 30.
# V1 (v1/sample/ops/topk_topp_sampler.py, FlashInfer's top_k_top_p_sampling_from_logits, its default on CUDA):
# the float32 logits 4, the top-k-masked logits 4 and the probabilities 4 = 12 (without FlashInfer, torch's sort
# path, as V0's, needs about twice that).
SAMPLER_BYTES = {"v0": 30, "v1": 12}
MAX_SEARCH_LEN = 2**31  # the longest max_model_len searched for
MIN_TOTAL_GIB = 0.001  # a GPU of less than about 1 MiB is a typo, not a card
KINDS = ("exact", "measured", "estimate")  # a figure's kind is the least sure of its inputs', in this order


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _fraction(field, value, low, high):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ConfigError(field, f"must be a number from {low} (excluded) to {high}, got {value!r}")
    if not low < value <= high:
        raise ConfigError(field, f"must be from {low} (excluded) to {high}, got {value:g}")


@dataclass(frozen=True)
class EngineSettings:
    """The engine's flags that change the fit (vLLM's names), and figures measured in the user's own log."""

    version: str = "v1"
    gpu_memory_utilization: float = 0.9
    max_model_len: int = 8192
    block_size: int = 16
    kv_cache_dtype: str = "auto"
    max_num_batched_tokens: int | None = None  # None: the engine's default for this card and max_model_len
    max_num_seqs: int | None = None
    tensor_parallel_size: int = 1
    window_layers: int | None = None  # layers with the model's sliding window; None: the model's own pattern
    # figures from a startup log, in GiB (None: estimated); kv_cache_memory_gib is V1's --kv-cache-memory-bytes
    weights_gib: float | None = None
    non_torch_gib: float | None = None
    activation_gib: float | None = None
    kv_cache_memory_gib: float | None = None
    allow_long_max_model_len: bool = False  # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: past the derived maximum, a warning
    # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1: chunked layers paged as such by V1's hybrid manager;
    # without it (0.11's default) the engine disables that manager for a chunked model and pages every layer full
    allow_chunked_hybrid: bool = False
    # one pipeline stage's worker (serving/pipeline.py fits each): the GPUs in all, for the non-torch estimate, and
    # whether this worker samples (vLLM samples on the last stage only)
    pipeline_parallel_size: int = 1
    samples: bool = True
    # beyond the model (serving/adapters.py): --enable-lora's buffers, a drafter for speculative decoding, and the
    # CUDA-graph estimate vLLM 0.21 on subtracts (cuda_graph_gib: your log's "Estimated CUDA graph memory")
    lora: LoraSettings | None = None
    speculative: Speculative | None = None
    cuda_graph_profiling: bool = False
    cuda_graph_gib: float | None = None
    # a vLLM release (serving/releases.py; implies V1): its token line, and a hybrid model's paging (vllm_hybrid);
    # None: today's V1 accounting, and a model with state layers as the latest release modelled
    vllm_version: str | None = None
    prefix_caching: bool = False  # a state group then keeps two pages a request (vLLM's mamba_cache_mode "align")
    num_speculative_tokens: int = 0  # a state page per token, and a conv state row per token
    mamba_cache_dtype: str = "auto"  # the conv state's (auto: the model's dtype)
    mamba_ssm_dtype: str = "auto"  # the temporal state's (auto: the config's, else the conv state's)

    def __post_init__(self):
        check_choice("version", self.version, tuple(VERSIONS))
        if self.vllm_version is not None:
            check_choice("vllm_version", self.vllm_version, tuple(RELEASES))
            if self.version != "v1":
                raise ConfigError("vllm_version", "a release number implies the V1 engine: drop --engine-version v0")
        check_int("num_speculative_tokens", self.num_speculative_tokens, 0, 1024)
        check_choice("mamba_cache_dtype", self.mamba_cache_dtype, vllm_hybrid.STATE_DTYPES)
        check_choice("mamba_ssm_dtype", self.mamba_ssm_dtype, vllm_hybrid.STATE_DTYPES)
        _fraction("gpu_memory_utilization", self.gpu_memory_utilization, 0, 1)
        check_int("max_model_len", self.max_model_len, 1, MAX_SEARCH_LEN)
        check_int("block_size", self.block_size, 1, 4096)
        check_choice("kv_cache_dtype", self.kv_cache_dtype, KV_DTYPES)
        for name in ("max_num_batched_tokens", "max_num_seqs"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1, 10_000_000)
        check_int("tensor_parallel_size", self.tensor_parallel_size, 1, 1024)
        check_int("pipeline_parallel_size", self.pipeline_parallel_size, 1, 1024)
        for name in (
            "allow_long_max_model_len",
            "allow_chunked_hybrid",
            "samples",
            "cuda_graph_profiling",
            "prefix_caching",
        ):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, f"must be true or false, got {getattr(self, name)!r}")
        if self.window_layers is not None and (
            isinstance(self.window_layers, bool) or not isinstance(self.window_layers, numbers.Integral)
        ):  # its range, 0 to the model's layers, is checked by engine_fit: one range in every message
            raise ConfigError("window_layers", f"must be an integer, got {self.window_layers!r}")
        for name, kind in (("lora", LoraSettings), ("speculative", Speculative)):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), kind):
                raise ConfigError(name, f"must be a {kind.__name__} or None, got {getattr(self, name)!r}")
        if self.cuda_graph_gib is not None and not self.cuda_graph_profiling:
            raise ConfigError("cuda_graph_gib", "is the estimate of a release that profiles CUDA graphs: turn the "
                              "profiling on (vLLM 0.21 on)")  # fmt: skip
        for name in ("weights_gib", "non_torch_gib", "activation_gib", "kv_cache_memory_gib", "cuda_graph_gib"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value <= 100_000
            ):
                raise ConfigError(name, f"must be a size in GiB from 0 to 100000, got {value!r}")


def default_batch(s: EngineSettings, total_gib: float, gpu: str | None = None) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) as the engine picks them for `vllm serve` when not given.

    V0: 256 sequences; chunked prefill (2048 tokens) when max_model_len > 32768, else max(max_model_len, 2048).
    V1 0.11: 8192 tokens and 1024 sequences on a card of >= 70 GiB that is not an A100, else 2048 and 256."""
    if s.version == "v0":
        tokens = 2048 if s.max_model_len > 32768 else max(s.max_model_len, 2048)
        seqs = 256
    else:
        big = total_gib >= 70 and not (gpu or "").startswith("a100")
        tokens, seqs = (8192, 1024) if big else (2048, 256)
    tokens = s.max_num_batched_tokens or tokens
    seqs = s.max_num_seqs or seqs
    return tokens, min(seqs, tokens) if s.version == "v1" else seqs


def activation_estimate(
    a: Decoder, tokens: int, seqs: int, tp: int = 1, dtype_bytes: int = 2, version: str = "v1"
) -> dict[str, int]:
    """Bytes alive at the widest points of the profiling run: one forward over `tokens`, then the sampler over the
    logits of `seqs` sequences.

    mlp: the residual and the normed input (2·H) plus the gated FFN's gate-and-up output and its product (3·I/tp;
    2·I/tp ungated; MoE: the routed and shared experts' widths a token uses). attention: residual, input, fused
    q/k/v and output. logits: one row per sequence over the vocabulary, in the model's dtype and as float32 (the
    estimate before the sampler was modelled). sampler: the forward's last hidden states (tokens · H, kept while it
    samples), the logits in the model's dtype and SAMPLER_BYTES per entry of the sampler's float32 work (the
    vocabulary is gathered whole on the sampling rank). The peak is the largest of mlp, attention and sampler;
    cuBLAS/attention workspaces, the allocator's rounding and MoE routing buffers are not counted."""
    H, V, b = a.d_model, a.vocab_size, dtype_bytes
    ffn = a.d_ff
    if a.n_experts:
        moe = (a.experts_per_token + a.n_shared_experts) * a.moe_d_ff
        ffn = max(moe, a.d_ff if a.n_dense_layers else 0)
    gated = 3 if a.ffn == "swiglu" else 2
    mlp = tokens * b * (2 * H + gated * ffn // tp)
    heads = max(1, a.n_heads // tp)
    if a.kv_lora_rank:
        qkv = heads * (a.d_head + a.rope_head_dim) + a.kv_lora_rank + a.rope_head_dim
        out = heads * (a.v_head_dim or a.d_head)
    else:
        qkv = (heads + 2 * max(1, a.kv_heads // tp)) * a.d_head
        out = heads * a.d_head
    attention = tokens * b * (2 * H + qkv + out)
    logits = seqs * V * (b + LOGIT_BYTES)
    sampler = tokens * H * b + seqs * V * (b + SAMPLER_BYTES[version])
    return {"mlp": mlp, "attention": attention, "logits": logits, "sampler": sampler,
            "peak": max(mlp, attention, sampler)}  # fmt: skip


def _forward(a: Decoder, tokens: int, tp: int, dtype_bytes: int) -> int:
    """The forward's widest tensors over `tokens` (activation_estimate's mlp and attention phases, no sampler)."""
    parts = activation_estimate(a, tokens, 1, tp, dtype_bytes)
    return max(parts["mlp"], parts["attention"])


def worst(*kinds: str) -> str:
    """The kind of a figure computed from figures of these kinds: the least sure of them (exact < measured <
    estimate)."""
    return max(kinds, key=KINDS.index)


@dataclass(frozen=True)
class EngineFit:
    """The engine's accounting for one model on one GPU; bytes per GPU (one tensor-parallel rank)."""

    version: str
    engine: str  # the version modelled, in words
    total_bytes: int
    budget_bytes: int  # total × gpu_memory_utilization
    weights_bytes: int
    non_torch_bytes: int
    activation_bytes: int
    activation_parts: dict  # activation_estimate's terms (empty when the peak was measured)
    weight_params: int
    weight_dtype: str
    tensor_parallel_size: int
    measured: tuple[str, ...]  # which of weights, non_torch, activation, kv_cache_memory came from a log
    kinds: dict  # figure -> exact | measured | estimate (KIND_FIGURES), each the least sure of its inputs
    kv_bytes: int  # what is left for the cache (may be negative)
    max_num_batched_tokens: int
    max_num_seqs: int
    block_size: int
    kv_dtype: str
    page_bytes: int  # one block of one layer
    layers: int
    window: int | None
    window_layers: int
    groups: tuple[tuple[str, int], ...]  # (full|sliding|chunked, number of groups) as V1's hybrid manager groups
    group_size: int  # layers sharing one block (V1: tensors in the pool; V0: every layer)
    num_blocks: int
    tokens: int  # the engine's "GPU KV cache size", or blocks × block_size
    max_model_len: int
    blocks_per_request: int
    concurrency: float
    cpu_blocks: int | None  # V0 only: swap_space / block
    starts: bool
    error: str | None  # the engine's error text when it would not start
    longest_max_model_len: int | None  # None: any length (sliding windows cap the cache)
    weight_format: str = ""  # the checkpoint's storage when its stored bytes were given (weights.StoredWeights)
    derived_max_model_len: int | None = None  # the model's, from its config.json (None: not known here)
    max_model_len_rule: str = ""  # how it was derived
    max_model_len_warning: str | None = None  # vLLM's warning past it, with its override set
    paging_note: str = ""  # how the engine pages a model's windowed layers, when it is not as the model attends
    advice: tuple[str, ...] = ()  # when it does not start: the changes that would start it (engine_advice)
    advice_note: str | None = None  # why vLLM's advice in `error` to raise gpu_memory_utilization cannot work here
    # serving/adapters.py: LoRA buffers, a drafter, CUDA graphs (Extras.to_dict), their deduction rows and log lines
    extras: dict | None = None
    extra_rows: tuple = ()
    graph_log: tuple[str, ...] = ()
    draft_layers: int = 0  # the drafter's attention layers in the pool
    draft_block_bytes: int = 0  # their bytes per block when their page is not the target's (else in group_size)
    hybrid: vllm_hybrid.HybridPaging | None = None  # a model with state layers: its release's paging
    vllm_version: str | None = None  # the release fitted as (None: VERSIONS' source)

    @property
    def block_bytes(self) -> int:
        """One block over all the layers that share it (a drafter's layers of another page beside them)."""
        return self.page_bytes * self.group_size + self.draft_block_bytes

    def to_dict(self) -> dict:
        out = asdict(self) | {"block_bytes": self.block_bytes, "log": log_lines(self)}
        if self.hybrid is None:
            return {k: v for k, v in out.items() if k != "hybrid"}
        return out | {"capacity": vllm_hybrid.capacity_sentence(self.hybrid)}


def _page_bytes(a: Decoder, s: EngineSettings, model_bytes: int) -> tuple[int, str]:
    if s.kv_cache_dtype == "nvfp4":
        if a.kv_lora_rank or s.version == "v0" or a.d_head % NVFP4_BLOCK:
            raise ConfigError("kv_cache_dtype", "nvfp4 needs the V1 engine, no latent attention (MLA) and a head_dim "
                              f"divisible by {NVFP4_BLOCK}; use fp8 here")  # fmt: skip
        heads = max(1, a.kv_heads // s.tensor_parallel_size)
        return 2 * s.block_size * heads * (a.d_head // 2 + a.d_head // NVFP4_BLOCK), "nvfp4 (4-bit, FP8 scale per 16)"
    kv_bytes = model_bytes if s.kv_cache_dtype == "auto" else DTYPE_BITS[s.kv_cache_dtype[:3]] // 8
    if a.kv_lora_rank:  # one latent + RoPE key per token, not split across ranks
        entry = a.kv_lora_rank + a.rope_head_dim
        if s.version == "v0":
            entry = cdiv(entry * model_bytes, MLA_ALIGN) * MLA_ALIGN // model_bytes
        return s.block_size * entry * kv_bytes, f"{kv_bytes * 8}-bit"
    heads = max(1, a.kv_heads // s.tensor_parallel_size)
    return 2 * s.block_size * heads * a.d_head * kv_bytes, f"{kv_bytes * 8}-bit"


def _groups(full: int, sliding: int, kind: str = "sliding") -> tuple[int, tuple[tuple[str, int], ...]]:
    """V1's grouping (kv_cache_utils._get_kv_cache_groups_uniform_page_size): one group per type when uniform,
    else groups of min(layers per type) layers (max when max < 1.5 × min), each type in cdiv(n, size) groups;
    `kind` names the windowed type (sliding, or chunked)."""
    if not sliding or not full:
        return full + sliding, ((kind if sliding else "full", 1),)
    lo, hi = min(full, sliding), max(full, sliding)
    size = hi if hi < 1.5 * lo else lo
    return size, (("full", cdiv(full, size)), (kind, cdiv(sliding, size)))


def _error(s: EngineSettings, fit: dict) -> str | None:
    kv, tokens = fit["kv_bytes"], fit["tokens"]
    if fit["num_blocks"] <= 0 or kv <= 0:
        return (
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
            "initializing the engine."
        )
    if s.version == "v0":
        if s.max_model_len <= tokens:
            return None
        return (
            f"The model's max seq len ({s.max_model_len}) is larger than the maximum number of tokens that can be "
            f"stored in KV cache ({tokens}). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
            "when initializing the engine."
        )
    needed = fit["needed"](s.max_model_len)
    if needed <= kv:
        return None
    return (
        f"To serve at least one request with the models's max seq len ({s.max_model_len}), "
        f"({needed / GIB:.2f} GiB KV cache is needed, which is larger than the available KV cache memory "
        f"({kv / GIB:.2f} GiB). Based on the available memory, the estimated maximum model length is "
        f"{fit['longest']}. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine."
    )


def engine_fit(
    a: Decoder,
    total_gib: float,
    s: EngineSettings = EngineSettings(),
    *,
    weight_dtype: str = "bf16",
    model_dtype: str = "bf16",
    gpu: str | None = None,
    weight_params: int | None = None,
    weight_bytes_given: int | None = None,
    weight_label: str = "",
    limit: ContextLimit | None = None,
    advise: bool = True,
) -> EngineFit:
    """The engine's fit of model `a` on a GPU whose torch total is total_gib (per rank with tensor parallelism).

    budget = total × util; kv = budget − weights − non_torch − activation peak (each measured or estimated; the
    weights are weight_bytes_given ÷ tp when the checkpoint's bytes are known, stored as weight_label);
    blocks = kv // (page × layers sharing a block); tokens, concurrency and the startup check as the engine
    computes them. `gpu` (a CARDS name) only picks V1's defaults (A100s get the smaller ones). `limit`, the
    model's derived maximum (context_limit.py): a longer max_model_len is refused as vLLM refuses it at startup
    (ConfigError on max_model_len), unless the settings allow it as VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 does. A fit that
    does not start says, when `advise`, what would start it (engine_advice: each change tried as a fit of its own),
    and why vLLM's advice to raise gpu_memory_utilization cannot work where no utilization up to 1 starts it."""
    if limit is not None and not s.allow_long_max_model_len and (refusal := limit.refusal(s.max_model_len)):
        raise ConfigError("max_model_len", refusal)
    if isinstance(total_gib, numbers.Real) and not isinstance(total_gib, bool) and 0 < total_gib < MIN_TOTAL_GIB:
        raise ConfigError("total_gib", f"must be from {MIN_TOTAL_GIB} to 100000 GiB, got {total_gib:g}")
    _fraction("total_gib", total_gib, 0, 100_000)
    check_choice("weight_dtype", weight_dtype, tuple(DTYPE_BITS))
    check_choice("model_dtype", model_dtype, MODEL_DTYPES)
    model_bytes, tp = DTYPE_BITS[model_dtype] // 8, s.tensor_parallel_size
    if s.kv_cache_memory_gib is not None and s.version == "v0":
        raise ConfigError("kv_cache_memory_gib", "is a V1 flag (--kv-cache-memory-bytes); V0 always profiles")
    if s.cuda_graph_profiling and s.version == "v0":
        raise ConfigError("cuda_graph_profiling", "is V1's (vLLM 0.21 on); V0 captures its graphs after the cache")
    window_layers = a.windowed_layers if s.window_layers is None else s.window_layers
    check_int("window_layers", window_layers, 0, a.n_layers)
    if window_layers and not a.sliding_window:
        raise ConfigError("window_layers", "needs a sliding window on the model (window > 0)")

    total = round(total_gib * GIB)
    budget = int(total * s.gpu_memory_utilization)
    tokens_t, seqs = default_batch(s, total_gib, gpu)
    params = count_parameters(a).total if weight_params is None else weight_params
    measured = tuple(k for k in ("weights", "non_torch", "activation") if getattr(s, f"{k}_gib") is not None)
    stored = weight_bytes(params, weight_dtype) if weight_bytes_given is None else weight_bytes_given
    weights = stored // tp if s.weights_gib is None else round(s.weights_gib * GIB)
    non_torch = NON_TORCH_GIB[min(tp * s.pipeline_parallel_size, 2)] if s.non_torch_gib is None else s.non_torch_gib
    non_torch = round(non_torch * GIB)
    parts = {} if s.activation_gib is not None else activation_estimate(a, tokens_t, seqs, tp, model_bytes, s.version)
    if parts and not s.samples:  # a pipeline stage before the last: no logits, no sampler
        parts = parts | {"logits": 0, "sampler": 0, "peak": max(parts["mlp"], parts["attention"])}
    activation = round(s.activation_gib * GIB) if s.activation_gib is not None else parts["peak"]
    ex = adapters.extras(
        a, lora=s.lora, speculative=s.speculative, cuda_graphs=s.cuda_graph_profiling, cuda_graph_gib=s.cuda_graph_gib,
        tp=tp, model_bytes=model_bytes, bytes_per_param=stored / params if params else DTYPE_BITS[weight_dtype] / 8,
        weights_measured=s.weights_gib is not None, kv_given=s.kv_cache_memory_gib is not None, total_bytes=total,
        utilization=s.gpu_memory_utilization, max_num_seqs=seqs,
        forward_bytes=lambda n: _forward(a, n, tp, model_bytes),
    )  # fmt: skip
    kv = budget - weights - non_torch - activation - ex.deducted
    if s.kv_cache_memory_gib is not None:
        kv, measured = round(s.kv_cache_memory_gib * GIB), (*measured, "kv_cache_memory")

    page, kv_dtype = _page_bytes(a, s, model_bytes)
    draft_layers = ex.drafter.kv_layers if ex.drafter else 0
    same = draft_layers if ex.drafter and ex.drafter.same_page else 0  # these join the target's full layers
    draft_block = 0 if same else draft_layers * _page_bytes(ex.drafter.kv_model, s, model_bytes)[0] if ex.drafter else 0
    bs, window = s.block_size, a.sliding_window
    chunked, paging_note = a.window_kind == "chunked" and window_layers > 0, ""
    if chunked and s.version == "v1" and not s.allow_chunked_hybrid:
        paging_note = (f"chunked local attention: vLLM disables its hybrid KV-cache manager for it by default (a "
                       f"latency regression), so the {window_layers} chunked layers are paged as full ones; "
                       "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 pages them by their chunk")  # fmt: skip
    if s.version == "v0" or paging_note:  # one pool, every layer full (v0: windows do not shrink it; the note: why)
        group_size, groups, window_layers = a.n_layers + same, (("full", 1),), 0
    else:
        windowed = "chunked" if chunked else "sliding"
        group_size, groups = _groups(a.n_layers - window_layers + same, window_layers, windowed)
    if draft_block and len(groups) > 1:
        raise ConfigError(
            "speculative_model",
            "a draft model whose KV page differs from the target's, beside "
            "windowed layers, is not modelled: give a draft of the target's KV heads and head_dim",
        )
    if s.num_speculative_tokens and a.mixer is None and s.speculative is None:
        raise ConfigError("num_speculative_tokens", "needs a drafter (--speculative-method or --speculative-model) on "
                          "a model without state layers")  # fmt: skip
    hybrid = None
    if a.mixer is not None:  # state layers: the release's paging (vllm_hybrid) in place of the attention-only one
        if s.version == "v0":
            raise ConfigError("version", "V0 is not modelled for state layers (Mamba, linear attention): use v1")
        if draft_block:
            raise ConfigError("speculative_model", "a draft model whose KV page differs from the target's, beside "
                              "state layers, is not modelled: use mtp or eagle (the target's page), or tokens alone "
                              "for the state's rows")  # fmt: skip
        hs = s if s.vllm_version else replace(s, vllm_version=LATEST)
        token = _page_bytes(a, replace(s, block_size=1), model_bytes)[0]  # one token's attention page
        kind = "chunked" if a.window_kind == "chunked" else "sliding"
        hybrid, hybrid_needed = vllm_hybrid.paging(a, hs, kv, model_bytes, token, tokens_t, window_layers, kind,
                                                   same)  # fmt: skip
        page, bs, group_size, groups = hybrid.page_bytes, hybrid.block_size, hybrid.group_size, hybrid.groups
        paging_note = ""
    block_bytes = page * group_size + draft_block  # vLLM's UniformTypeKVCacheSpecs: the layers' pages side by side
    blocks = max(kv // block_bytes, 0) if kv > 0 else 0

    def per_layer_blocks(kind: str, length: int) -> int:
        if kind == "full":
            return cdiv(length, bs)
        if kind == "chunked":  # ChunkedLocalAttentionSpec: at most one chunk and the batch's tokens, no extra block
            return cdiv(min(window + tokens_t, length), bs)
        return cdiv(min(window - 1 + tokens_t, length), bs) + 1  # SlidingWindowSpec.max_memory_usage_bytes

    def needed(length: int) -> int:  # the startup check: a request's worst case in every group, padding included
        return block_bytes * sum(n * per_layer_blocks(kind, length) for kind, n in groups)

    if s.version == "v0":
        tokens = blocks * bs
        per_request = cdiv(s.max_model_len, bs)
        concurrency = tokens / s.max_model_len
        longest = tokens
        cpu_blocks = SWAP_SPACE // block_bytes
    elif hybrid:
        tokens, per_request, concurrency, needed = hybrid.tokens, hybrid.per_request, hybrid.concurrency, hybrid_needed
        longest = _longest(needed, kv) if kv > 0 else 0
        cpu_blocks = None
    else:
        n_groups = sum(n for _, n in groups)
        tokens = blocks // n_groups * bs
        per_request = sum(n * per_layer_blocks(kind, s.max_model_len) for kind, n in groups)
        concurrency = blocks / per_request
        if s.vllm_version and RELEASES[s.vllm_version].token_line == "concurrency":
            tokens = int(concurrency * s.max_model_len)
        longest = _longest(needed, kv) if kv > 0 else 0
        cpu_blocks = None
    fit = {"kv_bytes": kv, "tokens": tokens, "num_blocks": blocks, "needed": needed, "longest": longest}
    card = CARDS.get(gpu) if gpu is not None else None
    kinds = figure_kinds(measured, total_kind="exact" if card is None else "measured" if card.logged else "estimate")
    if ex.kinds and "kv_cache_memory" not in measured:  # the cache is what the extras left: as sure as they are
        kv_kind = worst(kinds["kv"], *ex.kinds.values())
        kinds = kinds | ex.kinds | {k: kv_kind for k in ("kv", "blocks", "tokens", "concurrency")}
    elif ex.kinds:
        kinds = kinds | ex.kinds
    error = _error(s, fit)
    if error and s.version == "v1" and longest is not None:
        longest = min(longest, s.max_model_len)  # vLLM searches below the max_model_len asked for
    release = hybrid.release if hybrid else s.vllm_version
    words = f"vLLM {RELEASES[release].summary}" if release else VERSIONS[s.version]
    fit = EngineFit(
        s.version, words, total, budget, weights, non_torch, activation, parts, params,
        weight_dtype, tp, measured, kinds, kv, tokens_t, seqs, bs, kv_dtype, page, a.n_layers, window, window_layers,
        groups, group_size, blocks, tokens, s.max_model_len, per_request, concurrency, cpu_blocks, error is None,
        error, longest if kv > 0 else 0, weight_label if weight_bytes_given is not None else "",
        limit.tokens if limit else None, limit.rule if limit else "",
        limit.warning(s.max_model_len) if limit else None, paging_note, hybrid=hybrid, vllm_version=release,
    )  # fmt: skip
    if ex is not adapters.NONE:
        fit = replace(fit, extras=ex.to_dict(), extra_rows=ex.rows, draft_layers=draft_layers,
                      draft_block_bytes=draft_block,
                      graph_log=tuple(ex.graphs.log_lines(s.gpu_memory_utilization)) if ex.graphs else ())  # fmt: skip
    if fit.starts or not advise:
        return fit

    def refit(v: engine_advice.Variant) -> EngineFit:
        if a.mixer is not None and not _splits(a, v.settings.get("tensor_parallel_size", tp)):
            return fit  # vLLM refuses a tensor-parallel size that does not divide the state's widths
        return engine_fit(
            a, total_gib, replace(s, **v.settings), weight_dtype=v.weight_dtype or weight_dtype,
            model_dtype=model_dtype, gpu=gpu, weight_params=weight_params,
            weight_bytes_given=None if v.weight_dtype else weight_bytes_given, weight_label=weight_label,
            limit=limit, advise=False,
        )  # fmt: skip

    util_starts = refit(engine_advice.Variant({"gpu_memory_utilization": 1.0})).starts
    bits = weights * tp * 8 / params if params else DTYPE_BITS[weight_dtype]
    advice = engine_advice.remedies(fit, refit, a.n_heads, bits)
    return replace(fit, advice=advice, advice_note=engine_advice.util_note(error, fit, util_starts))


def _splits(a: Decoder, tp: int) -> bool:
    """Whether tensor parallelism of `tp` divides a hybrid model's state tensors (state.StateMixer.shapes)."""
    try:
        a.mixer.shapes(tp)
    except ConfigError:
        return False
    return True


KIND_FIGURES = ("budget", "weights", "non_torch", "activation", "kv", "blocks", "tokens", "concurrency")


def figure_kinds(measured: tuple[str, ...], total_kind: str = "exact") -> dict[str, str]:
    """Each figure's kind: measured (typed from the user's log, or a card's total read from a published vLLM log),
    estimate, or exact (the engine's arithmetic on exact inputs); a figure computed from others is the least sure
    of them. The budget (total × utilization) takes the total's kind: exact for a typed total, measured for a card
    a published vLLM log names, an estimate otherwise; the cache is budget − weights − non-torch − activation
    unless --kv-cache-memory-bytes was given, and the blocks, tokens and concurrency follow from it."""
    out = {"budget": total_kind}
    out |= {k: "measured" if k in measured else "estimate" for k in ("weights", "non_torch", "activation")}
    out["kv"] = "measured" if "kv_cache_memory" in measured else worst(*out.values())
    return out | {k: out["kv"] for k in ("blocks", "tokens", "concurrency")}


def log_estimated(f: EngineFit) -> bool:
    """Whether the lines the engine would log rest on an estimate (else: on the user's logged figures alone)."""
    shown = KIND_FIGURES if f.version == "v0" else ("kv", "tokens", "concurrency")
    return any(f.kinds[k] == "estimate" for k in shown)


def _longest(needed, kv: int) -> int | None:
    """The largest max_model_len whose worst case fits kv bytes (vLLM's estimate_max_model_len, a binary search);
    None when even the longest searched fits (every layer windowed)."""
    if needed(MAX_SEARCH_LEN) <= kv:
        return None
    lo, hi = 0, MAX_SEARCH_LEN  # needed(lo) <= kv < needed(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if needed(mid) <= kv else (lo, mid)
    return lo


def log_lines(f: EngineFit) -> list[str]:
    """The startup lines the engine would print, in its own words and number formats."""
    g = GIB
    if f.hybrid is not None:  # its own lines, the CUDA-graph estimate around the available memory as below
        lines = vllm_hybrid.log_lines(f.hybrid, f.kv_bytes)
        at = next(i for i, line in enumerate(lines) if line.startswith("Available KV cache memory"))
        return [*lines[:at], *f.graph_log[:1], lines[at], *f.graph_log[1:], *lines[at + 1 :]]
    if f.version == "v0":
        util = f.budget_bytes / f.total_bytes
        return [
            f"the current vLLM instance can use total_gpu_memory ({f.total_bytes / g:.2f}GiB) x "
            f"gpu_memory_utilization ({util:.2f}) = {f.budget_bytes / g:.2f}GiB",
            f"model weights take {f.weights_bytes / g:.2f}GiB; non_torch_memory takes {f.non_torch_bytes / g:.2f}GiB;"
            f" PyTorch activation peak memory takes {f.activation_bytes / g:.2f}GiB; the rest of the memory "
            f"reserved for KV Cache is {f.kv_bytes / g:.2f}GiB.",
            f"# CUDA blocks: {f.num_blocks}, # CPU blocks: {f.cpu_blocks}",
            f"Maximum concurrency for {f.max_model_len} tokens per request: {f.concurrency:.2f}x",
        ]
    return [
        *f.graph_log[:1],
        f"Available KV cache memory: {f.kv_bytes / g:.2f} GiB",
        *f.graph_log[1:],
        f"GPU KV cache size: {f.tokens:,} tokens",
        f"Maximum concurrency for {f.max_model_len:,} tokens per request: {f.concurrency:.2f}x",
    ]


def tokens_formula(f: EngineFit) -> str:
    """How the token line ("GPU KV cache size") was computed, in words with the numbers substituted."""
    if f.vllm_version and RELEASES[f.vllm_version].token_line == "concurrency":
        return f"int(concurrency × max_model_len) = int({f.concurrency:.4f} × {f.max_model_len:,})"
    groups = sum(n for _, n in f.groups)
    per = f" ÷ {groups} groups" if groups > 1 else ""
    smallest = f.block_size if f.hybrid is None or f.hybrid.prefix_caching else min(f.block_size, f.max_model_len)
    return f"blocks{per} × smallest block size = {f.num_blocks:,}{f' ÷ {groups}' if per else ''} × {smallest:,}"


def deductions(f: EngineFit) -> list[dict]:
    """Each step of the budget with its formula, the numbers substituted, the result in GiB and its kind
    (exact: the engine's arithmetic; estimate; measured: from the user's log, or 'measured (published log)' for a
    card's total read from a published vLLM log)."""
    g, pct, kind = GIB, f.budget_bytes / f.total_bytes, f.kinds.get
    p = f.activation_parts
    bits = DTYPE_BITS[f.weight_dtype]
    weights = f"{f.weight_params:,} × {bits / 8:g} B ÷ {f.tensor_parallel_size}" if "weights" not in f.measured else ""
    if f.weight_format and "weights" not in f.measured:
        weights = f"{f.weight_params:,} parameters stored as {f.weight_format} ÷ {f.tensor_parallel_size}"
    act = (
        f"max(mlp {p['mlp'] / g:.3f}, attention {p['attention'] / g:.3f}, sampler {p['sampler'] / g:.3f}) "
        f"at {f.max_num_batched_tokens:,} batched tokens, {f.max_num_seqs:,} sequences"
        if p
        else "from your log"
    )
    rows = [
        (
            "budget",
            "total × gpu_memory_utilization",
            f"{f.total_bytes / g:.2f} GiB × {pct:.2f}",
            f.budget_bytes,
            "measured (published log)" if kind("budget") == "measured" else kind("budget"),
        ),
        (
            "weights",
            "stored bytes ÷ tp" if f.weight_format else "parameters × bytes ÷ tp",
            weights,
            -f.weights_bytes,
            kind("weights"),
        ),
        ("non-torch", "CUDA context, NCCL, cuBLAS outside torch", "", -f.non_torch_bytes, kind("non_torch")),
        ("activation peak", "profiling run's torch peak", act, -f.activation_bytes, kind("activation")),
    ]
    out = [{"term": t, "formula": fm, "numbers": n, "gib": v / g, "kind": k} for t, fm, n, v, k in rows]
    out += [{k: v for k, v in r.items() if k != "bytes"} | {"gib": r["bytes"] / g} for r in f.extra_rows]
    given = "kv_cache_memory" in f.measured
    formula = "--kv-cache-memory-bytes" if given else "budget − weights − non-torch − activation"
    formula += "".join(f" − {r['term']}" for r in f.extra_rows) if not given else ""
    out.append({"term": "KV cache", "formula": formula, "numbers": "", "gib": f.kv_bytes / g, "kind": kind("kv")})
    return out


def bytes_text(n: int) -> str:
    """GiB with its label, and the decimal GB beside it, labelled."""
    return f"{n / GIB:.2f} GiB ({n / GB:.2f} GB)"
