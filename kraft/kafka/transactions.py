"""The transaction APIs (KIP-98) on the Kafka listener, thin adapters over kraft/server's
TransactionApis (the transaction coordinator, and the group coordinator for TxnOffsetCommit):
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeTransactions and
ListTransactions. InitProducerId with a transactional id and FindCoordinator's transaction key
are `apis/producer_ids_api.py`'s; DescribeProducers is `replica_admin.py`'s.

Errors are placed where Kafka places them: AddPartitionsToTxn and TxnOffsetCommit answer each
partition (AddPartitionsToTxn: a topic the principal may not Write gets TOPIC_AUTHORIZATION_FAILED
and the others OPERATION_NOT_ATTEMPTED; any other failure is every partition's. TxnOffsetCommit:
a topic the principal may not Read gets TOPIC_AUTHORIZATION_FAILED, an unknown partition
UNKNOWN_TOPIC_OR_PARTITION, and the others are committed or get the group's error), the others
at the top level. Requests older
than KIP-588's versions get INVALID_PRODUCER_EPOCH where newer ones get PRODUCER_FENCED
(`fenced_for_version`), as Kafka answers old clients.

AddPartitionsToTxn v0-3 is the client's form; v4-5 (KIP-890) is a broker's, batching many
transactions, each one's partitions added or (`verify_only`) checked to be in its open
transaction, with ClusterAction on the cluster instead of the client's rules. EndTxn v5
(transaction version 2) bumps the producer epoch at every end and answers the new producer id
and epoch. ListTransactions v1's duration filter (KIP-994) and v2's transactional id pattern
(KIP-1152, RE2 matched against the whole id) filter the listing.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any, Awaitable, Callable, Iterable, Mapping, TypeVar

from kraft.errors import KraftError
from kraft.kafka.entities import error_code, timestamp
from kraft.kafka.handling import KafkaApi
from kraft.metadata.acl import TOPIC
from kraft.server.access import ADD_PARTITIONS_TO_TXN, NAMED, rule_of
from kraft.server.groups import OffsetCommitEntry
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices
from kraft.server.transactions import TransactionDescription, TransactionPartitionsRequest

INIT_PRODUCER_ID = 22  # its handler is apis/producer_ids_api.py's
ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT_KEY = 24, 25, 26, 28
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66
# Kafka's TransactionState names, ListTransactions' unknown_state_filters are the others
STATES = frozenset({"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
                    "Dead", "PrepareEpochFence"})
# the first version of each API whose clients know PRODUCER_FENCED (KIP-588)
PRODUCER_FENCED_SINCE = {INIT_PRODUCER_ID: 4, ADD_PARTITIONS: 2, ADD_OFFSETS: 2, END_TXN: 2}
TRANSACTION_V2_END_TXN = 5  # EndTxn's first version of transaction version 2 (the epoch bumped at each end)

_ADD_TOPICS = rule_of(ADD_PARTITIONS_TO_TXN, TOPIC, NAMED)
T = TypeVar("T")


def fenced_for_version(error: KraftError, ctx: RequestContext, api_key: int) -> KraftError:
    """PRODUCER_FENCED as INVALID_PRODUCER_EPOCH for a request older than KIP-588 (its client
    treats that one as fatal the same way)."""
    if error.error_code == "PRODUCER_FENCED" and ctx.api_version < PRODUCER_FENCED_SINCE.get(api_key, 0):
        return KraftError("INVALID_PRODUCER_EPOCH", error.message)
    return error


async def _call(ctx: RequestContext, api_key: int, call: Callable[[], Awaitable[T]]) -> T:
    try:
        return await call()
    except KraftError as e:
        raise fenced_for_version(e, ctx, api_key) from None


def _by_topic(items: Iterable[tuple[str, int, Any]], name: str, partitions: str,
              answer: Callable[[int, Any], Any]) -> list[dict[str, Any]]:
    """[(topic, partition, x)] -> Kafka's topics, each with its partitions' `answer(partition, x)`."""
    topics: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for topic, partition, x in items:
        topics[topic].append(answer(partition, x))
    return [{name: t, partitions: ps} for t, ps in topics.items()]


async def add_partitions_to_txn(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    if ctx.api_version >= 4:
        return await _add_partitions_for_brokers(services, ctx, request)
    wanted = [(t.name, int(p)) for t in request.v3_and_below_topics for p in t.partitions]
    answers: dict[tuple[str, int], KraftError | str | None]
    try:
        results = await _call(ctx, ADD_PARTITIONS, lambda: services.transactions.add_partitions(
            ctx, request.v3_and_below_transactional_id, int(request.v3_and_below_producer_id),
            int(request.v3_and_below_producer_epoch), wanted))
        answers = {(r.topic, r.partition): r.error_code for r in results}
    except KraftError as e:
        # a topic refusal names the refused topics, the others were not attempted; any other
        # failure is every partition's
        refused = (set(services.authorization.refused(ctx, _ADD_TOPICS, {t for t, _ in wanted}))
                   if e.error_code == "TOPIC_AUTHORIZATION_FAILED" else None)
        answers = {tp: e if refused is None or tp[0] in refused else "OPERATION_NOT_ATTEMPTED" for tp in wanted}
    return {"results_by_topic_v3_and_below": _by_topic(
        ((t, p, answers.get((t, p))) for t, p in wanted), "name", "results_by_partition",
        lambda p, error: {"partition_index": p, "partition_error_code": error_code(error)})}


async def _add_partitions_for_brokers(services: BrokerServices, ctx: RequestContext,
                                      request: Any) -> Mapping[str, Any]:
    transactions = [TransactionPartitionsRequest(
        t.transactional_id, int(t.producer_id), int(t.producer_epoch), bool(t.verify_only),
        tuple((topic.name, int(p)) for topic in t.topics for p in topic.partitions)) for t in request.transactions]
    answers = await services.transactions.add_partitions_for_brokers(ctx, transactions)
    return {"error_code": error_code(None), "results_by_transaction": [
        {"transactional_id": txn.transactional_id, "topic_results": _by_topic(
            ((t, p, errors.get((t, p))) for t, p in txn.partitions), "name", "results_by_partition",
            lambda p, error: {"partition_index": p, "partition_error_code": error_code(error)})}
        for txn, errors in zip(transactions, answers)]}


async def add_offsets_to_txn(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    await _call(ctx, ADD_OFFSETS, lambda: services.transactions.add_offsets(
        ctx, request.transactional_id, int(request.producer_id), int(request.producer_epoch), request.group_id))
    return {"error_code": error_code(None)}


async def end_txn(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    producer = await _call(ctx, END_TXN, lambda: services.transactions.end_transaction(
        ctx, request.transactional_id, int(request.producer_id), int(request.producer_epoch),
        bool(request.committed), bump_epoch=ctx.api_version >= TRANSACTION_V2_END_TXN))
    # v5's fields (entities drop them below it)
    return {"error_code": error_code(None), "producer_id": producer.producer_id,
            "producer_epoch": producer.producer_epoch}


async def txn_offset_commit(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    """The offsets join the transaction at the group's coordinator, each partition answered on
    its own; the group sees them when the transaction commits. v3's member id, generation and
    instance id are not checked against the group (a transactional commit is fenced by the
    producer epoch; docs/kafka-protocol.md)."""
    entries = [OffsetCommitEntry(t.name, int(p.partition_index), int(p.committed_offset), p.committed_metadata or "")
               for t in request.topics for p in t.partitions]
    errors: dict[tuple[str, int], str | KraftError | None]
    try:
        committed = await _call(ctx, TXN_OFFSET_COMMIT_KEY, lambda: services.transactions.commit_offsets(
            ctx, request.group_id, request.transactional_id, int(request.producer_id), int(request.producer_epoch),
            entries))
    except KraftError as e:  # the whole commit refused: every partition's answer
        errors = {(x.topic, x.partition): e for x in entries}
    else:  # each partition answered on its own (handleTxnOffsetCommitRequest)
        errors = {(o.topic, o.partition): o.error_code for o in committed.offsets}
    return {"topics": _by_topic(((x.topic, x.partition, errors.get((x.topic, x.partition))) for x in entries),
                                "name", "partitions", lambda p, e: {"partition_index": p, "error_code": error_code(e)})}


async def describe_transactions(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    states = []
    for tid in request.transactional_ids:
        try:
            d = await services.transactions.describe(ctx, tid)
        except KraftError as e:
            states.append({"error_code": error_code(e), "transactional_id": tid, "transaction_state": "",
                           "transaction_timeout": 0, "transaction_start_time": timestamp(-1),
                           "producer_id": -1, "producer_epoch": -1, "topics": []})
            continue
        states.append({"error_code": error_code(None), "transactional_id": tid, "transaction_state": d.state,
                       "transaction_timeout": d.timeout_ms, "transaction_start_time": timestamp(d.start_timestamp),
                       "producer_id": d.producer_id, "producer_epoch": d.producer_epoch,
                       "topics": _by_topic(((t, p, p) for t, p in d.partitions), "topic", "partitions",
                                           lambda p, _: p)})
    return {"transaction_states": states}


def _running_for(d: TransactionDescription, duration_ms: int, now_ms: int) -> bool:
    """ListTransactions v1's duration filter, Kafka's arithmetic (a negative filter takes all)."""
    return duration_ms < 0 or now_ms - d.start_timestamp >= duration_ms


async def list_transactions(services: BrokerServices, ctx: RequestContext, request: Any) -> Mapping[str, Any]:
    states = list(request.state_filters)
    duration_ms, now_ms = int(getattr(request, "duration_filter", -1)), int(time.time() * 1000)
    found = services.transactions.list(ctx, states, [int(p) for p in request.producer_id_filters],
                                       getattr(request, "transactional_id_pattern", None))
    return {"error_code": error_code(None), "unknown_state_filters": [s for s in states if s not in STATES],
            "transaction_states": [{"transactional_id": d.transactional_id, "producer_id": d.producer_id,
                                    "transaction_state": d.state}
                                   for d in found if _running_for(d, duration_ms, now_ms)]}


APIS = (
    KafkaApi(ADD_PARTITIONS, 0, 5, add_partitions_to_txn),
    KafkaApi(ADD_OFFSETS, 0, 4, add_offsets_to_txn),
    KafkaApi(END_TXN, 0, 5, end_txn),
    KafkaApi(TXN_OFFSET_COMMIT_KEY, 0, 4, txn_offset_commit),
    KafkaApi(DESCRIBE_TRANSACTIONS, 0, 0, describe_transactions),
    KafkaApi(LIST_TRANSACTIONS, 0, 2, list_transactions),
)
