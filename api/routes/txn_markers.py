"""The partition side of transactions, for the transaction coordinator (node-only routes,
`api/messages/txn.py`): `POST /v1/partitions/txn-markers` (Kafka's WriteTxnMarkers: COMMIT or
ABORT markers, acks=all) and `POST /v1/partitions/txn-verify` (KIP-890: the partitions the
coordinator added to a transaction, whose leaders may then take its first batch).

Sent to the leader of the partitions named (as Kafka's coordinator sends markers to leaders); a
partition led elsewhere is answered NOT_LEADER_OR_FOLLOWER. The access table keeps both to the
cluster's own nodes (Kafka's WriteTxnMarkers needs ClusterAction on the cluster).
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Protocol

from aiohttp import web

from kraft.api.errors import KraftError, from_exception
from kraft.api.messages.txn import (
    TxnMarkerResult, TxnPartitionResult, VerifyTransactionRequest, VerifyTransactionResponse,
    WriteTxnMarkersRequest, WriteTxnMarkersResponse,
)
from kraft.api.routes.services import REPLICAS
from kraft.api.routes.transactions import TRANSACTIONS
from kraft.api.wire import read_message, render

routes = web.RouteTableDef()


class TransactionPartitionService(Protocol):
    async def write_txn_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                               coordinator_epoch: int, commit: bool, timeout_ms: int) -> int | None: ...

    async def verify_transaction(self, topic: str, partition: int, producer_id: int,
                                 producer_epoch: int) -> None: ...


def _service(request: web.Request) -> TransactionPartitionService:
    # with a transaction coordinator, its local side: a __consumer_offsets partition's marker
    # goes through the group coordinator, which replays it (kraft/broker/transactions)
    transactions = request.app.get(TRANSACTIONS)
    service = transactions.leaders.local if transactions is not None else request.app[REPLICAS]  # type: ignore[attr-defined]
    if not callable(getattr(service, "write_txn_marker", None)):
        raise KraftError("UNSUPPORTED_VERSION", "this node leads no partitions")
    return service  # type: ignore[return-value]


async def _answer(topic: str, partition: int, call: Awaitable[int | None]) -> TxnPartitionResult:
    try:
        offset = await call
    except Exception as e:
        error = from_exception(e)
        return TxnPartitionResult(topic=topic, partition=partition, error_code=error.error_code,
                                  message=error.message)
    return TxnPartitionResult(topic=topic, partition=partition, offset=offset)


@routes.post("/v1/partitions/txn-markers")
async def write_txn_markers(request: web.Request) -> web.Response:
    body = await read_message(request, WriteTxnMarkersRequest)
    service = _service(request)
    answers = await asyncio.gather(*(
        asyncio.gather(*(_answer(p.topic, p.partition, service.write_txn_marker(
            p.topic, p.partition, m.producer_id, m.producer_epoch, m.coordinator_epoch,
            m.transaction_result == "COMMIT", body.timeout_ms)) for p in m.partitions))
        for m in body.markers))
    return render(request, WriteTxnMarkersResponse(markers=[
        TxnMarkerResult(producer_id=m.producer_id, partitions=list(results))
        for m, results in zip(body.markers, answers)]))


@routes.post("/v1/partitions/txn-verify")
async def verify_transaction(request: web.Request) -> web.Response:
    body = await read_message(request, VerifyTransactionRequest)
    service = _service(request)
    results = await asyncio.gather(*(_answer(p.topic, p.partition, service.verify_transaction(
        p.topic, p.partition, body.producer_id, body.producer_epoch)) for p in body.partitions))
    return render(request, VerifyTransactionResponse(partitions=list(results)))
