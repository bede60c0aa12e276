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


def release_freed_memory() -> bool:
    """Give the heap's free pages back to the system (glibc's malloc_trim), between runs: keep_freed_memory keeps
    them for a training's reuse, so a worker process that trained a wide run held hundreds of MB after it, and
    loky replaced it as leaking (with a two-line warning) when it had grown 300 MB past its first run. True if
    anything was released."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.malloc_trim(0))
    except (OSError, AttributeError):  # not glibc
        return False
