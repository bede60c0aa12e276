"""`kv-cache --engine vllm`'s flags beyond the model: LoRA (--max-loras, --max-lora-rank, --lora-target-modules,
--lora-dtype, --adapter-config), speculative decoding (--speculative-method, --speculative-model,
--num-speculative-tokens) and CUDA-graph profiling (--cuda-graph-profiling, --cuda-graph-gib), read into
serving.engine's EngineSettings fields. Bad values and files raise ConfigError under the flag's name.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from attncore.config import ConfigError
from cli.flags import integer, number
from serving import cuda_graphs, lora, speculative
from serving.hf_config import MAX_BYTES, SOURCE, read_config
from serving.presets import CONFIGS, PRESETS

FLAG_OF = {
    "max_loras": "--max-loras", "max_lora_rank": "--max-lora-rank", "lora_target_modules": "--lora-target-modules",
    "lora_dtype": "--lora-dtype", "speculative_method": "--speculative-method",
    "speculative_model": "--speculative-model", "num_speculative_tokens": "--num-speculative-tokens",
    "mtp_layers": "--speculative-method", "draft_vocab_size": "--speculative-model",
    "cuda_graph_profiling": "--cuda-graph-profiling", "cuda_graph_gib": "--cuda-graph-gib",
}  # fmt: skip
LORA_FLAGS = ("max_loras", "max_lora_rank", "lora_target_modules", "lora_dtype", "adapter_config")


def add_args(k) -> None:
    k.add_argument("--enable-lora", action="store_true", help="LoRA adapters: vLLM's stacked buffers (any LoRA flag "
                   "below turns it on)")  # fmt: skip
    k.add_argument("--max-loras", type=integer, help="adapters in one batch (default 1)")
    k.add_argument("--max-lora-rank", type=integer, help=f"one of {', '.join(map(str, lora.MAX_LORA_RANKS))} "
                   "(default 16, or what --adapter-config's r needs)")  # fmt: skip
    k.add_argument(
        "--lora-target-modules",
        nargs="+",
        metavar="MODULE",
        choices=lora.MODULES,
        help=f"the layers wrapped: {', '.join(lora.MODULES)} (default: every linear layer of the blocks)",
    )
    k.add_argument("--lora-dtype", choices=lora.LORA_DTYPES, help="auto: the model's dtype")
    k.add_argument("--adapter-config", metavar="FILE", help="a PEFT adapter_config.json: its r and target_modules")
    k.add_argument(
        "--speculative-method",
        choices=speculative.METHODS,
        help="draft (a second model), eagle, eagle3 (a head), mtp (the model's own MTP layers)",
    )
    k.add_argument(
        "--speculative-model",
        metavar="PRESET|FILE",
        help="the draft model or the EAGLE head: a preset or its config.json",
    )
    k.add_argument("--num-speculative-tokens", type=integer, help="tokens drafted per step (mtp: default its layers)")
    k.add_argument("--cuda-graph-profiling", action=argparse.BooleanOptionalAction, default=None,
                   help="vLLM 0.21 on: the CUDA-graph estimate comes out of the KV budget (default off: the 0.11 "
                   "source modelled)")  # fmt: skip
    k.add_argument("--cuda-graph-gib", type=number, help="measured: 'Estimated CUDA graph memory: X GiB total'")


def read_file(path: str, flag: str) -> bytes:
    """At most MAX_BYTES + 1 bytes of a file (enough to refuse a larger one); ConfigError under `flag`."""
    if path == "-":
        raise ConfigError(flag, "give a file; standard input is --config's")
    try:
        with open(path, "rb") as f:
            return f.read(MAX_BYTES + 1)
    except OSError as e:
        raise ConfigError(flag, f"cannot read {path!r}: {e.strerror or e}") from None


def _under(flag: str, e: ConfigError) -> ConfigError:
    """e under `flag`, naming the field inside the file (not the reader's own name for a whole file)."""
    return ConfigError(flag, e.message if e.field == SOURCE else f"{e.field}: {e.message}")


def lora_settings(a) -> lora.LoraSettings | None:
    """The LoRA settings of these flags, None without any. An adapter's r sets the least max_lora_rank that loads it
    (a smaller --max-lora-rank is refused, as vLLM refuses the adapter); its target_modules are what
    --lora-target-modules would name, and the buffers stay vLLM's default (every linear layer) unless it is given."""
    if not a.enable_lora and all(getattr(a, name) is None for name in LORA_FLAGS):
        return None
    rank = a.max_lora_rank
    if a.adapter_config is not None:
        try:
            adapter = lora.read_adapter_config(read_file(a.adapter_config, "--adapter-config"))
        except ConfigError as e:
            raise _under("--adapter-config", e) from None
        if rank is not None and rank < adapter.r:
            raise ConfigError("--max-lora-rank", f"must be at least the adapter's rank {adapter.r} "
                              f"(--adapter-config), got {rank}: vLLM refuses to load the adapter")  # fmt: skip
        rank = rank or max(16, adapter.max_lora_rank)
    return lora.LoraSettings(max_loras=1 if a.max_loras is None else a.max_loras,
                             max_lora_rank=16 if rank is None else rank,
                             target_modules=tuple(a.lora_target_modules or ()),
                             lora_dtype=a.lora_dtype or "auto")  # fmt: skip


def print_adapter_line(a, arch, settings, model_dtype: str) -> None:
    """With --adapter-config and no --lora-target-modules: what allocating only the adapter's layers would take."""
    if a.adapter_config is None or a.lora_target_modules or settings.lora is None:
        return
    modules = lora.read_adapter_config(read_file(a.adapter_config, "--adapter-config")).modules
    model_bytes = {"fp32": 4}.get(model_dtype, 2)
    only = lora.lora_buffers(arch, replace(settings.lora, target_modules=modules), settings.tensor_parallel_size,
                             model_bytes)  # fmt: skip
    print(f"  the adapter targets {', '.join(modules)}: --lora-target-modules {' '.join(modules)} would allocate "
          f"{only.bytes / 2**30:.3f} GiB per GPU in place of every linear layer's")  # fmt: skip


def _draft_model(text: str):
    """(Decoder, draft_vocab_size or None) of a preset name or a config.json path."""
    flag = "--speculative-model"
    raw = (CONFIGS / f"{text}.json").read_bytes() if text in PRESETS else read_file(text, flag)
    try:
        return read_config(raw).arch, speculative.config_int(raw, ("draft_vocab_size",), 100_000_000)
    except ConfigError as e:
        raise _under(flag, e) from None


def target_config(a, preset: str | None) -> bytes | None:
    """The target's config.json bytes (--config, --model, or the preset's shipped file), for its MTP layers."""
    if getattr(a, "_config_bytes", None) is not None:
        return a._config_bytes
    if getattr(a, "_hub", None) is not None:
        return a._hub.config
    if preset in PRESETS:
        return Path(CONFIGS / f"{preset}.json").read_bytes()
    return None


def speculative_settings(a, preset: str | None) -> speculative.Speculative | None:
    """The speculative settings of these flags (None without --speculative-method or --speculative-model)."""
    method, model = a.speculative_method, a.speculative_model
    if method is None and model is None:  # tokens alone: a hybrid's state rows (engine.engine_fit refuses them else)
        return None
    method = method or "draft"
    draft, vocab = _draft_model(model) if model is not None else (None, None)
    layers = 0
    if method == "mtp":
        raw = target_config(a, preset)
        if raw is None:
            raise ConfigError("--speculative-method", "mtp reads the model's MTP layers from its config.json: give "
                              "--config FILE, --model ID or a preset")  # fmt: skip
        try:
            layers = speculative.mtp_layers(raw)
        except ConfigError as e:
            raise ConfigError("--speculative-method", e.message) from None
    tokens = a.num_speculative_tokens
    if tokens is None and method != "mtp":
        raise ConfigError("--num-speculative-tokens", f"{method} needs it (vLLM asks for it): from 1 to "
                          f"{speculative.MAX_TOKENS}")  # fmt: skip
    return speculative.Speculative(method, tokens or layers, draft, layers, vocab)


def settings(a, preset: str | None) -> dict:
    """The EngineSettings fields of these flags."""
    spec = speculative_settings(a, preset)
    out = {"lora": lora_settings(a), "speculative": spec}
    out["num_speculative_tokens"] = spec.num_tokens if spec else a.num_speculative_tokens or 0
    graphs = a.cuda_graph_profiling  # unset: as the named release does (0.21 on), else off (the 0.11 source)
    out["cuda_graph_profiling"] = (
        graphs if graphs is not None else bool(a.vllm_version) and cuda_graphs.profiles(a.vllm_version)
    )
    out["cuda_graph_gib"] = a.cuda_graph_gib
    return out


def print_extras(f) -> None:
    """The LoRA buffers per module, the drafter's parts and the notes, under the fit's deductions."""
    ex = f.extras or {}
    if ex.get("lora"):
        parts = ", ".join(f"{m} {b / 2**30:.3f}" for m, b in ex["lora"]["by_module"].items())
        print(f"  LoRA buffers per GPU (GiB): {parts}")
    if ex.get("drafter"):
        d = ex["drafter"]
        parts = ", ".join(f"{p} {n:,}" for p, n in d["parts"].items())
        print(f"  drafter ({d['method']}, {d['num_speculative_tokens']} tokens): {parts} parameters; "
              f"{d['kv_layers']} attention layer(s) in the KV pool")  # fmt: skip
    for note in ex.get("notes", ()):
        print(f"  note: {note}")
