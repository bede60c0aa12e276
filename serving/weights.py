"""The weights' bytes as a checkpoint stores them: every tensor in one element type, or the blocks' linear layers
quantised (fp8 with float32 block scales, AWQ or GPTQ integers with fp16 group scales and zero points, MXFP4 experts
with a shared exponent per 32) and the rest (embeddings, head, norms, biases, routers) in the element type.

A config.json's quantization_config gives the method, bits and group size (hf_config.py); it does not list the
layers a quantiser kept in 16 bits beyond modules_to_not_convert, so `note` says what is assumed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from attncore.checks import ConfigError, check_choice, check_int
from serving.kvcache import DTYPE_BITS, DTYPES, weight_bytes
from serving.parameters import Decoder, Tensor, block_groups, param_inventory

METHODS = ("none", "fp8", "awq", "gptq", "mxfp4")
METHOD_NAMES = {"none": "none", "fp8": "fp8", "awq": "AWQ", "gptq": "GPTQ", "mxfp4": "MXFP4"}
PARTS = ("attention", "ffn", "experts", "router")  # the linear layers of a block a quantisation may cover
DEFAULT_PARTS = {"fp8": ("attention", "ffn", "experts"), "awq": ("attention", "ffn", "experts"),
                 "gptq": ("attention", "ffn", "experts"), "mxfp4": ("experts",)}  # fmt: skip
FLOAT_DTYPES = ("fp32", "bf16", "fp16")  # what a quantisation leaves the other tensors in
SCALE_BYTES = {"fp8": 4, "awq": 2, "gptq": 2, "mxfp4": 1}  # float32 scale_inv; fp16 scales; an E8M0 exponent
MX_BLOCK = 32  # MXFP4: 32 four-bit values share one 8-bit exponent


@dataclass(frozen=True)
class WeightFormat:
    """How the weights are stored: `dtype` for every tensor the quantisation (method) leaves alone."""

    dtype: str = "bf16"
    method: str = "none"
    bits: int = 16  # AWQ/GPTQ: 2 to 8; fp8: 8; MXFP4: 4
    group_size: int = 0  # AWQ/GPTQ: input rows per scale (0: one group over the input); fp8: the edge of a square
    # block per scale (0: one scale per tensor); MXFP4: 32
    parts: tuple[str, ...] = ()  # the linear layers quantised (empty: the method's default)
    note: str = ""  # what the file could not say

    def __post_init__(self):
        check_choice("weight_dtype", self.dtype, DTYPES)
        check_choice("quantization", self.method, METHODS)
        if self.method == "none":
            return
        check_choice("weight_dtype", self.dtype, FLOAT_DTYPES)  # the rest of a quantised checkpoint
        low, high = {"fp8": (8, 8), "mxfp4": (4, 4)}.get(self.method, (2, 8))
        check_int("bits", self.bits, low, high)
        check_int("group_size", self.group_size, 0, 1_000_000)
        for part in self.parts:
            check_choice("parts", part, PARTS)

    @property
    def quantised(self) -> tuple[str, ...]:
        return (self.parts or DEFAULT_PARTS[self.method]) if self.method != "none" else ()

    @property
    def label(self) -> str:
        """'bf16'; 'AWQ 4-bit, groups of 128, fp16 rest'; 'fp8, 128×128 blocks, bf16 rest'; 'MXFP4 experts, ...'."""
        if self.method == "none":
            return self.dtype
        what = "experts" if self.quantised == ("experts",) else ""
        if self.method == "fp8":
            scale = f"{self.group_size}×{self.group_size} blocks" if self.group_size else "one scale per tensor"
            return f"fp8{' ' + what if what else ''}, {scale}, {self.dtype} rest"
        if self.method == "mxfp4":
            return f"MXFP4{' ' + what if what else ''}, {self.dtype} rest"
        groups = f"groups of {self.group_size}" if self.group_size else "one group per column"
        return f"{METHOD_NAMES[self.method]} {self.bits}-bit{' ' + what if what else ''}, {groups}, {self.dtype} rest"


def part_of(t: Tensor) -> str | None:
    """The quantisable part a weight matrix belongs to; None for what stays in the element type (biases, norms,
    sinks, embeddings, the head)."""
    if not t.name.startswith("blocks.") or len(t.shape) < 2:
        return None
    inside = t.name.split(".", 2)[2]  # attn.w_q, ffn.w1, ffn.experts.w1, ffn.shared.w2, ffn.router.w
    leaf = inside.rsplit(".", 1)[-1]
    if not leaf.startswith("w") or inside.startswith("mixer."):  # a hybrid's state mixers: counted unquantised
        return None
    if inside.startswith("attn."):
        return "attention"
    if inside.startswith("ffn.router."):
        return "router"
    return "experts" if inside.startswith("ffn.experts.") else "ffn"


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def matrix_bytes(d_in: int, d_out: int, f: WeightFormat) -> int:
    """Bytes of one quantised (d_in, d_out) weight matrix with its scales (and zero points, and GPTQ's g_idx)."""
    groups = cdiv(d_in, f.group_size) if f.group_size else 1
    if f.method == "fp8":
        scales = cdiv(d_in, f.group_size) * cdiv(d_out, f.group_size) if f.group_size else 1
        return d_in * d_out + scales * SCALE_BYTES["fp8"]
    if f.method == "mxfp4":
        return d_out * cdiv(d_in * 4, 8) + d_out * cdiv(d_in, MX_BLOCK) * SCALE_BYTES["mxfp4"]
    packed_out = cdiv(d_out * f.bits, 32) * 4  # int32 words holding one row's codes along the output
    if f.method == "awq":  # qweight (in, out/8) int32, qzeros (groups, out/8) int32, scales (groups, out) fp16
        return d_in * packed_out + groups * packed_out + groups * d_out * SCALE_BYTES["awq"]
    # GPTQ: qweight (in·bits/32, out) int32, qzeros (groups, out·bits/32) int32, scales fp16, g_idx (in,) int32
    return cdiv(d_in * f.bits, 32) * 4 * d_out + groups * packed_out + groups * d_out * SCALE_BYTES["gptq"] + 4 * d_in


@dataclass(frozen=True)
class StoredWeights:
    bytes: int
    quantised_params: int  # parameters in quantised matrices
    other_params: int  # parameters in the element type
    label: str

    def to_dict(self) -> dict:
        return {"bytes": self.bytes, "quantised_params": self.quantised_params, "other_params": self.other_params,
                "label": self.label}  # fmt: skip


def _bytes(tensors, f: WeightFormat) -> tuple[int, int, int]:
    """(bytes, quantised parameters, other parameters) of these tensors stored as f."""
    quantised, n_bytes, other, covered = 0, 0, 0, set(f.quantised)
    for t in tensors:
        if part_of(t) in covered:
            *lead, d_in, d_out = t.shape
            n_bytes += (lead[0] if lead else 1) * matrix_bytes(d_in, d_out, f)
            quantised += t.size
        else:
            other += t.size
    return n_bytes + other * DTYPE_BITS[f.dtype] // 8, quantised, other


def _layer_kinds(a: Decoder) -> list[tuple[list[Tensor], int]]:
    """(the tensors of one layer, how many layers are alike) per kind of layer (dense, MoE), and (the tensors outside
    the blocks, 1): a 10,000-layer model costs two layers' inventories, not ten thousand. A hybrid: its blocks by
    kind (parameters.block_groups)."""
    if a.layer_kinds:
        return block_groups(a)
    one = replace(a, n_layers=1, full_layers=0, n_dense_layers=0)
    kinds = [(one, a.n_layers - a.n_dense_layers)] if a.n_experts else [(one, a.n_layers)]
    if a.n_experts and a.n_dense_layers:
        kinds.append((replace(one, n_dense_layers=1), a.n_dense_layers))
    out = [([t for t in param_inventory(model) if t.name.startswith("blocks.")], count) for model, count in kinds]
    out.append(([t for t in param_inventory(one) if not t.name.startswith("blocks.")], 1))
    return [(tensors, count) for tensors, count in out if count]


def stored_weights(a: Decoder, f: WeightFormat) -> StoredWeights:
    """The checkpoint's bytes for model `a` stored as `f`. Unquantised: parameters × the element type's bytes
    (int8/int4 with an fp16 scale per kvcache.WEIGHT_GROUP, as kvcache.weight_bytes counts them)."""
    kinds = _layer_kinds(a)
    if f.method == "none":
        total = sum(count * sum(t.size for t in tensors) for tensors, count in kinds)
        return StoredWeights(weight_bytes(total, f.dtype), 0, total, f.label)
    n_bytes = quantised = other = 0
    for tensors, count in kinds:
        b, q, o = _bytes(tensors, f)
        n_bytes, quantised, other = n_bytes + count * b, quantised + count * q, other + count * o
    return StoredWeights(n_bytes, quantised, other, f.label)


def weights_checked(f: WeightFormat, a: Decoder) -> None:
    """A quantisation that covers no matrix of this model (MXFP4 experts on a dense model) is a mistake, not a 16-bit
    model: say so, naming the field."""
    if f.method != "none" and not any(part_of(t) in f.quantised for ts, _ in _layer_kinds(a) for t in ts):
        parts = ", ".join(f.quantised)
        raise ConfigError("quantization", f"{f.method} covers the {parts} layers, and this model has none")
