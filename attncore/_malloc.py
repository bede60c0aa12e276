"""Keep freed heap memory for reuse (glibc only): a training step allocates and frees
the same few hundred-kilobyte temporaries every step; by default glibc maps and unmaps
each one, and the page faults cost about a third of a step."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
_done = False


def keep_freed_memory(limit: int = 64 << 20) -> bool:
    """Serve allocations below `limit` bytes from the heap and never trim it; True if applied."""
    global _done
    if _done or not sys.platform.startswith("linux"):
        return _done
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        _done = bool(libc.mallopt(M_MMAP_THRESHOLD, limit)) and bool(libc.mallopt(M_TRIM_THRESHOLD, 2 * limit))
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to tune
        _done = False
    return _done
