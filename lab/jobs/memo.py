"""Server-wide state of the job runtime: a bounded LRU memo of page work keyed by its inputs, and `per_process`,
one instance per key and server process (what st.cache_resource gave, without Streamlit)."""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")
MAX_ENTRIES = 512  # results kept per kind of work (least recently used dropped first)
MISSING = object()  # what Memo.get answers for a key it does not hold


class Memo:
    """A thread-safe LRU dict of at most max_entries results."""

    def __init__(self, max_entries: int):
        self.max_entries, self._lock, self._items = max_entries, threading.Lock(), OrderedDict()

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
                return self._items.pop(key)
            return default

    def put(self, key: Hashable, value) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)


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
