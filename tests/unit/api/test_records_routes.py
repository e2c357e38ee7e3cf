"""The JSON convenience routes: produce records, read them back, look up offsets."""

from __future__ import annotations

import asyncio
import base64

from aiohttp.test_utils import TestClient

from harness import wait_until
from kraft.api.partitioner import partition_for_key
from routes_testing import create_topic, expect_error, read_all


async def test_produce_and_read_json(client: TestClient) -> None:
    await create_topic(client, "t")
    records = [
        {"key": "k1", "value": "hello", "headers": {"h": "v", "n": None}, "timestamp": 1000},
        {"value_b64": base64.b64encode(b"\xff\x00").decode(), "headers": [{"key": "a", "value": "b"}]},
        {"key": "k3", "value": None},  # a tombstone
    ]
    resp = await client.post("/v1/topics/t/records", json={"records": records, "acks": 1})
    assert resp.status == 200, await resp.text()
    assert await resp.json() == {"offsets": [{"partition": 0, "offset": i} for i in range(3)],
                                 "partitions": [{"partition": 0, "base_offset": 0, "record_count": 3}]}

    body = await read_all(client, "t")
    assert (body["high_watermark"], body["log_start_offset"], body["next_offset"]) == (3, 0, 3)
    first, second, third = body["records"]
    assert first["key"] == "k1" and first["value"] == "hello" and first["timestamp"] == 1000
    assert first["headers"] == [{"key": "h", "value": "v"}, {"key": "n", "value": None}]
    assert second["key"] is None and second["value"] is None
    assert base64.b64decode(second["value_b64"]) == b"\xff\x00"
    assert second["headers"] == [{"key": "a", "value": "b"}]
    assert third["key"] == "k3" and third["value"] is None and "value_b64" not in third

    page = await read_all(client, "t", offset=1, max_records=1)
    assert [r["offset"] for r in page["records"]] == [1] and page["next_offset"] == 2
    latest = await read_all(client, "t", offset="latest")
    assert latest["records"] == [] and latest["next_offset"] == 3


async def test_keyed_records_land_where_kafka_puts_them(client: TestClient) -> None:
    await create_topic(client, "keyed", 4)
    keys = [f"user-{i}" for i in range(20)]
    resp = await client.post("/v1/topics/keyed/records",
                             json={"records": [{"key": k, "value": "v"} for k in keys]})
    offsets = (await resp.json())["offsets"]
    assert [o["partition"] for o in offsets] == [partition_for_key(k.encode(), 4) for k in keys]
    explicit = await client.post("/v1/topics/keyed/records",
                                 json={"records": [{"key": "x", "value": "v", "partition": 3}]})
    assert (await explicit.json())["offsets"][0]["partition"] == 3
    keyless = await client.post("/v1/topics/keyed/records?acks=0",
                                json={"records": [{"value": str(i)} for i in range(5)]})
    answer = (await keyless.json())["offsets"]
    assert len({o["partition"] for o in answer}) == 1, "keyless records stick to one partition"
    assert all(o["offset"] is None for o in answer)


async def test_auto_create_on_produce(make_client) -> None:
    client = await make_client()
    resp = await client.post("/v1/topics/fresh/records", json={"records": [{"value": "x"}]})
    assert resp.status == 200
    assert (await client.get("/v1/topics/fresh")).status == 200

    strict = await make_client(auto_create_topics_enable="false")
    await expect_error(
        await strict.post("/v1/topics/fresh/records", json={"records": [{"value": "x"}]}),
        404, "UNKNOWN_TOPIC_OR_PARTITION")
    assert (await strict.get("/v1/topics/fresh")).status == 404


async def test_offsets_and_timestamp_lookup(client: TestClient) -> None:
    await create_topic(client, "ts")
    await client.post("/v1/topics/ts/records", json={"records": [
        {"value": "a", "timestamp": 100}, {"value": "b", "timestamp": 200},
        {"value": "c", "timestamp": 300}]})
    body = await (await client.get("/v1/topics/ts/partitions/0/offsets")).json()
    assert body == {"partition": 0, "log_start_offset": 0, "high_watermark": 3, "log_end_offset": 3,
                    "last_stable_offset": 3}
    found = await (await client.get("/v1/topics/ts/partitions/0/offsets?timestamp=150")).json()
    assert (found["offset"], found["timestamp"]) == (1, 200)
    none = await (await client.get("/v1/topics/ts/partitions/0/offsets?timestamp=999")).json()
    assert (none["offset"], none["timestamp"]) == (None, None)
    page = await read_all(client, "ts", timestamp=250)
    assert [r["value"] for r in page["records"]] == ["c"]


async def test_long_poll_wakes_on_produce(client: TestClient) -> None:
    await create_topic(client, "lp")
    loop = asyncio.get_running_loop()
    started = loop.time()
    poll = asyncio.ensure_future(client.get(
        "/v1/topics/lp/partitions/0/records", params={"offset": "0", "timeout_ms": "20000"}))
    await asyncio.sleep(0.05)  # a window: the long poll must still be waiting
    assert not poll.done()
    await client.post("/v1/topics/lp/records", json={"records": [{"value": "wake"}]})
    body = await (await asyncio.wait_for(poll, 10)).json()
    assert [r["value"] for r in body["records"]] == ["wake"]
    assert loop.time() - started < 10
    empty = await read_all(client, "lp", offset=1, timeout_ms=50)
    assert empty["records"] == []


async def test_acks_all_needs_min_insync_replicas(client: TestClient) -> None:
    await create_topic(client, "strict", configs={"min.insync.replicas": "2"})
    await expect_error(
        await client.post("/v1/topics/strict/records", json={"records": [{"value": "x"}]}),
        503, "NOT_ENOUGH_REPLICAS")
    ok = await client.post("/v1/topics/strict/records?acks=1", json={"records": [{"value": "x"}]})
    assert (await ok.json())["offsets"] == [{"partition": 0, "offset": 0}]


async def test_data_survives_restart(make_client, tmp_path) -> None:
    client = await make_client(data_dir=tmp_path / "d")
    await create_topic(client, "durable", 2)
    await client.post("/v1/topics/durable/records",
                      json={"records": [{"value": "v", "partition": 1}] * 3})
    cluster_id = (await (await client.get("/v1/metadata")).json())["cluster_id"]
    await client.close()
    again = await make_client(data_dir=tmp_path / "d")
    assert (await (await again.get("/v1/metadata")).json())["cluster_id"] == cluster_id
    body = await read_all(again, "durable", 1)
    assert [r["offset"] for r in body["records"]] == [0, 1, 2]
    assert (tmp_path / "d" / "meta.properties").read_text().count(f"cluster.id={cluster_id}") == 1


async def test_retention_deletes_old_segments(make_client) -> None:
    client = await make_client(log_retention_check_interval_ms="50")
    await create_topic(client, "old", configs={"segment.bytes": "1000", "retention.ms": "1"})
    for _ in range(5):  # each ~1 KB record fills a segment, so the log rolls
        await client.post("/v1/topics/old/records", json={"records": [{"value": "x" * 1000}]})
    # Every record is past retention.ms, so retention ends with every segment deleted (the expired
    # active one rolled first, as Kafka does); waiting for that end state leaves no race.
    async def offsets_once_all_deleted() -> dict | None:
        offsets = await (await client.get("/v1/topics/old/partitions/0/offsets")).json()
        return offsets if offsets["log_start_offset"] == 5 else None
    offsets = await wait_until(offsets_once_all_deleted, 15, interval=0.05, what="every segment deleted")
    assert offsets["log_end_offset"] == 5
    page = await read_all(client, "old")
    assert (page["records"], page["next_offset"]) == ([], 5)
    produced = await client.post("/v1/topics/old/records", json={"records": [{"value": "y"}]})
    assert (await produced.json())["offsets"][0]["offset"] == 5  # offsets go on past deleted segments
