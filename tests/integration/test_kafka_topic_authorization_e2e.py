"""Per-topic authorization over the wire as Kafka answers it (KafkaApis' Produce, OffsetCommit and
OffsetFetch handlers), on a real node with the StandardAuthorizer: a plaintext Kafka connection is
User:ANONYMOUS, which may Write and Read the topic "open", Read the group "g", and nothing on the
topic "closed" or the group "forbidden". A request naming both topics is served for "open" and
answers TOPIC_AUTHORIZATION_FAILED on the partitions of "closed" only; an OffsetFetch of a group
the principal may not Describe is the group's GROUP_AUTHORIZATION_FAILED. HTTP's /v1/produce
answers the same way."""

from __future__ import annotations

import datetime
import socket
import time
from typing import Any

import msgpack
import pytest

from harness import NodeProcess, start_node
from kafka_wire import read_frame_blocking, read_response, request_bytes
from kraft.log import kafka_batch
from kraft.log.batch import build_batch
from security_support import node_request

SECRET = "topic-authorization-secret"
ME = "User:ANONYMOUS"
PRODUCE, OFFSET_COMMIT, OFFSET_FETCH = 0, 8, 9


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = start_node(tmp_path_factory.mktemp("kafka-topic-auth"), **{
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "controller.quorum.secret": SECRET,
    })
    try:
        for topic in ("open", "closed"):
            as_node(n, "POST", "/v1/topics", {"name": topic, "partitions": 1})
        as_node(n, "POST", "/v1/acls", {"acls": [
            acl("TOPIC", "open", "WRITE"), acl("TOPIC", "open", "READ"), acl("GROUP", "g", "READ")]})
        yield n
    finally:
        n.stop()


def acl(rtype: str, name: str, op: str) -> dict[str, str]:
    return {"resource_type": rtype, "resource_name": name, "pattern_type": "LITERAL", "principal": ME,
            "host": "*", "operation": op, "permission_type": "ALLOW"}


def as_node(node: NodeProcess, method: str, path: str, body: Any = None) -> Any:
    answer = node_request(node.url, SECRET, 1, method, path, body)
    assert answer.status_code < 300, answer.content
    return msgpack.unpackb(answer.content)


def high_watermark(node: NodeProcess, topic: str) -> int:
    return as_node(node, "GET", f"/v1/topics/{topic}/partitions/0/offsets")["high_watermark"]


def call(node: NodeProcess, api_key: int, version: int, **fields: Any) -> Any:
    host, port = node.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(request_bytes(api_key, version, 1, **fields))
        _, answer = read_response(read_frame_blocking(sock), api_key, version)
    return answer


def errors(topics: Any, partitions: str) -> dict[tuple[str, int], str]:
    return {(t.name, p.partition_index if hasattr(p, "partition_index") else p.index): p.error_code.name
            for t in topics for p in getattr(t, partitions)}


def batch() -> bytes:
    """A Kafka v2 batch of one record."""
    return kafka_batch.build_batch([(b"k", b"v", (), int(time.time() * 1000))])


def test_produce_refuses_the_topic_it_may_not_write_and_appends_the_other(node: NodeProcess) -> None:
    before = high_watermark(node, "open")
    answer = call(node, PRODUCE, 9, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
                  topic_data=[{"name": t, "partition_data": [{"index": 0, "records": batch()}]}
                              for t in ("open", "closed")])
    assert errors(answer.responses, "partition_responses") == {
        ("open", 0): "none", ("closed", 0): "topic_authorization_failed"}
    assert (high_watermark(node, "open"), high_watermark(node, "closed")) == (before + 1, 0)


def test_http_produce_answers_the_refused_topic_per_partition(node: NodeProcess) -> None:
    """The same service answers /v1/produce: a 200 with the refused topic's partition in error,
    the other appended (it was a 403 for the whole request, nothing appended)."""
    import requests
    before = high_watermark(node, "open")
    records = build_batch([(b"k", b"v", (), int(time.time() * 1000))])  # the HTTP API's batch format
    body = {"acks": -1, "partitions": [{"topic": t, "partition": 0, "records": records} for t in ("open", "closed")]}
    answer = requests.post(f"{node.url}/v1/produce", data=msgpack.packb(body), timeout=60,
                           headers={"Content-Type": "application/msgpack", "Accept": "application/msgpack"})
    assert answer.status_code == 200, answer.content
    codes = {p["topic"]: p.get("error_code") for p in msgpack.unpackb(answer.content)["partitions"]}
    assert codes == {"open": None, "closed": "TOPIC_AUTHORIZATION_FAILED"}
    assert (high_watermark(node, "open"), high_watermark(node, "closed")) == (before + 1, 0)


def test_offset_commit_and_fetch_answer_the_refused_topic_per_partition(node: NodeProcess) -> None:
    committed = call(node, OFFSET_COMMIT, 8, group_id="g", generation_id_or_member_epoch=-1, member_id="",
                     group_instance_id=None, topics=[{"name": t, "partitions": [
                         {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                          "committed_metadata": ""}]} for t in ("open", "closed")])
    assert errors(committed.topics, "partitions") == {("open", 0): "none", ("closed", 0): "topic_authorization_failed"}

    fetched = call(node, OFFSET_FETCH, 7, group_id="g", require_stable=False,
                   topics=[{"name": t, "partition_indexes": [0]} for t in ("open", "closed")])
    assert fetched.error_code.name == "none"
    assert {(t.name, p.committed_offset, p.error_code.name) for t in fetched.topics for p in t.partitions} == {
        ("open", 1, "none"), ("closed", -1, "topic_authorization_failed")}
    everything = call(node, OFFSET_FETCH, 7, group_id="g", require_stable=False, topics=None)
    assert [t.name for t in everything.topics] == ["open"]  # a fetch of all offsets leaves "closed" out

    groups = call(node, OFFSET_FETCH, 8, require_stable=False, groups=[
        {"group_id": g, "topics": [{"name": "open", "partition_indexes": [0]}]} for g in ("g", "forbidden")])
    assert {g.group_id: g.error_code.name for g in groups.groups} == {"g": "none", "forbidden": "group_authorization_failed"}
