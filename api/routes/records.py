"""The JSON convenience routes for people with curl: produce records to a topic, read records
from a partition and offset, and look up a partition's offsets.

These decode and build batches (per request, not per record on the broker's side); clients use the
batch routes (`api/routes/batch.py`) instead.
"""

from __future__ import annotations

import asyncio
import base64
import random
import time
from typing import Any

from aiohttp import web

from kraft.api import authz
from kraft.api.throttle import throttle
from kraft.api.errors import KraftError, invalid_request
from kraft.api.partitioner import partition_for_key
from kraft.api.routes.forward import not_leader, produce_remote, proxy, remote_leader
from kraft.api.routes.metadata import require_topic
from kraft.api.routes.services import (
    ADMIN, METADATA, NODE_INFO, REPLICAS, FetchEntry, ProduceEntry, ProduceResult, TopicDescription,
)
from kraft.api.wire import INT32_MAX, Fields, check_topic_name, parse_acks, read_body, render, wants_msgpack
from kraft.log.batch import build_batch, decode_records, iter_batches
from kraft.metadata.acl import TOPIC

routes = web.RouteTableDef()

MAX_RECORDS_PER_REQUEST = 100_000
MAX_FETCH_RECORDS = 10_000
MAX_TIMEOUT_MS = 300_000
PRODUCE_TIMEOUT_MS = 30_000
DEFAULT_FETCH_BYTES = 1024 * 1024


async def topic_or_create(request: web.Request, name: str) -> TopicDescription:
    """The topic, auto-created with the broker defaults when auto.create.topics.enable."""
    topic = request.app[METADATA].topic(check_topic_name(name))
    if topic is not None:
        return topic
    if not request.app[NODE_INFO].auto_create_topics:
        raise KraftError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
    if not authz.may_create_topic(request, name):
        raise authz.authorization_failed(request, "CREATE", TOPIC, (name,))
    try:
        return await request.app[ADMIN].create_topic(name, None, None, {})
    except KraftError as e:
        if e.error_code != "TOPIC_ALREADY_EXISTS":  # lost a race with another creator: fine
            raise
    return require_topic(request, name)


def _text_or_b64(fields: Fields, name: str) -> bytes | None:
    """`name` as a UTF-8 string, or `name_b64` as base64; neither (or null) is None."""
    if f"{name}_b64" in fields.obj:
        value = fields.raw(f"{name}_b64")
        if not isinstance(value, str):
            raise invalid_request(f"{fields.where}.{name}_b64 must be a base64 string")
        return Fields({}, binary_b64=True).to_bytes(value, f"{fields.where}.{name}_b64")
    raw = fields.raw(name, None, nullable=True)
    if isinstance(raw, bytes):  # msgpack bodies carry binary natively
        return raw
    text = fields.get_str(name, None, nullable=True)
    return None if text is None else text.encode("utf-8")


def _headers(fields: Fields) -> list[tuple[str, bytes | None]]:
    raw = fields.raw("headers", None)
    if raw is None:
        return []
    where = f"{fields.where}.headers"
    if isinstance(raw, dict):
        pairs = list(raw.items())
    elif isinstance(raw, list):
        pairs = []
        for i, item in enumerate(raw):
            h = Fields(item, f"{where}[{i}]")
            pairs.append((h.get_str("key"), h.raw("value", None, nullable=True)))
    else:
        raise invalid_request(f"{where} must be an object or an array of {{key, value}}")
    out = []
    for key, value in pairs:
        if not isinstance(key, str) or not (value is None or isinstance(value, (str, bytes))):
            raise invalid_request(f"{where}: header keys are strings, values strings or null (binary in msgpack)")
        out.append((key, value.encode("utf-8") if isinstance(value, str) else value))
    return out


def _choose_partition(topic: TopicDescription, key: bytes | None, sticky: int) -> int:
    return sticky if key is None else partition_for_key(key, len(topic.partitions))


@routes.post("/v1/topics/{topic}/records")
async def produce_records(request: web.Request) -> web.Response:
    name = check_topic_name(request.match_info["topic"], "produce to")
    authz.require(request, "WRITE", TOPIC, name)
    body, _ = await read_body(request)
    fields = Fields(body)
    query_acks = parse_acks(request.query.get("acks", "all"))
    acks = parse_acks(fields.raw("acks")) if "acks" in fields.obj else query_acks
    items = fields.get_list("records", MAX_RECORDS_PER_REQUEST)
    if not items:
        raise invalid_request("body.records must hold at least one record")
    now_ms = int(time.time() * 1000)
    parsed = []
    for i, item in enumerate(items):
        r = fields.child(item, f"records[{i}]")
        parsed.append((
            _text_or_b64(r, "key"), _text_or_b64(r, "value"), _headers(r),
            r.get_int("timestamp", now_ms, 0), r.get_int("partition", None, 0, INT32_MAX), i,
        ))
    # Everything validated: only now may the topic be created and records appended.
    topic = await topic_or_create(request, name)
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
    offsets: list[dict[str, Any]] = [{}] * len(items)
    for result in results:
        rows = by_partition[result.partition]
        error = None if not result.error_code else KraftError(result.error_code, result.message or "").to_dict()
        stored = error is None and acks != 0
        partitions.append({"partition": result.partition, "base_offset": result.base_offset if stored else None,
                           "record_count": len(rows), **(error or {})})
        for delta, row in enumerate(rows):
            offsets[row[4]] = {"partition": result.partition,
                               "offset": result.base_offset + delta if stored else None, **(error or {})}
    if all(r.error_code for r in results):  # no partition stored its records: one error answers
        first = results[0]
        raise KraftError(first.error_code or "UNKNOWN_SERVER_ERROR", first.message or "", partitions=partitions)
    return render(request, {"offsets": offsets, "partitions": partitions})


async def _produce_anywhere(request: web.Request, entries: list[ProduceEntry], acks: int) -> list[ProduceResult]:
    """Appends here what this node leads and forwards the rest to the partitions' leaders: one
    result per entry, an error for what failed (never an exception once anything may be stored)."""
    local: list[ProduceEntry] = []
    remote: dict[tuple[str, int], list[ProduceEntry]] = {}
    for entry in entries:
        address = remote_leader(request, entry.topic, entry.partition)
        if address is None:
            local.append(entry)
        else:
            remote.setdefault(address, []).append(entry)
    calls = [request.app[REPLICAS].produce(local, acks, PRODUCE_TIMEOUT_MS)] if local else []
    calls += [produce_remote(request, address, group, acks, PRODUCE_TIMEOUT_MS) for address, group in remote.items()]
    results = [result for results in await asyncio.gather(*calls) for result in results]
    # the leaders charge what they were forwarded; this node charges what it appended itself
    await throttle(request, "produce", sum(len(e.records) for e in local))
    return results


def _partition_number(request: web.Request, topic: TopicDescription) -> int:
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


def _decoded(data: bytes | None, name: str, binary: bool = False) -> dict[str, Any]:
    """A key/value back as a string when it is UTF-8, else `<name>_b64`; msgpack answers
    (`binary`) carry the bytes as they are."""
    if data is None or binary:
        return {name: data}
    try:
        return {name: data.decode("utf-8")}
    except UnicodeDecodeError:
        return {name: None, f"{name}_b64": base64.b64encode(data).decode("ascii")}


async def _start_offset(request: web.Request, query: Fields, name: str, partition: int) -> int:
    replicas = request.app[REPLICAS]
    text = query.get_str("offset", "earliest")
    offset = None if text in ("earliest", "latest") else query.get_int("offset")
    if query.has("timestamp"):
        ts = query.get_int("timestamp", minimum=0)
        found = await replicas.offset_for_timestamp(name, partition, ts)
        return (await replicas.offsets(name, partition)).high_watermark if found is None else found[0]
    if text == "earliest":
        return (await replicas.offsets(name, partition)).log_start_offset
    if text == "latest":
        return (await replicas.offsets(name, partition)).high_watermark
    return offset


@routes.get("/v1/topics/{topic}/partitions/{partition}/records")
async def fetch_records(request: web.Request) -> web.Response:
    authz.require(request, "READ", TOPIC, request.match_info["topic"])
    topic = require_topic(request, request.match_info["topic"])
    partition = _partition_number(request, topic)
    if (leader := remote_leader(request, topic.name, partition)) is not None:
        return await proxy(request, leader)
    query = Fields(request.query, "query")
    max_records = query.get_int("max_records", 100, 1, MAX_FETCH_RECORDS)
    max_bytes = query.get_int("max_bytes", DEFAULT_FETCH_BYTES, 1, INT32_MAX)
    timeout_ms = query.get_int("timeout_ms", 0, 0, MAX_TIMEOUT_MS)
    offset = await _start_offset(request, query, topic.name, partition)
    [result] = await request.app[REPLICAS].fetch(
        [FetchEntry(topic.name, partition, offset, max_bytes)], timeout_ms, 1, max_bytes
    )
    if result.error_code == "NOT_LEADER_OR_FOLLOWER":
        raise not_leader(request, topic.name, partition, result.message or "")
    if result.error_code:
        raise KraftError(result.error_code, result.message or "")
    records: list[dict[str, Any]] = []
    binary = wants_msgpack(request)
    for pos, header in iter_batches(result.records):
        if header.last_offset < offset:
            continue
        for rec in decode_records(result.records, pos):
            if rec.offset < offset or rec.offset >= result.high_watermark:
                continue
            records.append({
                "partition": partition, "offset": rec.offset, "timestamp": rec.timestamp,
                **_decoded(rec.key, "key", binary), **_decoded(rec.value, "value", binary),
                "headers": [{"key": k, **_decoded(v, "value", binary)} for k, v in rec.headers],
            })
            if len(records) == max_records:
                break
        if len(records) == max_records:
            break
    return render(request, {
        "records": records,
        "high_watermark": result.high_watermark,
        "log_start_offset": result.log_start_offset,
        "next_offset": records[-1]["offset"] + 1 if records else offset,
    })


@routes.get("/v1/topics/{topic}/partitions/{partition}/offsets")
async def partition_offsets(request: web.Request) -> web.Response:
    authz.require(request, "DESCRIBE", TOPIC, request.match_info["topic"])
    topic = require_topic(request, request.match_info["topic"])
    partition = _partition_number(request, topic)
    if (leader := remote_leader(request, topic.name, partition)) is not None:
        return await proxy(request, leader)
    replicas = request.app[REPLICAS]
    offsets = await replicas.offsets(topic.name, partition)
    body: dict[str, Any] = {
        "partition": partition,
        "log_start_offset": offsets.log_start_offset,
        "high_watermark": offsets.high_watermark,
        "log_end_offset": offsets.log_end_offset,
    }
    query = Fields(request.query, "query")
    if query.has("timestamp"):
        found = await replicas.offset_for_timestamp(
            topic.name, partition, query.get_int("timestamp", minimum=0)
        )
        body["offset"], body["timestamp"] = found if found is not None else (None, None)
    return render(request, body)
