"""ACLs on a real node with Kafka's StandardAuthorizer (plaintext listener: every client is
User:ANONYMOUS, so the ACLs below are about that principal; the cluster's own signed requests set
up what the principal may not do itself): a produce without Write is refused with 403
TOPIC_AUTHORIZATION_FAILED and writes nothing, with Write it works; prefixed ACLs and deny over
allow; metadata and topic listings show only what the principal may describe; groups need Read, and a
regex subscription resolves to the topics the member may Describe; `kraft acls` adds, lists and
removes as kafka-acls prints."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import msgpack
import pytest
import requests

from kraft.api.client import KraftError, Producer
from harness import NodeProcess, start_node, wait_for
from security_support import node_request

SECRET = "acl-test-cluster-secret"
KRAFT = [sys.executable, "-c", "from kraft.api.cli import main; main()"]
ME = "User:ANONYMOUS"


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = start_node(tmp_path_factory.mktemp("acls"), **{
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "controller.quorum.secret": SECRET,
    })
    # bootstrap as the cluster itself: the principal may manage ACLs (Alter/Describe on the cluster)
    for op in ("ALTER", "DESCRIBE"):
        create_as_node(n, [acl("CLUSTER", "kafka-cluster", op)])
    yield n
    n.stop()


def acl(rtype: str, name: str, op: str, perm: str = "ALLOW", pattern: str = "LITERAL",
        principal: str = ME) -> dict[str, str]:
    return {"resource_type": rtype, "resource_name": name, "pattern_type": pattern, "principal": principal,
            "host": "*", "operation": op, "permission_type": perm}


def as_node(node: NodeProcess, method: str, path: str, body: Any = None) -> Any:
    answer = node_request(node.url, SECRET, 1, method, path, body)
    assert answer.status_code < 300, answer.content
    return msgpack.unpackb(answer.content)


def create_as_node(node: NodeProcess, acls: list[dict[str, str]]) -> None:
    as_node(node, "POST", "/v1/acls", {"acls": acls})


def high_watermark(node: NodeProcess, topic: str) -> int:
    return as_node(node, "GET", f"/v1/topics/{topic}/partitions/0/offsets")["high_watermark"]


def produce(node: NodeProcess, topic: str) -> requests.Response:
    return requests.post(f"{node.url}/v1/topics/{topic}/records", json={"records": [{"value": "v"}]}, timeout=30)


def refused(answer: requests.Response, code: str) -> bool:
    return answer.status_code == 403 and answer.json()["error_code"] == code


def kraft(node: NodeProcess, *args: str) -> str:
    proc = subprocess.run(KRAFT + ["acls", "--bootstrap-server", node.bootstrap, *args], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc.stdout


def test_produce_needs_write_and_writes_nothing_without_it(node):
    as_node(node, "POST", "/v1/topics", {"name": "orders"})
    answer = produce(node, "orders")
    assert refused(answer, "TOPIC_AUTHORIZATION_FAILED"), answer.text
    with Producer(node.bootstrap, retries=0) as producer:  # the client's batch route: refused, not retried
        with pytest.raises(KraftError) as e:
            producer.send("orders", value=b"v", partition=0).result(timeout=30)
    assert e.value.error_code == "TOPIC_AUTHORIZATION_FAILED"
    assert high_watermark(node, "orders") == 0
    kraft(node, "--add", "--allow-principal", ME, "--operation", "Write", "--topic", "orders")
    answer = produce(node, "orders")
    assert answer.status_code == 200, answer.text
    assert high_watermark(node, "orders") == 1
    # Write implies Describe, not Read
    offsets = requests.get(f"{node.url}/v1/topics/orders/partitions/0/offsets", timeout=10)
    assert offsets.status_code == 200, offsets.text
    read = requests.get(f"{node.url}/v1/topics/orders/partitions/0/records?offset=0", timeout=10)
    assert refused(read, "TOPIC_AUTHORIZATION_FAILED")


def test_prefixed_acls_and_deny_over_allow(node):
    kraft(node, "--add", "--allow-principal", ME, "--operation", "All", "--topic", "team-",
          "--resource-pattern-type", "prefixed")
    kraft(node, "--add", "--deny-principal", ME, "--operation", "Write", "--topic", "team-secret")
    for topic in ("team-a", "team-secret"):  # All on the prefix includes Create
        created = requests.post(f"{node.url}/v1/topics", json={"name": topic}, timeout=30)
        assert created.status_code == 201, created.text
    assert produce(node, "team-a").status_code == 200
    assert refused(produce(node, "team-secret"), "TOPIC_AUTHORIZATION_FAILED")
    assert high_watermark(node, "team-secret") == 0
    read = requests.get(f"{node.url}/v1/topics/team-secret/partitions/0/records?offset=0", timeout=10)
    assert read.status_code == 200, read.text  # the deny is of Write only
    created = requests.post(f"{node.url}/v1/topics", json={"name": "other"}, timeout=30)
    assert refused(created, "TOPIC_AUTHORIZATION_FAILED")


def test_metadata_lists_only_topics_the_principal_may_describe(node):
    as_node(node, "POST", "/v1/topics", {"name": "hidden"})
    as_node(node, "POST", "/v1/topics", {"name": "team-b"})
    listed = {t["name"] for t in requests.get(f"{node.url}/v1/metadata", timeout=10).json()["topics"]}
    assert "team-b" in listed and "hidden" not in listed
    assert "hidden" not in {t["name"] for t in requests.get(f"{node.url}/v1/topics", timeout=10).json()["topics"]}
    named = requests.get(f"{node.url}/v1/metadata?topics=hidden,team-b", timeout=10).json()
    assert [t["name"] for t in named["topics"]] == ["team-b"]
    assert [(e["name"], e["error_code"]) for e in named["topic_errors"]] == [("hidden", "TOPIC_AUTHORIZATION_FAILED")]
    assert refused(requests.get(f"{node.url}/v1/topics/hidden", timeout=10), "TOPIC_AUTHORIZATION_FAILED")


def test_groups_need_read_on_the_group(node):
    body = {"offsets": [{"topic": "team-a", "partition": 0, "offset": 1}]}
    answer = requests.post(f"{node.url}/v1/groups/g1/offsets", json=body, timeout=30)
    assert refused(answer, "GROUP_AUTHORIZATION_FAILED"), answer.text
    kraft(node, "--add", "--allow-principal", ME, "--operation", "Read", "--group", "g1")
    answer = requests.post(f"{node.url}/v1/groups/g1/offsets", json=body, timeout=30)
    assert answer.status_code == 200, answer.text


def test_a_regex_subscription_resolves_to_the_topics_the_member_may_describe(node):
    """Issue 21: a heartbeat with subscribed_topic_regex ".*" was assigned partitions of topics the
    member may not Describe; Kafka's coordinator keeps only those it may. A literal subscription
    naming such a topic is refused with TOPIC_AUTHORIZATION_FAILED, as Kafka's heartbeat answers."""
    for topic in ("ledger", "payroll"):
        as_node(node, "POST", "/v1/topics", {"name": topic, "partitions": 2})
    create_as_node(node, [acl("GROUP", "regex-readers", "READ"), acl("TOPIC", "ledger", "DESCRIBE")])
    url = f"{node.url}/v1/groups/regex-readers/heartbeat"
    joined = requests.post(url, json={"member_epoch": 0, "subscribed_topic_regex": ".*"}, timeout=30)
    assert joined.status_code == 200, joined.text
    assigned = {a["topic"]: a["partitions"] for a in joined.json()["assignment"]}
    assert assigned.get("ledger") == [0, 1]
    assert "payroll" not in assigned and "hidden" not in assigned
    denied = requests.post(url, json={"member_epoch": 0, "subscribed_topics": ["ledger", "payroll"]}, timeout=30)
    assert refused(denied, "TOPIC_AUTHORIZATION_FAILED"), denied.text
    assert "payroll" in denied.json()["message"] and "ledger" not in denied.json()["message"]
    # Describe granted later: a heartbeat once the broker has the ACL resolves the regex again
    create_as_node(node, [acl("TOPIC", "payroll", "DESCRIBE")])
    member = joined.json()

    def heartbeat() -> bool:
        answer = requests.post(url, json={"member_id": member["member_id"], "member_epoch": member["member_epoch"],
                                          "owned_partitions": member["assignment"]}, timeout=30)
        assert answer.status_code == 200, answer.text
        member.update(answer.json())
        return "payroll" in {a["topic"] for a in member["assignment"]}

    wait_for(heartbeat, what="payroll assigned once it may be described")


def test_kraft_acls_lists_and_removes_as_kafka_acls_prints(node):
    out = kraft(node, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders",
                "--group", "g2")
    assert out == (
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n\n"
        "Adding ACLs for resource `ResourcePattern(resourceType=GROUP, name=g2, patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n\n")
    again = kraft(node, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders")
    assert again == ("Acl (pattern=ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL), "
                     "entry=(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)) already exists.\n")
    assert kraft(node, "--list", "--topic", "orders") == (
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:\n"
        "\t(principal=User:ANONYMOUS, host=*, operation=WRITE, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n\n")
    assert kraft(node, "--list", "--principal", "User:alice") == (
        "ACLs for principal `User:alice`\n"
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:\n"
        "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n\n"
        "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=g2, patternType=LITERAL)`:\n"
        "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n\n")
    assert kraft(node, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read",
                 "--topic", "orders", "--group", "g2") == ""
    assert kraft(node, "--list", "--principal", "User:alice") == "ACLs for principal `User:alice`\n"
    assert "User:ANONYMOUS" in kraft(node, "--list", "--topic", "orders")
