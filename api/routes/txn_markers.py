"""The partition side of transactions, for the transaction coordinator (node-only routes,
`api/messages/txn.py`), adapters over kraft/server's TransactionApis:
`POST /v1/partitions/txn-markers` (Kafka's WriteTxnMarkers: COMMIT or ABORT markers, acks=all)
and `POST /v1/partitions/txn-verify` (KIP-890: the partitions the coordinator added to a
transaction, whose leaders may then take its first batch).

Sent to the leader of the partitions named (as Kafka's coordinator sends markers to leaders); a
partition led elsewhere is answered NOT_LEADER_OR_FOLLOWER. Only the cluster's own nodes are
served (Kafka's WriteTxnMarkers needs ClusterAction on the cluster).
"""

from __future__ import annotations

import msgspec
from aiohttp import web

from kraft.api.messages.txn import (
    TxnMarkerResult, TxnPartitionResult, VerifyTransactionRequest, VerifyTransactionResponse,
    WriteTxnMarkersRequest, WriteTxnMarkersResponse,
)
from kraft.api.routes.services import context_of, services_of
from kraft.api.wire import read_message, render
from kraft.server.transactions import TxnMarker

routes = web.RouteTableDef()


def _wire(result: object) -> TxnPartitionResult:
    return msgspec.convert(result, TxnPartitionResult, from_attributes=True)


@routes.post("/v1/partitions/txn-markers")
async def write_txn_markers(request: web.Request) -> web.Response:
    body = await read_message(request, WriteTxnMarkersRequest)
    markers = [TxnMarker(m.producer_id, m.producer_epoch, m.coordinator_epoch, m.transaction_result == "COMMIT",
                         tuple((p.topic, p.partition) for p in m.partitions)) for m in body.markers]
    answers = await services_of(request).transactions.write_txn_markers(context_of(request), markers, body.timeout_ms)
    return render(request, WriteTxnMarkersResponse(markers=[
        TxnMarkerResult(producer_id=m.producer_id, partitions=[_wire(r) for r in results])
        for m, results in zip(body.markers, answers)]))


@routes.post("/v1/partitions/txn-verify")
async def verify_transaction(request: web.Request) -> web.Response:
    body = await read_message(request, VerifyTransactionRequest)
    results = await services_of(request).transactions.verify_transaction(
        context_of(request), body.producer_id, body.producer_epoch, [(p.topic, p.partition) for p in body.partitions])
    return render(request, VerifyTransactionResponse(partitions=[_wire(r) for r in results]))
