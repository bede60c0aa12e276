"""A rate limit over a sliding window: at most so many events per key (a visitor, however many tabs they open) and
over every key (the server) in the last `window_s` seconds, so one visitor spends at most per_key of the server's
total. The clock is passed in, so a test moves time without waiting."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Hashable


class RateLimit:
    def __init__(self, window_s: float = 3600.0, clock: Callable[[], float] = time.monotonic):
        self.window_s, self._clock, self._lock = window_s, clock, threading.Lock()
        self._events: deque[tuple[float, Hashable]] = deque()

    def take(self, key: Hashable, per_key: int, total: int) -> str | None:
        """Record one event for `key` and return None, or, past a limit, record nothing and return why."""
        now = self._clock()
        with self._lock:
            while self._events and self._events[0][0] <= now - self.window_s:
                self._events.popleft()
            minutes = f"{self.window_s / 60:g} minutes"
            if sum(1 for _, k in self._events if k == key) >= per_key:
                return f"this visitor made {per_key} of them in the last {minutes}, the most one may"
            if len(self._events) >= total:
                return f"the server made {total} of them in the last {minutes} for all its visitors, the most it may"
            self._events.append((now, key))
        return None
