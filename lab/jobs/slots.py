"""The server's slots for heavy work: at most `max_concurrent` trainings, sweeps, timings or ablations at once,
shared by every session of one server process, and what holds each taken slot (what a waiting visitor is told)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from lab.formats import duration
from lab.jobs.intervals import SLOT_POLL_SECONDS
from lab.jobs.memo import per_process


@per_process
def shared(n: int) -> threading.BoundedSemaphore:
    return threading.BoundedSemaphore(n)  # one per server process, shared by every session


class BusyError(RuntimeError):
    """All slots stayed taken for longer than the wait allowed."""


_holders: dict[int, tuple[str, float]] = {}  # id(Slot) -> (what holds it, since when): what a waiter is told
_holders_lock = threading.Lock()


def holders_text(now: float | None = None) -> str:
    """'a training for 40 s, Training the depth experiment for 3 min 20 s': what holds the taken slots now."""
    now = time.monotonic() if now is None else now
    with _holders_lock:
        held = sorted(_holders.values(), key=lambda h: h[1])
    return ", ".join(f"{what} for {duration(now - since)}" for what, since in held)


class Slot:
    """One taken slot. Released once: at the end of the `with`, or, after hand_to(job), when the job ends."""

    def __init__(self, slots: threading.BoundedSemaphore, what: str = "a heavy job"):
        self._slots, self._lock, self._held, self.handed = slots, threading.Lock(), True, False
        with _holders_lock:
            _holders[id(self)] = (what, time.monotonic())

    def release(self, *_) -> None:
        with self._lock:
            if self._held:
                self._held = False
                with _holders_lock:
                    _holders.pop(id(self), None)
                self._slots.release()

    def hand_to(self, job) -> None:
        """Keep the slot until `job` (a concurrent.futures.Future) is done, even if the page stops first."""
        self.handed = True
        job.add_done_callback(self.release)


def wait_text(n: int, wait_seconds: float, what: str, waited: float) -> str:
    """What a job waiting `waited` seconds of at most `wait_seconds` for one of the n slots is told."""
    held = holders_text()
    return (
        f"The server runs at most {n} heavy job{'s' * (n != 1)} at once and all are busy"
        f"{f' ({held})' if held else ''}: {what} is waiting for a free slot ({waited:.0f} s of at most "
        f"{wait_seconds} s)."
    )


def take(
    n: int,
    what: str,
    wait_seconds: float,
    waiting: Callable[[float], object] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Slot:
    """One of the server's n slots, held by `what` (the caller releases it, or hands it to a job).

    Free: taken at once. Else waiting(seconds waited so far) is called every SLOT_POLL_SECONDS while waiting (the
    page redraws its notice there, and Streamlit stops or reruns a page whose visitor left); after wait_seconds,
    BusyError. Whatever waiting() raises, no slot is held then.
    """
    slots = shared(n)
    if slots.acquire(blocking=False):
        return Slot(slots, what)
    start = clock()
    while True:
        waited = clock() - start
        if waited >= wait_seconds:
            raise BusyError(
                f"The server is busy: its {n} slot{'s' * (n != 1)} for heavy jobs stayed taken for {wait_seconds} s. "
                "Try again in a minute."
            )
        if waiting is not None:
            waiting(waited)
        if slots.acquire(timeout=SLOT_POLL_SECONDS):
            return Slot(slots, what)


@contextmanager
def held(n: int, what: str, wait_seconds: float) -> Iterator[Slot]:
    """One of the n slots for the `with` body, for work outside a page's script run (nothing shown while waiting).

    Waits up to wait_seconds, then raises BusyError naming `what`.
    """
    slots = shared(n)
    if not slots.acquire(timeout=wait_seconds):
        raise BusyError(f"The server is busy: {what} waited {wait_seconds:g} s for a free slot. Try again in a minute.")
    slot = Slot(slots, what)
    try:
        yield slot
    finally:
        slot.release()
