"""The transaction routes of a broker, in process: WriteTxnMarkers and the KIP-890 verification
answer each partition on its own with Kafka's error names (a fenced marker, a partition that does
not exist, an older coordinator), bad bodies are 400s and write nothing, and the read routes'
isolation_level (batch fetch, JSON records, offsets)."""

from __future__ import annotations

import time
from typing import Any

import msgpack
from aiohttp.test_utils import TestClient

from kraft.log.batch import build_batch
from kraft.security.node_auth import NodeCredential
from kraft.security.peers import PeerSecurity
from routes_testing import MSGPACK, create_topic, post_msgpack

SECRET = "txn-routes-secret"
PID = 4242
TID = "t-writer"  # the producer's transactional id (no authorizer here: any id may be written)
NOW = int(time.time() * 1000)  # the markers' time too: a segment would roll on a week's gap


async def as_node(client: TestClient, path: str, body: Any) -> tuple[int, Any]:
    data = msgpack.packb(body, use_bin_type=True)
    headers = {"Content-Type": MSGPACK, "Accept": MSGPACK,
               **PeerSecurity(NodeCredential(1, SECRET)).headers("POST", path, data, target=1)}
    resp = await client.post(path, data=data, headers=headers)
    return resp.status, msgpack.unpackb(await resp.read(), raw=False)


def marker(result: str, epoch: int = 0, coordinator_epoch: int = 0, partition: int = 0) -> dict[str, Any]:
    return {"markers": [{"producer_id": PID, "producer_epoch": epoch, "coordinator_epoch": coordinator_epoch,
                         "transaction_result": result, "partitions": [{"topic": "t", "partition": partition}]}]}


def txn_batch(seq: int, value: bytes, epoch: int = 0) -> bytes:
    return build_batch([(None, value, None, NOW)], producer_id=PID, producer_epoch=epoch, base_sequence=seq,
                       transactional=True)


async def produce(client: TestClient, records: bytes, transactional_id: str | None = None) -> dict[str, Any]:
    status, body = await post_msgpack(client, "/v1/produce", {"partitions": [
        {"topic": "t", "partition": 0, "records": records}], "transactional_id": transactional_id})
    assert status == 200, body
    return body["partitions"][0]


async def log_end(client: TestClient) -> int:
    return (await (await client.get("/v1/topics/t/partitions/0/offsets")).json())["log_end_offset"]


async def test_markers_and_verification_answer_each_partition_with_kafkas_errors(make_client) -> None:
    client = await make_client(controller_quorum_secret=SECRET)
    await create_topic(client, "t")
    status, body = await as_node(client, "/v1/partitions/txn-verify", {
        "producer_id": PID, "producer_epoch": 1, "partitions": [{"topic": "t", "partition": 0},
                                                               {"topic": "t", "partition": 7}]})
    assert status == 200
    assert [p.get("error_code") for p in body["partitions"]] == [None, "UNKNOWN_TOPIC_OR_PARTITION"]
    assert "error_code" not in await produce(client, txn_batch(0, b"x", epoch=1), TID)
    status, body = await as_node(client, "/v1/partitions/txn-markers", marker("ABORT", epoch=0))
    [answer] = body["markers"][0]["partitions"]
    assert answer["error_code"] == "INVALID_PRODUCER_EPOCH"  # a zombie coordinator's old epoch
    status, body = await as_node(client, "/v1/partitions/txn-markers", marker("ABORT", epoch=1, coordinator_epoch=3))
    assert body["markers"][0]["partitions"][0]["offset"] == 1
    status, body = await as_node(client, "/v1/partitions/txn-markers", marker("COMMIT", epoch=1, coordinator_epoch=2))
    assert body["markers"][0]["partitions"][0]["error_code"] == "TRANSACTION_COORDINATOR_FENCED"
    assert await log_end(client) == 2


async def test_bad_transaction_bodies_are_refused_and_write_nothing(make_client) -> None:
    client = await make_client(controller_quorum_secret=SECRET)
    await create_topic(client, "t")
    for body, error in ((marker("MAYBE"), "INVALID_REQUEST"), ({"markers": []}, "INVALID_REQUEST"),
                        ({**marker("COMMIT"), "extra": 1}, "INVALID_REQUEST"),
                        ({"markers": [{**marker("ABORT")["markers"][0], "producer_id": -1}]}, "INVALID_REQUEST"),
                        ({"markers": [{**marker("ABORT")["markers"][0], "partitions": [
                            {"topic": "../x", "partition": 0}]}]}, "INVALID_TOPIC_EXCEPTION")):
        status, answer = await as_node(client, "/v1/partitions/txn-markers", body)
        assert (status, answer["error_code"]) == (400, error), (body, answer)
    status, answer = await as_node(client, "/v1/partitions/txn-verify", {"producer_id": PID, "partitions": []})
    assert (status, answer["error_code"]) == (400, "INVALID_REQUEST")
    assert await log_end(client) == 0
    # a transactional batch needs a producer id, and the coordinator's verification
    refused = await produce(client, build_batch([(None, b"v", None, NOW)], transactional=True), TID)
    assert refused["error_code"] == "INVALID_RECORD"
    assert (await produce(client, txn_batch(0, b"x"), TID))["error_code"] == "INVALID_TXN_STATE"
    assert await log_end(client) == 0


async def test_transactional_batches_need_the_requests_transactional_id(make_client) -> None:
    """Kafka's handleProduceRequest rule on `POST /v1/produce`: transactional batches without the
    request's transactional id are refused as a whole, 403 TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    even with no authorizer and the partition verified for the producer (else Write on the topic
    alone appends to any producer's open transaction); nothing is written, the plain batch of the
    other partition neither. Named, the same request is appended."""
    client = await make_client(controller_quorum_secret=SECRET)
    await create_topic(client, "t", partitions=2)
    await as_node(client, "/v1/partitions/txn-verify", {"producer_id": PID, "producer_epoch": 0,
                                                        "partitions": [{"topic": "t", "partition": 0}]})
    body = {"partitions": [{"topic": "t", "partition": 0, "records": txn_batch(0, b"forged")},
                           {"topic": "t", "partition": 1, "records": build_batch([(None, b"plain", None, NOW)])}]}
    status, answer = await post_msgpack(client, "/v1/produce", body)
    assert (status, answer["error_code"]) == (403, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"), answer
    assert "transactional_id" in answer["message"]
    for partition in (0, 1):
        offsets = await (await client.get(f"/v1/topics/t/partitions/{partition}/offsets")).json()
        assert offsets["log_end_offset"] == 0
    status, answer = await post_msgpack(client, "/v1/produce", {**body, "transactional_id": TID})
    assert status == 200 and [p.get("error_code") for p in answer["partitions"]] == [None, None], answer


async def test_isolation_levels_of_the_read_routes(make_client) -> None:
    client = await make_client(controller_quorum_secret=SECRET)
    await create_topic(client, "t")
    await as_node(client, "/v1/partitions/txn-verify", {"producer_id": PID, "producer_epoch": 0,
                                                        "partitions": [{"topic": "t", "partition": 0}]})
    await produce(client, txn_batch(0, b"aborted"), TID)
    await produce(client, build_batch([(None, b"plain", None, NOW)]))
    offsets = await (await client.get("/v1/topics/t/partitions/0/offsets?isolation_level=read_committed")).json()
    assert (offsets["last_stable_offset"], offsets["high_watermark"]) == (0, 2)
    committed = await (await client.get("/v1/topics/t/partitions/0/records",
                                        params={"offset": "latest", "isolation_level": "read_committed"})).json()
    assert committed["records"] == [] and committed["next_offset"] == 0  # latest: the LSO
    await as_node(client, "/v1/partitions/txn-markers", marker("ABORT"))
    status, body = await post_msgpack(client, "/v1/fetch", {"isolation_level": "read_committed", "partitions": [
        {"topic": "t", "partition": 0, "fetch_offset": 0}]})
    [part] = body["partitions"]
    assert part["last_stable_offset"] == 3 and part["aborted_transactions"] == [{"producer_id": PID, "first_offset": 0}]
    status, body = await post_msgpack(client, "/v1/fetch", {"partitions": [{"topic": "t", "partition": 0,
                                                                             "fetch_offset": 0}]})
    assert "aborted_transactions" not in body["partitions"][0]
    for isolation, values in (("read_committed", ["plain"]), ("read_uncommitted", ["aborted", "plain"])):
        page = await (await client.get("/v1/topics/t/partitions/0/records",
                                       params={"offset": "0", "isolation_level": isolation})).json()
        assert [r["value"] for r in page["records"]] == values and page["next_offset"] == 3, page
    bad = await client.get("/v1/topics/t/partitions/0/records", params={"isolation_level": "dirty"})
    assert bad.status == 400 and (await bad.json())["error_code"] == "INVALID_REQUEST"


async def test_an_administrator_aborts_a_hanging_transaction(make_client) -> None:
    """kafka-transactions abort's route: the ABORT marker of a transaction no coordinator knows
    (here a producer verified by hand, as a coordinator that then lost its state would have done)
    ends it, so the last stable offset moves; a fenced epoch and bad bodies change nothing."""
    client = await make_client(controller_quorum_secret=SECRET)
    await create_topic(client, "t")
    await as_node(client, "/v1/partitions/txn-verify", {"producer_id": PID, "producer_epoch": 2,
                                                        "partitions": [{"topic": "t", "partition": 0}]})
    await produce(client, txn_batch(0, b"hanging", epoch=2), TID)
    await produce(client, build_batch([(None, b"later", None, NOW)]))
    producers = await (await client.get("/v1/topics/t/partitions/0/producers")).json()
    assert [(p["producer_id"], p["current_txn_start_offset"]) for p in producers["producers"]] == [(PID, 0)]

    async def stable_offset() -> int:
        offsets = await (await client.get("/v1/topics/t/partitions/0/offsets?isolation_level=read_committed")).json()
        return offsets["last_stable_offset"]

    assert await stable_offset() == 0
    path = "/v1/topics/t/partitions/0/abort-transaction"
    for body, status, error in (({"producer_id": PID, "producer_epoch": 1}, 409, "INVALID_PRODUCER_EPOCH"),
                                ({"producer_id": PID}, 400, "INVALID_REQUEST"),
                                ({"producer_id": -1, "producer_epoch": 2}, 400, "INVALID_REQUEST")):
        answer = await client.post(path, json=body)
        assert (answer.status, (await answer.json())["error_code"]) == (status, error), body
    assert await log_end(client) == 2 and await stable_offset() == 0
    answer = await client.post(path, json={"producer_id": PID, "producer_epoch": 2, "coordinator_epoch": 0})
    assert answer.status == 200 and (await answer.json()) == {"topic": "t", "partition": 0, "offset": 2}
    assert await stable_offset() == 3
    page = await (await client.get("/v1/topics/t/partitions/0/records",
                                   params={"offset": "0", "isolation_level": "read_committed"})).json()
    assert [r["value"] for r in page["records"]] == ["later"]
    missing = await client.post("/v1/topics/t/partitions/5/abort-transaction",
                                json={"producer_id": PID, "producer_epoch": 2})
    assert (await missing.json())["error_code"] == "UNKNOWN_TOPIC_OR_PARTITION"
