"""What clients can make a node hold, node-wide: open connections (Kafka's `max.connections`,
`max.connections.per.ip`) and the bytes of requests read and not yet answered (Kafka's
`queued.max.request.bytes`, its MemoryPool).

Both are plain counters on the event loop, no I/O. A connection over a limit is refused at once
(Kafka closes it, TooManyConnectionsException); a frame whose size does not fit the pool is not
read until answers free room (`RequestMemoryPool.try_reserve` fails, the connection pauses reading
and asks to be woken by `wait`): Kafka's non-strict pool, which lets a request in whenever nothing
else holds memory, so one request of up to socket.request.max.bytes always gets through.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable


class ConnectionLimits:
    def __init__(self, max_connections: int, max_connections_per_ip: int) -> None:
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self._per_ip: Counter[str] = Counter()
        self.total = 0

    def admit(self, host: str) -> str | None:
        """Counts a new connection from `host`; or, over a limit, the reason it is refused."""
        if self.total >= self.max_connections:
            return f"max.connections ({self.max_connections}) reached"
        if self._per_ip[host] >= self.max_connections_per_ip:
            return f"max.connections.per.ip ({self.max_connections_per_ip}) reached for {host}"
        self.total += 1
        self._per_ip[host] += 1
        return None

    def release(self, host: str) -> None:
        assert self._per_ip[host] > 0 and self.total > 0, host
        self.total -= 1
        self._per_ip[host] -= 1
        if not self._per_ip[host]:
            del self._per_ip[host]


class RequestMemoryPool:
    def __init__(self, capacity: int | None) -> None:
        """`capacity` None: unbounded (Kafka's queued.max.request.bytes=-1)."""
        self.capacity = capacity
        self.used = 0
        self._waiters: list[Callable[[], None]] = []

    def try_reserve(self, size: int) -> bool:
        if self.capacity is not None and self.used and self.used + size > self.capacity:
            return False
        self.used += size
        return True

    def force(self, size: int) -> None:
        """Counts bytes that are already in memory (a frame read whole with its size)."""
        self.used += size

    def release(self, size: int) -> None:
        assert 0 <= size <= self.used, (size, self.used)
        self.used -= size
        if size and self._waiters:
            waiters, self._waiters = self._waiters, []
            for wake in waiters:  # each tries again, and waits again if it still does not fit
                wake()

    def wait(self, wake: Callable[[], None]) -> None:
        """`wake()` once some memory is released."""
        self._waiters.append(wake)

    def forget(self, wake: Callable[[], None]) -> None:
        if wake in self._waiters:
            self._waiters.remove(wake)
