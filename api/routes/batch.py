"""The batch routes for clients: `POST /v1/produce` and `POST /v1/fetch` (the hot path).

Bodies are msgpack (JSON with base64 works too). Work here is per partition and per batch, never
per record: batch framing and CRCs are checked for the whole request before anything is appended,
and per-partition outcomes (unknown partition, not leader, not enough replicas) come back as
`error_code`/`message` inside a 200 answer, as Kafka does.
"""

from __future__ import annotations

from aiohttp import web

from kraft.api import authz
from kraft.api.access import REPLICA_FETCH
from kraft.api.throttle import throttle
from kraft.api.errors import KraftError, invalid_request
from kraft.api.messages.batch import (
    NO_EPOCH, NO_REPLICA, FetchPartitionResponse, FetchRequest, FetchResponse, ProducePartitionResponse,
    ProduceRequest, ProduceResponse,
)
from kraft.api.messages.common import READ_COMMITTED
from kraft.api.routes.metrics import FETCH_CONSUMER, FETCH_FOLLOWER, count_as
from kraft.api.routes.records import topic_or_create
from kraft.api.routes.replication import (
    ReplicaFetchEntry, aborted_fields, as_replica_fetch_service, render_result,
)
from kraft.api.routes.services import REPLICAS, FetchEntry, ProduceEntry
from kraft.api.wire import read_message, render
from kraft.log.batch import validate_batch
from kraft.log.errors import LogError

routes = web.RouteTableDef()


def _check_batches(records: bytes, index: int) -> None:
    """Every batch well framed with a valid CRC, no trailing bytes: else the request is refused."""
    where = f"$.partitions[{index}].records"
    if not records:
        raise invalid_request(f"{where} is empty: send at least one batch")
    pos = 0
    view = memoryview(records)
    while pos < len(records):
        try:
            pos += validate_batch(view, pos).size_in_bytes
        except LogError as e:
            raise KraftError(e.error_code, f"{where}: {e}") from None


@routes.post("/v1/produce")
async def produce(request: web.Request) -> web.Response:
    body = await read_message(request, ProduceRequest)
    entries = []
    for i, p in enumerate(body.partitions):
        _check_batches(p.records, i)
        entries.append(ProduceEntry(p.topic, p.partition, p.records))
    # one topic the principal may not write refuses the whole request: nothing is appended
    authz.require_named(request, {e.topic for e in entries})
    for name in {e.topic for e in entries}:
        await topic_or_create(request, name)
    results = await request.app[REPLICAS].produce(entries, body.acks, body.timeout_ms)
    throttle_ms = await throttle(request, "produce", sum(len(e.records) for e in entries))
    return render(request, ProduceResponse(partitions=[
        ProducePartitionResponse(topic=r.topic, partition=r.partition, base_offset=r.base_offset,
                                 log_start_offset=r.log_start_offset, error_code=r.error_code, message=r.message)
        for r in results
    ], throttle_time_ms=throttle_ms))


def fetch_entries(body: FetchRequest) -> list[ReplicaFetchEntry]:
    # Kafka's replicas fetch read_uncommitted: a follower reads to the log end whatever it says
    read_committed = body.isolation_level == READ_COMMITTED and body.replica_id == NO_REPLICA
    return [
        ReplicaFetchEntry(p.topic, p.partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch,
                          p.last_fetched_epoch, p.high_watermark, p.log_start_offset, read_committed)
        for p in body.partitions
    ]


async def replica_fetch(service: object, body: FetchRequest, entries: list[ReplicaFetchEntry]) -> FetchResponse:
    """A follower's fetch (its node credential checked by the caller), over HTTP or its channel
    (api/routes/replication_channel.py); followers are never throttled."""
    results = await as_replica_fetch_service(service).replica_fetch(
        body.replica_id, body.replica_epoch, entries, body.max_wait_ms, body.min_bytes, body.max_bytes)
    return FetchResponse(throttle_time_ms=0, partitions=[render_result(r) for r in results])


@routes.post("/v1/fetch")
async def fetch(request: web.Request) -> web.Response:
    """Consumers and followers alike (Kafka's one Fetch API). A fetch naming a `replica_id` or a
    partition's leader epochs goes to the replica side (api/routes/replication.py)."""
    body = await read_message(request, FetchRequest)
    replica_id = body.replica_id
    entries = fetch_entries(body)
    if replica_id != NO_REPLICA:  # a replica's fetch moves the high watermark and the ISR: nodes only
        authz.require_nodes(request, REPLICA_FETCH, as_node_id=replica_id)
    else:
        authz.require_named(request, {e.topic for e in entries})
    if not entries:  # nothing to wait for: answered at once, as Kafka's ReplicaManager.fetchMessages does
        return render(request, FetchResponse(throttle_time_ms=0, partitions=[]))
    service = request.app[REPLICAS]
    if replica_id != NO_REPLICA:
        count_as(request, FETCH_FOLLOWER)
        return render(request, await replica_fetch(service, body, entries))
    if any(e.current_leader_epoch != NO_EPOCH or e.last_fetched_epoch != NO_EPOCH for e in entries):
        count_as(request, FETCH_CONSUMER)
        replica_results = await as_replica_fetch_service(service).replica_fetch(
            replica_id, body.replica_epoch, entries, body.max_wait_ms, body.min_bytes, body.max_bytes
        )
        throttle_ms = await throttle(request, "fetch", sum(len(r.records) for r in replica_results))
        return render(request, FetchResponse(throttle_time_ms=throttle_ms,
                                             partitions=[render_result(r) for r in replica_results]))
    results = await service.fetch([
        FetchEntry(e.topic, e.partition, e.fetch_offset, e.partition_max_bytes, e.read_committed) for e in entries
    ], body.max_wait_ms, body.min_bytes, body.max_bytes)
    throttle_ms = await throttle(request, "fetch", sum(len(r.records) for r in results))
    return render(request, FetchResponse(throttle_time_ms=throttle_ms, partitions=[
        FetchPartitionResponse(topic=r.topic, partition=r.partition, high_watermark=r.high_watermark,
                               log_start_offset=r.log_start_offset, records=r.records, error_code=r.error_code,
                               message=r.message, **aborted_fields(r.last_stable_offset, r.aborted_transactions))
        for r in results
    ]))
