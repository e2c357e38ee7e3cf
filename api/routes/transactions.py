"""The transaction coordinator's client APIs (KIP-98), adapters over kraft/server's
TransactionApis: served by the coordinator of the transactional id (others answer NOT_COORDINATOR
naming it, as for groups), and DescribeProducers at a partition's leader (docs/transactions.md):

- `GET  /v1/transactions/{transactional_id}/coordinator`: FindCoordinator (key type transaction)
- `POST /v1/transactions/{transactional_id}/init`: InitProducerId
- `POST /v1/transactions/{transactional_id}/partitions`: AddPartitionsToTxn
- `POST /v1/transactions/{transactional_id}/offsets`: AddOffsetsToTxn
- `POST /v1/transactions/{transactional_id}/end`: EndTxn
- `GET  /v1/transactions/{transactional_id}`: DescribeTransactions
- `GET  /v1/transactions`: ListTransactions (the ids this broker coordinates)
- `POST /v1/groups/{group}/txn-offsets`: TxnOffsetCommit
- `GET  /v1/topics/{topic}/partitions/{partition}/producers`: DescribeProducers
- `POST /v1/producers/describe`: DescribeProducers for many partitions, of the broker asked
- `POST /v1/topics/{topic}/partitions/{partition}/abort-transaction`: Admin.abortTransaction
  (WriteTxnMarkers with an ABORT marker, at the partition's leader)
"""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from kraft.api.errors import invalid_request
from kraft.api.messages.node import InitProducerIdResponse
from kraft.api.messages.txn import (
    AbortTransactionRequest, AbortTransactionResponse, AddOffsetsToTxnRequest, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, DescribeProducersManyResponse, DescribeProducersRequest, DescribeProducersResponse,
    EndTxnRequest, PartitionProducersResult, FindTransactionCoordinatorResponse, InitTransactionRequest, ListTransactionsResponse,
    ProducerState, TransactionAck, TransactionalId, TransactionDescription, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnPartitionResult, TxnTopicPartition,
)
from kraft.api.routes.forward import proxy, remote_leader
from kraft.api.routes.groups import group_id_of, some_committed
from kraft.api.routes.records import partition_number
from kraft.api.routes.services import context_of, services_of
from kraft.api.wire import read_message, render
from kraft.server.groups import OffsetCommitEntry
from kraft.server.transaction_apis import TransactionApis

routes = web.RouteTableDef()


def _transactions(request: web.Request) -> TransactionApis:
    return services_of(request).transactions


def _transactional_id(request: web.Request) -> str:
    raw = request.match_info["transactional_id"]
    try:
        return msgspec.convert(raw, TransactionalId)
    except msgspec.ValidationError:
        raise invalid_request(f"invalid transactional id {raw!r}: use 1-1024 characters") from None


def _description(d: Any) -> TransactionDescription:
    return TransactionDescription(
        transactional_id=d.transactional_id, coordinator=d.coordinator, state=d.state, producer_id=d.producer_id,
        producer_epoch=d.producer_epoch, transaction_timeout_ms=d.timeout_ms,
        transaction_start_time_ms=d.start_timestamp,
        topic_partitions=[TxnTopicPartition(topic=t, partition=p) for t, p in d.partitions])


@routes.get("/v1/transactions/{transactional_id}/coordinator")
async def find_coordinator(request: web.Request) -> web.Response:
    answer = await _transactions(request).find_coordinator(context_of(request), _transactional_id(request))
    return render(request, msgspec.convert(answer, FindTransactionCoordinatorResponse, from_attributes=True))


@routes.post("/v1/transactions/{transactional_id}/init")
async def init_producer_id(request: web.Request) -> web.Response:
    body = await read_message(request, InitTransactionRequest)
    answer = await _transactions(request).init_producer_id(context_of(request), _transactional_id(request),
                                                           body.transaction_timeout_ms)
    return render(request, InitProducerIdResponse(producer_id=answer.producer_id, producer_epoch=answer.producer_epoch))


@routes.post("/v1/transactions/{transactional_id}/partitions")
async def add_partitions(request: web.Request) -> web.Response:
    body = await read_message(request, AddPartitionsToTxnRequest)
    results = await _transactions(request).add_partitions(
        context_of(request), _transactional_id(request), body.producer_id, body.producer_epoch,
        [(p.topic, p.partition) for p in body.partitions])
    return render(request, AddPartitionsToTxnResponse(partitions=[
        msgspec.convert(r, TxnPartitionResult, from_attributes=True) for r in results]))


@routes.post("/v1/transactions/{transactional_id}/offsets")
async def add_offsets(request: web.Request) -> web.Response:
    body = await read_message(request, AddOffsetsToTxnRequest)
    await _transactions(request).add_offsets(context_of(request), _transactional_id(request), body.producer_id,
                                             body.producer_epoch, body.group_id)
    return render(request, TransactionAck())


@routes.post("/v1/transactions/{transactional_id}/end")
async def end_transaction(request: web.Request) -> web.Response:
    body = await read_message(request, EndTxnRequest)
    await _transactions(request).end_transaction(context_of(request), _transactional_id(request), body.producer_id,
                                                 body.producer_epoch, body.commit)
    return render(request, TransactionAck())


@routes.get("/v1/transactions/{transactional_id}")
async def describe_transaction(request: web.Request) -> web.Response:
    answer = await _transactions(request).describe(context_of(request), _transactional_id(request))
    return render(request, _description(answer))


@routes.get("/v1/transactions")
async def list_transactions(request: web.Request) -> web.Response:
    states = [s for s in request.query.get("states", "").split(",") if s]
    try:
        pids = [int(p) for p in request.query.get("producer_ids", "").split(",") if p]
    except ValueError:
        raise invalid_request("producer_ids must be comma-separated integers") from None
    found = _transactions(request).list(context_of(request), states, pids)
    return render(request, ListTransactionsResponse(transactions=[_description(d) for d in found]))


@routes.post("/v1/groups/{group}/txn-offsets")
async def txn_offset_commit(request: web.Request) -> web.Response:
    group_id = group_id_of(request)
    body = await read_message(request, TxnOffsetCommitRequest)
    answer = await _transactions(request).commit_offsets(
        context_of(request), group_id, body.transactional_id, body.producer_id, body.producer_epoch,
        [OffsetCommitEntry(o.topic, o.partition, o.offset, o.metadata) for o in body.offsets])
    return render(request, msgspec.convert(some_committed(answer), TxnOffsetCommitResponse, from_attributes=True))


def _partition(request: web.Request) -> tuple[str, int]:
    described = services_of(request).topics.require_topic(request.match_info["topic"])
    return described.name, partition_number(request, described)


@routes.get("/v1/topics/{topic}/partitions/{partition}/producers")
async def describe_producers(request: web.Request) -> web.Response:
    services = services_of(request)
    topic, partition = _partition(request)
    if (leader := remote_leader(request, topic, partition)) is not None:
        return await proxy(request, leader)
    [answer] = await services.replicas.describe_producers(context_of(request), [(topic, partition)])
    if answer.error is not None:
        raise answer.error
    return render(request, DescribeProducersResponse(topic=topic, partition=partition, producers=[
        msgspec.convert(p, ProducerState, from_attributes=True) for p in answer.producers]))


@routes.post("/v1/producers/describe")
async def describe_producers_of_partitions(request: web.Request) -> web.Response:
    """Kafka's DescribeProducers as its admin client sends it: one request per broker, for the
    partitions that broker leads (no forwarding: each partition is answered on its own)."""
    body = await read_message(request, DescribeProducersRequest)
    answers = await services_of(request).replicas.describe_producers(
        context_of(request), [(p.topic, p.partition) for p in body.partitions])
    return render(request, DescribeProducersManyResponse(partitions=[PartitionProducersResult(
        topic=a.topic, partition=a.partition,
        producers=[msgspec.convert(p, ProducerState, from_attributes=True) for p in a.producers],
        error_code=None if a.error is None else a.error.error_code,
        message=None if a.error is None else a.error.message) for a in answers]))


@routes.post("/v1/topics/{topic}/partitions/{partition}/abort-transaction")
async def abort_transaction(request: web.Request) -> web.Response:
    topic, partition = _partition(request)
    if (leader := remote_leader(request, topic, partition)) is not None:
        return await proxy(request, leader)
    body = await read_message(request, AbortTransactionRequest)
    offset = await _transactions(request).abort_transaction(
        context_of(request), topic, partition, body.producer_id, body.producer_epoch, body.coordinator_epoch,
        body.timeout_ms)
    return render(request, AbortTransactionResponse(topic=topic, partition=partition, offset=offset))
