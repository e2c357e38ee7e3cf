"""Honouring a broker's `throttle_time_ms` (Kafka's clients since KIP-219): after an answer that
reports a throttle, the client sends nothing more to that broker until the throttle time, counted
from when the throttled request was sent, has passed. A broker that already held its answer back
that long (kraft's does) costs no extra wait; one that answers at once and reports the throttle
makes the client wait the rest of it.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable


class BrokerThrottle:
    def __init__(self, clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self._clock = clock
        self._sleep = sleep
        self._until: dict[int, float] = {}
        self._lock = threading.Lock()

    def note(self, node: int, sent_at: float, answer: Any) -> None:
        """Record the throttle an answer to a request sent at `sent_at` reported, if any."""
        throttle_ms = answer.get("throttle_time_ms") if isinstance(answer, dict) else None
        if isinstance(throttle_ms, int) and not isinstance(throttle_ms, bool) and throttle_ms > 0:
            with self._lock:
                self._until[node] = max(self._until.get(node, 0.0), sent_at + throttle_ms / 1000)

    def wait(self, node: int) -> None:
        """Block until `node` may be sent to again."""
        with self._lock:
            remaining = self._until.get(node, 0.0) - self._clock()
        if remaining > 0:
            self._sleep(remaining)
