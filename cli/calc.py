"""The `params` and `kv-cache` subcommands: calculators.py and kvcache.py on the command line.

Both take a preset, a Hugging Face config.json (--config FILE, '-' for standard input; cli.config_file) or
architecture flags, flags overriding the preset's or the file's fields. A model typed with --d is a modern decoder
in every choice not typed (parameters.typed_decoder: SwiGLU of Llama's width, no biases, RMSNorm, RoPE, untied),
and the command says in one line what it assumed; without --d the flags change this lab's own model;
`kv-cache` also takes bare --layers/--kv-heads/--head-dim. Bad values raise ConfigError naming the flag, which
cli.main turns into one line and exit code 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from contextlib import contextmanager

from attncore.config import ConfigError, ModelConfig, check_int
from cli import config_file
from cli import engine as engine_cli
from cli.flags import ArgumentError, integer, number
from serving import kvcache
from serving import parameters as calc
from serving.hf_fields import pattern_text
from serving.presets import GPUS, PRESETS, get_preset, gpu_memory_gb
from serving.safetensors_count import comparison
from serving.weights import stored_weights

# flag, Decoder field, type or choices, help
ARCH_FLAGS = (
    ("--d", "d_model", integer, "width; given, what is not typed is a modern decoder's (default: the lab's model)"),
    ("--layers", "n_layers", integer, "blocks"),
    ("--heads", "n_heads", integer, "query heads"),
    ("--kv-heads", "n_kv_heads", integer, "key/value heads: = heads MHA, 1 MQA, between GQA"),
    ("--head-dim", "head_dim", integer, "default d / heads"),
    ("--d-ff", "d_ff", integer, "FFN width (with --d: Llama's 2/3 · 4d rounded up to 256 if gated, else 4d)"),
    ("--ffn", "ffn", calc.FFN_KINDS, "relu/gelu: two matrices, swiglu/geglu: three"),
    ("--bias", "bias", calc.BIAS_KINDS, "which linear layers have biases"),
    ("--norm", "norm", calc.NORM_KINDS, "layernorm (gamma, beta) or rmsnorm (gamma)"),
    ("--vocab", "vocab_size", integer, "vocabulary size"),
    ("--position", "position", calc.POSITION_KINDS, "only learned has parameters"),
    ("--max-len", "max_len", integer, "rows of a learned position table"),
    ("--window", "sliding_window", integer, "sliding-window attention: tokens each layer keeps"),
    ("--kv-lora-rank", "kv_lora_rank", integer, "MLA latent width (0: ordinary attention)"),
    ("--q-lora-rank", "q_lora_rank", integer, "MLA low-rank query width (0: full rank)"),
    ("--rope-head-dim", "rope_head_dim", integer, "MLA decoupled RoPE width per head"),
    ("--v-head-dim", "v_head_dim", integer, "MLA value width per head (default head-dim)"),
    ("--experts", "n_experts", integer, "MoE routed experts (0: dense)"),
    ("--shared-experts", "n_shared_experts", integer, "MoE shared experts"),
    ("--experts-per-token", "experts_per_token", integer, "MoE routed experts used per token"),
    ("--moe-d-ff", "moe_d_ff", integer, "MoE expert width"),
    ("--dense-layers", "n_dense_layers", integer, "MoE: first layers with a dense FFN"),
    ("--norm-placement", "norm_placement", calc.NORM_PLACEMENTS, "pre, post (OLMo 2) or sandwich (Gemma 2/3: four)"),
    ("--qk-norm", "qk_norm", calc.QK_NORMS, "q/k norms: of head_dim (Qwen3, Gemma 3) or the whole projection (OLMo 2)"),
    ("--full-layers", "full_layers", integer, "with --window: layers that attend to every token (hybrid models)"),
    ("--window-kind", "window_kind", calc.WINDOW_KINDS, "sliding, or chunked (Llama 4: within chunks of --window)"),
)
BOOL_FLAGS = (
    ("--tied-embeddings", "tied_embeddings", "output head shares the token embedding"),
    ("--final-norm", "final_norm", "a norm before the output head"),
    ("--head-bias", "head_bias", "output head bias"),
    ("--attention-sinks", "attention_sinks", "a learned logit per query head and layer (GPT-OSS)"),
    ("--router-bias", "router_bias", "MoE: a bias per routed expert on the router"),
)
FLAG_OF = {field: flag for flag, field, *_ in ARCH_FLAGS + BOOL_FLAGS} | {
    "kv_heads": "--kv-heads",
    "window": "--window",
    "context": "--context",
    "batch": "--batch",
    "dtype": "--dtype",
    "weight_dtype": "--weights-dtype",
    "weight_params": "--params",
    "group_size": "--group-size",
    "gpu_gb": "--gpu-gb",
    "gpu": "--gpu",
    "reserve": "--reserve",
    "preset": "--preset",
    "window_layers": "--window-layers",
    "quantization": "--config",
}
UNITS = "GiB = 2³⁰ B, GB = 10⁹ B"


@contextmanager
def flag_names():
    """Re-raise a ConfigError under the command-line flag of its field."""
    try:
        yield
    except ConfigError as e:
        raise ConfigError(FLAG_OF.get(e.field, e.field), str(e).split(": ", 1)[1]) from None


def add_arch_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", help="a model from serving/presets.py, or 'list'")
    p.add_argument("--config", metavar="FILE", help="a Hugging Face config.json (at most 1 MB; - reads standard input)")
    p.add_argument(
        "--model",
        metavar="ORG/NAME[@REV]",
        help="a Hub model id: its config.json and safetensors headers "
        "fetched, each read bounded (HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE honoured), never its weights",
    )
    for flag, field, kind, text in ARCH_FLAGS:
        if isinstance(kind, tuple):
            p.add_argument(flag, dest=field, choices=kind, help=text)
        else:
            p.add_argument(flag, dest=field, type=kind, help=text)
    for flag, field, text in BOOL_FLAGS:
        p.add_argument(flag, dest=field, action=argparse.BooleanOptionalAction, help=text)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def arch_from_args(a, *, need_width: bool = False) -> calc.Decoder | None:
    """The preset or --config file with the flags' overrides, or the lab's model with them; None if need_width and
    no --d."""
    fields = [field for _, field, *_ in ARCH_FLAGS + BOOL_FLAGS]
    overrides = {f: getattr(a, f) for f in fields if getattr(a, f) is not None}
    model = config_file.load(a)
    with flag_names():
        if model is not None:
            return dataclasses.replace(model.arch, **overrides)
        if a.preset:
            return dataclasses.replace(get_preset(a.preset).arch, **overrides)
        if need_width and "d_model" not in overrides:
            return None
        if "d_model" in overrides:  # a model typed by its fields: a modern decoder unless told
            return calc.typed_decoder(overrides)
        return dataclasses.replace(calc.describe_attncore(ModelConfig()), **overrides)


NEGATED = {"final_norm": "--no-final-norm"}  # the flag that changes an assumed boolean


def assumed(a, arch: calc.Decoder | None) -> tuple[list[str], list[str]]:
    """(what a model typed with --d was assumed to be, the flags that change it); empty for a preset, a file, the
    lab's model changed by flags, or bare cache geometry."""
    if arch is None or getattr(a, "d_model", None) is None or a.preset or config_file.load(a) is not None:
        return [], []
    typed = {field for _, field, *_ in ARCH_FLAGS + BOOL_FLAGS if getattr(a, field) is not None}
    items = calc.assumed(arch, typed)
    return [words for _, words in items], [NEGATED.get(f, FLAG_OF[f]) for f, _ in items]


def print_assumed(a, arch: calc.Decoder | None) -> None:
    """One line saying which choices a typed model was assumed to have, and the flags that change them."""
    words, flags = assumed(a, arch)
    if words:
        print(f"assumed (not typed): {', '.join(words)}; change with {' '.join(flags)} (--preset attncore: this "
              "lab's own model)")  # fmt: skip


def describe(a: calc.Decoder) -> str:
    """One line naming the architecture."""
    if a.kv_lora_rank:
        attn = f"MLA {a.n_heads} heads, latent {a.kv_lora_rank} + RoPE key {a.rope_head_dim}"
    else:
        attn = f"{a.attention} {a.n_heads} heads, {a.kv_heads} KV heads of {a.d_head}"
    ffn = f"{a.ffn} FFN {a.d_ff:,}"
    if a.n_experts:
        ffn += (
            f" in {a.n_dense_layers} dense layers, then MoE {a.n_experts} experts ({a.experts_per_token} per token)"
            f" + {a.n_shared_experts} shared of {a.moe_d_ff:,}"
        )
    pos = f"learned positions {a.max_len:,}" if a.position == "learned" else f"{a.position} positions"
    word = "chunked attention" if a.window_kind == "chunked" else "window"
    window = f", {word} {a.sliding_window:,}" if a.sliding_window else ""
    if a.sliding_window and a.full_layers:
        window += f" on {a.windowed_layers} of {a.n_layers} layers"
    extras = [f"{a.norm_placement}-norm", f"q/k norms of the {a.qk_norm}" if a.qk_norm != "none" else ""]
    extras += ["attention sinks" * a.attention_sinks, "router bias" * a.router_bias]
    hybrid = f" ({pattern_text(a.layer_kinds, a.sliding_window)}; {a.mixer.kind} mixers)" if a.mixer else ""
    return (
        f"d {a.d_model:,}, {a.n_layers} layers{hybrid}, {attn}{window}; {ffn}; biases {a.bias}; {a.norm} "
        f"({', '.join(x for x in extras if x)}); vocab {a.vocab_size:,} "
        f"{'tied' if a.tied_embeddings else 'untied'}; {pos}"
    )


def _decimal(n: int) -> str:
    return f"{n / kvcache.GB:,.3f} GB" if n >= kvcache.GB else f"{n / 10**6:,.3f} MB"


def print_preset_list(counted: bool, as_json: bool = False) -> None:
    if as_json:
        counts = {p.name: {"published": p.published, "source": p.source} if counted else {} for p in PRESETS.values()}
        rows = [{"name": p.name, "attention": p.arch.attention} | counts[p.name] for p in PRESETS.values()]
        print(json.dumps(rows))
        return
    for p in PRESETS.values():
        extra = f"  {p.published:>16,}  {p.source}" if counted else f"  {p.arch.attention}"
        print(f"{p.name:<18}{extra}")


def cmd_params(a) -> int:
    if a.preset == "list":
        print_preset_list(counted=True, as_json=a.json)
        return 0
    arch = arch_from_args(a)
    model = config_file.load(a)
    hub_model = config_file.hub_model(a)
    checkpoint = hub_model.checkpoint if hub_model else None
    name = config_file.name_of(a) if model else a.preset
    if model is not None and not model.counted:
        return print_checkpoint_only(a, model, arch, name, hub_model)
    count = calc.count_parameters(arch)
    preset = PRESETS[a.preset] if a.preset and arch == PRESETS[a.preset].arch else None
    if a.json:
        out = {"name": name, "architecture": dataclasses.asdict(arch)} | count.to_dict()
        out["checkpoint_total"] = checkpoint.total if checkpoint else None
        if (said := assumed(a, arch))[0]:
            out["assumed"], out["assumed_flags"] = said
        if hub_model:
            out["checkpoint"] = checkpoint_json(hub_model, count.total)
        if preset:
            out |= {"published": preset.published, "source": preset.source, "matches": count.total == preset.published}
        if model:
            out["config"] = config_file.summary(model, arch)
        print(json.dumps(out))
        return 0
    if model:
        config_file.print_read(model, arch, name)
    print_assumed(a, arch)
    print(f"{name or 'custom'}: {count.total:,} parameters")
    if hub_model:
        print(f"  {checkpoint_line(hub_model, count.total)}")
    if preset:
        verdict = "matches" if count.total == preset.published else "DIFFERS FROM"
        print(f"  {verdict} the published {preset.published:,} ({preset.source})")
        if preset.note:
            print(f"  note: {preset.note}")
    print(f"  {describe(arch)}")
    print(f"  {'component':<12}{'params':>17}{'share':>8}")
    for row in count.rows():
        print(f"  {row['component']:<12}{row['params']:>17,}{row['share']:>8.1%}")
    blocks = sorted(set(count.per_layer))
    print(f"  per block {' / '.join(f'{n:,}' for n in blocks)}; non-embedding {count.non_embedding:,}")
    if count.active != count.total:
        print(f"  active per token {count.active:,} (routed experts a token skips left out; embeddings counted)")
    sizes = ", ".join(f"{dt} {_decimal(kvcache.weight_bytes(count.total, dt))}" for dt in ("fp32", "bf16", "int4"))
    print(f"  weights: {sizes} (GB = 10⁹ B; int4 with an fp16 scale per {kvcache.WEIGHT_GROUP})")
    if model:
        stored = stored_weights(arch, model.weights)
        how = "as the checkpoint stores them" if model.dtype_stored else "with no torch_dtype in the file, ASSUMED"
        print(f"  {how} ({stored.label}): {_decimal(stored.bytes)} = {stored.bytes:,} B")
    return 0


def checkpoint_line(hub_model, formula: int | None) -> str:
    """The checkpoint's count beside the formula's, or why there is none."""
    if hub_model.checkpoint is None:
        return f"checkpoint: not counted ({hub_model.checkpoint_note})"
    return "checkpoint: " + comparison(hub_model.checkpoint, formula)


def checkpoint_json(hub_model, formula: int | None) -> dict:
    c = hub_model.checkpoint
    return (c.to_dict() if c else {"total": None}) | {
        "note": hub_model.checkpoint_note,
        "formula_matches": c.total == formula if c and formula else None,
    }


def print_checkpoint_only(a, model, arch, name: str, hub_model) -> int:
    """An architecture no formula counts: the checkpoint's count is the total (the file was read for its
    attention fields only because that count is at hand)."""
    c = hub_model.checkpoint
    if a.json:
        out = {
            "name": name,
            "total": c.total,
            "checkpoint_total": c.total,
            "formula": None,
            "checkpoint": checkpoint_json(hub_model, None),
            "config": config_file.summary(model, arch),
        }
        print(json.dumps(out))
        return 0
    config_file.print_read(model, arch, name)
    print(f"{name}: {c.total:,} parameters, the checkpoint's own count (no formula here for {model.model_type})")
    print(f"  {checkpoint_line(hub_model, None)}")
    for dtype, n in c.per_dtype.items():
        print(f"  {dtype:<10}{n:>17,}")
    for group, n in list(c.groups.items())[:8]:
        print(f"  {group + '.*':<40}{n:>17,}")
    return 0


def cache_from_args(a, arch: calc.Decoder | None) -> tuple[kvcache.KVCache, str, list[str]]:
    """The workload's KVCache, a label and warnings, from a preset, a config.json, an architecture (arch:
    arch_from_args(a, need_width=True)) or bare cache geometry. A config.json's weights are counted as the engine
    loads them (its quantisation, a float32 checkpoint in 16 bits) unless --weights-dtype or --params says
    otherwise."""
    model = config_file.load(a)
    with flag_names():
        if arch is not None:
            arch = with_window_layers(arch, a.window_layers)
            stored = label = None
            params, weights_dtype = uncounted_weights(a, model)
            if model is not None and model.counted and a.weights_dtype is None and a.params is None:
                weights = stored_weights(arch, config_file.served(model))
                stored, label = weights.bytes, weights.label
            cache = kvcache.kv_cache_for(
                arch, a.context, a.batch, cache_dtype(a, model), group_size=a.group_size,
                weight_dtype=weights_dtype, weight_params=params, weight_bytes_given=stored, weight_label=label,
                **state_dtype_flags(a),
            )  # fmt: skip
            warnings = []
            if arch.position == "learned" and a.context > arch.max_len:
                warnings.append(f"context {a.context:,} exceeds the model's {arch.max_len:,} learned positions")
            longest = model.max_position_embeddings if model else None
            if longest and a.context > longest:
                warnings.append(f"context {a.context:,} exceeds the file's max_position_embeddings {longest:,}")
            return cache, config_file.name_of(a) if model else a.preset or "custom", warnings
        if a.n_heads is not None:  # checked first: --heads also stands in for a missing --kv-heads
            check_int("n_heads", a.n_heads, 1, 100_000)
        kv_heads = a.n_heads if a.n_kv_heads is None else a.n_kv_heads  # 0 is checked, not replaced
        if a.n_layers is None or (not a.kv_lora_rank and (kv_heads is None or a.head_dim is None)):
            raise ArgumentError("kv-cache needs --preset NAME, or --layers, --kv-heads and --head-dim, or --d")
        cache = kvcache.kv_cache(
            a.n_layers, 1 if kv_heads is None else kv_heads, 1 if a.head_dim is None else a.head_dim,
            a.context, a.batch, cache_dtype(a, None),
            window=a.sliding_window, window_layers=a.window_layers, n_heads=a.n_heads, kv_lora_rank=a.kv_lora_rank or 0,
            rope_head_dim=a.rope_head_dim or 0, group_size=a.group_size, weight_params=a.params,
            weight_dtype=a.weights_dtype, window_kind=a.window_kind or "sliding",
        )  # fmt: skip
        return cache, "custom", []


def state_dtype_flags(a) -> dict:
    """--mamba-cache-dtype and --mamba-ssm-dtype (the engine flags', cli/engine.py), "auto" when not given."""
    return {k: getattr(a, k, None) or "auto" for k in ("mamba_cache_dtype", "mamba_ssm_dtype")}


def uncounted_weights(a, model) -> tuple[int | None, str | None]:
    """(--params, --weights-dtype), or for an architecture no formula counts the checkpoint's count in the dtype
    the engine serves it in."""
    if model is None or model.counted or a.params is not None:
        return a.params, a.weights_dtype
    return config_file.hub_model(a).checkpoint.total, a.weights_dtype or model.serving_dtype


def cache_dtype(a, model) -> str:
    """--dtype, else the file's dtype as served (bf16 for a float32 checkpoint), else fp16."""
    return a.dtype or (model.serving_dtype if model is not None else "fp16")


def with_window_layers(arch: calc.Decoder, windowed: int | None) -> calc.Decoder:
    """arch with --window-layers layers windowed (the others full), if given."""
    if windowed is None:
        return arch
    check_int("window_layers", windowed, 0, arch.n_layers)
    if not arch.sliding_window:
        raise ConfigError("window_layers", "needs a sliding window on the model (--window)")
    return dataclasses.replace(arch, full_layers=arch.n_layers - windowed)


def print_cache(c: kvcache.KVCache, name: str) -> None:
    if c.attention == "MLA":
        what = f"MLA latent {c.latent_dim} per token and layer"
    else:
        what = f"{c.attention} {c.kv_heads} KV heads × {c.head_dim}"
    layers = f"{c.n_layers} attention layers and {c.state_layers} state layers" if c.state_layers else (
        f"{c.n_layers} layers")  # fmt: skip
    print(f"{name}: {layers}, {what}, cache in {c.dtype}   ({UNITS})")
    word = "chunks of" if c.window_kind == "chunked" else "window"
    window = f", {word} {c.window:,} -> {c.tokens_per_layer:,} tokens kept per layer" if c.window else ""
    if c.window and c.window_layers < c.n_layers:
        window = (
            f", {word} {c.window:,} on {c.window_layers} layers -> {c.tokens_per_layer:,} tokens each; the other "
            f"{c.n_layers - c.window_layers} keep all {c.context:,}"
        )
    print(f"  context {c.context:,} × batch {c.batch}{window}")
    if c.state_layers:
        print_kinds(c)
    elif len(c.by_kind()) > 1:
        for row in c.by_kind():
            print(f"    {row['kind']:<8}{row['layers']:>5} layers × {row['tokens_per_layer']:>9,} tokens  "
                  f"{kvcache.human_bytes(row['bytes'])}")  # fmt: skip
    if c.dtype in kvcache.GROUPED_DTYPES and c.group_size:
        print(f"  {c.dtype}: one fp16 scale per {c.group_size} elements = {c.bits_per_element:.3f} bits per element")
    if c.state_layers:
        print(f"  KV             {kvcache.human_bytes(c.kv_bytes)}")
        print(f"  state          {kvcache.human_bytes(c.state_total)}")
    print(f"  KV cache       {kvcache.human_bytes(c.bytes)}" + (" (KV and state)" if c.state_layers else ""))
    print(f"  per token      {c.bytes_per_token:,} B (one sequence, all layers)")
    if c.weight_bytes is None:
        print("  weights        not given (--params N to compare)")
        return
    print(f"  weights        {c.weight_params:,} params in {c.weight_dtype} = {kvcache.human_bytes(c.weight_bytes)}")
    if c.ratio is not None:
        print(f"  cache/weights  {c.ratio:.3g}")


def print_kinds(c: kvcache.KVCache) -> None:
    """A hybrid's cache by layer kind: the attention kinds' bytes per token, the state's per sequence, each total at
    the workload's batch and context."""
    print(f"  {'kind':<24}{'layers':>7}  {'bytes (one sequence)':<49}total at batch {c.batch}, context {c.context:,}")
    for row in c.by_kind():
        if row["kind"] == "state":
            kind, dtypes = f"state ({row['mixer']})", " + ".join(row["dtypes"])
            each = f"{row['bytes_per_sequence']:,} B a sequence ({dtypes})"
        else:
            kind, each = row["kind"], f"{row['bytes_per_token']:,} B a token (KV)"
        print(f"  {kind:<24}{row['layers']:>7}  {each:<49}{kvcache.human_bytes(row['bytes'])}")


def print_fit(f: kvcache.Fit, c: kvcache.KVCache, gpu_label: str) -> None:
    print(f"GPU {gpu_label} = {f.gpu_bytes:,} B (GB = 10⁹ B as sold; most cards hold about as many GiB, a bit more)")
    print(f"  {f.reserve:.0%} reserved for the runtime -> {f.usable_bytes:,} B usable")
    print(f"  {f.message}")
    if f.weights_fit:
        longest = "any length (the window caps the cache)" if f.max_context is None else f"{f.max_context:,} tokens"
        print(
            f"  longest context at batch {c.batch}: {longest}; largest batch at context {c.context:,}: {f.max_batch:,}"
        )


def cmd_kv_cache(a) -> int:
    if a.preset == "list":
        print_preset_list(counted=False, as_json=getattr(a, "json", False))
        return 0
    if not 0 <= a.reserve < 1:
        raise ConfigError("--reserve", f"must be a fraction in [0, 1), got {a.reserve}")
    if a.engine:
        model = config_file.load(a)
        name = config_file.name_of(a) if model else a.preset or "custom"
        arch = arch_from_args(a, need_width=True)
        if model is not None and not a.json:
            config_file.print_read(model, arch, name)
        if not a.json:
            print_assumed(a, arch)
        limit = model.limit if model is not None else get_preset(a.preset).model.limit if a.preset else None
        return engine_cli.run(a, arch, name, model, limit)
    if a.gpu_gib is not None:
        raise ArgumentError("--gpu-gib needs --engine vllm (the simple fit takes --gpu-gb, decimal GB)")
    arch = arch_from_args(a, need_width=True)
    cache, name, warnings = cache_from_args(a, arch)
    model = config_file.load(a)
    gpu = a.gpu if a.gpu is not None else a.gpu_gb
    result = None
    if gpu is not None:
        with flag_names():
            gb = gpu_memory_gb(gpu) if isinstance(gpu, str) else gpu
            if a.gpu is not None and not 0 < gb <= 100_000:  # nan, inf or 0 typed as --gpu, not --gpu-gb
                raise ConfigError("gpu", f"must be a card or a size in GB from 0 (excluded) to 100000, got {a.gpu!r}")
            result = kvcache.fit(cache, gb, a.reserve)
    if a.json:
        out = {"name": name, "units": {"GiB": kvcache.GIB, "GB": kvcache.GB}, "warnings": warnings} | cache.to_dict()
        if result:
            out |= {"tokens_that_fit": result.tokens_that_fit, "fit": result.to_dict()}
        if model:
            out["config"] = config_file.summary(model, arch)
        if (said := assumed(a, arch))[0]:
            out["assumed"], out["assumed_flags"] = said
        print(json.dumps(out))
        return 0
    if model:
        config_file.print_read(model, arch, name)
    print_assumed(a, arch)
    print_cache(cache, name)
    for w in warnings:
        print(f"  warning: {w}")
    if result:
        label = f"{a.gpu} ({result.gpu_gb:g} GB)" if a.gpu in GPUS else f"{result.gpu_gb:g} GB"
        print_fit(result, cache, label)
    return 0


def register(sub) -> None:
    p = sub.add_parser("params", help="parameter count and breakdown of a decoder (preset or flags)")
    add_arch_args(p)
    p.set_defaults(func=cmd_params)

    k = sub.add_parser("kv-cache", help="key-value-cache memory, and whether a workload fits a GPU")
    add_arch_args(k)
    k.add_argument("--context", type=integer, default=4096, help="tokens per sequence (default 4096)")
    k.add_argument("--batch", type=integer, default=1, help="sequences (default 1)")
    k.add_argument("--dtype", choices=kvcache.DTYPES, help="cache element type (default: a --config file's, else fp16)")
    k.add_argument("--weights-dtype", choices=kvcache.DTYPES, help="weights' element type (default: --dtype)")
    k.add_argument("--group-size", type=integer, default=kvcache.CACHE_GROUP, help="int8/int4 elements per fp16 scale")
    k.add_argument("--params", type=integer, help="weights' parameter count when no preset or --d describes them")
    gpu = k.add_mutually_exclusive_group()
    gpu.add_argument("--gpu", help=f"a card ({', '.join(GPUS)}); without --engine, also a size in GB")
    gpu.add_argument("--gpu-gb", type=number, help="GPU memory in GB (10⁹ bytes)")
    gpu.add_argument("--gpu-gib", type=number, help="--engine: the GPU's total in GiB (2³⁰ B), as torch reports")
    k.add_argument("--reserve", type=number, default=kvcache.DEFAULT_RESERVE, help="fraction kept for the runtime")
    engine_cli.add_engine_args(k)
    k.set_defaults(func=cmd_kv_cache)
