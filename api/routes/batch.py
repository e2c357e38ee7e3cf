"""The batch routes for clients: `POST /v1/produce` and `POST /v1/fetch` (the hot path).

Bodies are msgpack (JSON with base64 works too). Work here is per partition and per batch, never
per record: batch framing and CRCs are checked for the whole request before anything is appended,
and per-partition outcomes (unknown partition, not leader, not enough replicas) come back as
`error_code`/`message` inside a 200 answer, as Kafka does.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kraft.api import authz
from kraft.api.throttle import throttle
from kraft.api.errors import KraftError, invalid_request
from kraft.api.routes.metrics import FETCH_CONSUMER, FETCH_FOLLOWER, count_as
from kraft.api.routes.records import MAX_TIMEOUT_MS, topic_or_create
from kraft.api.routes.replication import (
    NO_EPOCH, NO_REPLICA, ReplicaFetchEntry, as_replica_fetch_service, render_result,
)
from kraft.api.routes.services import REPLICAS, FetchEntry, ProduceEntry
from kraft.api.security import require_node
from kraft.api.wire import INT32_MAX, INT64_MAX, Fields, check_topic_name, parse_acks, read_body, render
from kraft.log.batch import validate_batch
from kraft.log.errors import LogError

routes = web.RouteTableDef()

MAX_PARTITIONS_PER_REQUEST = 10_000
DEFAULT_FETCH_MAX_BYTES = 52_428_800
DEFAULT_PARTITION_MAX_BYTES = 1_048_576


def _check_batches(records: bytes, where: str) -> None:
    """Every batch well framed with a valid CRC, no trailing bytes: else the request is refused."""
    if not records:
        raise invalid_request(f"{where} is empty: send at least one batch")
    pos = 0
    view = memoryview(records)
    while pos < len(records):
        try:
            pos += validate_batch(view, pos).size_in_bytes
        except LogError as e:
            raise KraftError(e.error_code, f"{where}: {e}") from None


def _partition_key(fields: Fields) -> tuple[str, int]:
    return (check_topic_name(fields.raw("topic")),
            fields.get_int("partition", minimum=0, maximum=INT32_MAX))


def _error_fields(error_code: str | None, message: str | None) -> dict[str, Any]:
    return {} if error_code is None else {"error_code": error_code, "message": message}


@routes.post("/v1/produce")
async def produce(request: web.Request) -> web.Response:
    body, is_json = await read_body(request)
    fields = Fields(body, binary_b64=is_json)
    acks = parse_acks(fields.raw("acks", -1))
    timeout_ms = fields.get_int("timeout_ms", 30_000, 0, MAX_TIMEOUT_MS)
    items = fields.get_list("partitions", MAX_PARTITIONS_PER_REQUEST)
    entries = []
    for i, item in enumerate(items):
        p = fields.child(item, f"partitions[{i}]")
        topic, partition = _partition_key(p)
        check_topic_name(topic, "produce to")
        records = p.get_bytes("records")
        _check_batches(records, f"{p.where}.records")
        entries.append(ProduceEntry(topic, partition, records))
    # one topic the principal may not write refuses the whole request: nothing is appended
    authz.require_topics(request, "WRITE", {e.topic for e in entries})
    for name in {e.topic for e in entries}:
        await topic_or_create(request, name)
    results = await request.app[REPLICAS].produce(entries, acks, timeout_ms)
    throttle_ms = await throttle(request, "produce", sum(len(e.records) for e in entries))
    return render(request, {"partitions": [
        {"topic": r.topic, "partition": r.partition, "base_offset": r.base_offset,
         "log_start_offset": r.log_start_offset, **_error_fields(r.error_code, r.message)}
        for r in results
    ], "throttle_time_ms": throttle_ms})


EPOCH_FIELDS = ("current_leader_epoch", "last_fetched_epoch")


@routes.post("/v1/fetch")
async def fetch(request: web.Request) -> web.Response:
    """Consumers and followers alike (Kafka's one Fetch API). A fetch naming a `replica_id` or a
    partition's leader epochs goes to the replica side (api/routes/replication.py)."""
    body, is_json = await read_body(request)
    fields = Fields(body, binary_b64=is_json)
    max_wait_ms = fields.get_int("max_wait_ms", 500, 0, MAX_TIMEOUT_MS)
    min_bytes = fields.get_int("min_bytes", 1, 0, INT32_MAX)
    max_bytes = fields.get_int("max_bytes", DEFAULT_FETCH_MAX_BYTES, 1, INT32_MAX)
    replica_id = fields.get_int("replica_id", NO_REPLICA, NO_REPLICA, INT32_MAX)
    replica_epoch = fields.get_int("replica_epoch", -1, -1, INT64_MAX)
    items = fields.get_list("partitions", MAX_PARTITIONS_PER_REQUEST)
    entries = []
    for i, item in enumerate(items):
        p = fields.child(item, f"partitions[{i}]")
        topic, partition = _partition_key(p)
        entries.append(ReplicaFetchEntry(
            topic, partition, p.get_int("fetch_offset"),
            p.get_int("partition_max_bytes", DEFAULT_PARTITION_MAX_BYTES, 1, INT32_MAX),
            *(p.get_int(name, NO_EPOCH, NO_EPOCH, INT32_MAX) for name in EPOCH_FIELDS),
            p.get_int("high_watermark", -1, -1, INT64_MAX),
        ))
    if replica_id != NO_REPLICA:  # a replica's fetch moves the high watermark and the ISR: nodes only
        require_node(request, as_node_id=replica_id)
    else:
        authz.require_topics(request, "READ", {e.topic for e in entries})
    service = request.app[REPLICAS]
    if replica_id != NO_REPLICA or any(
        e.current_leader_epoch != NO_EPOCH or e.last_fetched_epoch != NO_EPOCH for e in entries
    ):
        count_as(request, FETCH_FOLLOWER if replica_id != NO_REPLICA else FETCH_CONSUMER)
        replica_results = await as_replica_fetch_service(service).replica_fetch(
            replica_id, replica_epoch, entries, max_wait_ms, min_bytes, max_bytes
        )
        throttle_ms = 0 if replica_id != NO_REPLICA else await throttle(
            request, "fetch", sum(len(r.records) for r in replica_results))
        return render(request, {"throttle_time_ms": throttle_ms,
                                "partitions": [render_result(r) for r in replica_results]})
    results = await service.fetch([
        FetchEntry(e.topic, e.partition, e.fetch_offset, e.partition_max_bytes) for e in entries
    ], max_wait_ms, min_bytes, max_bytes)
    throttle_ms = await throttle(request, "fetch", sum(len(r.records) for r in results))
    return render(request, {"throttle_time_ms": throttle_ms, "partitions": [
        {"topic": r.topic, "partition": r.partition, "high_watermark": r.high_watermark,
         "log_start_offset": r.log_start_offset, "records": r.records,
         **_error_fields(r.error_code, r.message)}
        for r in results
    ]})
