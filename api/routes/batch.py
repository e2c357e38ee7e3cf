"""The batch routes for clients: `POST /v1/produce` and `POST /v1/fetch` (the hot path), adapters
over the record services (kraft/server/record_apis.py: Produce, Fetch).

Bodies are msgpack (JSON with base64 works too). Work here is per partition and per batch, never
per record: per-partition outcomes (a batch that fails its framing or CRC: CORRUPT_MESSAGE, checked
once, by the leader's validator; unknown partition, not leader, not enough replicas) come back as
`error_code`/`message` inside a 200 answer, as Kafka does. A throttled answer is held back by the
throttle time the services computed, and says it.
"""

from __future__ import annotations

from aiohttp import web

from kraft.api.errors import invalid_request
from kraft.api.messages.batch import (
    AbortedTransaction, DivergingEpoch, FetchPartitionResponse, FetchRequest, FetchResponse, ProducePartitionResponse, ProduceRequest,
    ProduceResponse,
)
from kraft.api.messages.common import READ_COMMITTED, Node
from kraft.api.routes.services import context_of, services_of
from kraft.api.throttle import hold_back
from kraft.api.wire import read_message, render
from kraft.server import record_apis
from kraft.server.records import NO_REPLICA, FetchEntry, FetchPartitionResult, ProduceEntry

routes = web.RouteTableDef()


@routes.post("/v1/produce")
async def produce(request: web.Request) -> web.Response:
    body = await read_message(request, ProduceRequest)
    entries = []
    for i, p in enumerate(body.partitions):
        if not p.records:
            raise invalid_request(f"$.partitions[{i}].records is empty: send at least one batch")
        # framing and CRCs are the leader's validator's to check (every path's), per partition
        entries.append(ProduceEntry(p.topic, p.partition, p.records))
    # a topic the principal may not write answers its own partitions (Kafka's rule); transactional
    # batches without a transactional id the principal may write refuse the whole request
    result = await services_of(request).records.produce(context_of(request), entries, body.acks, body.timeout_ms,
                                                        body.transactional_id)
    return render(request, ProduceResponse(partitions=[
        ProducePartitionResponse(topic=r.topic, partition=r.partition, base_offset=r.base_offset,
                                 log_start_offset=r.log_start_offset, error_code=r.error_code, message=r.message,
                                 log_append_time=r.log_append_time)
        for r in result.partitions
    ], throttle_time_ms=await hold_back(result.throttle_time_ms)))


def fetch_call(body: FetchRequest) -> record_apis.FetchRequest:
    """The Fetch service's arguments of a fetch body (a client's or a replica's)."""
    # Kafka's replicas fetch read_uncommitted: a follower reads to the log end whatever it says
    read_committed = body.isolation_level == READ_COMMITTED and body.replica_id == NO_REPLICA
    entries = [
        FetchEntry(p.topic, p.partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch,
                   p.last_fetched_epoch, p.high_watermark, p.log_start_offset, read_committed)
        for p in body.partitions
    ]
    return record_apis.FetchRequest(entries, body.max_wait_ms, body.min_bytes, body.max_bytes, body.replica_id,
                                    body.replica_epoch)


def fetch_response(call: record_apis.FetchRequest, results: list[FetchPartitionResult],
                   throttle_time_ms: int) -> FetchResponse:
    """The wire answer: a follower's (or one naming leader epochs) also carries the log end
    offset and a diverging epoch; a plain consumer's carries neither."""
    replica_shape = call.replica_id != NO_REPLICA or any(e.names_epochs for e in call.entries)
    read_committed = any(e.read_committed for e in call.entries)
    return FetchResponse(throttle_time_ms=throttle_time_ms,
                         partitions=[_fetch_partition(r, replica_shape, read_committed) for r in results])


@routes.post("/v1/fetch")
async def fetch(request: web.Request) -> web.Response:
    """Consumers and followers alike (Kafka's one Fetch API): a follower names its `replica_id`."""
    body = await read_message(request, FetchRequest)
    call = fetch_call(body)
    result = await services_of(request).records.fetch(context_of(request), call)
    return render(request, fetch_response(call, result.partitions, await hold_back(result.throttle_time_ms)))


def _fetch_partition(r: FetchPartitionResult, replica_shape: bool, read_committed: bool) -> FetchPartitionResponse:
    # the last stable offset always; the aborted transactions for a read_committed reader
    transactions = {"last_stable_offset": r.last_stable_offset if r.last_stable_offset >= 0 else None,
                    "aborted_transactions": [AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset)
                                             for t in r.aborted_transactions] if read_committed else None}
    if not replica_shape:
        return FetchPartitionResponse(topic=r.topic, partition=r.partition, high_watermark=r.high_watermark,
                                      log_start_offset=r.log_start_offset, records=r.records,
                                      error_code=r.error_code, message=r.message, **transactions)
    diverging = r.diverging_epoch
    return FetchPartitionResponse(
        topic=r.topic, partition=r.partition, high_watermark=r.high_watermark, log_start_offset=r.log_start_offset,
        records=r.records, log_end_offset=r.log_end_offset,
        diverging_epoch=None if diverging is None else DivergingEpoch(epoch=diverging.epoch,
                                                                      end_offset=diverging.end_offset),
        error_code=r.error_code, message=r.message, leader=None if r.leader is None else Node(**r.leader),
        **transactions)
