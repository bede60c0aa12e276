"""One BLAS thread while training (issue 19): OpenBLAS splits a matrix product differently over 1 and 2 threads,
so the same run would give other float32 bits depending on the thread count a process inherits. A ctypes call
into the OpenBLAS that NumPy loaded (NumPy's bundled scipy_openblas or a system libopenblas), found through the
process's mapped libraries; a no-op where there is none (another BLAS, or no /proc)."""

from __future__ import annotations

import ctypes
import glob
import itertools
import os
from contextlib import contextmanager

_PREFIXES, _SUFFIXES = ("scipy_", ""), ("64_", "", "_64")
_funcs: tuple | None = None
_searched = False


def _loaded_openblas_paths() -> list[str]:
    """Paths of mapped shared libraries whose name holds 'openblas' (Linux /proc/self/maps), else NumPy's own."""
    paths = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(" ", 5)[-1].strip()
                if "openblas" in os.path.basename(path).lower() and path not in paths:
                    paths.append(path)
    except OSError:
        import numpy

        here = os.path.dirname(numpy.__file__)
        for pattern in ("../numpy.libs/*openblas*", ".dylibs/*openblas*"):
            paths += sorted(glob.glob(os.path.join(here, pattern)))
    return paths


def _find() -> tuple | None:
    """(get_num_threads, set_num_threads) of the loaded OpenBLAS, or None."""
    global _funcs, _searched
    if _searched:
        return _funcs
    _searched = True
    for path in _loaded_openblas_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in itertools.product(_PREFIXES, _SUFFIXES):
            get = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
            put = getattr(lib, f"{prefix}openblas_set_num_threads{suffix}", None)
            if get is not None and put is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                put.restype, put.argtypes = None, [ctypes.c_int]
                _funcs = (get, put)
                return _funcs
    return None


def blas_threads() -> int | None:
    """The loaded OpenBLAS's thread count, or None where none was found."""
    funcs = _find()
    return funcs[0]() if funcs else None


@contextmanager
def one_blas_thread():
    """Run the body with OpenBLAS on one thread, then restore the count it had (a no-op without OpenBLAS)."""
    funcs = _find()
    if funcs is None:
        yield
        return
    get, put = funcs
    before = get()
    put(1)
    try:
        yield
    finally:
        put(before)
