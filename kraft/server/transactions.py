"""The transaction coordinator's interface (`TransactionService`, implemented by
`kraft/broker/transactions/coordinator.py`) and the partition side it needs of the broker, with
their typed answers: InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn, DescribeTransactions, ListTransactions, WriteTxnMarkers (DescribeProducers is
`replica_admin.py`'s). Listeners
encode the answers in their own wire shapes (docs/transactions.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol

from kraft.server.groups import CommitOffsetsResult, NodeEndpoint, OffsetCommitEntry

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class FindTransactionCoordinatorResult:
    transactional_id: str
    partition: int  # of __transaction_state
    coordinator: NodeEndpoint


@dataclass(frozen=True)
class TransactionProducer:
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True)
class TransactionDescription:
    """Kafka's DescribeTransactions state of one transactional id."""

    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_timestamp: int  # -1: no open transaction
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class PartitionError:
    """One partition's answer: None when it succeeded."""

    topic: str
    partition: int
    error_code: str | None = None
    message: str | None = None
    offset: int | None = None  # a marker's offset


@dataclass(frozen=True)
class TxnMarker:
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class TransactionPartitionsRequest:
    """One transaction of a broker's AddPartitionsToTxn v4+ (KIP-890's batched form): add its
    partitions, or (`verify_only`) only say whether they are in its open transaction."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    verify_only: bool
    partitions: tuple[TopicPartition, ...]


class TransactionService(Protocol):
    async def find_coordinator(self, transactional_id: str) -> FindTransactionCoordinatorResult: ...

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None = None) -> TransactionProducer: ...

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> dict[TopicPartition, str | None]: ...

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          group_id: str) -> None: ...

    async def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              commit: bool, bump_epoch: bool = False) -> TransactionProducer: ...

    async def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                partitions: Iterable[TopicPartition]) -> dict[TopicPartition, str | None]: ...

    async def describe(self, transactional_id: str) -> TransactionDescription: ...

    def list(self, states: Iterable[str] = (), producer_ids: Iterable[int] = ()) -> list[TransactionDescription]: ...


class TransactionalOffsets(Protocol):
    """The group coordinator's side: TxnOffsetCommit."""

    async def commit_transactional_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                           offsets: list[OffsetCommitEntry]) -> CommitOffsetsResult: ...


class TransactionPartitions(Protocol):
    """The partitions this broker leads, as the coordinator reaches them: a marker (a
    `__consumer_offsets` partition's through the group coordinator) and KIP-890's verification
    (`kraft/broker/transactions/partition_leaders.py`'s LocalTxnPartitions)."""

    async def write_txn_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                               coordinator_epoch: int, commit: bool, timeout_ms: int) -> int | None: ...

    async def verify_transaction(self, topic: str, partition: int, producer_id: int, producer_epoch: int) -> None: ...
