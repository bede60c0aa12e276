"""Page work that costs seconds of CPU: answered from a bounded server-wide memo keyed by its inputs,
else computed under one of the server's slots (ui.limits), like a training, with a visible wait.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TypeVar

import streamlit as st

from ui.limits import training_slot

T = TypeVar("T")
MAX_ENTRIES = 512  # results kept per kind of work (least recently used dropped first)
_MISSING = object()


class Memo:
    """A thread-safe LRU dict of at most max_entries results."""

    def __init__(self, max_entries: int):
        self.max_entries, self._lock, self._items = max_entries, threading.Lock(), OrderedDict()

    def get(self, key: Hashable):
        with self._lock:
            if key not in self._items:
                return _MISSING
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


@st.cache_resource
def memo(kind: str) -> Memo:
    return Memo(MAX_ENTRIES)  # one per kind of work and server process, shared by every session


def known(kind: str, key: Hashable) -> bool:
    return memo(kind).get(key) is not _MISSING


def metered(kind: str, key: Hashable, compute: Callable[[], T], what: str) -> T:
    """compute()'s result for `key`: from the memo, else computed under a slot (BusyError if none frees up)."""
    found = memo(kind).get(key)
    if found is not _MISSING:
        return found
    with training_slot(what):
        found = memo(kind).get(key)  # another session may have computed it while this one waited
        if found is _MISSING:
            found = compute()
            memo(kind).put(key, found)
    return found
