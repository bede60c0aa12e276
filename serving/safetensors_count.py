"""A checkpoint's own parameter count, from its safetensors headers alone: each file opens with 8 bytes of
little-endian length, then a JSON object naming every tensor with its dtype, shape and byte offsets. The elements
per dtype summed over the files are the count the Hub publishes for a model; set beside the formula's
(parameters.py), the difference is named by the tensors that explain it (a vision tower, a multi-token-prediction
head). The headers are fetched by serving.hub; this module only reads them.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass

PACKED = ("I32", "U8", "I8", "U32", "F8_E4M3", "F8_E5M2", "F4", "U4")  # quantised storage: not one weight an element
EXTRAS = ("vision", "visual", "image", "audio", "mtp", "nextn", "projector", "speech", "mm_")  # beside the LM


@dataclass(frozen=True)
class CheckpointCount:
    """Elements per dtype over every tensor of every file, and the tensors' groups (the names' first two parts)."""

    total: int
    per_dtype: dict[str, int]
    groups: dict[str, int]  # "model.layers" -> elements, largest first
    files: int

    @property
    def packed(self) -> bool:
        """Whether integer or 8-bit tensors hold packed or quantised weights: then elements are not weights."""
        return any(d in PACKED for d in self.per_dtype)

    def dtypes_text(self) -> str:
        return ", ".join(f"{d} {n:,}" for d, n in self.per_dtype.items())

    def extras(self) -> dict[str, int]:
        """The groups of tensors beside the language model (their names say vision, audio, MTP, projector ...)."""
        return {g: n for g, n in self.groups.items() if any(w in g.lower() for w in EXTRAS)}

    def to_dict(self) -> dict:
        return {"total": self.total, "per_dtype": self.per_dtype, "files": self.files, "packed": self.packed,
                "extras": self.extras()}  # fmt: skip


def count_headers(headers: dict[str, dict[str, tuple[str, tuple[int, ...]]]]) -> CheckpointCount:
    """The count of files' headers: {file: {tensor: (dtype, shape)}} (ValueError past MAX_PARAMS)."""
    per_dtype: dict[str, int] = {}
    groups: dict[str, int] = {}
    for tensors in headers.values():
        for name, (dtype, shape) in tensors.items():
            n = math.prod(shape)
            per_dtype[dtype] = per_dtype.get(dtype, 0) + n
            group = ".".join(name.split(".")[:2])
            groups[group] = groups.get(group, 0) + n
    ordered = dict(sorted(groups.items(), key=lambda kv: -kv[1]))
    if sum(per_dtype.values()) > MAX_PARAMS:
        raise ValueError(f"the checkpoint's count must be at most {MAX_PARAMS:,} elements; its headers sum to "
                         f"{sum(per_dtype.values()):.3g}")  # fmt: skip
    return CheckpointCount(sum(per_dtype.values()), dict(sorted(per_dtype.items())), ordered, len(headers))


# element sizes in bits of the safetensors dtypes (the format's own list); a shape's elements times this, rounded up
# to bytes, is the span of its data_offsets
DTYPE_BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F4": 4, "F6_E2M3": 6,
              "F6_E3M2": 6, "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "I64": 64,
              "U64": 64, "F64": 64, "C64": 64}  # fmt: skip
MAX_HEADER_BYTES = 25_000_000  # a header's JSON, at most (huggingface_hub's own limit for a header it reads)
MAX_DIM = 2**40  # one axis of a tensor
MAX_PARAMS = 10**14  # a checkpoint's elements: a hundred trillion, far past any published model


def parse_header(raw: bytes, name: str = "model.safetensors") -> dict[str, tuple[str, tuple[int, ...]]]:
    """{tensor: (dtype, shape)} of a safetensors file's opening bytes (its __metadata__ left out), every entry checked
    as input: a known dtype, a shape of whole numbers from 0 to MAX_DIM, data_offsets that span exactly the shape's
    bytes and follow one another from 0. ValueError in one line naming the file and the field otherwise."""
    if len(raw) < 8:
        raise ValueError(f"{name}: not a safetensors file: shorter than its 8-byte header length")
    (length,) = struct.unpack("<Q", raw[:8])
    if length > MAX_HEADER_BYTES:
        raise ValueError(f"{name}: header length must be at most {MAX_HEADER_BYTES:,} bytes, got {length:,}")
    if len(raw) < 8 + length:
        raise ValueError(f"{name}: the header is {length:,} bytes, {len(raw) - 8:,} given")
    try:
        data = json.loads(raw[8 : 8 + length])
    except (ValueError, RecursionError):
        raise ValueError(f"{name}: header must be a JSON object, and is not valid JSON") from None
    if not isinstance(data, dict):
        raise ValueError(f"{name}: header must be a JSON object of tensors")
    tensors, spans = {}, []
    for tensor, entry in data.items():
        if tensor == "__metadata__":
            continue
        dtype, shape, span = _entry(name, tensor, entry)
        tensors[tensor] = (dtype, shape)
        spans.append((*span, tensor))
    end = 0
    for start, stop, tensor in sorted(spans):
        if start != end:
            raise ValueError(f"{name}: tensor {tensor[:80]!r}: data_offsets must follow one another from 0 without "
                             f"gaps or overlaps; it starts at {start:,}, the one before ends at {end:,}")  # fmt: skip
        end = stop
    return tensors


def _entry(name: str, tensor: str, entry) -> tuple[str, tuple[int, ...], tuple[int, int]]:
    """(dtype, shape, (start, end)) of one tensor's header entry, checked."""
    where = f"{name}: tensor {tensor[:80]!r}"
    if not isinstance(entry, dict):
        raise ValueError(f"{where} must be an object with dtype, shape and data_offsets")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise ValueError(f"{where}: dtype must be one of {', '.join(DTYPE_BITS)}; got {str(dtype)[:20]!r}")
    if not isinstance(shape, list) or len(shape) > 8 or not all(_whole(n, MAX_DIM) for n in shape):
        raise ValueError(f"{where}: shape must be at most 8 whole numbers from 0 to {MAX_DIM:,}; "
                         f"got {str(shape)[:40]}")  # fmt: skip
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_whole(n, 2**64) for n in offsets):
        raise ValueError(f"{where}: data_offsets must be two whole numbers [start, end]; got {str(offsets)[:40]}")
    start, end = offsets
    size = -(-math.prod(shape) * DTYPE_BITS[dtype] // 8)
    if end - start != size:
        raise ValueError(f"{where}: data_offsets must span its shape's {size:,} bytes of {dtype}; "
                         f"they span {end - start:,}")  # fmt: skip
    return dtype, tuple(shape), (start, end)


def _whole(n, high: int) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= high


def header_bytes(tensors: dict[str, tuple[str, tuple[int, ...]]]) -> bytes:
    """A safetensors header for these tensors (offsets as if their data followed, in order): what a test serves."""
    out, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        end = offset - (-math.prod(shape) * DTYPE_BITS[dtype] // 8)
        out[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, end]}
        offset = end
    text = json.dumps(out).encode()
    return struct.pack("<Q", len(text)) + text


def comparison(checkpoint: CheckpointCount, formula: int | None) -> str:
    """'the checkpoint holds N; the formula gives N: exact', or the difference with the tensors that explain it."""
    held = f"the checkpoint holds {checkpoint.total:,} ({checkpoint.dtypes_text()})"
    if checkpoint.packed:
        held += "; integer and 8-bit tensors hold packed or quantised weights, so elements are not weights"
    if formula is None:
        return f"{held}; no formula for this architecture: the checkpoint's count is the total"
    if formula == checkpoint.total:
        return f"{held}; the formula gives {formula:,}: exact"
    diff = checkpoint.total - formula
    extras = checkpoint.extras()
    named = "; ".join(f"{g}.* {n:,}" for g, n in extras.items())
    rest = diff - sum(extras.values())
    why = f": beside the language model, {named}" if extras else ""
    if extras and rest:
        why += f", and {rest:+,} the formula does not explain"
    elif extras:
        why += ", which explains all of it"
    return f"{held}; the formula gives {formula:,}: the checkpoint holds {diff:+,} ({diff / formula:+.2%}){why}"
