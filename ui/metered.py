"""Page work that costs seconds of CPU: answered from a server-wide memo keyed by its inputs (lab.jobs.memo),
else computed under one of the server's slots (ui.slots), like a training, with a visible wait.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

from lab.jobs.memo import MISSING, shared
from ui.slots import training_slot

T = TypeVar("T")


def metered(kind: str, key: Hashable, compute: Callable[[], T], what: str) -> T:
    """compute()'s result for `key`: from the memo, else computed under a slot (BusyError if none frees up)."""
    found = shared(kind).get(key)
    if found is not MISSING:
        return found
    with training_slot(what):
        found = shared(kind).get(key)  # another session may have computed it while this one waited
        if found is MISSING:
            found = compute()
            shared(kind).put(key, found)
    return found
