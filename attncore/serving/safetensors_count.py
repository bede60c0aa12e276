"""A checkpoint's own parameter count, from its safetensors headers alone: each file opens with 8 bytes of
little-endian length, then a JSON object naming every tensor with its dtype, shape and byte offsets. The elements
per dtype summed over the files are the count the Hub publishes for a model; set beside the formula's
(parameters.py), the difference is named by the tensors that explain it (a vision tower, a multi-token-prediction
head). The headers are fetched by lab.hub; this module only reads them.
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
    """The count of files' headers: {file: {tensor: (dtype, shape)}}."""
    per_dtype: dict[str, int] = {}
    groups: dict[str, int] = {}
    for tensors in headers.values():
        for name, (dtype, shape) in tensors.items():
            n = math.prod(shape)
            per_dtype[dtype] = per_dtype.get(dtype, 0) + n
            group = ".".join(name.split(".")[:2])
            groups[group] = groups.get(group, 0) + n
    ordered = dict(sorted(groups.items(), key=lambda kv: -kv[1]))
    return CheckpointCount(sum(per_dtype.values()), dict(sorted(per_dtype.items())), ordered, len(headers))


def parse_header(raw: bytes) -> dict[str, tuple[str, tuple[int, ...]]]:
    """{tensor: (dtype, shape)} of a safetensors file's opening bytes (its __metadata__ left out); ValueError when
    they are not a header."""
    if len(raw) < 8:
        raise ValueError("not a safetensors file: shorter than its 8-byte header length")
    (length,) = struct.unpack("<Q", raw[:8])
    if len(raw) < 8 + length:
        raise ValueError(f"the header is {length:,} bytes, {len(raw) - 8:,} given")
    data = json.loads(raw[8 : 8 + length])
    return {k: (v["dtype"], tuple(v["shape"])) for k, v in data.items() if k != "__metadata__"}


def header_bytes(tensors: dict[str, tuple[str, tuple[int, ...]]]) -> bytes:
    """A safetensors header for these tensors (offsets as if their data followed, in order): what a test serves."""
    sizes = {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "U32": 4, "BF16": 2, "F16": 2, "I16": 2, "U8": 1, "I8": 1}
    out, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        end = offset + math.prod(shape) * sizes.get(dtype, 1)
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
