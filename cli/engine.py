"""`kv-cache --engine vllm`: serving.engine on the command line (flags, text and JSON output).

cli.calc adds these flags to `kv-cache` and hands over when --engine is given. Bad values raise ConfigError
under the flag's name, which cli.main turns into one line and exit code 2.
"""

from __future__ import annotations

import argparse
import json

from attncore.config import ConfigError
from cli import adapters as adapters_cli
from cli import config_file, plan
from cli.flags import ArgumentError, integer, number
from lab import formats
from serving import engine, engine_advice, validation, vllm_hybrid
from serving.context_limit import OVERRIDE
from serving.kvcache import GB, GIB
from serving.presets import CARDS
from serving.releases import RELEASES, release_help
from serving.weights import WeightFormat, stored_weights

# flag, EngineSettings field, type or choices, help
ENGINE_FLAGS = (
    ("--engine-version", "version", tuple(engine.VERSIONS), "v1 (0.11 source, default) or v0 (0.6.6-0.8)"),
    ("--gpu-memory-utilization", "gpu_memory_utilization", number, "fraction of the total (default 0.9)"),
    ("--max-model-len", "max_model_len", integer, "tokens per request the engine must hold (default --context)"),
    ("--block-size", "block_size", integer, "tokens per KV block (default 16)"),
    ("--kv-cache-dtype", "kv_cache_dtype", engine.KV_DTYPES, "auto: the model's dtype; fp8: 1 byte"),
    ("--max-num-batched-tokens", "max_num_batched_tokens", integer, "tokens of the profiling run (default: engine's)"),
    ("--max-num-seqs", "max_num_seqs", integer, "sequences of the profiling run (default: engine's)"),
    ("--tp", "tensor_parallel_size", integer, "tensor-parallel GPUs (KV heads and weights split over them)"),
    ("--window-layers", "window_layers", integer, "layers with the sliding window (default: the model's pattern)"),
    ("--weights-gib", "weights_gib", number, "measured: 'model weights take X GiB' from your log"),
    ("--non-torch-gib", "non_torch_gib", number, "measured: 'non_torch_memory takes X GiB'"),
    ("--activation-gib", "activation_gib", number, "measured: 'PyTorch activation peak memory takes X GiB'"),
    ("--kv-cache-memory-gib", "kv_cache_memory_gib", number, "V1 --kv-cache-memory-bytes, in GiB"),
    ("--vllm-version", "vllm_version", tuple(RELEASES), release_help()),
    ("--mamba-cache-dtype", "mamba_cache_dtype", vllm_hybrid.STATE_DTYPES, "conv state (auto: the model's dtype)"),
    ("--mamba-ssm-dtype", "mamba_ssm_dtype", vllm_hybrid.STATE_DTYPES, "temporal state (auto: config's, else conv's)"),
)
MIN_GB = 0.002  # GB (10^9 B) above engine.MIN_TOTAL_GIB GiB
ENGINE_FLAG_OF = (
    {field: flag for flag, field, *_ in ENGINE_FLAGS}
    | {
        "total_gib": "--gpu-gib",
        "model_dtype": "--model-dtype",
    }
    | adapters_cli.FLAG_OF
)


def add_engine_args(k) -> None:
    k.add_argument("--engine", choices=("vllm",), help="fit as the serving engine sees it (see --engine-version)")
    for flag, field, kind, text in ENGINE_FLAGS:
        if isinstance(kind, tuple):
            k.add_argument(flag, dest=field, choices=kind, help=text)
        else:
            k.add_argument(flag, dest=field, type=kind, help=text)
    k.add_argument("--allow-long-max-model-len", dest="allow_long_max_model_len", action="store_true",
                   help="as VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: a max_model_len past the model's derived maximum warns "
                   "instead of refusing")  # fmt: skip
    k.add_argument("--allow-chunked-hybrid", dest="allow_chunked_hybrid", action="store_true",
                   help="as VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1: chunked local-attention layers "
                   "(Llama 4) paged by their chunk, not as full layers")  # fmt: skip
    k.add_argument("--prefix-caching", dest="prefix_caching", action=argparse.BooleanOptionalAction,
                   help="a hybrid's state groups keep two pages a request with it (vLLM's mamba_cache_mode align); "
                   "default off, as the 0.19 log of a hybrid without the flag shows")  # fmt: skip
    served = "activations and an auto cache (default: a --config file's dtype as served, else bf16)"
    k.add_argument("--model-dtype", choices=engine.MODEL_DTYPES, help=served)
    plan.add_plan_args(k)
    adapters_cli.add_args(k)


def total_of(a) -> tuple[float, str, str | None]:
    """(total GiB, a label, the card's name) from --gpu (a card of CARDS), --gpu-gib or --gpu-gb."""
    if a.gpu is not None:
        if a.gpu not in CARDS:
            raise ConfigError("--gpu", f"with --engine, one of {', '.join(CARDS)}; or give --gpu-gib / --gpu-gb")
        card = CARDS[a.gpu]
        label = f"{card.name} ({card.total_gib:.2f} GiB as torch reports; sold as {card.sold})"
        return card.total_gib, label, card.name
    if a.gpu_gib is not None:
        return a.gpu_gib, f"{a.gpu_gib:g} GiB (typed)", None
    if a.gpu_gb is not None:
        if not MIN_GB <= a.gpu_gb <= 100_000:  # the engine's smallest total in GiB, rounded up to GB
            raise ConfigError("--gpu-gb", f"must be from {MIN_GB:g} to 100000 GB, got {a.gpu_gb:g}")
        return a.gpu_gb * GB / GIB, f"{a.gpu_gb:g} GB typed = {a.gpu_gb * GB / GIB:.2f} GiB", None
    raise ArgumentError("--engine needs --gpu NAME, --gpu-gib or --gpu-gb")


def run(a, arch, name: str, model=None, limit=None) -> int:
    """Print the engine's fit of arch (a Decoder; from `model`, a config.json's ModelFile, when given: its weights
    as the engine loads them, its dtype) and return the exit code. `limit`, the model's derived maximum
    (serving.context_limit): a longer max_model_len is refused as vLLM refuses it."""
    if arch is None:
        raise ArgumentError("--engine needs --preset NAME, --config FILE or --d (widths and vocabulary for the peak)")
    total, label, card = total_of(a)
    values = {field: getattr(a, field) for _, field, *_ in ENGINE_FLAGS if getattr(a, field) is not None}
    values.setdefault("max_model_len", a.context)
    values["allow_long_max_model_len"] = bool(getattr(a, "allow_long_max_model_len", False))
    values["allow_chunked_hybrid"] = bool(getattr(a, "allow_chunked_hybrid", False))
    values["prefix_caching"] = bool(getattr(a, "prefix_caching", False))
    model_dtype = a.model_dtype or (model.serving_dtype if model is not None else "bf16")
    stored, params = None, a.params
    if model is not None and not model.counted and params is None:  # no formula: the checkpoint's own count
        params = config_file.hub_model(a).checkpoint.total
    elif model is not None and a.weights_dtype is None and a.params is None:
        stored = stored_weights(arch, config_file.served(model))
    extra = adapters_cli.settings(a, getattr(a, "preset", None))
    if plan.wanted(a):
        if any(extra.values()):
            raise ConfigError("--pp", "is modelled without LoRA buffers, a drafter or CUDA-graph profiling: "
                              "drop those flags for a plan over stages")  # fmt: skip
        if params is not None:
            raise ConfigError("--pp", "needs the model's layers counted (a preset, --config with a formula, or --d), "
                              "not a parameter total")  # fmt: skip
        try:
            settings = engine.EngineSettings(**values)
        except ConfigError as e:
            raise ConfigError(ENGINE_FLAG_OF.get(e.field, e.field), e.message) from None
        weights = (config_file.served(model) if model is not None and a.weights_dtype is None
                   else WeightFormat(dtype=a.weights_dtype or model_dtype))  # fmt: skip
        try:
            return plan.run(a, arch, name, label, card, total, settings, weights, model_dtype, limit)
        except ConfigError as e:
            said = " (here: --allow-long-max-model-len)" if OVERRIDE in e.message else ""
            raise ConfigError(ENGINE_FLAG_OF.get(e.field, e.field), e.message + said) from None
    try:
        values |= extra
        settings = engine.EngineSettings(**values)
        fit = engine.engine_fit(
            arch, total, settings, weight_dtype=a.weights_dtype or model_dtype, model_dtype=model_dtype,
            gpu=card, weight_params=params, weight_bytes_given=stored.bytes if stored else None,
            weight_label=stored.label if stored else "", limit=limit,
        )  # fmt: skip
    except ConfigError as e:
        said = " (here: --allow-long-max-model-len)" if OVERRIDE in e.message else ""
        raise ConfigError(ENGINE_FLAG_OF.get(e.field, e.field), str(e).split(": ", 1)[1] + said) from None
    if a.json:
        lora_bytes = fit.extras["lora"]["bytes"] if fit.extras and fit.extras["lora"] else None
        print(json.dumps({"name": name, "gpu": label, "units": {"GiB": GIB, "GB": GB}, "lora_bytes": lora_bytes}
                         | fit.to_dict()))  # fmt: skip
        return 0
    print_fit(fit, name, label)
    adapters_cli.print_adapter_line(a, arch, settings, model_dtype)
    return 0


def print_fit(f: engine.EngineFit, name: str, gpu: str) -> None:
    print(f"{name} on {gpu}: {f.engine}   (GiB = 2³⁰ B, GB = 10⁹ B)")
    rows = engine.deductions(f)
    kind_width = max(len(row["kind"]) for row in rows)
    for row in rows:
        numbers = f"  {row['numbers']}" if row["numbers"] else ""
        gib = formats.with_spec(row["gib"], ".2f")  # the lab's minus sign, as in 'budget − weights'
        print(f"  {row['term']:<16}{gib:>8} GiB  {row['kind']:<{kind_width}} {row['formula']}{numbers}")
    adapters_cli.print_extras(f)
    window = f", {f.window_layers} with a window of {f.window:,}" if f.window_layers else ""
    if f.window_layers and f.groups[-1][0] == "chunked":
        window = f", {f.window_layers} with chunks of {f.window:,}"
    of = f" (of {f.layers} layers{window})" if f.group_size != f.layers or window else ""  # else: every layer
    draft = f" + the drafter's {f.draft_layers} layers' {f.draft_block_bytes:,} B" if f.draft_block_bytes else ""
    if f.hybrid is not None:
        h = f.hybrid
        print(f"  state page {h.state_page_bytes:,} B per layer, padded to the attention page of {h.block_size:,} "
              f"tokens × {h.token_bytes:,} B; groups: {', '.join(f'{n} {kind}' for kind, n in h.groups)}")  # fmt: skip
    print(
        f"  blocks of {f.block_size} tokens: {f.page_bytes:,} B per layer ({f.kv_dtype} cache) × {f.group_size} "
        f"layers sharing a block{of}{draft} = {f.block_bytes:,} B"
    )
    print(
        f"  {f.num_blocks:,} blocks, {f.tokens:,} tokens, concurrency {f.concurrency:.2f}×: {f.kinds['blocks']} "
        f"(batch limits {f.max_num_batched_tokens:,} tokens, {f.max_num_seqs:,} sequences)"
    )
    if engine.log_estimated(f):
        print("  the engine would log, ESTIMATED (not a log: it rests on the estimates above):")
    else:
        print("  the engine would log, from your log's figures:")
    for line in engine.log_lines(f):
        print(f"    {line}")
    if f.hybrid is not None:
        print(f"  {vllm_hybrid.capacity_sentence(f.hybrid)}")
    longest = "any (every layer windowed)" if f.longest_max_model_len is None else f"{f.longest_max_model_len:,}"
    if f.starts:
        print(f"  starts at max_model_len {f.max_model_len:,}; the longest that would start: {longest}")
    else:
        print(f"  does NOT start at max_model_len {f.max_model_len:,}; the longest that would: {longest}")
        print(f"    vLLM's error: {f.error}")
        if f.advice_note:
            print(f"    but {f.advice_note}")
        for line in f.advice:
            print(f"    would start: {line}")
        if not f.advice:
            print("    would start: none of a higher gpu_memory_utilization, a tensor-parallel size up to "
                  f"{engine_advice.MAX_TP}, fp8 or int4 weights alone")  # fmt: skip
    if f.derived_max_model_len is not None:
        print(f"  the model's derived maximum, which vLLM checks first: {f.derived_max_model_len:,} "
              f"({f.max_model_len_rule})")  # fmt: skip
    if f.max_model_len_warning:
        print(f"  warning: {f.max_model_len_warning}")
    if f.paging_note:
        print(f"  note: {f.paging_note}")
    estimated = [k for k, kind in f.kinds.items() if kind == "estimate"]
    if estimated:
        print(f"  estimates: {', '.join(estimated)}")
        print("    give your log's figures with --weights-gib, --non-torch-gib, --activation-gib")
    if f.kinds["activation"] == "estimate":
        print("    the activation estimate (the forward's widest tensors, the sampler's float32 work) against the")
        print(f"    published V0 logs: {validation.error_sentence()}")
