"""One BLAS thread for every computation of a run: OpenBLAS splits a matrix product differently
over 1 and 2 threads (with its Haswell kernels even at the lab's sizes), so a run's bits would depend on the thread
count a process inherits. `on_one_blas_thread` wraps the model's public functions (attncore.model, whose forward
the hooks of attncore.interpret use), so training steps, evaluation, snapshots and attention maps all run on one
thread, called from `train` or not. A ctypes call into every OpenBLAS the process has mapped (NumPy's bundled
scipy_openblas or a system libopenblas, and any other package's: SciPy's, PyTorch's), found through
/proc/self/maps: which of them NumPy calls cannot be told from the maps' order, so all are pinned; a no-op where
there is none (another BLAS).

The thread count is process-wide: nested and concurrent callers (the dashboard's threads) share one pin, set by the
first to enter and restored by the last to leave."""

from __future__ import annotations

import ctypes
import functools
import glob
import itertools
import os
import sys
import threading
from contextlib import contextmanager

_PREFIXES, _SUFFIXES = ("scipy_", ""), ("64_", "", "_64")
_funcs: list[tuple] = []
_modules = -1  # len(sys.modules) at the last search
_lock = threading.Lock()
_depth = 0  # callers inside a pin, in any thread
_before: list[int] = []  # the counts the first of them found, one a library


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


def _find() -> list[tuple]:
    """(get_num_threads, set_num_threads) of each loaded OpenBLAS ([] without one). Searched again whenever the
    process has imported modules since (a library loaded after the first search: PyTorch's, SciPy's); reading the
    maps costs about a millisecond, so not on every call."""
    global _funcs, _modules
    modules = len(sys.modules)
    if modules == _modules:
        return _funcs
    found = []
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
                found.append((get, put))
                break
    with _lock:
        if _depth == 0:  # inside a pin the libraries stay those it pinned (and the search is made again next call)
            _funcs, _modules = found, modules
    return _funcs


def blas_threads() -> int | None:
    """The largest thread count among the loaded OpenBLAS libraries, or None where none was found."""
    funcs = _find()
    return max(get() for get, _ in funcs) if funcs else None


def _enter(funcs) -> None:
    global _depth, _before
    with _lock:
        if _depth == 0:
            _before = [get() for get, _ in funcs]
            for (_, put), count in zip(funcs, _before, strict=True):
                if count != 1:
                    put(1)
        _depth += 1


def _leave(funcs) -> None:
    global _depth
    with _lock:
        _depth -= 1
        if _depth == 0:
            for (_, put), count in zip(funcs, _before, strict=True):
                if count != 1:
                    put(count)


@contextmanager
def one_blas_thread():
    """Run the body with every OpenBLAS on one thread, then restore the counts they had (a no-op without OpenBLAS)."""
    funcs = _find()
    if not funcs:
        yield
        return
    _enter(funcs)
    try:
        yield
    finally:
        _leave(funcs)


def on_one_blas_thread(fn):
    """`fn` run inside `one_blas_thread` (a decorator; its cost is a lock and a counter when already pinned)."""

    @functools.wraps(fn)
    def pinned(*args, **kwargs):
        funcs = _find()
        if not funcs:
            return fn(*args, **kwargs)
        _enter(funcs)
        try:
            return fn(*args, **kwargs)
        finally:
            _leave(funcs)

    return pinned
