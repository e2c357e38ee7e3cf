"""The timers of one coordinator shard (Kafka's `CoordinatorTimer`): at most one per key;
scheduling a key replaces its timer. A due timer hands its entry to the runtime, which runs the
operation as a handler of the shard if the entry is still the key's when its turn comes (a
heartbeat may have rescheduled the session meanwhile). Each timer is one `call_later` on the
event loop: an idle shard wakes nobody.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterable, Protocol

from kraft.coordinator.result import CancelTimer, Operation, ScheduleTimer, TimerChange


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    """Calls `callback` after `delay_s` seconds (the event loop's `call_later`; tests pass a
    manual one)."""

    def call_later(self, delay_s: float, callback: Callable[[], Any]) -> Cancellable: ...


class LoopScheduler:
    def call_later(self, delay_s: float, callback: Callable[[], Any]) -> Cancellable:
        return asyncio.get_running_loop().call_later(delay_s, callback)


@dataclass(eq=False)
class TimerEntry:
    key: Hashable
    deadline_ms: int
    operation: Operation[Any, Any]
    handle: Cancellable | None = None


class CoordinatorTimer:
    def __init__(self, scheduler: Scheduler, clock: Callable[[], int],
                 expired: Callable[[TimerEntry], None]) -> None:
        """`expired(entry)` is called when a current entry is due."""
        self._scheduler = scheduler
        self._clock = clock
        self._expired = expired
        self._entries: dict[Hashable, TimerEntry] = {}

    def apply(self, changes: Iterable[TimerChange]) -> None:
        for change in changes:
            if isinstance(change, ScheduleTimer):
                self.schedule(change.key, change.deadline_ms, change.operation)
            else:
                assert isinstance(change, CancelTimer), change
                self.cancel(change.key)

    def schedule(self, key: Hashable, deadline_ms: int, operation: Operation[Any, Any]) -> None:
        self.cancel(key)
        entry = self._entries[key] = TimerEntry(key, deadline_ms, operation)
        delay_s = max(0, deadline_ms - self._clock()) / 1000
        entry.handle = self._scheduler.call_later(delay_s, lambda: self._due(entry))

    def cancel(self, key: Hashable) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None and entry.handle is not None:
            entry.handle.cancel()

    def cancel_all(self) -> None:
        for key in list(self._entries):
            self.cancel(key)

    def take(self, entry: TimerEntry) -> bool:
        """Removes `entry` if it is still its key's timer (then its operation runs); False if it
        was replaced or cancelled since it became due."""
        if self._entries.get(entry.key) is not entry:
            return False
        del self._entries[entry.key]
        return True

    def scheduled(self) -> dict[Hashable, int]:
        """Each key's deadline (ms)."""
        return {key: entry.deadline_ms for key, entry in self._entries.items()}

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def _due(self, entry: TimerEntry) -> None:
        if self._entries.get(entry.key) is entry:
            self._expired(entry)
