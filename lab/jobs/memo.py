"""Server-wide state of the job runtime: a bounded LRU memo of page work keyed by its inputs, `per_process`, one
instance per key and server process (what st.cache_resource gave, without Streamlit), and `view_memo`, the light
work every visitor's view of a stored run repeats alike (its frames, charts, loaded records), made once per server.

ATTNLAB_VIEW_MEMO=0 turns the view memos off (each view computes again), so a benchmark can measure what they save
(benchmarks/page_cpu.py --compare)."""

from __future__ import annotations

import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")
MAX_ENTRIES = 512  # results kept per kind of work (least recently used dropped first)
MISSING = object()  # what Memo.get answers for a key it does not hold


MiB = 2**20
# A view memo's bounds per kind: (results, bytes by the size each put declares); the sum bounds what they hold.
VIEW_MEMOS = {"records": (1024, 160 * MiB), "charts": (1024, 96 * MiB), "frames": (512, 32 * MiB)}


class Memo:
    """A thread-safe LRU dict of at most max_entries results (and of at most max_bytes, by the sizes put declares)."""

    def __init__(self, max_entries: int, max_bytes: int | None = None):
        self.max_entries, self._lock, self._items = max_entries, threading.Lock(), OrderedDict()
        self.max_bytes, self._sizes, self.bytes = max_bytes, {}, 0

    def get(self, key: Hashable):
        with self._lock:
            if key not in self._items:
                return MISSING
            self._items.move_to_end(key)
            return self._items[key]

    def pop(self, key: Hashable, default=None, *, only_if: Callable[[object], bool] | None = None):
        """Remove and return the value of `key` (when only_if(value) holds, if given); else default."""
        with self._lock:
            if key in self._items and (only_if is None or only_if(self._items[key])):
                self.bytes -= self._sizes.pop(key, 0)
                return self._items.pop(key)
            return default

    def put(self, key: Hashable, value, size: int = 0) -> None:
        if self.max_bytes is not None and size > self.max_bytes:
            return  # larger than the whole memo: not kept
        with self._lock:
            self.bytes += size - self._sizes.get(key, 0)
            self._items[key], self._sizes[key] = value, size
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries or (self.max_bytes is not None and self.bytes > self.max_bytes):
                old, _ = self._items.popitem(last=False)
                self.bytes -= self._sizes.pop(old, 0)

    def __len__(self) -> int:
        return len(self._items)


class per_process(Generic[T]):  # a decorator, named as one
    """make(*key) made once per key in this process, under a lock, and shared by every session; clear() forgets."""

    def __init__(self, make: Callable[..., T]):
        self._make, self._lock, self._made = make, threading.Lock(), {}
        functools.update_wrapper(self, make)

    def __call__(self, *key: Hashable) -> T:
        with self._lock:
            if key not in self._made:
                self._made[key] = self._make(*key)
            return self._made[key]

    def clear(self) -> None:
        with self._lock:
            self._made.clear()


@per_process
def shared(kind: str) -> Memo:
    return Memo(MAX_ENTRIES)  # one per kind of work and server process, shared by every session


def view_memo_on() -> bool:
    """Whether the view memos are on in this process (ATTNLAB_VIEW_MEMO=0 turns them off)."""
    return os.environ.get("ATTNLAB_VIEW_MEMO", "1").strip() != "0"


@per_process
def view_memo(kind: str) -> Memo:
    return Memo(*VIEW_MEMOS[kind])  # one per kind of view work and server process, shared by every session


def memoised(kind: str, key: Hashable, compute: Callable[[], T], size: Callable[[T], int] | None = None) -> T:
    """compute()'s result for `key` from the server-wide view memo `kind` (a key of VIEW_MEMOS), else computed (in
    the caller's thread, no slot: light work) and kept, weighing size(result) bytes. The result is shared by every
    session: callers must not change it."""
    if not view_memo_on():
        return compute()
    memo = view_memo(kind)
    found = memo.get(key)
    if found is MISSING:
        found = compute()
        memo.put(key, found, size(found) if size is not None else 0)
    return found
