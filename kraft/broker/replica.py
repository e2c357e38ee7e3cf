"""One local replica of a partition: its PartitionLog, what the metadata says about it (leader,
leader epoch, ISR), its sans-I/O core (`replication.partition.Partition`: the role this broker
plays for it and every replication decision), the append lock, and the waiters.

The lock serialises everything that mutates the log (appends and truncations inline, retention /
compaction / flush in a thread), so offsets stay ordered and no thread touches the segments under
an append. The role is applied from the metadata (`leader_state` is set only while this broker
leads the partition at the registration's leader epoch; the core exists once the log is open),
so a broker in the middle of a leadership change answers as the metadata it has applied says,
never from a stale role.
Three kinds of waiters: high-watermark waiters (consumer long polls, DeleteRecords: woken at every
advance), waits for a high watermark target (acks=all produces: woken by the advance that covers
their batch, Kafka's DelayedProduce, or a role change), and append waiters (follower long polls,
woken by new data, a new log start or a role change, not by a high-watermark advance: Kafka's
DelayedFetch; and produces waiting for their predecessor's sequence). `view()` is the frozen copy
readers get (`kraft/broker/partition_state.py`).

A broker holds one Replica per local partition (hundreds of thousands at scale), so it is slotted
and allocates waiter queues only while someone waits: an `asyncio.Event` allocates a deque
(~600 B) up front, and every tracked object is one more for each full garbage collection to walk.
"""

from __future__ import annotations

import asyncio
import heapq
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraft.broker.partition_state import PartitionView
from kraft.broker.replication.leader import LeaderState
from kraft.broker.replication.partition import Partition, ReplicaState
from kraft.log.config import LogConfig
from kraft.metadata.topic_name import validate_topic_name

__all__ = ["Replica", "ReplicaState"]


@dataclass(slots=True)
class Replica:
    topic: str
    partition: int
    data_dir: Path
    node_id: int
    state: ReplicaState
    config: LogConfig
    log: Any = None  # kraft.log.partition_log.PartitionLog once `is_ready`
    open_error: BaseException | None = None  # the log could not be opened (OSError: retried)
    # the log could not record the role the metadata gives (a full disk: the leader-epoch
    # checkpoint): offline, requests answer KAFKA_STORAGE_ERROR, retried until it succeeds
    storage_error: OSError | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # allocates its queue when contended
    core: Partition | None = None  # once the log is open; None again when the replica is deleted
    is_ready: bool = False  # an attempt to open the log finished (`log` or `open_error` is set)
    _ready_event: asyncio.Event | None = None  # only while someone waits for `is_ready`
    _hw_waiters: list[asyncio.Future[None]] | None = None
    _hw_targets: list[tuple[int, int, asyncio.Future[None]]] | None = None  # heap of (target, id, future)
    _append_waiters: list[asyncio.Future[None]] | None = None

    def __post_init__(self) -> None:
        # Replay keeps reserved names out of the image; checked again here because a partition
        # named after the node's own state would share its directory (`__cluster_metadata-0`).
        validate_topic_name(self.topic)

    async def wait_ready(self) -> None:
        """Returns once an attempt to open the log has finished (at once if one has)."""
        if self.is_ready:
            return
        if self._ready_event is None:
            self._ready_event = asyncio.Event()
        await self._ready_event.wait()

    def set_ready(self) -> None:
        self.is_ready = True
        event, self._ready_event = self._ready_event, None
        if event is not None:
            event.set()  # wakes every current waiter; later ones see `is_ready`

    def clear_ready(self) -> None:
        """An attempt to open the log again is under way: requests (and a deletion) wait for it."""
        self.is_ready = False

    @property
    def directory(self) -> Path:
        """The log's directory, `<data dir>/<topic>-<partition>`: built when used (opening or
        deleting, in a thread), not per replica on the loop (a Path costs a parse)."""
        return self.data_dir / f"{self.topic}-{self.partition}"

    @property
    def offline(self) -> bool:
        """Kafka's offline replica: no log, or a log that cannot take its role."""
        return self.open_error is not None or self.storage_error is not None

    @property
    def leader_state(self) -> LeaderState | None:
        """Set while this broker leads the partition at the applied registration's epoch."""
        return None if self.core is None else self.core.leader_state

    @property
    def is_leader(self) -> bool:
        return self.leader_state is not None

    def view(self) -> PartitionView:
        """This replica's state now, as readers see it."""
        state, plog, leader_state = self.state, self.log, self.leader_state
        if plog is None:
            return PartitionView(state.leader, state.leader_epoch, state.replicas, state.isr,
                                 leader_state is not None, self.offline, self.config.min_insync_replicas)
        leo = plog.log_end_offset
        lag = 0
        if leader_state is not None:
            for replica_id, follower in leader_state.followers.items():
                if follower.log_end_offset >= 0 and replica_id in state.replicas:
                    lag = max(lag, leo - follower.log_end_offset)
        return PartitionView(
            state.leader, state.leader_epoch, state.replicas, state.isr, leader_state is not None,
            self.offline, self.config.min_insync_replicas, True, plog.log_start_offset, leo,
            plog.high_watermark, plog.size_in_bytes, plog.segment_count, plog.quarantined_count,
            lag, str(self.data_dir), plog.last_stable_offset, plog.oldest_transaction_last_timestamp,
        )

    def wait_for_data(self, future: asyncio.Future[None]) -> None:
        """Resolves `future` at the next high-watermark advance or role change."""
        if self._hw_waiters is None:
            self._hw_waiters = []
        self._hw_waiters.append(future)

    def wait_for_append(self, future: asyncio.Future[None]) -> None:
        """Resolves `future` at the next append (or log start move) or role change."""
        if self._append_waiters is None:
            self._append_waiters = []
        self._append_waiters.append(future)

    def wait_for_high_watermark(self, future: asyncio.Future[None], target: int) -> None:
        """Resolves `future` once the high watermark reaches `target`, or at a role change."""
        if self._hw_targets is None:
            self._hw_targets = []
        heapq.heappush(self._hw_targets, (target, id(future), future))

    def forget_waiter(self, future: asyncio.Future[None]) -> None:
        for waiters in (self._hw_waiters, self._append_waiters):
            try:
                waiters.remove(future)  # type: ignore[union-attr]
            except (AttributeError, ValueError):  # no waiters list, or not in it: one scan, not two
                pass
        targets = self._hw_targets
        if targets and not future.done():  # a resolved one was popped when it was woken
            for i, (_, _, waiting) in enumerate(targets):
                if waiting is future:
                    targets[i] = targets[-1]
                    targets.pop()
                    heapq.heapify(targets)
                    break

    def wake_appended(self) -> None:
        _resolve(self._append_waiters)
        self._append_waiters = None

    def wake_high_watermark(self, high_watermark: int) -> None:
        """The high watermark advanced to `high_watermark`: every consumer long poll answers, and
        the waits for a target it reached; the others keep waiting without a wake-up. Followers'
        long polls are not woken: they learn the high watermark with their next data, as
        Kafka's followers do (a wake-up per advance doubled the replication exchanges)."""
        _resolve(self._hw_waiters)
        self._hw_waiters = None
        targets = self._hw_targets
        while targets and targets[0][0] <= high_watermark:
            future = heapq.heappop(targets)[2]
            if not future.done():
                future.set_result(None)

    def wake_all(self) -> None:
        _resolve(self._hw_waiters)
        _resolve(self._append_waiters)
        _resolve([future for _, _, future in self._hw_targets or ()])
        self._hw_waiters = self._append_waiters = self._hw_targets = None


def _resolve(futures: list[asyncio.Future[None]] | None) -> None:
    for future in futures or ():
        if not future.done():
            future.set_result(None)
