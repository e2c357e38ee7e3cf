"""Bad input on every route: a 4xx with a Kafka error name, and nothing stored."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import TestClient

from kraft.log.batch import build_batch
from routes_testing import MSGPACK, create_topic, expect_error, post_msgpack


def batch(value: bytes = b"v") -> bytes:
    return build_batch([(None, value, None, 1)])


def corrupt(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0xFF])


async def assert_empty(client: TestClient, topic: str, partitions: int = 1) -> None:
    for p in range(partitions):
        offsets = await (await client.get(f"/v1/topics/{topic}/partitions/{p}/offsets")).json()
        assert offsets["log_end_offset"] == 0, offsets


async def test_unknown_route_and_wrong_method(client: TestClient) -> None:
    await expect_error(await client.get("/v1/nowhere"), 404, "NOT_FOUND")
    await expect_error(await client.put("/v1/topics"), 405, "METHOD_NOT_ALLOWED")
    await expect_error(await client.get("/v1/produce"), 405, "METHOD_NOT_ALLOWED")


async def test_batch_produce_is_all_or_nothing(client: TestClient) -> None:
    await create_topic(client, "t", 2)
    good = batch()
    cases = [
        ({"partitions": [{"topic": "t", "partition": 0, "records": good},
                         {"topic": "t", "partition": 1, "records": b""}]}, 400, "INVALID_REQUEST"),
        ({"partitions": [{"topic": "t", "partition": 0, "records": b""}]}, 400, "INVALID_REQUEST"),
        ({"partitions": [{"topic": "t", "partition": 0, "records": "text"}]}, 400, "INVALID_REQUEST"),
        ({"partitions": [{"topic": "t", "partition": -1, "records": good}]}, 400, "INVALID_REQUEST"),
        ({"partitions": [{"topic": "t", "partition": 2**40, "records": good}]}, 400,
         "INVALID_REQUEST"),
        ({"partitions": [{"topic": "bad name", "partition": 0, "records": good}]}, 400,
         "INVALID_TOPIC_EXCEPTION"),
        ({"partitions": [{"partition": 0, "records": good}]}, 400, "INVALID_REQUEST"),
        ({"acks": 2, "partitions": [{"topic": "t", "partition": 0, "records": good}]}, 400,
         "INVALID_REQUIRED_ACKS"),
        ({"acks": "some", "partitions": []}, 400, "INVALID_REQUIRED_ACKS"),
        ({"timeout_ms": -1, "partitions": []}, 400, "INVALID_REQUEST"),
        ({"partitions": {"t": 0}}, 400, "INVALID_REQUEST"),
        ({"partitions": ["x"]}, 400, "INVALID_REQUEST"),
        ([1, 2], 400, "INVALID_REQUEST"),
    ]
    for body, status, code in cases:
        got_status, answer = await post_msgpack(client, "/v1/produce", body)
        assert (got_status, answer["error_code"]) == (status, code), (body, answer)
    await assert_empty(client, "t", 2)
    resp = await client.post("/v1/produce", json={"partitions": [
        {"topic": "t", "partition": 0, "records": "not base64!"}]})
    await expect_error(resp, 400, "INVALID_REQUEST")
    await assert_empty(client, "t", 2)


async def test_a_corrupt_batch_is_refused_on_its_partition_and_stores_nothing(client: TestClient) -> None:
    """Kafka's Produce rule: a batch that fails its framing or CRC answers CORRUPT_MESSAGE on its
    partition (checked once, by the leader's validator) and the other partitions are written."""
    await create_topic(client, "t", 2)
    good, bad = batch(), corrupt(batch())
    status, answer = await post_msgpack(client, "/v1/produce", {"partitions": [
        {"topic": "t", "partition": 0, "records": good}, {"topic": "t", "partition": 1, "records": bad}]})
    assert status == 200, answer
    assert [(p["partition"], p.get("error_code")) for p in answer["partitions"]] == [(0, None), (1, "CORRUPT_MESSAGE")]
    for blob in (bad, good + good[:30], good + bad, b"\x00" * 70):
        status, answer = await post_msgpack(client, "/v1/produce", {"partitions": [
            {"topic": "t", "partition": 1, "records": blob}]})
        assert (status, answer["partitions"][0].get("error_code")) == (200, "CORRUPT_MESSAGE"), (blob, answer)
    ends = [(await (await client.get(f"/v1/topics/t/partitions/{p}/offsets")).json())["log_end_offset"]
            for p in (0, 1)]
    assert ends == [1, 0]


async def test_bad_fetch_requests(client: TestClient) -> None:
    await create_topic(client, "t")
    for body in [
        {"partitions": [{"topic": "t", "partition": 0, "fetch_offset": -1}]},
        {"partitions": [{"topic": "t", "partition": 0}]},
        {"max_wait_ms": -5, "partitions": []},
        {"max_wait_ms": 10**9, "partitions": []},
        {"max_bytes": 0, "partitions": []},
        {"partitions": [{"topic": "t", "partition": 0, "fetch_offset": 0,
                         "partition_max_bytes": "big"}]},
    ]:
        status, answer = await post_msgpack(client, "/v1/fetch", body)
        assert (status, answer["error_code"]) == (400, "INVALID_REQUEST"), body


async def test_bad_json_produce_changes_nothing(client: TestClient) -> None:
    await create_topic(client, "t")
    for body, code in [
        ({"records": []}, "INVALID_REQUEST"),
        ({"records": [{"value": "ok"}, {"value": 5}]}, "INVALID_REQUEST"),
        ({"records": [{"value": "ok"}, {"value_b64": "%%%"}]}, "INVALID_REQUEST"),
        ({"records": [{"value": "ok"}, {"headers": "h"}]}, "INVALID_REQUEST"),
        ({"records": [{"value": "ok"}, {"headers": {"k": 1}}]}, "INVALID_REQUEST"),
        ({"records": [{"value": "ok"}, {"headers": [{"value": "v"}]}]}, "INVALID_REQUEST"),
        ({"records": [{"value": "ok"}, {"timestamp": -3}]}, "INVALID_REQUEST"),
        ({"records": [{"value": "ok"}, {"partition": "0"}]}, "INVALID_REQUEST"),
        ({"records": [{"value": "ok"}], "acks": 3}, "INVALID_REQUIRED_ACKS"),
        ({"records": "all of them"}, "INVALID_REQUEST"),
        ({"records": [7]}, "INVALID_REQUEST"),
    ]:
        await expect_error(await client.post("/v1/topics/t/records", json=body), 400, code)
    await expect_error(await client.post("/v1/topics/t/records",
                                         json={"records": [{"value": "ok", "partition": 1}]}),
                       404, "UNKNOWN_TOPIC_OR_PARTITION")
    await expect_error(await client.post("/v1/topics/bad%20name/records",
                                         json={"records": [{"value": "x"}]}),
                       400, "INVALID_TOPIC_EXCEPTION")
    await assert_empty(client, "t")
    assert [t["name"] for t in (await (await client.get("/v1/topics")).json())["topics"]] == ["t"]


@pytest.mark.parametrize("query, status, code", [
    ("offset=-1", 400, "INVALID_REQUEST"),
    ("offset=abc", 400, "INVALID_REQUEST"),
    ("offset=99", 416, "OFFSET_OUT_OF_RANGE"),
    ("max_records=0", 400, "INVALID_REQUEST"),
    ("max_records=99999999", 400, "INVALID_REQUEST"),
    ("timeout_ms=-1", 400, "INVALID_REQUEST"),
    ("max_bytes=0", 400, "INVALID_REQUEST"),
    ("timestamp=x", 400, "INVALID_REQUEST"),
])
async def test_bad_record_queries(client: TestClient, query: str, status: int, code: str) -> None:
    await create_topic(client, "t")
    await expect_error(await client.get(f"/v1/topics/t/partitions/0/records?{query}"), status, code)


async def test_bad_partition_paths(client: TestClient) -> None:
    await create_topic(client, "t")
    await expect_error(await client.get("/v1/topics/t/partitions/1/records"), 404,
                       "UNKNOWN_TOPIC_OR_PARTITION")
    await expect_error(await client.get("/v1/topics/t/partitions/-1/offsets"), 400,
                       "INVALID_REQUEST")
    await expect_error(await client.get("/v1/topics/t/partitions/99999999999999/offsets"), 400,
                       "INVALID_REQUEST")
    await expect_error(await client.get("/v1/topics/nope/partitions/0/offsets"), 404,
                       "UNKNOWN_TOPIC_OR_PARTITION")
    await expect_error(await client.get("/v1/topics/t/partitions/0/offsets?timestamp=-4"), 400,
                       "INVALID_REQUEST")


async def test_bodies_media_types_and_sizes(make_client) -> None:
    client = await make_client(socket_request_max_bytes="2000")
    await expect_error(await client.post("/v1/topics", data=b"{not json",
                                         headers={"Content-Type": "application/json"}),
                       400, "INVALID_REQUEST")
    await expect_error(await client.post("/v1/topics", data=b"\xc1\xc1",
                                         headers={"Content-Type": MSGPACK}), 400, "INVALID_REQUEST")
    await expect_error(await client.post("/v1/topics", data=b"name=x",
                                         headers={"Content-Type": "application/x-www-form-urlencoded"}),
                       415, "UNSUPPORTED_MEDIA_TYPE")
    await expect_error(await client.post("/v1/topics", json={"name": "big", "pad": "x" * 5000}),
                       413, "MESSAGE_TOO_LARGE")
    assert (await (await client.get("/v1/topics")).json())["topics"] == []
