"""vLLM's accounting of a hybrid model (state layers beside attention), release by release: the attention block
raised until an attention page holds a state page, the state page padded to it, the KV-cache groups and their
padding layers, the blocks of the available memory, the pages one request needs with and without prefix caching,
and the lines vLLM prints for them, in its words and number formats.

Read in vLLM's source (serving/releases.py names each release): HybridAttentionMambaModelConfig
.verify_and_update_config (the block size and the padding), kv_cache_utils._get_kv_cache_groups_uniform_page_size
(groups), get_num_blocks, get_max_concurrency_for_kv_cache_config and _report_kv_cache_config (the printed lines),
kv_cache_interface.MambaSpec (page_size_bytes, max_memory_usage_bytes). Validated on published logs in
docs/serving.md ("vLLM's accounting of hybrid models"). Pure: no engine import; engine.engine_fit calls it.
"""

from __future__ import annotations

from dataclasses import dataclass

from attncore.checks import ConfigError
from serving.kvcache import GIB
from serving.releases import RELEASES, Release
from serving.state import STATE_DTYPES, cache_layers, state_bytes, state_dtypes

__all__ = ["STATE_DTYPES", "HybridPaging", "paging", "log_lines", "capacity_sentence", "group_layers"]
MODEL_DTYPES = {2: "bfloat16", 4: "float32"}  # the model's bytes per element -> a dtype of that width (fp16: 2)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def layer_counts(a, window_layers: int, windowed_kind: str) -> dict[str, int]:
    """Layers of each cache kind (full, sliding, chunked, state), from the model's layer_kinds (state.cache_layers:
    a parallel layer counts as one of each, an FFN layer as none) or its counts."""
    if a.layer_kinds:
        return cache_layers(a.layer_kinds)
    counts = {"full": a.n_layers - window_layers, windowed_kind: window_layers}
    return {k: n for k, n in counts.items() if n}


def group_layers(counts: dict[str, int]) -> tuple[int, tuple[tuple[str, int], ...], tuple[tuple[str, int, float]]]:
    """(group size, (kind, groups) each, (kind, padding layers, % wasted) where padded): the group size is the
    fewest layers of a kind, or the most when that is under 1.5 times the fewest; each kind fills cdiv(n, size)
    groups, the last padded."""
    lo, hi = min(counts.values()), max(counts.values())
    size = hi if hi < lo * 1.5 else lo
    groups = tuple((kind, cdiv(n, size)) for kind, n in counts.items())
    padding = tuple((kind, size - n % size, (size - n % size) / n * 100) for kind, n in counts.items() if n % size)
    return size, groups, padding


@dataclass(frozen=True)
class HybridPaging:
    """How one release pages a hybrid model on one rank, and what it prints."""

    release: str
    block_size: int  # the attention block size the engine uses (raised, or as given when large enough)
    block_raised: bool  # the engine printed "Setting attention block size to N tokens ..."
    token_bytes: int  # one attention token of one layer
    state_page_bytes: int  # one sequence's state in one layer, unpadded
    page_bytes: int  # one block of one layer: the attention page, to which the state page is padded
    group_size: int
    groups: tuple[tuple[str, int], ...]  # (kind, number of groups)
    padding_layers: tuple[tuple[str, int, float], ...]  # (kind, padding layers, % of that kind's cache wasted)
    prefix_caching: bool  # vLLM's mamba_cache_mode "align" when on, "none" when off
    num_speculative_tokens: int
    pages_per_request: dict  # kind -> pages one request of max_model_len takes, summed over that kind's groups
    num_blocks: int
    tokens: int  # the token line as this release prints it
    concurrency: float
    max_model_len: int

    @property
    def padding_pct(self) -> float:
        return 100 * (self.page_bytes - self.state_page_bytes) / self.state_page_bytes

    @property
    def per_request(self) -> int:
        return sum(self.pages_per_request.values())

    @property
    def slots(self) -> int:
        """The token slots the pool holds in one group: blocks × block size."""
        return self.num_blocks * self.block_size


def aligned_block(release: Release, state_page: int, token_bytes: int, given: int) -> tuple[int, bool]:
    """(block size, raised): alignment × cdiv(state page, alignment × attention token page), used when the block
    size given is smaller."""
    block = release.alignment * cdiv(state_page, release.alignment * token_bytes)
    return (block, True) if given < block else (given, False)


def kind_pages(kind: str, length: int, block: int, window: int | None, batched: int, prefix: bool, spec: int) -> int:
    """Pages one group of this kind holds for a request of `length` tokens (each spec's max_memory_usage_bytes
    ÷ page): a state group one page and one per speculative token (two and those with prefix caching, "align")."""
    if kind == "full":
        return cdiv(length, block)
    if kind == "sliding":
        return cdiv(min(window - 1 + batched, length), block) + 1
    if kind == "chunked":
        return cdiv(min(window + batched, length), block)
    return (2 if prefix else 1) + spec


def paging(a, s, kv_bytes: int, model_bytes: int, token: int, batched: int, window_layers: int,
           windowed_kind: str, drafter_layers: int = 0) -> tuple[HybridPaging, object]:  # fmt: skip
    """The release's paging of model `a` (a Decoder with state layers) with settings `s` (engine.EngineSettings)
    and kv_bytes available for the cache, and needed(length): the bytes the startup check asks for a request of
    that length. token: one attention layer's page of one token on one rank (engine's page at block size 1: keys
    and values of its KV heads, latent attention's latent and RoPE key, in the cache's format). drafter_layers: a
    drafter's attention layers of the target's page (MTP layers, an EAGLE head), which join the full-attention
    layers' groups as vLLM's drafter registers its layers in the same pool."""
    release = RELEASES[s.vllm_version]
    tp, spec = s.tensor_parallel_size, s.num_speculative_tokens
    dtypes = state_dtypes(a.mixer, MODEL_DTYPES[model_bytes], s.mamba_cache_dtype, s.mamba_ssm_dtype)
    state = state_bytes(a.mixer, dtypes, tp, spec)
    counts = layer_counts(a, window_layers, windowed_kind)
    if drafter_layers:
        counts["full"] = counts.get("full", 0) + drafter_layers
    if set(counts) == {"state"}:
        raise ConfigError("layer_kinds", "a model of state layers alone has no attention page to align: not modelled")
    block, raised = aligned_block(release, state, token, s.block_size)
    page = block * token
    size, groups, padding = group_layers(counts)
    window, L, prefix = a.sliding_window, s.max_model_len, s.prefix_caching

    def pages(length: int) -> dict:
        return {kind: n * kind_pages(kind, length, block, window, batched, prefix, spec) for kind, n in groups}

    def needed(length: int) -> int:
        return size * page * sum(pages(length).values())

    blocks = max(kv_bytes // page // size, 0) if kv_bytes > 0 else 0
    per_request = pages(L)
    concurrency = blocks / sum(per_request.values())
    if release.token_line == "groups":  # the smallest group block: a state group's is max_model_len without caching
        smallest = block if prefix else min(block, L)
        tokens = blocks // sum(n for _, n in groups) * smallest
    else:
        tokens = int(concurrency * L)
    fit = HybridPaging(release.number, block, raised, token, state, page, size, groups, padding, prefix, spec,
                       per_request, blocks, tokens, concurrency, L)  # fmt: skip
    return fit, needed


def log_lines(p: HybridPaging, kv_bytes: int) -> list[str]:
    """Every line vLLM prints for this accounting, in its order, words and number formats."""
    out = []
    if p.block_raised:
        out.append(f"Setting attention block size to {p.block_size} tokens to ensure that attention page size is >= "
                   "mamba page size.")  # fmt: skip
    if p.page_bytes != p.state_page_bytes:
        out.append(f"Padding mamba page size by {p.padding_pct:.2f}% to ensure that mamba page size and attention "
                   "page size are exactly equal.")  # fmt: skip
    out.append(f"Available KV cache memory: {kv_bytes / GIB:.2f} GiB")
    for _, n, pct in p.padding_layers:
        out.append(f"Add {n} padding layers, may waste at most {pct:.2f}% KV cache memory")
    out.append(f"GPU KV cache size: {p.tokens:,} tokens")
    out.append(f"Maximum concurrency for {p.max_model_len:,} tokens per request: {p.concurrency:.2f}x")
    return out


def capacity_sentence(p: HybridPaging) -> str:
    """One sentence: which printed line is the real capacity, what the pool holds, and the shortest prefix the
    prefix cache can ever hit (one block)."""
    parts = " + ".join(f"{n:,} {kind}" for kind, n in p.pages_per_request.items())
    token_line = (
        "blocks ÷ groups × block size, an undercount for a hybrid model"
        if RELEASES[p.release].token_line == "groups"
        else "that concurrency × max_model_len"
    )
    return (
        f"The concurrency line is the real capacity: the pool holds {p.num_blocks:,} blocks of {p.block_size:,} "
        f"tokens, shared by {sum(n for _, n in p.groups)} groups of {p.group_size} layers, and one request of "
        f"{p.max_model_len:,} tokens takes {p.per_request:,} of them ({parts}), so {p.concurrency:.2f} such requests "
        f"fit, while the token line ({p.tokens:,}) is {token_line}, not tokens the pool holds; the shortest shared "
        f"prefix that can ever hit the prefix cache is one block, {p.block_size:,} tokens."
    )
