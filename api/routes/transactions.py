"""The transaction coordinator's client APIs (KIP-98), served by the coordinator of the
transactional id (others answer NOT_COORDINATOR naming it, as for groups), and DescribeProducers
at a partition's leader (docs/transactions.md):

- `GET  /v1/transactions/{transactional_id}/coordinator`: FindCoordinator (key type transaction)
- `POST /v1/transactions/{transactional_id}/init`: InitProducerId
- `POST /v1/transactions/{transactional_id}/partitions`: AddPartitionsToTxn
- `POST /v1/transactions/{transactional_id}/offsets`: AddOffsetsToTxn
- `POST /v1/transactions/{transactional_id}/end`: EndTxn
- `GET  /v1/transactions/{transactional_id}`: DescribeTransactions
- `GET  /v1/transactions`: ListTransactions (the ids this broker coordinates)
- `POST /v1/groups/{group}/txn-offsets`: TxnOffsetCommit
- `GET  /v1/topics/{topic}/partitions/{partition}/producers`: DescribeProducers
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec
from aiohttp import web

from kraft.api import authz
from kraft.api.errors import KraftError, invalid_request
from kraft.api.messages.txn import (
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, DescribeProducersResponse,
    EndTxnRequest, FindTransactionCoordinatorResponse, InitTransactionRequest, ListTransactionsResponse, ProducerState, TransactionalId,
    TransactionAck, TransactionDescription, TxnOffsetCommitRequest, TxnPartitionResult, TxnTopicPartition,
)
from kraft.api.messages.node import InitProducerIdResponse
from kraft.api.routes.groups import GROUPS, OffsetCommitEntry, group_id_of
from kraft.api.routes.forward import proxy, remote_leader
from kraft.api.routes.metadata import require_topic
from kraft.api.routes.records import partition_number
from kraft.api.routes.services import REPLICAS
from kraft.api.wire import read_message, render

routes = web.RouteTableDef()


class TransactionService(Protocol):
    """`kraft.broker.transactions.coordinator.TransactionCoordinator`."""

    async def find_coordinator(self, transactional_id: str) -> dict[str, Any]: ...

    async def init_producer_id(self, transactional_id: str, timeout_ms: int) -> Any: ...

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[tuple[str, int]]) -> dict[tuple[str, int], str | None]: ...

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          group_id: str) -> None: ...

    async def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              commit: bool) -> None: ...

    async def describe(self, transactional_id: str) -> Any: ...

    def list(self, states: list[str], producer_ids: list[int]) -> list[Any]: ...


TRANSACTIONS = web.AppKey("transaction_service", TransactionService)


def _service(request: web.Request) -> TransactionService:
    service = request.app.get(TRANSACTIONS)
    if service is None:
        raise KraftError("COORDINATOR_NOT_AVAILABLE", "this node runs no transaction coordinator")
    return service


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
    answer = await _service(request).find_coordinator(_transactional_id(request))
    return render(request, msgspec.convert(answer, FindTransactionCoordinatorResponse))


@routes.post("/v1/transactions/{transactional_id}/init")
async def init_producer_id(request: web.Request) -> web.Response:
    body = await read_message(request, InitTransactionRequest)
    answer = await _service(request).init_producer_id(_transactional_id(request), body.transaction_timeout_ms)
    return render(request, InitProducerIdResponse(producer_id=answer.producer_id, producer_epoch=answer.producer_epoch))


@routes.post("/v1/transactions/{transactional_id}/partitions")
async def add_partitions(request: web.Request) -> web.Response:
    body = await read_message(request, AddPartitionsToTxnRequest)
    authz.require_named(request, {p.topic for p in body.partitions})  # Kafka: Write on each topic
    errors = await _service(request).add_partitions(
        _transactional_id(request), body.producer_id, body.producer_epoch,
        [(p.topic, p.partition) for p in body.partitions])
    return render(request, AddPartitionsToTxnResponse(partitions=[
        TxnPartitionResult(topic=t, partition=p, error_code=error,
                           message=None if error is None else f"{t}-{p} was not added to the transaction")
        for (t, p), error in errors.items()]))


@routes.post("/v1/transactions/{transactional_id}/offsets")
async def add_offsets(request: web.Request) -> web.Response:
    body = await read_message(request, AddOffsetsToTxnRequest)
    authz.require_named(request, [body.group_id])  # Kafka: Read on the group
    await _service(request).add_offsets(_transactional_id(request), body.producer_id, body.producer_epoch,
                                        body.group_id)
    return render(request, TransactionAck())


@routes.post("/v1/transactions/{transactional_id}/end")
async def end_transaction(request: web.Request) -> web.Response:
    body = await read_message(request, EndTxnRequest)
    await _service(request).end_transaction(_transactional_id(request), body.producer_id, body.producer_epoch,
                                            body.commit)
    return render(request, TransactionAck())


@routes.get("/v1/transactions/{transactional_id}")
async def describe_transaction(request: web.Request) -> web.Response:
    return render(request, _description(await _service(request).describe(_transactional_id(request))))


@routes.get("/v1/transactions")
async def list_transactions(request: web.Request) -> web.Response:
    states = [s for s in request.query.get("states", "").split(",") if s]
    try:
        pids = [int(p) for p in request.query.get("producer_ids", "").split(",") if p]
    except ValueError:
        raise invalid_request("producer_ids must be comma-separated integers") from None
    found = _service(request).list(states, pids)
    # Kafka's ListTransactions: only the ids one may Describe
    return render(request, ListTransactionsResponse(transactions=authz.visible(
        request, [_description(d) for d in found], lambda d: d.transactional_id)))


@routes.post("/v1/groups/{group}/txn-offsets")
async def txn_offset_commit(request: web.Request) -> web.Response:
    group_id = group_id_of(request)
    body = await read_message(request, TxnOffsetCommitRequest)
    authz.require_named(request, [body.transactional_id])  # Kafka: Write on the transactional id
    groups = request.app.get(GROUPS)
    if groups is None:
        raise KraftError("COORDINATOR_NOT_AVAILABLE", "this node runs no group coordinator")
    await groups.commit_transactional_offsets(  # type: ignore[attr-defined]
        group_id, body.producer_id, body.producer_epoch,
        [OffsetCommitEntry(o.topic, o.partition, o.offset, o.metadata) for o in body.offsets])
    return render(request, TransactionAck())


@routes.get("/v1/topics/{topic}/partitions/{partition}/producers")
async def describe_producers(request: web.Request) -> web.Response:
    described = require_topic(request, request.match_info["topic"])
    topic, partition = described.name, partition_number(request, described)
    if (leader := remote_leader(request, topic, partition)) is not None:
        return await proxy(request, leader)
    entries = await request.app[REPLICAS].describe_producers(topic, partition)  # type: ignore[attr-defined]
    return render(request, DescribeProducersResponse(topic=topic, partition=partition, producers=[
        ProducerState(producer_id=e.producer_id, producer_epoch=e.producer_epoch, last_sequence=e.last_sequence,
                      last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                      current_txn_start_offset=e.current_txn_first_offset)
        for e in entries]))
