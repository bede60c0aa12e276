"""Key-value-cache memory: bytes of MHA/GQA/MQA and latent (MLA) caches, and the GPU fit question.

A sliding window caps the tokens of the layers that have it (all of them, or some: a hybrid model's full layers
keep every token), int8/int4 carry fp16 scales per group; the weights' memory sits beside the cache. Also the
series behind the dashboard's memory-against-context charts. A hybrid model's state layers (state.py) keep a fixed
state per sequence beside the attention layers' tokens: counted apart, in the dtypes vLLM gives them.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, replace

from attncore.checks import ConfigError, check_choice, check_int
from serving.decoder import MAX_WINDOW, WINDOW_KINDS
from serving.parameters import Decoder, count_parameters
from serving.state import StateMixer, cache_layers, state_bytes, state_dtypes

# --- units and bytes -------------------------------------------------------

GB = 10**9  # decimal gigabyte, the unit GPU memory is sold in
GIB = 2**30  # binary gibibyte, the unit memory is allocated in
MIB = 2**20

DTYPE_BITS = {"fp64": 64, "fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "int4": 4}
DTYPES = tuple(DTYPE_BITS)
GROUPED_DTYPES = ("int8", "int4")  # integer formats carry one fp16 scale per group of elements
SCALE_BYTES = 2  # one fp16 scale per group (symmetric); an asymmetric zero-point would add 2 more
CACHE_GROUP = 64  # cache elements per scale, along each head vector (Hugging Face QuantizedCache q_group_size)
WEIGHT_GROUP = 128  # weights per scale (the usual GPTQ/AWQ group size)
DEFAULT_RESERVE = 0.10  # GPU memory kept for the runtime, activations and fragmentation (vLLM uses 0.9 of it)


def stored_bytes(n_elements: int, dtype: str, group: int = 0) -> int:
    """Bytes of n elements stored as dtype; int8/int4 add one fp16 scale per `group` elements (0: none)."""
    check_choice("dtype", dtype, DTYPES)
    data = -(-n_elements * DTYPE_BITS[dtype] // 8)
    scales = -(-n_elements // group) * SCALE_BYTES if dtype in GROUPED_DTYPES and group else 0
    return data + scales


def weight_bytes(n_params: int, dtype: str) -> int:
    """The weights' memory: n_params in dtype, with WEIGHT_GROUP-sized scale groups for int8/int4."""
    return stored_bytes(n_params, dtype, WEIGHT_GROUP)


def human_bytes(n: float) -> str:
    """'1,610,612,736 B = 1.500 GiB = 1.611 GB': binary and decimal units, both labelled."""
    if n < GIB:
        return f"{n:,.0f} B = {n / MIB:.2f} MiB = {n / 10**6:.2f} MB"
    return f"{n:,.0f} B = {n / GIB:.3f} GiB = {n / GB:.3f} GB"


# --- the key-value cache -----------------------------------------------------


@dataclass(frozen=True)
class KVCache:
    """The cache of one workload: its geometry, its bytes, and the weights beside it."""

    attention: str  # MHA, GQA, MQA, or MLA (one latent vector per token and layer)
    n_layers: int
    kv_heads: int
    head_dim: int
    latent_dim: int  # MLA: kv_lora_rank + rope_head_dim; 0 otherwise
    context: int
    batch: int
    dtype: str
    group_size: int  # elements per fp16 scale for int8/int4 (0: no scales)
    window: int | None
    tokens_per_layer: int  # min(context, window): what a windowed layer keeps (a full layer keeps the context)
    bytes_per_token: int  # one more cached token of one sequence, over all layers (before any window is full)
    bytes: int
    weight_params: int | None
    weight_dtype: str  # the weights' element type, or their storage's label (e.g. 'AWQ 4-bit, ...')
    weight_bytes: int | None
    window_layers: int = 0  # layers with the window (0 without one); the other n_layers - window_layers are full
    window_kind: str = "sliding"  # what the windowed layers are: sliding, or chunked (Llama 4's local attention)
    # a hybrid's state layers (n_layers above are its attention layers): each sequence keeps state_bytes per layer,
    # its tensors in state_dtypes (conv, temporal), whatever the context; `bytes` includes them
    state_layers: int = 0
    state_bytes: int = 0
    state_dtypes: tuple[str, ...] = ()
    state_mixer: str = ""  # the mixer's kind (state.MIXERS)

    @property
    def gib(self) -> float:
        return self.bytes / GIB

    @property
    def gb(self) -> float:
        return self.bytes / GB

    @property
    def ratio(self) -> float | None:
        """Cache bytes over weight bytes."""
        return self.bytes / self.weight_bytes if self.weight_bytes else None

    @property
    def bytes_per_sequence(self) -> int:
        return self.bytes // self.batch

    @property
    def state_total(self) -> int:
        """Bytes of every sequence's state in every state layer (0 without state layers)."""
        return self.state_layers * self.state_bytes * self.batch

    @property
    def kv_bytes(self) -> int:
        """The attention layers' keys and values alone."""
        return self.bytes - self.state_total

    def by_kind(self) -> list[dict]:
        """One row per kind of layer (full, sliding or chunked, and a hybrid's state layers): its layers, the tokens
        each keeps (None for state) and the bytes per token of a sequence over the kind's layers (KV) or per
        sequence over them (state), and their bytes at the workload's batch and context."""
        per_layer = self.bytes_per_token // self.n_layers if self.n_layers else 0
        kinds = [("full", self.n_layers - self.window_layers, self.context, None)]
        kinds.append((self.window_kind, self.window_layers, self.tokens_per_layer, self.window))
        rows = [
            {"kind": kind, "layers": n, "window": w, "tokens_per_layer": t, "bytes_per_token": per_layer * n,
             "bytes_per_sequence": per_layer * n * t, "bytes": per_layer * n * t * self.batch}
            for kind, n, t, w in kinds
            if n
        ]  # fmt: skip
        if self.state_layers:
            per_sequence = self.state_layers * self.state_bytes
            rows.append({"kind": "state", "layers": self.state_layers, "window": None, "tokens_per_layer": None,
                         "bytes_per_token": None, "bytes_per_sequence": per_sequence, "bytes": self.state_total,
                         "mixer": self.state_mixer, "dtypes": list(self.state_dtypes)})  # fmt: skip
        return rows

    @property
    def bits_per_element(self) -> float:
        """Stored bits per cached number, scales included."""
        per_layer = self.latent_dim or 2 * self.kv_heads * self.head_dim
        return 8 * self.bytes_per_token / (self.n_layers * per_layer) if self.n_layers else 0.0

    def to_dict(self) -> dict:
        extra = {"gib": self.gib, "gb": self.gb, "ratio": self.ratio, "bits_per_element": self.bits_per_element,
                 "kv_bytes": self.kv_bytes, "state_total": self.state_total}  # fmt: skip
        return asdict(self) | extra | {"by_kind": self.by_kind()}


def cache_geometry(a: Decoder) -> dict:
    """The Decoder fields the cache depends on, as keyword arguments of kv_cache and the curves. A hybrid's n_layers
    are its attention layers (a parallel layer's among them), beside its state layers and their mixer."""
    if a.mixer is not None:
        counts = cache_layers(a.layer_kinds)
        windowed = counts.get("sliding", 0) + counts.get("chunked", 0)
        return {
            "n_layers": counts.get("full", 0) + windowed, "n_heads": a.n_heads, "kv_heads": a.kv_heads,
            "head_dim": a.d_head, "window": a.sliding_window if windowed else None,
            "window_layers": windowed if windowed else None, "window_kind": a.window_kind,
            "kv_lora_rank": a.kv_lora_rank, "rope_head_dim": a.rope_head_dim, "state_layers": counts.get("state", 0),
            "mixer": a.mixer,
        }  # fmt: skip
    return {
        "n_layers": a.n_layers,
        "n_heads": a.n_heads,
        "kv_heads": a.kv_heads,
        "head_dim": a.d_head,
        "window": a.sliding_window,
        "window_layers": a.windowed_layers if a.sliding_window else None,
        "window_kind": a.window_kind,
        "kv_lora_rank": a.kv_lora_rank,
        "rope_head_dim": a.rope_head_dim,
    }


def kv_cache(
    n_layers: int,
    kv_heads: int,
    head_dim: int,
    context: int,
    batch: int = 1,
    dtype: str = "fp16",
    *,
    window: int | None = None,
    window_layers: int | None = None,
    n_heads: int | None = None,
    kv_lora_rank: int = 0,
    rope_head_dim: int = 0,
    group_size: int = CACHE_GROUP,
    weight_params: int | None = None,
    weight_dtype: str | None = None,
    weight_bytes_given: int | None = None,
    weight_label: str | None = None,
    counted: bool = False,
    window_kind: str = "sliding",
    state_layers: int = 0,
    mixer: StateMixer | None = None,
    mamba_cache_dtype: str = "auto",
    mamba_ssm_dtype: str = "auto",
) -> KVCache:
    """bytes = 2 · layers · kv_heads · head_dim · tokens · batch · bytes_per_element (K and V: the 2).

    With kv_lora_rank > 0 (MLA) each token and layer caches one latent of kv_lora_rank plus the shared
    RoPE key of rope_head_dim, with no factor 2. A sliding window caps the tokens of window_layers layers (None:
    every layer); the others keep the whole context. int8/int4 add one fp16 scale per group_size elements of each
    cached vector; window_kind names the windowed layers (sliding, or chunked: a chunk of `window` tokens caches at
    most as many, so its bytes are a window's). n_heads only names the attention kind; the weights, if weight_params
    is given, are counted in weight_dtype (default dtype), or are weight_bytes_given bytes stored as weight_label
    (weights.stored_weights); `counted`: weight_params is the model's own count, not a figure the user gave (so not
    bounded as one). A hybrid's `state_layers` keep `mixer`'s state per sequence (tensor parallel 1, no speculative
    tokens), the conv state in mamba_cache_dtype and the temporal one in mamba_ssm_dtype ("auto": the cache's
    dtype when it is a float type, else bf16; the temporal state's, the model's own default: state.state_dtypes).
    """
    check_int("state_layers", state_layers, 0, 100_000)
    if state_layers and mixer is None:
        raise ConfigError("state_layers", "need the state layers' mixer")
    check_int("n_layers", n_layers, 0 if state_layers else 1, 100_000)
    check_int("context", context, 1)
    check_int("batch", batch, 1, 10_000_000)
    check_choice("dtype", dtype, DTYPES)
    check_int("group_size", group_size, 0, 1_000_000)
    check_choice("window_kind", window_kind, WINDOW_KINDS)
    if window is not None:
        check_int("window", window, 1, MAX_WINDOW)
        window_layers = n_layers if window_layers is None else window_layers
        check_int("window_layers", window_layers, 0, n_layers)
    elif window_layers:
        raise ConfigError("window_layers", "needs a sliding window (window > 0)")
    windowed = window_layers if window else 0
    weight_dtype = dtype if weight_dtype is None else weight_dtype
    if weight_bytes_given is None:
        check_choice("weight_dtype", weight_dtype, DTYPES)
    if kv_lora_rank:
        check_int("kv_lora_rank", kv_lora_rank, 1, 1_000_000)
        check_int("rope_head_dim", rope_head_dim, 0, 1_000_000)
        latent, attention = kv_lora_rank + rope_head_dim, "MLA"
        per_layer = stored_bytes(latent, dtype, group_size)
    else:
        check_int("kv_heads", kv_heads, 1, 100_000)
        check_int("head_dim", head_dim, 1, 100_000)
        if n_heads is not None:
            check_int("n_heads", n_heads, kv_heads, 100_000)
        latent = 0
        attention = "MQA" if kv_heads == 1 else "MHA" if kv_heads == n_heads else "GQA" if n_heads else "MHA/GQA"
        per_layer = 2 * kv_heads * stored_bytes(head_dim, dtype, group_size)
    bytes_per_token = n_layers * per_layer
    state, dtypes = 0, ()
    if state_layers:
        model_dtype = {"fp32": "float32", "fp16": "float16"}.get(dtype, "bfloat16")  # an 8/4-bit cache: bf16 model
        dtypes = state_dtypes(mixer, model_dtype, mamba_cache_dtype, mamba_ssm_dtype)
        state = state_bytes(mixer, dtypes)
    tokens = min(context, window) if window else context
    layer_tokens = (n_layers - windowed) * context + windowed * tokens  # over all layers, one sequence
    weights = None
    if weight_params is not None:
        if not counted:  # the user's figure (--params, the page's Weights field); a counted total is the model's own
            check_int("weight_params", weight_params, 0, 10**15)
        weights = weight_bytes(weight_params, weight_dtype) if weight_bytes_given is None else weight_bytes_given
    return KVCache(
        attention, n_layers, kv_heads, head_dim, latent, context, batch, dtype, group_size, window,
        tokens, bytes_per_token, per_layer * layer_tokens * batch + state_layers * state * batch, weight_params,
        weight_label or weight_dtype, weights, windowed, window_kind, state_layers, state, dtypes,
        mixer.kind if state_layers else "",
    )  # fmt: skip


def kv_cache_for(
    a: Decoder,
    context: int,
    batch: int = 1,
    dtype: str = "fp16",
    *,
    window: int | None = None,
    group_size: int = CACHE_GROUP,
    weight_dtype: str | None = None,
    weight_params: int | None = None,
    weight_bytes_given: int | None = None,
    weight_label: str | None = None,
    mamba_cache_dtype: str = "auto",
    mamba_ssm_dtype: str = "auto",
) -> KVCache:
    """kv_cache for a described model: its geometry, its window (unless overridden; on the same layers) and its
    weights (counted by count_parameters unless weight_params is given; weight_bytes_given: their stored bytes)."""
    geometry = cache_geometry(a)
    if window is not None:
        geometry |= {"window": window, "window_layers": geometry["window_layers"]}
    counted = weight_params is None
    weight_params = count_parameters(a).total if counted else weight_params
    return kv_cache(
        context=context, batch=batch, dtype=dtype, group_size=group_size, weight_params=weight_params,
        weight_dtype=weight_dtype, weight_bytes_given=weight_bytes_given, weight_label=weight_label, counted=counted,
        mamba_cache_dtype=mamba_cache_dtype, mamba_ssm_dtype=mamba_ssm_dtype, **geometry,
    )  # fmt: skip


def workload(
    base: Decoder | None,
    geometry: dict,
    context: int,
    batch: int = 1,
    dtype: str = "fp16",
    *,
    weight_dtype: str | None = None,
    weight_params: int | None = None,
    weight_storage=None,
) -> KVCache:
    """The cache of `geometry` (cache_geometry's keys) on a base architecture, whose weights are then recounted
    with that geometry (stored as `weight_storage`, a callable Decoder -> (bytes, label), when given); with base
    None, bare geometry and weight_params as given (None: not counted)."""
    if base is None:
        return kv_cache(
            context=context, batch=batch, dtype=dtype, weight_params=weight_params, weight_dtype=weight_dtype,
            **geometry,
        )  # fmt: skip
    arch = with_geometry(base, geometry)
    stored, label = weight_storage(arch) if weight_storage is not None else (None, None)
    return kv_cache_for(arch, context, batch, dtype, weight_dtype=weight_dtype, weight_params=weight_params,
                        weight_bytes_given=stored, weight_label=label)  # fmt: skip


def geometry_fields(geometry: dict) -> dict:
    """The Decoder fields a cache geometry (cache_geometry's keys) sets."""
    window, windowed = geometry["window"], geometry.get("window_layers")
    full = geometry["n_layers"] - windowed if window and windowed is not None else 0
    if "state_layers" in geometry:  # a hybrid: its layers and their kinds are its pattern's, not the geometry's
        return dict(n_heads=geometry["n_heads"], n_kv_heads=geometry["kv_heads"], head_dim=geometry["head_dim"],
                    kv_lora_rank=geometry["kv_lora_rank"], rope_head_dim=geometry["rope_head_dim"])  # fmt: skip
    return dict(
        n_layers=geometry["n_layers"], n_heads=geometry["n_heads"], n_kv_heads=geometry["kv_heads"],
        head_dim=geometry["head_dim"], sliding_window=window, kv_lora_rank=geometry["kv_lora_rank"],
        rope_head_dim=geometry["rope_head_dim"], full_layers=full,
    ) | ({"window_kind": geometry["window_kind"]} if "window_kind" in geometry else {})  # fmt: skip


def with_geometry(base: Decoder, geometry: dict) -> Decoder:
    """base with the cache geometry (cache_geometry's keys) replaced; raises ConfigError on a bad mix."""
    return replace(base, **geometry_fields(geometry))


# --- does it fit on a GPU ----------------------------------------------------


@dataclass(frozen=True)
class Fit:
    gpu_gb: float
    gpu_bytes: int  # gpu_gb · 10^9: GB is the decimal unit (cards sold as "80 GB" often hold 80 GiB: conservative)
    reserve: float  # fraction kept for the runtime, activations and fragmentation
    usable_bytes: int
    weight_bytes: int  # 0 when the weights were not given
    budget_bytes: int  # left for the cache; <= 0 when the weights alone do not fit
    tokens_that_fit: int  # cached tokens over all sequences
    max_context: int | None  # longest context at the workload's batch; None: the window caps the cache, any fits
    max_batch: int  # largest batch at the workload's context
    weights_fit: bool
    fits: bool  # weights plus the workload's cache
    message: str

    def to_dict(self) -> dict:
        return asdict(self)


def _gb(n_bytes: float) -> str:
    """Decimal GB with three significant digits, as the pages write sizes (lab.formats.significant)."""
    value = n_bytes / GB
    decimals = max(0, 2 - math.floor(math.log10(value))) if value > 0 else 0
    return f"{value:,.{decimals}f} GB"


def fit(cache: KVCache, gpu_gb: float, reserve: float = DEFAULT_RESERVE) -> Fit:
    """How much of this cache fits on a GPU of gpu_gb decimal GB once the reserve and the weights are taken."""
    if isinstance(gpu_gb, bool) or not isinstance(gpu_gb, numbers.Real) or not 0 < gpu_gb <= 100_000:
        raise ConfigError(
            "gpu_gb", f"must be a memory size in GB (10⁹ bytes) from 0 (excluded) to 100000, got {gpu_gb!r}"
        )
    if isinstance(reserve, bool) or not isinstance(reserve, numbers.Real) or not 0 <= reserve < 1:
        raise ConfigError("reserve", f"must be a fraction in [0, 1), got {reserve!r}")
    gpu_bytes = round(gpu_gb * GB)
    usable = round(gpu_bytes * (1 - reserve))
    weights = cache.weight_bytes or 0
    budget = usable - weights
    where = f"{_gb(usable)} usable ({gpu_gb:g} GB less {reserve:.0%} reserved)"
    unknown = "" if cache.weight_bytes is not None else "; weights not counted"
    if budget <= 0:
        message = f"does not fit: the weights alone need {_gb(weights)} in {cache.weight_dtype}, over the {where}"
        return Fit(gpu_gb, gpu_bytes, reserve, usable, weights, budget, 0, 0, 0, False, False, message)
    bpt = cache.bytes_per_token
    kv_budget = budget - cache.state_total  # a hybrid's states first: one per sequence whatever the context
    tokens = max(kv_budget, 0) // bpt if bpt else 0
    max_context = longest_context(cache, kv_budget) if kv_budget >= 0 else 0
    max_batch = budget // cache.bytes_per_sequence if cache.bytes_per_sequence else 0
    fits = cache.bytes <= budget
    verdict = "fits" if fits else "does not fit"
    sign = "<=" if fits else ">"
    state = f" (state {_gb(cache.state_total)} of it)" if cache.state_layers else ""
    message = (
        f"{verdict}: weights {_gb(weights)} + cache {_gb(cache.bytes)}{state} {sign} {where}; "
        f"room for {tokens:,} cached tokens{unknown}"
    )
    return Fit(gpu_gb, gpu_bytes, reserve, usable, weights, budget, tokens, max_context, max_batch, True, fits, message)


def longest_context(cache: KVCache, budget: int) -> int | None:
    """The longest context whose cache fits `budget` bytes at the cache's batch; None: any (every layer windowed and
    the windows fit). Full layers grow with the context, windowed ones stop at the window."""
    if not cache.bytes_per_token:
        return None  # state layers alone: no token is cached
    if not cache.window or not cache.window_layers:
        return budget // (cache.bytes_per_token * cache.batch)
    layer_tokens = budget // (cache.bytes_per_token // cache.n_layers * cache.batch)  # tokens x layers that fit
    windowed, full = cache.window_layers, cache.n_layers - cache.window_layers
    if layer_tokens >= cache.n_layers * cache.window:  # past the window: only the full layers grow
        return None if not full else (layer_tokens - windowed * cache.window) // full
    return layer_tokens // cache.n_layers


# --- series for charts -------------------------------------------------------


def context_grid(max_context: int, start: int = 256) -> list[int]:
    """Powers of two from start below max_context, then max_context: the x axis of a memory chart."""
    check_int("max_context", max_context, 1)
    return [2**k for k in range(64) if start <= 2**k < max_context] + [max_context]


def _curve(label, contexts, **cache_args) -> list[dict]:
    rows = []
    for t in contexts:
        c = kv_cache(context=t, **cache_args)
        rows.append(
            {"context": t, "variant": label, "attention": c.attention, "dtype": c.dtype, "bytes": c.bytes, "gib": c.gib}
        )
    return rows


def cache_curves(
    n_layers, n_heads, kv_heads, head_dim, contexts, *, batch=1, dtype="fp16", window=None, window_layers=None,
    kv_lora_rank=0, rope_head_dim=0, group_size=CACHE_GROUP, window_kind="sliding", state_layers=0, mixer=None,
) -> list[dict]:  # fmt: skip
    """Cache memory against context for MHA, this GQA (if 1 < kv_heads < n_heads), MQA and MLA (if a latent
    rank is given): long-format rows (context, variant, attention, dtype, bytes, gib) for one chart."""
    common = dict(n_layers=n_layers, head_dim=head_dim, batch=batch, dtype=dtype, window=window,
                  window_layers=window_layers, group_size=group_size, window_kind=window_kind,
                  state_layers=state_layers, mixer=mixer)  # fmt: skip
    variants = {f"MHA ({n_heads} KV heads)": n_heads}
    if 1 < kv_heads < n_heads:
        variants[f"GQA ({kv_heads} KV heads)"] = kv_heads
    variants["MQA (1 KV head)"] = 1
    rows = [r for label, h in variants.items() for r in _curve(label, contexts, kv_heads=h, n_heads=n_heads, **common)]
    if kv_lora_rank:
        label = f"MLA (latent {kv_lora_rank} + RoPE {rope_head_dim})"
        rows += _curve(label, contexts, kv_heads=1, kv_lora_rank=kv_lora_rank, rope_head_dim=rope_head_dim, **common)
    return rows


def dtype_curves(
    n_layers, n_heads, kv_heads, head_dim, contexts, *, batch=1, dtypes=DTYPES, window=None, window_layers=None,
    kv_lora_rank=0, rope_head_dim=0, group_size=CACHE_GROUP, window_kind="sliding", state_layers=0, mixer=None,
) -> list[dict]:  # fmt: skip
    """Cache memory against context for each element type, same long format as cache_curves."""
    common = dict(
        n_layers=n_layers, n_heads=n_heads, kv_heads=kv_heads, head_dim=head_dim, batch=batch, window=window,
        window_layers=window_layers, kv_lora_rank=kv_lora_rank, rope_head_dim=rope_head_dim, group_size=group_size,
        window_kind=window_kind, state_layers=state_layers, mixer=mixer,
    )  # fmt: skip
    return [r for dt in dtypes for r in _curve(dt, contexts, dtype=dt, **common)]
