"""Where a run's numbers came from: CPU model, BLAS library, version and kernel family, NumPy version,
dtype and BLAS threads. float32 training differs between BLAS kernel families (OpenBLAS's SkylakeX and Haswell
kernels round differently), so every record says which one computed it. OpenBLAS picks the family from the CPU's
instruction set (AVX-512: SkylakeX, AVX2: Haswell, whatever the vendor) unless the environment forces one with
OPENBLAS_CORETYPE; the record keeps that variable's value too, so a caption can say which it was.

Imports threadpoolctl, NumPy and the standard library only (attncore may not import threadpoolctl).
"""

from __future__ import annotations

import functools
import os
import platform as _platform
from collections.abc import Mapping

import numpy as np

MAX_TEXT = 200  # a stored platform's strings come from untrusted sidecars: bounded, plain text
FIELDS = ("cpu", "machine", "blas", "blas_version", "blas_kernel", "blas_threads", "numpy", "dtype", "blas_coretype")
CORETYPE = "OPENBLAS_CORETYPE"  # read by OpenBLAS when it loads: a kernel family forced by the environment


@functools.cache
def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux), else platform.processor(), else the machine type."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _platform.processor() or _platform.machine() or "unknown"


def _blas() -> dict:
    from threadpoolctl import threadpool_info

    blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    if not blas:
        return {"blas": "none found", "blas_version": None, "blas_kernel": None, "blas_threads": None}
    b = blas[0]  # NumPy's own BLAS is the first loaded
    return {
        "blas": b.get("internal_api"),
        "blas_version": b.get("version"),
        "blas_kernel": b.get("architecture"),
        "blas_threads": b.get("num_threads"),
    }


def coretype() -> str | None:
    """OPENBLAS_CORETYPE as this process's environment sets it (None when unset or empty), bounded to plain text."""
    value = os.environ.get(CORETYPE) or None
    if value is not None and not (len(value) <= 40 and value.isprintable()):
        value = "(an unprintable or long value)"
    return value


def current(dtype: str = "float32") -> dict:
    """This process's platform now: call it where the numbers are computed (inside the BLAS thread limit)."""
    env = {"numpy": np.__version__, "dtype": dtype, "blas_coretype": coretype()}
    return {"cpu": cpu_model(), "machine": _platform.machine()} | _blas() | env


def kernel_family(info: Mapping) -> str:
    """'openblas SkylakeX': the BLAS library and its kernel architecture, what decides float32 rounding; 'unknown'
    for a platform that names neither."""
    return " ".join(str(info.get(k)) for k in ("blas", "blas_kernel") if info.get(k)) or "unknown"


def here() -> str:
    """This machine's kernel family."""
    return kernel_family(current())


def checked(value) -> dict:
    """A platform read back from a sidecar: a dict of FIELDS (a record stored before a field was recorded lacks
    it) with short strings, whole numbers or nulls; ValueError otherwise."""
    if not isinstance(value, dict) or set(value) - set(FIELDS):
        raise ValueError("the platform is not an object of the known fields")
    for k, v in value.items():
        ok = v is None or (isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 10**6)
        ok = ok or (isinstance(v, str) and len(v) <= MAX_TEXT and v.isprintable())
        if not ok:
            raise ValueError(f"the platform's {k} is not a short text or a whole number")
    return dict(value)


def kernel_choice(info: Mapping) -> str:
    """How the kernel family was chosen: '' for another BLAS or a record stored before the variable was recorded,
    else 'forced by OPENBLAS_CORETYPE=Haswell in the environment' or 'picked by OpenBLAS from the CPU's instruction
    set'."""
    if info.get("blas") != "openblas" or "blas_coretype" not in info:
        return ""
    if info["blas_coretype"]:
        return f"forced by {CORETYPE}={info['blas_coretype']} in the environment"
    return "picked by OpenBLAS from the CPU's instruction set"


def describe(info: Mapping) -> str:
    """One line: 'Intel(R) Xeon(R) Processor (x86_64), openblas 0.3.31 SkylakeX kernels on 1 thread (picked by
    OpenBLAS from the CPU's instruction set), NumPy 2.4.6, float32'."""
    threads = info.get("blas_threads")
    blas = f"{info.get('blas')} {info.get('blas_version') or ''} {info.get('blas_kernel') or ''} kernels".split()
    text = f"{info.get('cpu')} ({info.get('machine')}), {' '.join(blas)}"
    text += f" on {threads} thread{'s' * (threads != 1)}" if isinstance(threads, int) else ""
    text += f" ({choice})" if (choice := kernel_choice(info)) else ""
    return text + f", NumPy {info.get('numpy')}, {info.get('dtype')}"


def foreign(summaries, family: str | None = None) -> dict[str, int]:
    """{kernel family: runs} of the summaries (RunRecord.summary() dicts) computed on another kernel family than
    `family` (default: this machine's)."""
    family = here() if family is None else family
    out: dict[str, int] = {}
    for s in summaries:
        theirs = kernel_family(s["platform"])
        if theirs != family:
            out[theirs] = out.get(theirs, 0) + 1
    return out
