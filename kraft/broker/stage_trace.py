"""Timestamps along a record's way through the broker (`kraft-bench --trace`): the node's side.

Each event says that a stage reached an offset of a partition at a wall-clock time: the leader
appended up to `offset` (exclusive), answered a follower's fetch with batches up to it, a follower
appended up to it, a follower's fetch reported it as its new log end, the high watermark moved to
it, a produce answered up to it. A record at offset `o` passed a stage at the first event of that
stage (and follower) whose `offset` is above `o`: offsets only grow along a stage, so the bench
joins the client's batches to the nodes' events without any id travelling with the record.

Off unless `stage.trace.events` is set (the number of events kept, a ring: the bench reads them
while it runs with `GET /v1/trace?after=SEQ`). Wall-clock nanoseconds (`time.time_ns`), so the
stages of processes on one host line up; across hosts they are as good as the clocks' sync.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable

# The stages in the order a record passes them (acks=all); the client adds `client_send` before
# and `client_ack` after. `fetch_answered`, `follower_append` and `follower_fetch` name a follower.
LEADER_APPEND = "leader_append"
FETCH_ANSWERED = "fetch_answered"
FOLLOWER_APPEND = "follower_append"
FOLLOWER_FETCH = "follower_fetch"
HW_ADVANCE = "hw_advance"
PRODUCE_ANSWERED = "produce_answered"
NODE_STAGES = (LEADER_APPEND, FETCH_ANSWERED, FOLLOWER_APPEND, FOLLOWER_FETCH, HW_ADVANCE, PRODUCE_ANSWERED)

# (seq, time_ns, stage, topic, partition, offset, replica): replica is the follower's id, -1 else
TraceEvent = tuple[int, int, str, str, int, int, int]


class StageTrace:
    """A bounded ring of stage events; `record` is a no-op (one attribute test) when off."""

    def __init__(self, capacity: int = 0, clock_ns: Callable[[], int] = time.time_ns) -> None:
        self.enabled = capacity > 0
        self._events: deque[TraceEvent] = deque(maxlen=max(capacity, 1))
        self._seq = 0
        self._clock_ns = clock_ns

    def record(self, stage: str, topic: str, partition: int, offset: int, replica: int = -1) -> None:
        if not self.enabled:
            return
        self._seq += 1
        self._events.append((self._seq, self._clock_ns(), stage, topic, partition, offset, replica))

    def events(self, after: int = 0) -> list[TraceEvent]:
        """The events kept with a sequence number above `after`, oldest first."""
        events = self._events
        if not events or events[-1][0] <= after:
            return []
        skip = max(0, after - events[0][0] + 1)  # sequence numbers are consecutive in the ring
        return [events[i] for i in range(skip, len(events))]


NO_TRACE = StageTrace()
