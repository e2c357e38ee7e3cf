"""Topic administration routes against a real in-process node."""

from __future__ import annotations

from aiohttp.test_utils import TestClient

from routes_testing import create_topic, expect_error


async def test_health(client: TestClient) -> None:
    resp = await client.get("/v1/health")
    body = await resp.json()
    assert {k: body[k] for k in ("status", "node_id", "roles")} == {
        "status": "ok", "node_id": 1, "roles": ["broker", "controller"]}
    assert (body["active_controller"], body["controller_id"], body["broker_state"]) == (True, 1, "RUNNING")


async def test_metadata_lists_this_broker_and_topics(client: TestClient) -> None:
    await create_topic(client, "orders", 2)
    body = await (await client.get("/v1/metadata")).json()
    assert body["controller_id"] == 1
    assert len(body["cluster_id"]) == 22
    assert [b["node_id"] for b in body["brokers"]] == [1]
    [topic] = body["topics"]
    assert topic["name"] == "orders" and not topic["internal"]
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"]) for p in topic["partitions"]] == [
        (0, 1, [1], [1]), (1, 1, [1], [1])]
    only = await (await client.get("/v1/metadata", params={"topics": "orders,missing"})).json()
    assert [t["name"] for t in only["topics"]] == ["orders"]


async def test_topic_lifecycle(client: TestClient) -> None:
    created = await create_topic(client, "t1", 3, configs={"retention.ms": 60000})
    assert created["name"] == "t1" and created["partitions"] == 3
    assert created["replication_factor"] == 1
    assert created["configs"] == {"retention.ms": "60000"}
    listed = await (await client.get("/v1/topics")).json()
    assert [(t["name"], t["partitions"]) for t in listed["topics"]] == [("t1", 3)]
    described = await (await client.get("/v1/topics/t1")).json()
    assert described["topic_id"] == created["topic_id"]
    assert described["configs"] == {"retention.ms": "60000"}
    assert len(described["partitions"]) == 3

    configs = await (await client.get("/v1/topics/t1/configs")).json()
    assert configs["configs"] == {"retention.ms": "60000"}
    assert configs["defaults"]["segment.bytes"] == "1073741824"
    resp = await client.patch("/v1/topics/t1/configs",
                              json={"configs": {"retention.ms": None, "cleanup.policy": "compact"}})
    assert await resp.json() == {"configs": {"cleanup.policy": "compact"}}

    resp = await client.post("/v1/topics/t1/partitions", json={"count": 5})
    assert await resp.json() == {"name": "t1", "partitions": 5}
    await expect_error(await client.post("/v1/topics/t1/partitions", json={"count": 2}),
                       400, "INVALID_PARTITIONS")

    assert await (await client.delete("/v1/topics/t1")).json() == {"name": "t1"}
    await expect_error(await client.get("/v1/topics/t1"), 404, "UNKNOWN_TOPIC_OR_PARTITION")
    recreated = await create_topic(client, "t1", 1)
    assert recreated["topic_id"] != created["topic_id"]


async def test_create_errors_change_nothing(client: TestClient) -> None:
    await create_topic(client, "dup")
    await expect_error(await client.post("/v1/topics", json={"name": "dup"}), 409,
                       "TOPIC_ALREADY_EXISTS")
    for body, status, code in [
        ({"name": "bad/name"}, 400, "INVALID_TOPIC_EXCEPTION"),
        ({"name": ".."}, 400, "INVALID_TOPIC_EXCEPTION"),
        ({"name": "x" * 250}, 400, "INVALID_TOPIC_EXCEPTION"),
        ({"name": 7}, 400, "INVALID_REQUEST"),  # not a string: a malformed body, before any name rule
        ({}, 400, "INVALID_REQUEST"),
        ({"name": "a", "partitions": 0}, 400, "INVALID_PARTITIONS"),
        ({"name": "a", "partitions": -1}, 400, "INVALID_PARTITIONS"),
        ({"name": "a", "partitions": 10**12}, 400, "INVALID_PARTITIONS"),
        ({"name": "a", "partitions": 1.5}, 400, "INVALID_REQUEST"),
        ({"name": "a", "partitions": "2"}, 400, "INVALID_REQUEST"),
        ({"name": "a", "partitions": True}, 400, "INVALID_REQUEST"),
        ({"name": "a", "replication_factor": 3}, 400, "INVALID_REPLICATION_FACTOR"),
        ({"name": "a", "configs": {"retention.ms": "soon"}}, 400, "INVALID_CONFIG"),
        ({"name": "a", "configs": {"no.such": "1"}}, 400, "INVALID_CONFIG"),
        ({"name": "a", "configs": ["retention.ms"]}, 400, "INVALID_REQUEST"),
        ({"name": "a", "configs": {"retention.ms": [1]}}, 400, "INVALID_REQUEST"),
    ]:
        await expect_error(await client.post("/v1/topics", json=body), status, code)
    listed = await (await client.get("/v1/topics")).json()
    assert [t["name"] for t in listed["topics"]] == ["dup"]


async def test_alter_and_partition_errors(client: TestClient) -> None:
    await create_topic(client, "t")
    await expect_error(await client.patch("/v1/topics/t/configs",
                                          json={"configs": {"retention.ms": "-5"}}),
                       400, "INVALID_CONFIG")
    await expect_error(await client.patch("/v1/topics/t/configs", json={"configs": 3}),
                       400, "INVALID_REQUEST")
    await expect_error(await client.patch("/v1/topics/nope/configs", json={"configs": {}}),
                       404, "UNKNOWN_TOPIC_OR_PARTITION")
    await expect_error(await client.post("/v1/topics/t/partitions", json={"count": "many"}),
                       400, "INVALID_REQUEST")
    await expect_error(await client.delete("/v1/topics/nope"), 404, "UNKNOWN_TOPIC_OR_PARTITION")
    configs = await (await client.get("/v1/topics/t/configs")).json()
    assert configs["configs"] == {}
    assert len((await (await client.get("/v1/topics/t")).json())["partitions"]) == 1


async def test_delete_disabled(make_client) -> None:
    client = await make_client(delete_topic_enable="false")
    await create_topic(client, "keep")
    await expect_error(await client.delete("/v1/topics/keep"), 403, "TOPIC_DELETION_DISABLED")
    assert (await client.get("/v1/topics/keep")).status == 200
