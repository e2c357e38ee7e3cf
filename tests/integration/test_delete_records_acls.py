"""DeleteRecords needs Delete on the topic (Kafka's authorization of DeleteRecords), on a real node
with the StandardAuthorizer: refused with 403 TOPIC_AUTHORIZATION_FAILED and nothing moves, then
allowed once the principal has Delete. The node and helpers are test_acls_e2e.py's."""

from __future__ import annotations

import requests

from test_acls_e2e import acl, as_node, create_as_node, node, refused  # noqa: F401 (node: the fixture)

BODY = {"partitions": [{"topic": "ledger", "partition": 0, "offset": 1}]}


def log_start(node) -> int:  # noqa: F811
    return as_node(node, "GET", "/v1/topics/ledger/partitions/0/offsets")["log_start_offset"]


def test_delete_records_needs_delete_on_the_topic(node) -> None:  # noqa: F811
    as_node(node, "POST", "/v1/topics", {"name": "ledger"})
    as_node(node, "POST", "/v1/topics/ledger/records", {"records": [{"value": "a"}, {"value": "b"}]})
    create_as_node(node, [acl("TOPIC", "ledger", "WRITE")])  # Write (and so Describe) is not Delete
    answer = requests.post(f"{node.url}/v1/delete-records", json=BODY, timeout=30)
    assert refused(answer, "TOPIC_AUTHORIZATION_FAILED"), answer.text
    assert log_start(node) == 0
    create_as_node(node, [acl("TOPIC", "ledger", "DELETE")])
    answer = requests.post(f"{node.url}/v1/delete-records", json=BODY, timeout=30)
    assert answer.status_code == 200 and answer.json()["partitions"][0]["low_watermark"] == 1, answer.text
    assert log_start(node) == 1
