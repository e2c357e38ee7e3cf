"""The node's own names are not the clients' (issue: one produce to `__cluster_metadata` erased a
single node's metadata log, whose directory `__cluster_metadata-0` a partition 0 of that topic
shared): a client cannot create, produce to or delete reserved and internal topics, and the
metadata survives a restart after such attempts."""

from __future__ import annotations

import requests

from harness import start_node


def _records(node, topic: str) -> list[str]:
    body = requests.get(f"{node.url}/v1/topics/{topic}/partitions/0/records",
                        params={"offset": "earliest"}, timeout=10).json()
    return [r["value"] for r in body["records"]]


def test_produce_to_cluster_metadata_cannot_touch_the_metadata_log(tmp_path) -> None:
    node = start_node(tmp_path)
    try:
        assert requests.post(f"{node.url}/v1/topics", json={"name": "important"}, timeout=10).status_code == 201
        r = requests.post(f"{node.url}/v1/topics/important/records?acks=1",
                          json={"records": [{"value": "kept"}]}, timeout=10)
        assert r.status_code == 200, r.text

        # The one request: auto-create made it a topic sharing the metadata log's files.
        r = requests.post(f"{node.url}/v1/topics/__cluster_metadata/records?acks=1",
                          json={"records": [{"value": "x"}]}, timeout=10)
        assert (r.status_code, r.json()["error_code"]) == (400, "INVALID_REQUEST"), r.text
        r = requests.post(f"{node.url}/v1/topics", json={"name": "__cluster_metadata"}, timeout=10)
        assert (r.status_code, r.json()["error_code"]) == (400, "INVALID_REQUEST"), r.text

        assert node.stop() == 0  # SIGTERM, as in the issue
        node.start()
        topics = [t["name"] for t in requests.get(f"{node.url}/v1/topics", timeout=10).json()["topics"]]
        assert topics == ["important"]
        assert _records(node, "important") == ["kept"]
    finally:
        node.stop()


def test_internal_topics_are_the_nodes_own(node) -> None:
    # A group lookup makes the node create __consumer_offsets itself.
    r = requests.get(f"{node.url}/v1/groups/reserved-names-probe/coordinator", timeout=30)
    assert r.status_code == 200, r.text
    listed = {t["name"]: t["internal"] for t in requests.get(f"{node.url}/v1/topics", timeout=10).json()["topics"]}
    assert listed["__consumer_offsets"] is True
    before = requests.get(f"{node.url}/v1/topics/__consumer_offsets", timeout=10).json()

    def refused(resp: requests.Response, code: str) -> None:
        assert (resp.status_code, resp.json()["error_code"]) == (400, code), resp.text

    refused(requests.post(f"{node.url}/v1/topics/__consumer_offsets/records",
                          json={"records": [{"value": "x"}]}, timeout=10), "INVALID_TOPIC_EXCEPTION")
    refused(requests.post(f"{node.url}/v1/topics/__transaction_state/records",
                          json={"records": [{"value": "x"}]}, timeout=10), "INVALID_TOPIC_EXCEPTION")
    refused(requests.post(f"{node.url}/v1/topics", json={"name": "__transaction_state"}, timeout=10),
            "INVALID_REQUEST")
    refused(requests.delete(f"{node.url}/v1/topics/__consumer_offsets", timeout=10), "INVALID_REQUEST")
    refused(requests.post(f"{node.url}/v1/topics/__consumer_offsets/partitions", json={"count": 99},
                          timeout=10), "INVALID_REQUEST")

    after = requests.get(f"{node.url}/v1/topics/__consumer_offsets", timeout=10).json()
    assert after == before
    names = [t["name"] for t in requests.get(f"{node.url}/v1/topics", timeout=10).json()["topics"]]
    assert "__transaction_state" not in names and "__cluster_metadata" not in names
    # Clients may still read internal topics, as in Kafka.
    r = requests.get(f"{node.url}/v1/topics/__consumer_offsets/partitions/0/records",
                     params={"offset": "earliest"}, timeout=10)
    assert r.status_code == 200, r.text
