"""The follower side of `POST /v1/fetch`: the values and the service the batch route calls when a
fetch comes from a replica (`replica_id` >= 0) or carries leader epochs (KIP-320).

Kafka has one Fetch API for consumers and followers; so does kraft. A replica fetch names the
fetching broker (`replica_id`, `replica_epoch`: its broker epoch, KIP-903), and per partition the
leader epoch it believes current (`current_leader_epoch`: FENCED_LEADER_EPOCH when older than the
broker's, UNKNOWN_LEADER_EPOCH when newer), the epoch of its last batch (`last_fetched_epoch`: the
answer carries `diverging_epoch` {epoch, end_offset} when the follower's log diverged), and its
own high watermark (the leader answers at once when it has a newer one) and log start offset (what
DeleteRecords waits on; the leader answers at once when its own moved past it). Replica fetches
read up to the log end offset; consumer fetches only below the high watermark (read_committed
ones below the last stable offset, answered with the aborted transactions they overlap).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from kraft.api.errors import KraftError
from kraft.api.messages.batch import (
    NO_EPOCH, NO_REPLICA, AbortedTransaction, DivergingEpoch, FetchPartitionResponse,
)
from kraft.api.messages.common import Node

__all__ = ["NO_EPOCH", "NO_REPLICA", "ReplicaFetchEntry", "ReplicaFetchResult", "ReplicaFetchService",
           "aborted_fields", "as_replica_fetch_service", "render_result"]


@dataclass(frozen=True)
class ReplicaFetchEntry:
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = NO_EPOCH
    last_fetched_epoch: int = NO_EPOCH
    high_watermark: int = -1  # the follower's own
    log_start_offset: int = -1  # the follower's own (the leader's low watermark counts it)
    read_committed: bool = False  # a consumer's isolation_level=read_committed


@dataclass(frozen=True)
class ReplicaFetchResult:
    topic: str
    partition: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    records: bytes
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end_offset)
    error_code: str | None = None
    message: str | None = None
    leader: dict[str, Any] | None = None  # {node_id, host, port} with NOT_LEADER_OR_FOLLOWER
    last_stable_offset: int = -1
    aborted_transactions: tuple[tuple[int, int], ...] | None = None  # read_committed: (producer id, first offset)


class ReplicaFetchService(Protocol):
    async def replica_fetch(
        self, replica_id: int, replica_epoch: int, entries: Sequence[ReplicaFetchEntry],
        max_wait_ms: int, min_bytes: int, max_bytes: int,
    ) -> list[ReplicaFetchResult]: ...


def render_result(r: ReplicaFetchResult) -> FetchPartitionResponse:
    diverging = r.diverging_epoch
    return FetchPartitionResponse(
        topic=r.topic, partition=r.partition, high_watermark=r.high_watermark, log_start_offset=r.log_start_offset,
        records=r.records, log_end_offset=r.log_end_offset,
        diverging_epoch=None if diverging is None else DivergingEpoch(epoch=diverging[0], end_offset=diverging[1]),
        error_code=r.error_code, message=r.message, leader=None if r.leader is None else Node(**r.leader),
        **aborted_fields(r.last_stable_offset, r.aborted_transactions))


def aborted_fields(last_stable_offset: int,
                   aborted: tuple[tuple[int, int], ...] | None) -> dict[str, Any]:
    """The transactional fields of a FetchPartitionResponse (left out when unknown)."""
    fields: dict[str, Any] = {}
    if last_stable_offset >= 0:
        fields["last_stable_offset"] = last_stable_offset
    if aborted is not None:
        fields["aborted_transactions"] = [AbortedTransaction(producer_id=p, first_offset=f) for p, f in aborted]
    return fields


def as_replica_fetch_service(service: object) -> ReplicaFetchService:
    """The node's replica service, when it serves replica fetches (a plain ReplicaService does not)."""
    if not callable(getattr(service, "replica_fetch", None)):
        raise KraftError("UNSUPPORTED_VERSION", "this node does not serve replica fetches")
    return service  # type: ignore[return-value]
