"""What a coordinator handler returns (Kafka's `CoordinatorResult`) and what a shard replays.

A handler is `(shard, now_ms) -> CoordinatorResult`: it reads the shard's state, changes nothing,
and says which records to append, what to answer once they are committed, and which of the
shard's timers to schedule or cancel then. `CoordinatorRecord` is one record of the partition as
the shard replays it, whether written a moment ago or loaded after a failover.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, Hashable, Protocol, TypeVar

T = TypeVar("T")
S = TypeVar("S", bound="CoordinatorShard")

Record = tuple[bytes | None, bytes | None]
"""A record a handler writes: (key, value); a None value is a tombstone."""


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int = -1  # a transactional record's producer (-1: not transactional)


@dataclass(frozen=True)
class TransactionalProducer:
    """The records are the producer's, in its open transaction (a transactional offset commit):
    they count once its COMMIT marker is replayed."""

    producer_id: int
    producer_epoch: int


@dataclass(frozen=True)
class EndTransaction:
    """A COMMIT or ABORT marker the runtime writes to the partition (Kafka's WriteTxnMarkers to a
    coordinator partition) and replays (`CoordinatorShard.replay_end_transaction`)."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool


@dataclass(frozen=True)
class ScheduleTimer:
    """Run `operation` as a handler of the shard at `deadline_ms`, replacing the timer of `key`."""

    key: Hashable
    deadline_ms: int
    operation: Operation[Any, Any]


@dataclass(frozen=True)
class CancelTimer:
    key: Hashable


TimerChange = ScheduleTimer | CancelTimer


@dataclass(frozen=True)
class CoordinatorResult(Generic[T]):
    """`records` are appended in one batch; `response` answers the request once they are
    committed (at once when there are none); `timers` are applied then too, so a request that
    fails leaves the timers as they were."""

    records: tuple[Record, ...]
    response: T
    timers: tuple[TimerChange, ...] = ()
    producer: TransactionalProducer | None = None  # the records are this producer's, transactional
    end_transaction: EndTransaction | None = None  # a marker to write (with no records)

    def __post_init__(self) -> None:
        assert self.end_transaction is None or not self.records, "a marker is a batch of its own"


class CoordinatorShard(Protocol):
    """The state machine of one coordinator partition (Kafka's `CoordinatorShard`)."""

    def replay(self, record: CoordinatorRecord) -> None:
        """Applies one committed record. Must not raise: a record it cannot read is skipped."""
        ...

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        """Applies a committed COMMIT/ABORT marker of `producer_id` (its transactional records
        count, or are dropped). Must not raise."""
        ...

    def on_loaded(self, now_ms: int) -> tuple[TimerChange, ...]:
        """The partition is loaded: the timers the state calls for (sessions, expiry checks)."""
        ...

    def on_unloaded(self) -> None:
        """The shard is no longer served (resigned, reloaded, failed, closed): what waits on its
        state is told. Must not raise."""
        ...


Operation = Callable[[S, int], CoordinatorResult[T]]
"""A handler: (shard, now_ms) -> result, with no side effect on the shard."""
