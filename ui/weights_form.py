"""How the weights are stored, as URL-mirrored widgets: none (every tensor in the element type chosen beside), or a
quantisation of the blocks' linear layers (fp8 block scales, AWQ/GPTQ bits and groups, MXFP4 experts, NVFP4) and which
layers it covers. The element type of the rest is the page's own widget; serving.weights counts the bytes."""

from __future__ import annotations

import streamlit as st

from attncore import ConfigError
from serving import weights as w
from ui.params import url_multiselect, url_number, url_select

METHOD_LABELS = {"none": "none", "fp8": "fp8", "awq": "AWQ", "gptq": "GPTQ", "mxfp4": "MXFP4", "nvfp4": "NVFP4"}
METHOD_HELP = (
    "none: every tensor in the element type. fp8: a byte a weight, a float32 scale per block (or tensor). "
    "AWQ, GPTQ: packed integers, fp16 scales and zero points per group. MXFP4: four bits, an 8-bit "
    "exponent per 32 (GPT-OSS's experts). NVFP4: four bits, an FP8 scale per 16 and two FP32 scales per "
    "matrix. Embeddings, head, norms and biases stay in the element type."
)
BITS = {"none": (16,), "fp8": (8,), "mxfp4": (4,), "nvfp4": (4,), "awq": (4, 8, 2, 3), "gptq": (4, 8, 2, 3)}
GROUP_HELP = (
    "Elements along the input per scale; 0: one group per output channel. fp8: the edge of a square block "
    "per scale; 0: one scale per tensor."
)
GROUP = {"fp8": 128, "awq": 128, "gptq": 128, "mxfp4": 32, "nvfp4": 16}  # the usual group of each method

FIXED_GROUP = {"mxfp4": w.MX_BLOCK, "nvfp4": w.NV_BLOCK}  # formats whose block the format itself fixes


def fields_state(prefix: str, f: w.WeightFormat) -> dict:
    """Session-state values that show storage f in these widgets."""
    return {
        f"{prefix}wquant": f.method, f"{prefix}wbits": f.bits, f"{prefix}wgroup": f.group_size,
        f"{prefix}wparts": list(f.quantised),
    }  # fmt: skip


UNQUANTISED = w.WeightFormat()


def fields(prefix: str, default: w.WeightFormat = UNQUANTISED) -> dict:
    """The quantisation widgets (method; bits, group and layers when quantised): their values."""
    cols = st.columns([2.2, 1, 1, 2.2])
    with cols[0]:
        method = url_select("Quantisation", f"{prefix}wquant", list(w.METHODS),
                            default.method, format_func=lambda m: METHOD_LABELS[m], help=METHOD_HELP)  # fmt: skip
    if method == "none":
        return {"method": "none"}
    same = method == default.method
    with cols[1]:
        bits = url_select("Bits", f"{prefix}wbits", BITS[method], default.bits if same else BITS[method][0],
                          disabled=len(BITS[method]) == 1)  # fmt: skip
    with cols[2]:
        group = url_number("Group size", f"{prefix}wgroup", default.group_size if same else GROUP[method],
                           0, 1_000_000, help=GROUP_HELP, disabled=method in FIXED_GROUP)  # fmt: skip
    with cols[3]:
        parts = url_multiselect("Layers quantised", f"{prefix}wparts", list(w.PARTS),
                                list(default.quantised if same else w.DEFAULT_PARTS[method]))  # fmt: skip
    return {"method": method, "bits": bits, "group": group, "parts": tuple(parts)}


def format_of(values: dict, dtype: str) -> w.WeightFormat:
    """The storage `fields` gave, with every other tensor in `dtype`; ConfigError on a bad mix (a quantisation
    leaves the rest in fp32, bf16 or fp16; it quantises at least one kind of layer)."""
    if values["method"] == "none":
        return w.WeightFormat(dtype=dtype)
    if not values["parts"]:
        raise ConfigError("quantised layers", "choose at least one kind of layer, or quantisation none")
    group = FIXED_GROUP.get(values["method"], values["group"])
    return w.WeightFormat(dtype, values["method"], values["bits"], group, values["parts"])


def storage(prefix: str, dtype: str, default: w.WeightFormat = UNQUANTISED) -> w.WeightFormat:
    """fields and format_of in one: the storage the widgets say, the rest in `dtype`."""
    return format_of(fields(prefix, default), dtype)
