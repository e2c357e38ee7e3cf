"""What the coordinator runtime asks of the replica manager for a partition this broker leads
(Kafka's `PartitionWriter` and the loader's log reads), and the errors a coordinator answers
when an append fails (Kafka's `CoordinatorOperationExceptionHelper`)."""

from __future__ import annotations

from typing import Protocol, Sequence

from kraft.errors import KraftError
from kraft.server.records import FetchPartitionResult, PartitionOffsets, ProduceEntry, ProducePartitionResult

# A failed append as the coordinator's clients see it, as Kafka's coordinators map it: the client
# finds the coordinator again (NOT_COORDINATOR) or retries it (COORDINATOR_NOT_AVAILABLE).
_APPEND_ERRORS = {
    "UNKNOWN_TOPIC_OR_PARTITION": "COORDINATOR_NOT_AVAILABLE",
    "NOT_ENOUGH_REPLICAS": "COORDINATOR_NOT_AVAILABLE",
    "REQUEST_TIMED_OUT": "COORDINATOR_NOT_AVAILABLE",
    "NOT_LEADER_OR_FOLLOWER": "NOT_COORDINATOR",
    "KAFKA_STORAGE_ERROR": "NOT_COORDINATOR",
    "MESSAGE_TOO_LARGE": "UNKNOWN_SERVER_ERROR",
    "RECORD_LIST_TOO_LARGE": "UNKNOWN_SERVER_ERROR",
}


class PartitionWriter(Protocol):
    async def produce(
        self, entries: Sequence[ProduceEntry], acks: int, timeout_ms: int, *, coordinator: bool = False
    ) -> list[ProducePartitionResult]:
        """`coordinator`: records the coordinator writes for a producer (no sequences)."""
        ...

    async def write_txn_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                               coordinator_epoch: int, commit: bool, timeout_ms: int) -> int:
        """A COMMIT/ABORT marker, acks=all: its offset. Raises KraftError."""
        ...

    async def offsets(self, topic: str, partition: int) -> PartitionOffsets: ...

    async def read_committed(self, topic: str, partition: int, offset: int, max_bytes: int,
                             max_wait_ms: int) -> FetchPartitionResult:
        """Whole batches below the high watermark from `offset` of a partition led here,
        waiting up to `max_wait_ms` for some (a consumer fetch, not counted as one)."""
        ...


def append_error(topic: str, partition: int, error_code: str, message: str | None) -> KraftError:
    code = _APPEND_ERRORS.get(error_code, error_code)
    return KraftError(code, f"writing to {topic}-{partition} failed ({error_code}): {message or ''}")
