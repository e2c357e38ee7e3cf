"""The batch routes (`/v1/produce`, `/v1/fetch`) in msgpack and JSON."""

from __future__ import annotations

import asyncio
import base64

from aiohttp.test_utils import TestClient

from kraft.log.batch import build_batch, decode_records, iter_batches
from routes_testing import create_topic, post_msgpack


def batch(*values: bytes, ts: int = 1) -> bytes:
    return build_batch([(None, v, None, ts) for v in values])


def values(records: bytes) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for pos, _ in iter_batches(records)
            for r in decode_records(records, pos)]


async def test_produce_and_fetch_msgpack(client: TestClient) -> None:
    await create_topic(client, "b", 2)
    status, body = await post_msgpack(client, "/v1/produce", {"acks": -1, "partitions": [
        {"topic": "b", "partition": 0, "records": batch(b"a", b"b") + batch(b"c")},
        {"topic": "b", "partition": 1, "records": batch(b"z", ts=5)},
    ]})
    assert status == 200
    assert body == {"partitions": [
        {"topic": "b", "partition": 0, "base_offset": 0, "log_start_offset": 0},
        {"topic": "b", "partition": 1, "base_offset": 0, "log_start_offset": 0}], "throttle_time_ms": 0}
    status, body = await post_msgpack(client, "/v1/produce", {"acks": "all", "partitions": [
        {"topic": "b", "partition": 0, "records": batch(b"d")}]})
    assert body["partitions"][0]["base_offset"] == 3

    status, body = await post_msgpack(client, "/v1/fetch", {"max_wait_ms": 0, "partitions": [
        {"topic": "b", "partition": 0, "fetch_offset": 1},
        {"topic": "b", "partition": 1, "fetch_offset": 0},
    ]})
    p0, p1 = body["partitions"]
    assert (p0["high_watermark"], p0["log_start_offset"]) == (4, 0)
    # whole batches: the one holding offset 1 starts at 0
    assert values(p0["records"]) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    assert values(p1["records"]) == [(0, b"z")]


async def test_produce_and_fetch_json_base64(client: TestClient) -> None:
    await create_topic(client, "j")
    records = base64.b64encode(batch(b"x")).decode()
    resp = await client.post("/v1/produce", json={"partitions": [
        {"topic": "j", "partition": 0, "records": records}]})
    assert (await resp.json())["partitions"][0]["base_offset"] == 0
    resp = await client.post("/v1/fetch", json={"partitions": [
        {"topic": "j", "partition": 0, "fetch_offset": 0}]})
    [p] = (await resp.json())["partitions"]
    assert values(base64.b64decode(p["records"])) == [(0, b"x")]


async def test_per_partition_errors_inside_a_200(client: TestClient) -> None:
    await create_topic(client, "e")
    status, body = await post_msgpack(client, "/v1/produce", {"partitions": [
        {"topic": "e", "partition": 0, "records": batch(b"ok")},
        {"topic": "e", "partition": 9, "records": batch(b"nope")},
    ]})
    assert status == 200
    ok, bad = body["partitions"]
    assert ok["base_offset"] == 0 and "error_code" not in ok
    assert bad["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION" and bad["base_offset"] == -1
    status, body = await post_msgpack(client, "/v1/fetch", {"max_wait_ms": 0, "partitions": [
        {"topic": "e", "partition": 0, "fetch_offset": 5},
        {"topic": "missing", "partition": 0, "fetch_offset": 0},
    ]})
    out_of_range, unknown = body["partitions"]
    assert out_of_range["error_code"] == "OFFSET_OUT_OF_RANGE"
    assert unknown["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert (await client.get("/v1/topics/missing")).status == 404, "fetch never creates topics"


async def test_fetch_long_poll_and_limits(client: TestClient) -> None:
    await create_topic(client, "f", 2)
    poll = asyncio.ensure_future(post_msgpack(client, "/v1/fetch", {
        "max_wait_ms": 20000, "min_bytes": 1, "partitions": [
            {"topic": "f", "partition": 0, "fetch_offset": 0},
            {"topic": "f", "partition": 1, "fetch_offset": 0}]}))
    await asyncio.sleep(0.05)  # a window: the long poll must still be waiting
    assert not poll.done()
    await post_msgpack(client, "/v1/produce", {"acks": 1, "partitions": [
        {"topic": "f", "partition": 1, "records": batch(b"late")}]})
    _, body = await asyncio.wait_for(poll, 10)
    assert values(body["partitions"][1]["records"]) == [(0, b"late")]

    for _ in range(5):
        await post_msgpack(client, "/v1/produce", {"acks": 1, "partitions": [
            {"topic": "f", "partition": 0, "records": batch(b"x" * 1000)}]})
    _, body = await post_msgpack(client, "/v1/fetch", {"max_wait_ms": 0, "max_bytes": 10, "partitions": [
        {"topic": "f", "partition": 0, "fetch_offset": 0}]})
    assert len(values(body["partitions"][0]["records"])) == 1, "first batch even above max_bytes"
    _, body = await post_msgpack(client, "/v1/fetch", {"max_wait_ms": 0, "partitions": [
        {"topic": "f", "partition": 0, "fetch_offset": 0, "partition_max_bytes": 2500}]})
    assert len(values(body["partitions"][0]["records"])) == 2


async def test_batch_produce_to_reserved_and_internal_topics_is_refused(client: TestClient) -> None:
    for topic, code in (("__cluster_metadata", "INVALID_REQUEST"), ("__consumer_offsets", "INVALID_TOPIC_EXCEPTION")):
        status, body = await post_msgpack(client, "/v1/produce", {"acks": 1, "partitions": [
            {"topic": topic, "partition": 0, "records": batch(b"x")}]})
        assert (status, body["error_code"]) == (400, code), body
    topics = await (await client.get("/v1/topics")).json()
    assert topics["topics"] == []  # nothing auto-created


async def test_an_empty_fetch_answers_at_once(client: TestClient) -> None:
    """Nothing to wait for (Kafka's ReplicaManager.fetchMessages answers an empty fetch at once)."""
    status, body = await asyncio.wait_for(
        post_msgpack(client, "/v1/fetch", {"max_wait_ms": 300_000, "partitions": []}), 10)
    assert (status, body) == (200, {"throttle_time_ms": 0, "partitions": []})
