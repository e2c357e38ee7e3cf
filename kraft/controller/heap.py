"""Short garbage-collector pauses while the metadata grows (both node roles use it).

CPython's cyclic collector walks every object it tracks, holding the GIL: a full (generation 2)
collection of a controller holding 20k partitions (~200k objects) took 0.1-0.4 s on the shared
2-core machine, stopping the Raft thread as much as the event loop, and its cost grows with the
metadata (the image, a broker's partitions and logs, the controller's record tail).

- `HeapFreezer` is a `gc.callbacks` hook: after a full collection that cost at least `min_cpu_s`
  of CPU, it calls `gc.freeze()`, which moves the survivors (alive and reachable right then) into
  the permanent generation that collections skip (O(1)). The next full collection walks only
  what was allocated since, so a full collection costs what the heap grew by, never the whole
  heap again. Frozen objects are still freed by reference counting; only one that later becomes
  part of cyclic garbage stays until the process ends (a few hundred objects per freeze; freezes
  happen once per ~50k objects of growth, so for a metadata image that only grows it is noise).
- `gc_paused()` keeps the collector off while one large structure is decoded (msgpack decoding
  of a snapshot spent 85% of its time in collections its own allocations triggered).
"""

from __future__ import annotations

import gc
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

FREEZE_AFTER_CPU_S = 0.005  # a full collection this expensive: ~25-50k objects walked


class HeapFreezer:
    """`HeapFreezer().install()`: freezes a full collection's survivors when it was expensive."""

    def __init__(self, *, min_cpu_s: float = FREEZE_AFTER_CPU_S, freeze: Callable[[], None] = gc.freeze,
                 cpu_clock: Callable[[], float] = time.thread_time) -> None:
        self.min_cpu_s = min_cpu_s
        self._freeze = freeze
        self._cpu_clock = cpu_clock  # the collecting thread's CPU: preemption does not count
        self._started: float | None = None
        self.freezes = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._started = self._cpu_clock()
        elif self._started is not None:
            spent, self._started = self._cpu_clock() - self._started, None
            if spent >= self.min_cpu_s:
                self._freeze()
                self.freezes += 1

    def install(self) -> "HeapFreezer":
        """Process-wide, once per process however many nodes it runs (tests run several): what
        start-up built (modules, classes, the app) is collected once and frozen, then the hook."""
        with _install_lock:
            if not any(isinstance(cb, HeapFreezer) for cb in gc.callbacks):
                gc.collect()
                self._freeze()
                gc.callbacks.append(self)
        return self


_install_lock = threading.Lock()
_paused_lock = threading.Lock()
_paused = 0


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside (threads may overlap and nest); the collector is on again
    once the last one leaves, whatever it was before (nothing in kraft turns it off for good)."""
    global _paused
    with _paused_lock:
        _paused += 1
        gc.disable()
    try:
        yield
    finally:
        with _paused_lock:
            _paused -= 1
            if _paused == 0:
                gc.enable()
