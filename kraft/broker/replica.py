"""One local replica of a partition: its PartitionLog, its role (leader or follower) with the
leader epoch and ISR from the metadata, the append lock, and the high-watermark waiters.

The lock serialises everything that mutates the log (appends inline, retention/compaction/flush
in a thread), so offsets stay ordered and no thread touches the segments under an append.
High watermark (Kafka's rule): the smallest log end offset among the ISR members, the leader's own
included; followers' LEOs are recorded by the replication fetch path.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from log.config import LogConfig


@dataclass
class ReplicaState:
    """What the metadata says about this partition (updated on every metadata change)."""

    topic_id: str
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass
class Replica:
    topic: str
    partition: int
    directory: Path
    node_id: int
    state: ReplicaState
    config: LogConfig
    log: Any = None  # log.partition_log.PartitionLog once `ready` is set
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    open_error: BaseException | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    follower_leos: dict[int, int] = field(default_factory=dict)
    _waiters: list[asyncio.Future[None]] = field(default_factory=list)

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.node_id

    def wait_for_data(self, future: asyncio.Future[None]) -> None:
        """Resolves `future` at the next high-watermark advance (fetch long poll)."""
        self._waiters.append(future)

    def forget_waiter(self, future: asyncio.Future[None]) -> None:
        try:
            self._waiters.remove(future)
        except ValueError:
            pass

    def maybe_advance_high_watermark(self) -> bool:
        """Sets the HW to the smallest LEO in the ISR; wakes waiters when it moved."""
        log = self.log
        leo = log.log_end_offset
        candidates = [leo]
        for member in self.state.isr:
            if member != self.node_id:
                candidates.append(min(self.follower_leos.get(member, 0), leo))
        new_hw = min(candidates)
        if new_hw <= log.high_watermark:
            return False
        log.high_watermark = new_hw
        self._wake()
        return True

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)
