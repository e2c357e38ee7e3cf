"""Bad input of every route gets a 4xx with a Kafka error name, the node keeps running and stored
data does not change."""

from __future__ import annotations

import uuid

import msgpack
import pytest
import requests

from kraft.log.batch import build_batch


@pytest.fixture(scope="module")
def seeded(node):
    """A topic with known content; every bad request below must leave it as it is."""
    name = f"bad-{uuid.uuid4().hex[:8]}"
    assert requests.post(f"{node.url}/v1/topics", json={"name": name, "partitions": 2}, timeout=10).status_code == 201
    r = requests.post(f"{node.url}/v1/topics/{name}/records",
                      json={"records": [{"value": f"v{i}", "partition": i % 2} for i in range(10)]}, timeout=10)
    assert r.status_code == 200
    return name


def snapshot(node, topic):
    out = []
    for p in (0, 1):
        r = requests.get(f"{node.url}/v1/topics/{topic}/partitions/{p}/records",
                         params={"offset": 0, "max_records": 1000}, timeout=10).json()
        out.append((r["high_watermark"], [(x["offset"], x["value"]) for x in r["records"]]))
    topics = sorted(t["name"] for t in requests.get(f"{node.url}/v1/topics", timeout=10).json()["topics"])
    return out, topics


JSON_CASES = [
    # (method, path, json body or raw bytes, expected status, expected error_code)
    ("POST", "/v1/topics", {"name": ""}, 400, "INVALID_TOPIC_EXCEPTION"),
    ("POST", "/v1/topics", {"name": "bad/name"}, 400, "INVALID_TOPIC_EXCEPTION"),
    ("POST", "/v1/topics", {"name": "x" * 250}, 400, "INVALID_TOPIC_EXCEPTION"),
    ("POST", "/v1/topics", {"name": ".."}, 400, "INVALID_TOPIC_EXCEPTION"),
    ("POST", "/v1/topics", {"name": "ok-{u}", "partitions": 0}, 400, "INVALID_PARTITIONS"),
    ("POST", "/v1/topics", {"name": "ok-{u}", "partitions": -3}, 400, "INVALID_PARTITIONS"),
    ("POST", "/v1/topics", {"name": "ok-{u}", "partitions": 10**12}, 400, "INVALID_PARTITIONS"),
    ("POST", "/v1/topics", {"name": "ok-{u}", "partitions": "3"}, 400, "INVALID_REQUEST"),
    ("POST", "/v1/topics", {"name": "ok-{u}", "replication_factor": 3}, 400, "INVALID_REPLICATION_FACTOR"),
    ("POST", "/v1/topics", {"name": "ok-{u}", "configs": {"no.such.key": "1"}}, 400, "INVALID_CONFIG"),
    ("POST", "/v1/topics", {"name": "ok-{u}", "configs": {"retention.ms": "soon"}}, 400, "INVALID_CONFIG"),
    ("POST", "/v1/topics", {"name": "ok-{u}", "configs": {"cleanup.policy": "shred"}}, 400, "INVALID_CONFIG"),
    ("POST", "/v1/topics", [1, 2], 400, "INVALID_REQUEST"),
    ("POST", "/v1/topics", b"{not json", 400, "INVALID_REQUEST"),
    ("POST", "/v1/topics/{t}/partitions", {"count": "many"}, 400, "INVALID_REQUEST"),
    ("POST", "/v1/topics/{t}/partitions", {"count": 1}, 400, "INVALID_PARTITIONS"),
    ("POST", "/v1/topics/nope-{u}/partitions", {"count": 5}, 404, "UNKNOWN_TOPIC_OR_PARTITION"),
    ("PATCH", "/v1/topics/{t}/configs", {"configs": {"segment.bytes": "-5"}}, 400, "INVALID_CONFIG"),
    ("PATCH", "/v1/topics/{t}/configs", {"configs": {"bogus": "1"}}, 400, "INVALID_CONFIG"),
    ("PATCH", "/v1/topics/{t}/configs", {"configs": "retention.ms=1"}, 400, "INVALID_REQUEST"),
    ("POST", "/v1/topics/{t}/records", {"records": "x"}, 400, "INVALID_REQUEST"),
    ("POST", "/v1/topics/{t}/records", {"records": [{"value": 5}]}, 400, "INVALID_REQUEST"),
    ("POST", "/v1/topics/{t}/records", {"records": [{"value": "a", "partition": 7}]}, 404, "UNKNOWN_TOPIC_OR_PARTITION"),
    ("POST", "/v1/topics/{t}/records", {"records": [{"value": "a", "partition": -1}]}, 400, "INVALID_REQUEST"),
    ("POST", "/v1/topics/{t}/records", {"records": [{"value_b64": "!!notbase64!!"}]}, 400, "INVALID_REQUEST"),
    ("POST", "/v1/topics/{t}/records", {"records": [{"value": "a", "headers": 7}]}, 400, "INVALID_REQUEST"),
    ("POST", "/v1/topics/{t}/records", {"records": [{"value": "a", "timestamp": "now"}]}, 400, "INVALID_REQUEST"),
    ("POST", "/v1/topics/{t}/records", {"records": [{"value": "ok"}, {"value": 1.5}]}, 400, "INVALID_REQUEST"),
    ("POST", "/v1/topics/{t}/records", {"records": [{"value": "a"}], "acks": 2}, 400, "INVALID_REQUIRED_ACKS"),
    ("POST", "/v1/topics/{t}/records", {"records": [{"value": "x" * 2_000_000}]}, 413, "MESSAGE_TOO_LARGE"),
    ("GET", "/v1/topics/{t}/partitions/0/records?offset=-5", None, 400, "INVALID_REQUEST"),
    ("GET", "/v1/topics/{t}/partitions/0/records?offset=abc", None, 400, "INVALID_REQUEST"),
    ("GET", "/v1/topics/{t}/partitions/0/records?offset=99999999", None, 416, "OFFSET_OUT_OF_RANGE"),
    ("GET", "/v1/topics/{t}/partitions/0/records?offset=0&max_records=-1", None, 400, "INVALID_REQUEST"),
    ("GET", "/v1/topics/{t}/partitions/0/records?offset=0&timeout_ms=99999999999999999999", None, 400, "INVALID_REQUEST"),
    ("GET", "/v1/topics/{t}/partitions/x/records", None, 400, "INVALID_REQUEST"),
    ("GET", "/v1/topics/{t}/partitions/5/records", None, 404, "UNKNOWN_TOPIC_OR_PARTITION"),
    ("GET", "/v1/topics/{t}/partitions/0/offsets?timestamp=yesterday", None, 400, "INVALID_REQUEST"),
    ("POST", "/v1/produce", {"partitions": "all"}, 400, "INVALID_REQUEST"),
    ("POST", "/v1/produce", {"acks": "most", "partitions": []}, 400, "INVALID_REQUIRED_ACKS"),
    ("POST", "/v1/fetch", {"partitions": [{"topic": "{t}", "partition": 0, "fetch_offset": -7}]}, 400, "INVALID_REQUEST"),
    ("POST", "/v1/fetch", {"max_wait_ms": -1, "partitions": []}, 400, "INVALID_REQUEST"),
    ("DELETE", "/v1/topics/nope-{u}", None, 404, "UNKNOWN_TOPIC_OR_PARTITION"),
    ("GET", "/v1/no/such/route", None, 404, None),
    ("PUT", "/v1/topics", {}, 405, None),
]


@pytest.mark.parametrize("method,path,body,status,code", JSON_CASES,
                         ids=[f"{c[0]} {c[1]} {str(c[2])[:30]}" for c in JSON_CASES])
def test_bad_request_is_rejected_and_changes_nothing(node, seeded, method, path, body, status, code):
    before = snapshot(node, seeded)
    u = uuid.uuid4().hex[:6]
    url = node.url + path.replace("{t}", seeded).replace("{u}", u)
    if isinstance(body, bytes):
        r = requests.request(method, url, data=body, headers={"Content-Type": "application/json"}, timeout=10)
    elif body is None:
        r = requests.request(method, url, timeout=10)
    else:
        body = _subst(body, seeded, u)
        r = requests.request(method, url, json=body, timeout=10)
    assert r.status_code == status, r.text
    err = r.json()
    assert isinstance(err["message"], str) and err["message"]
    assert isinstance(err["retriable"], bool)
    if code:
        assert err["error_code"] == code, err
    assert node.health()["status"] == "ok"
    assert snapshot(node, seeded) == before


def _subst(body, topic, u):
    if isinstance(body, dict):
        return {k: _subst(v, topic, u) for k, v in body.items()}
    if isinstance(body, list):
        return [_subst(v, topic, u) for v in body]
    if isinstance(body, str):
        return body.replace("{t}", topic).replace("{u}", u)
    return body


def test_corrupt_batches_are_rejected_whole(node, seeded):
    before = snapshot(node, seeded)
    good = build_batch([(None, b"fine", (), 1_700_000_000_000)])
    bad = bytearray(build_batch([(None, b"evil", (), 1_700_000_000_000)]))
    bad[-1] ^= 0xFF  # payload byte: CRC mismatch
    hdr = {"Content-Type": "application/msgpack", "Accept": "application/msgpack"}
    for blob in (good + bytes(bad), bytes(bad), good[:30], b"\x00" * 70, good + b"\x01"):
        body = {"acks": 1, "partitions": [{"topic": seeded, "partition": 0, "records": blob}]}
        r = requests.post(f"{node.url}/v1/produce", data=msgpack.packb(body), headers=hdr, timeout=10)
        assert r.status_code in (200, 400), r.content
        part = msgpack.unpackb(r.content)["partitions"][0] if r.status_code == 200 else msgpack.unpackb(r.content)
        assert part["error_code"] == "CORRUPT_MESSAGE", part
    assert snapshot(node, seeded) == before


def test_malformed_msgpack_and_wrong_content_type(node, seeded):
    before = snapshot(node, seeded)
    r = requests.post(f"{node.url}/v1/produce", data=b"\xc1\xc1\xc1",
                      headers={"Content-Type": "application/msgpack"}, timeout=10)
    assert r.status_code == 400 and r.json()["error_code"] == "INVALID_REQUEST"
    r = requests.post(f"{node.url}/v1/topics", data=b"name=x", headers={"Content-Type": "text/plain"}, timeout=10)
    assert r.status_code == 415
    assert snapshot(node, seeded) == before


def test_a_compression_bomb_is_refused_at_produce(node, seeded):
    """Issue 21: a 3 KB zstd batch whose one record holds 100 MB of zeros passed max.message.bytes
    on its compressed size, and every JSON read of it then built a 629 MB answer. The topic's
    max.message.bytes now bounds the batch decompressed too: MESSAGE_TOO_LARGE, nothing stored."""
    before = snapshot(node, seeded)
    bomb = build_batch([(None, b"\0" * (100 << 20), (), 1_700_000_000_000)], compression="zstd")
    assert len(bomb) < 10_000
    body = {"acks": -1, "partitions": [{"topic": seeded, "partition": 0, "records": bomb}]}
    hdr = {"Content-Type": "application/msgpack", "Accept": "application/msgpack"}
    r = requests.post(f"{node.url}/v1/produce", data=msgpack.packb(body), headers=hdr, timeout=60)
    assert r.status_code == 200, r.content
    part = msgpack.unpackb(r.content)["partitions"][0]
    assert part["error_code"] == "MESSAGE_TOO_LARGE", part
    assert snapshot(node, seeded) == before
