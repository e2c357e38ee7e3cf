"""The JSON convenience routes for people with curl: produce records to a topic, read records
from a partition and offset, and look up a partition's offsets, adapters over the record services
(kraft/server/record_apis.py: Produce, Fetch, ListOffsets).

These decode and build batches (per request, not per record on the broker's side); clients use the
batch routes (`api/routes/batch.py`) instead. Partitions led by another broker are forwarded there
(api/routes/forward.py). A read answers at most `max_bytes` (and the broker's
fetch.max.bytes) of decoded keys, values and headers, and always at least one record, as Kafka's
fetch sizes bound what a reply holds: batches are decoded one at a time until the reply is full.
Transaction markers are never answered; `isolation_level=read_committed` reads stop at the last
stable offset and leave out aborted transactions' records (filtered here, `log/isolation.py`).
"""

from __future__ import annotations

import asyncio
import base64
import random
import time
from typing import Any

import msgspec
from aiohttp import web

from kraft.api.throttle import hold_back
from kraft.api.errors import KraftError, invalid_request
from kraft.api.partitioner import partition_for_key
from kraft.api.routes.forward import by_leader, not_leader, produce_remote, proxy, remote_leader
from kraft.api.routes.services import context_of, services_of
from kraft.api.messages.common import READ_COMMITTED, check_topic_name, parse_acks
from kraft.api.messages.records import (
    FetchRecordsQuery, FetchRecordsResponse, Header, PartitionOffsetsQuery, PartitionOffsetsResponse,
    ProducedPartition, ProduceRecordsQuery, ProduceRecordsRequest, ProduceRecordsResponse, RecordIn, RecordOffset,
    RecordOut,
)
from kraft.api.wire import read_message, read_query, render, wants_msgpack
from kraft.log.batch import Record, build_batch
from kraft.log.records import decode_records
from kraft.log.isolation import readable_batches
from kraft.server.access import PRODUCE
from kraft.server.metadata import TopicDescription
from kraft.server.records import ProduceEntry, ProducePartitionResult

routes = web.RouteTableDef()

PRODUCE_TIMEOUT_MS = 30_000


def _data(value: Any, index: int, field: str) -> bytes | None:
    """A key, value or header value of record `index`: text as UTF-8, bin (msgpack) as it is, or
    null."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise invalid_request(f"Expected `str | null`, got `{type(value).__name__}` - at `$.records[{index}].{field}`")


def _key_or_value(record: RecordIn, index: int, name: str) -> bytes | None:
    """`name` as text (or bin), or `name_b64` decoded; neither (or null) is None."""
    b64 = record.key_b64 if name == "key" else record.value_b64
    return b64 if b64 is not None else _data(getattr(record, name), index, name)


def _headers(record: RecordIn, index: int) -> list[tuple[str, bytes | None]]:
    headers = record.headers
    if headers is None:
        return []
    if isinstance(headers, dict):
        return [(key, _data(value, index, f"headers.{key}")) for key, value in headers.items()]
    return [(h.key, _data(h.value, index, f"headers[{j}].value")) for j, h in enumerate(headers)]


def _choose_partition(topic: TopicDescription, key: bytes | None, sticky: int) -> int:
    return sticky if key is None else partition_for_key(key, len(topic.partitions))


@routes.post("/v1/topics/{topic}/records")
async def produce_records(request: web.Request) -> web.Response:
    name = check_topic_name(request.match_info["topic"], "produce to")
    query_acks = parse_acks(read_query(request, ProduceRecordsQuery).acks)
    body = await read_message(request, ProduceRecordsRequest)
    acks = query_acks if body.acks is None else body.acks
    now_ms = int(time.time() * 1000)
    parsed = []
    for i, r in enumerate(body.records):
        parsed.append((_key_or_value(r, i, "key"), _key_or_value(r, i, "value"), _headers(r, i),
                       now_ms if r.timestamp is None else r.timestamp, r.partition, i))
    # Everything validated: only now may the topic be created and records appended.
    topic = await services_of(request).topics.topic_or_create(context_of(request), PRODUCE, name)
    count = len(topic.partitions)
    sticky = random.randrange(count)
    by_partition: dict[int, list[tuple[Any, ...]]] = {}
    for key, value, headers, ts, partition, index in parsed:
        p = _choose_partition(topic, key, sticky) if partition is None else partition
        if p >= count:
            raise KraftError(
                "UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} has no partition {p} (has {count})"
            )
        by_partition.setdefault(p, []).append((key, value, headers, ts, index))
    entries = [
        ProduceEntry(name, p, build_batch([row[:4] for row in rows]))
        for p, rows in by_partition.items()
    ]
    results = sorted(await _produce_anywhere(request, entries, acks), key=lambda r: r.partition)
    # as Kafka, every partition is answered on its own: a client resends only the failed ones
    partitions = []
    offsets: list[RecordOffset] = [None] * len(body.records)  # type: ignore[list-item]
    for result in results:
        rows = by_partition[result.partition]
        error = None if not result.error_code else KraftError(result.error_code, result.message or "")
        fields = {} if error is None else {"error_code": error.error_code, "message": error.message,
                                           "retriable": error.retriable}
        stored = error is None and acks != 0
        partitions.append(ProducedPartition(partition=result.partition,
                                            base_offset=result.base_offset if stored else None,
                                            record_count=len(rows), **fields))
        for delta, row in enumerate(rows):
            offsets[row[4]] = RecordOffset(partition=result.partition,
                                           offset=result.base_offset + delta if stored else None, **fields)
    if all(r.error_code for r in results):  # no partition stored its records: one error answers
        first = results[0]
        raise KraftError(first.error_code or "UNKNOWN_SERVER_ERROR", first.message or "",
                         partitions=msgspec.to_builtins(partitions))
    return render(request, ProduceRecordsResponse(offsets=offsets, partitions=partitions))


async def _produce_anywhere(request: web.Request, entries: list[ProduceEntry], acks: int) -> list[ProducePartitionResult]:
    """Appends here what this node leads and forwards the rest to the partitions' leaders: one
    result per entry, an error for what failed (never an exception once anything may be stored)."""
    local, remote = by_leader(request, entries)
    # the leaders charge what they were forwarded; this node charges what it appends itself
    here = services_of(request).records.produce(context_of(request), local, acks, PRODUCE_TIMEOUT_MS)
    calls = [produce_remote(request, leader, group, acks, PRODUCE_TIMEOUT_MS) for leader, group in remote.items()]
    answered, *forwarded = await asyncio.gather(here, *calls)
    await hold_back(answered.throttle_time_ms)
    return answered.partitions + [result for results in forwarded for result in results]


def partition_number(request: web.Request, topic: TopicDescription) -> int:
    text = request.match_info["partition"]
    if not text.isdigit() or len(text) > 10:
        raise invalid_request(f"partition must be a non-negative integer, got {text!r}")
    partition = int(text)
    if partition >= len(topic.partitions):
        raise KraftError(
            "UNKNOWN_TOPIC_OR_PARTITION",
            f"topic {topic.name!r} has no partition {partition} (has {len(topic.partitions)})",
        )
    return partition


def _decoded(data: bytes | None, binary: bool) -> tuple[Any, str | None]:
    """A key/value back as text when it is UTF-8, else null and its base64; msgpack answers
    (`binary`) carry the bytes as they are."""
    if data is None or binary:
        return data, None
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return None, base64.b64encode(data).decode("ascii")


def _decoded_size(record: Record) -> int:
    """What a record adds to a reply, counted as Kafka counts record sizes: key, value, headers."""
    return (len(record.key or b"") + len(record.value or b"")
            + sum(len(k) + len(v or b"") for k, v in record.headers))


def _header(key: str, value: bytes | None, binary: bool) -> Header:
    text, b64 = _decoded(value, binary)
    return Header(key=key, value=text, value_b64=b64)


@routes.get("/v1/topics/{topic}/partitions/{partition}/records")
async def fetch_records(request: web.Request) -> web.Response:
    services = services_of(request)
    topic = services.topics.require_topic(request.match_info["topic"])
    partition = partition_number(request, topic)
    if (leader := remote_leader(request, topic.name, partition)) is not None:
        return await proxy(request, leader)
    query = read_query(request, FetchRecordsQuery)
    max_records, max_bytes = query.max_records, min(query.max_bytes, services.node.fetch_max_bytes)
    read_committed = query.isolation_level == READ_COMMITTED
    offset, result = await services.records.read(context_of(request), topic.name, partition, query.offset,
                                                 query.timestamp, max_bytes, query.timeout_ms, read_committed)
    if result.error_code == "NOT_LEADER_OR_FOLLOWER":
        raise not_leader(request, topic.name, partition, result.message or "")
    if result.error_code:
        raise KraftError(result.error_code, result.message or "")
    records: list[RecordOut] = []
    binary = wants_msgpack(request)
    size = 0  # decoded bytes in the reply
    full = False
    next_offset = offset  # past what the reply holds or left out
    end = result.last_stable_offset if read_committed else result.high_watermark
    for pos, header, visible in readable_batches(result.records,
                                                 result.aborted_transactions if read_committed else None):
        if header.last_offset < offset:
            continue
        if not visible:  # a marker or an aborted batch: never answered, read past
            next_offset = max(next_offset, header.next_offset)
            continue
        for rec in decode_records(result.records, pos):
            if rec.offset < offset or rec.offset >= end:
                continue
            size += _decoded_size(rec)
            if records and size > max_bytes:
                full = True
                break
            (key, key_b64), (value, value_b64) = _decoded(rec.key, binary), _decoded(rec.value, binary)
            records.append(RecordOut(
                partition=partition, offset=rec.offset, timestamp=rec.timestamp, key=key, value=value,
                headers=[_header(k, v, binary) for k, v in rec.headers], key_b64=key_b64, value_b64=value_b64))
            next_offset = rec.offset + 1
            full = len(records) == max_records or size >= max_bytes
            if full:
                break
        if full:
            break
    return render(request, FetchRecordsResponse(
        records=records, high_watermark=result.high_watermark, log_start_offset=result.log_start_offset,
        next_offset=next_offset, last_stable_offset=result.last_stable_offset))


@routes.get("/v1/topics/{topic}/partitions/{partition}/offsets")
async def partition_offsets(request: web.Request) -> web.Response:
    services, ctx = services_of(request), context_of(request)
    topic = services.topics.require_topic(request.match_info["topic"])
    partition = partition_number(request, topic)
    if (leader := remote_leader(request, topic.name, partition)) is not None:
        return await proxy(request, leader)
    query = read_query(request, PartitionOffsetsQuery)
    offsets = await services.records.partition_offsets(ctx, topic.name, partition)
    body = PartitionOffsetsResponse(
        partition=partition, log_start_offset=offsets.log_start_offset, high_watermark=offsets.high_watermark,
        log_end_offset=offsets.log_end_offset, last_stable_offset=offsets.last_stable_offset)
    if query.timestamp is not None:
        found = await services.records.list_offsets(ctx, topic.name, partition, query.timestamp,
                                                    query.isolation_level == READ_COMMITTED)
        body.offset, body.timestamp = (found.offset, found.timestamp) if found.offset is not None else (None, None)
    return render(request, body)
