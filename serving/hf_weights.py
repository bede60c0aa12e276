"""The weights' storage a config.json gives: torch_dtype (or dtype), a wrapper's first, and quantization_config
(fp8 block scales, AWQ/GPTQ bits and groups, MXFP4 experts, less modules_to_not_convert), with the notes on what
the file cannot say. hf_families.read calls weights() once the model is built.
"""

from __future__ import annotations

from dataclasses import replace

from attncore.checks import ConfigError
from serving.decoder import Decoder
from serving.hf_fields import Fields
from serving.weights import WeightFormat, weights_checked

DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}


def weights(f: Fields, top: Fields, a: Decoder, notes: list, ignored: list) -> tuple[WeightFormat, str]:
    """(the checkpoint's storage, the dtype vLLM's dtype 'auto' serves it in); quantization_config's keys no rule
    reads are added to `ignored`. A wrapper's own torch_dtype comes first, as vLLM reads it (Gemma 3's text_config
    says float32 for a bf16 checkpoint)."""
    where = next((x for x in (top, f) for k in ("torch_dtype", "dtype") if x.has(k)), None)
    key = next((k for k in ("torch_dtype", "dtype") if where is not None and where.has(k)), "torch_dtype")
    dtype = DTYPES[where.text(key, tuple(DTYPES))] if where is not None else "bf16"
    for x in (f, top):  # both spellings are read where present, so neither is listed as ignored
        x.read |= {"torch_dtype", "dtype"} & set(x.data)
    if where is None:
        notes.append(
            "no torch_dtype: the checkpoint's element type is not in the file; bf16 is assumed, not read "
            "(check the checkpoint: GPT-2's, for one, is float32)"
        )
    serving = "bf16" if dtype == "fp32" else dtype
    if dtype == "fp32":
        notes.append("torch_dtype float32: vLLM's dtype auto serves a float32 checkpoint in bf16")
    q = (f if f.has("quantization_config") else top).object("quantization_config")
    top.read.add("quantization_config")
    if q is None:
        return WeightFormat(dtype=dtype), serving
    holder = f if f.has("quantization_config") else top
    q_fields = Fields(q, f.model_type, f"{holder.prefix}quantization_config.")
    fmt = _quantization(q_fields, dtype, notes)
    ignored += q_fields.ignored()
    if fmt.method != "none":
        weights_checked(fmt, a)
    return fmt, serving


def _quantization(q: Fields, dtype: str, notes: list) -> WeightFormat:
    method = q.data.get("quant_method")
    q.read.add("quant_method")
    rest = "fp16" if dtype == "fp32" else dtype
    kept = q.data.get("modules_to_not_convert") or []
    q.read.add("modules_to_not_convert")
    if method == "fp8":
        block = q.data.get("weight_block_size")
        q.read.add("weight_block_size")
        square = isinstance(block, list) and len(block) == 2 and block[0] == block[1]
        if block is not None and not (square and type(block[0]) is int and block[0] >= 1):
            raise ConfigError(q.name("weight_block_size"), "must be two equal whole numbers such as [128, 128]")
        fmt = WeightFormat(rest, "fp8", 8, block[0] if block else 0)
    elif method in ("awq", "gptq"):
        bits = q.int("bits", 2, 8)
        group = q.int("group_size", -1, 1_000_000, 128)
        if method == "awq" and not q.flag("zero_point", True):
            notes.append("AWQ without zero points: counted with them (the file's qzeros are not described)")
        fmt = WeightFormat(rest, method, bits, max(group, 0))
    elif method == "mxfp4":
        fmt = WeightFormat(rest, "mxfp4", 4, 32)
    else:
        shown = repr(method)[:40] if isinstance(method, str) else "none"
        notes.append(f"quantization_config quant_method {shown} is not read: the weights are counted in {dtype}")
        return WeightFormat(dtype=dtype)
    parts = _kept(kept, fmt.quantised, notes)
    notes.append(
        f"{fmt.label}: the file does not list the layers kept in 16 bits beyond modules_to_not_convert; counted "
        f"quantised: the blocks' {', '.join(parts)} layers; in {rest}: embeddings, head, norms, biases"
        + ("" if "router" in parts else ", routers")
    )
    return replace(fmt, parts=parts)


def _kept(patterns: list, parts: tuple[str, ...], notes: list) -> tuple[str, ...]:
    """The method's parts less those modules_to_not_convert names (self_attn, mlp/experts, router/gate)."""
    out = list(parts)
    for p in patterns if isinstance(patterns, list) else []:
        text = str(p)
        for part, words in (("attention", ("self_attn", "attn")), ("experts", ("experts",)), ("ffn", ("mlp",)),
                            ("router", ("router", "gate"))):  # fmt: skip
            if any(w in text for w in words) and part in out and not (part == "ffn" and "router" in text):
                out.remove(part)
    return tuple(out) or parts
