"""PartitionStateReader: what readers of partition state (the metrics, the consumer-group lag)
see of this broker's replicas, without the replica manager's mutable objects (design §4a).

A `PartitionView` is a frozen copy of one local replica's state at the moment it was asked for:
the registration the broker applied (leader, leader epoch, replicas, ISR), its role, and its
log's offsets and size. The replica manager implements the Protocol; `local_partitions` walks
only this broker's replicas, so a reader's work is ∝ the local partitions, never the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Protocol

NO_OFFSET = -1


@dataclass(frozen=True, slots=True)
class PartitionView:
    """One local replica. `leader`/`leader_epoch`/`replicas`/`isr` are the applied registration's;
    `is_leader` is whether this broker leads it now (its role taken at that epoch). The log
    fields are NO_OFFSET / 0 while `has_log` is False (the log not open yet, or offline)."""

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    is_leader: bool
    offline: bool
    min_insync_replicas: int
    has_log: bool = False
    log_start_offset: int = NO_OFFSET
    log_end_offset: int = NO_OFFSET
    high_watermark: int = NO_OFFSET
    size_in_bytes: int = 0
    segment_count: int = 0
    quarantined_count: int = 0
    # as leader: the largest lag, in offsets, of a follower that fetched at least once
    max_follower_lag: int = 0
    log_dir: str = ""  # the log directory holding it (JBOD)
    # no transaction open below it: read_committed readers' end (and their group's lag)
    last_stable_offset: int = NO_OFFSET
    # the last timestamp of the producer of the oldest open transaction (None: none open)
    oldest_transaction_last_timestamp: int | None = None


class PartitionStateReader(Protocol):
    def local_partitions(self) -> Iterator[tuple[str, int, PartitionView]]:
        """(topic, partition, view) of every replica on this broker."""
        ...

    def partition_state(self, topic: str, partition: int) -> PartitionView | None:
        """The view of one local replica; None when this broker holds none."""
        ...
