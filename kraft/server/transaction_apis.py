"""The transaction APIs (KafkaApis' handlers for FindCoordinator of a transactional id,
InitProducerId with one, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
DescribeTransactions, ListTransactions, and the inter-node WriteTxnMarkers
with KIP-890's verification): each authorizes its API's resources through the request context,
as Kafka's rules say (kraft/server/access.py), then calls the transaction coordinator, the group
coordinator or the partitions this broker leads. DescribeProducers is `replica_admin.py`'s.

Requests for a transactional id go to its coordinator (the leader of its `__transaction_state`
partition); another broker answers NOT_COORDINATOR naming it.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Iterable

from kraft.broker.groups.topic_regex import compile_regex
from kraft.errors import KraftError, from_exception
from kraft.metadata.acl import CLUSTER as CLUSTER_TYPE, GROUP, TOPIC, TRANSACTIONAL_ID
from kraft.server.access import (
    ADD_OFFSETS_TO_TXN, ADD_PARTITIONS_TO_TXN, ADMIN_ABORT, BROKER_ADD_PARTITIONS, CLUSTER, DESCRIBE_TRANSACTIONS, END_TXN,
    FIND_COORDINATOR, INIT_PRODUCER_ID, LIST_TRANSACTIONS, LISTED, NAMED, TXN_COORDINATOR, TXN_OFFSET_COMMIT,
    WRITE_TXN_MARKERS, rule_of,
)
from kraft.server.authorization import Authorization
from kraft.server.group_apis import topic_refusal
from kraft.server.groups import CommitOffsetsResult, OffsetCommitEntry, commit_per_partition
from kraft.server.request_context import RequestContext
from kraft.server.transactions import (
    FindTransactionCoordinatorResult, PartitionError, TopicPartition, TransactionalOffsets,
    TransactionDescription, TransactionPartitions, TransactionPartitionsRequest, TransactionProducer,
    TransactionService, TxnMarker,
)

_FIND = rule_of(FIND_COORDINATOR, TRANSACTIONAL_ID, NAMED, TXN_COORDINATOR)
_INIT = rule_of(INIT_PRODUCER_ID, TRANSACTIONAL_ID, NAMED)
_ADD = rule_of(ADD_PARTITIONS_TO_TXN, TRANSACTIONAL_ID, NAMED)
_ADD_TOPICS = rule_of(ADD_PARTITIONS_TO_TXN, TOPIC, NAMED)
_ADD_OFFSETS = rule_of(ADD_OFFSETS_TO_TXN, TRANSACTIONAL_ID, NAMED)
_ADD_OFFSETS_GROUP = rule_of(ADD_OFFSETS_TO_TXN, GROUP, NAMED)
_END = rule_of(END_TXN, TRANSACTIONAL_ID, NAMED)
_COMMIT = rule_of(TXN_OFFSET_COMMIT, TRANSACTIONAL_ID, NAMED)
_COMMIT_GROUP = rule_of(TXN_OFFSET_COMMIT, GROUP, NAMED)
_COMMIT_TOPICS = rule_of(TXN_OFFSET_COMMIT, TOPIC, NAMED)
_DESCRIBE = rule_of(DESCRIBE_TRANSACTIONS, TRANSACTIONAL_ID, NAMED)
_LIST = rule_of(LIST_TRANSACTIONS, TRANSACTIONAL_ID, LISTED)
_ADMIN_ABORT = rule_of(WRITE_TXN_MARKERS, CLUSTER_TYPE, CLUSTER, ADMIN_ABORT)
_ADD_FOR_BROKERS = rule_of(ADD_PARTITIONS_TO_TXN, CLUSTER_TYPE, CLUSTER, BROKER_ADD_PARTITIONS)


class TransactionApis:
    def __init__(self, coordinator: TransactionService | None, groups: TransactionalOffsets | None,
                 partitions: TransactionPartitions | None, authorization: Authorization) -> None:
        """Without a coordinator (a node that runs none) its calls are COORDINATOR_NOT_AVAILABLE;
        without partitions (no broker role) the partition calls are UNSUPPORTED_VERSION."""
        self._coordinator = coordinator
        self._groups = groups
        self._partitions = partitions
        self.auth = authorization

    @property
    def coordinator(self) -> TransactionService:
        if self._coordinator is None:
            raise KraftError("COORDINATOR_NOT_AVAILABLE", "this node runs no transaction coordinator")
        return self._coordinator

    @property
    def partitions(self) -> TransactionPartitions:
        if self._partitions is None:
            raise KraftError("UNSUPPORTED_VERSION", "this node leads no partitions")
        return self._partitions

    # -- the producer's APIs ------------------------------------------------------------------

    async def find_coordinator(self, ctx: RequestContext, transactional_id: str) -> FindTransactionCoordinatorResult:
        self.auth.require(ctx, _FIND, (transactional_id,))
        return await self.coordinator.find_coordinator(transactional_id)

    async def init_producer_id(self, ctx: RequestContext, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None = None) -> TransactionProducer:
        """`expected`: the producer id and epoch of a producer re-initialising itself (KIP-360):
        PRODUCER_FENCED unless they are the transactional id's current ones."""
        self.auth.require(ctx, _INIT, (transactional_id,))
        return await self.coordinator.init_producer_id(transactional_id, timeout_ms, expected)

    async def add_partitions(self, ctx: RequestContext, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[TopicPartition]) -> list[PartitionError]:
        self.auth.require(ctx, _ADD, (transactional_id,))
        self.auth.require(ctx, _ADD_TOPICS, {t for t, _ in partitions})
        errors = await self.coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions)
        return [PartitionError(t, p, error, None if error is None else f"{t}-{p} was not added to the transaction")
                for (t, p), error in errors.items()]

    async def add_partitions_for_brokers(self, ctx: RequestContext, transactions: list[TransactionPartitionsRequest]
                                         ) -> list[dict[TopicPartition, str | None]]:
        """Kafka's AddPartitionsToTxn v4+ (a broker's, KIP-890): ClusterAction on the cluster
        instead of the client's rules; each transaction's partitions added (or, `verify_only`,
        checked to be in its open transaction) and answered on their own, an error of the
        transaction (its producer fenced, another coordinator) on each of its partitions."""
        self.auth.require(ctx, _ADD_FOR_BROKERS)

        async def one(txn: TransactionPartitionsRequest) -> dict[TopicPartition, str | None]:
            call = self.coordinator.verify_partitions if txn.verify_only else self.coordinator.add_partitions
            try:
                return await call(txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.partitions)
            except Exception as e:  # noqa: BLE001 - the transaction's answer, not the request's
                return dict.fromkeys(txn.partitions, from_exception(e).error_code)
        return list(await asyncio.gather(*(one(txn) for txn in transactions)))

    async def add_offsets(self, ctx: RequestContext, transactional_id: str, producer_id: int, producer_epoch: int,
                          group_id: str) -> None:
        self.auth.require(ctx, _ADD_OFFSETS, (transactional_id,))
        self.auth.require(ctx, _ADD_OFFSETS_GROUP, (group_id,))
        await self.coordinator.add_offsets(transactional_id, producer_id, producer_epoch, group_id)

    async def end_transaction(self, ctx: RequestContext, transactional_id: str, producer_id: int,
                              producer_epoch: int, commit: bool, bump_epoch: bool = False) -> TransactionProducer:
        """The producer id and epoch after the end; `bump_epoch`: transaction version 2 (EndTxn
        v5) bumps the epoch at every end."""
        self.auth.require(ctx, _END, (transactional_id,))
        return await self.coordinator.end_transaction(transactional_id, producer_id, producer_epoch, commit,
                                                      bump_epoch)

    async def commit_offsets(self, ctx: RequestContext, group_id: str, transactional_id: str, producer_id: int,
                             producer_epoch: int, offsets: list[OffsetCommitEntry]) -> CommitOffsetsResult:
        """Kafka's TxnOffsetCommit, to the group's coordinator. As handleTxnOffsetCommitRequest:
        Write on the transactional id and Read on the group, else the whole commit is refused;
        a topic the principal may not Read answers its partitions TOPIC_AUTHORIZATION_FAILED
        (and an unknown partition UNKNOWN_TOPIC_OR_PARTITION), the others join the transaction."""
        self.auth.require(ctx, _COMMIT, (transactional_id,))
        self.auth.require(ctx, _COMMIT_GROUP, (group_id,))
        groups = self._groups
        if groups is None:
            raise KraftError("COORDINATOR_NOT_AVAILABLE", "this node runs no group coordinator")
        return await commit_per_partition(
            offsets, topic_refusal(self.auth, ctx, _COMMIT_TOPICS, offsets),
            lambda allowed: groups.commit_transactional_offsets(group_id, producer_id, producer_epoch, allowed))

    # -- describing ---------------------------------------------------------------------------

    async def describe(self, ctx: RequestContext, transactional_id: str) -> TransactionDescription:
        self.auth.require(ctx, _DESCRIBE, (transactional_id,))
        return await self.coordinator.describe(transactional_id)

    def list(self, ctx: RequestContext, states: Iterable[str], producer_ids: Iterable[int],
             pattern: str | None = None) -> list[TransactionDescription]:
        """The ids this broker coordinates that the principal may Describe; `pattern` (a
        regular expression, ListTransactions v2, KIP-1152): those it matches whole (RE2, as
        Kafka's RE2/J), INVALID_REGULAR_EXPRESSION when it is not one."""
        found = self.auth.visible(ctx, _LIST, self.coordinator.list(states, producer_ids), lambda d: d.transactional_id)
        if not pattern:
            return found
        fullmatch = compile_regex(pattern, "TransactionalIdPattern").fullmatch
        return [d for d in found if fullmatch(d.transactional_id)]

    # -- an administrator's (kafka-transactions abort) ------------------------------------------

    async def abort_transaction(self, ctx: RequestContext, topic: str, partition: int, producer_id: int,
                                producer_epoch: int, coordinator_epoch: int, timeout_ms: int) -> int | None:
        """Kafka's Admin.abortTransaction: WriteTxnMarkers(ABORT) for one partition this broker
        leads, from a principal with ClusterAction on the cluster (Kafka's rule for the API). Ends
        a hanging transaction: one whose coordinator will never write its marker. The marker's
        offset (None for a `__consumer_offsets` partition, whose group coordinator wrote it)."""
        self.auth.require(ctx, _ADMIN_ABORT)
        return await self.partitions.write_txn_marker(topic, partition, producer_id, producer_epoch,
                                                      coordinator_epoch, False, timeout_ms)

    # -- the cluster's own (WriteTxnMarkers and KIP-890's verification, node-only) ------------

    async def write_txn_markers(self, ctx: RequestContext, markers: list[TxnMarker],
                                timeout_ms: int) -> list[list[PartitionError]]:
        """Each marker's partitions, each answered on its own (its marker's offset, or the error)."""
        self.auth.require_node(ctx)
        partitions = self.partitions
        return list(await asyncio.gather(*(
            asyncio.gather(*(_answer(t, p, partitions.write_txn_marker(
                t, p, m.producer_id, m.producer_epoch, m.coordinator_epoch, m.commit, timeout_ms))
                for t, p in m.partitions))
            for m in markers)))

    async def verify_transaction(self, ctx: RequestContext, producer_id: int, producer_epoch: int,
                                 partitions: list[TopicPartition]) -> list[PartitionError]:
        self.auth.require_node(ctx)
        leaders = self.partitions
        return list(await asyncio.gather(*(
            _answer(t, p, leaders.verify_transaction(t, p, producer_id, producer_epoch)) for t, p in partitions)))


async def _answer(topic: str, partition: int, call: Awaitable[int | None]) -> PartitionError:
    try:
        offset = await call
    except Exception as e:
        error = from_exception(e)
        return PartitionError(topic, partition, error.error_code, error.message)
    return PartitionError(topic, partition, offset=offset)
