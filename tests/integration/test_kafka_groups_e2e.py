"""Consumer groups of real Kafka clients against a real node (issue 23's group APIs): kafka-python,
confluent-kafka and aiokafka each run a group of three consumers with a client-side assignor
(range, roundrobin, cooperative-sticky), which splits the partitions, rebalances when one leaves
and commits offsets; then the group and its lag show over HTTP and in `kraft consumer-groups`, and
the offsets committed through Kafka are read over HTTP and the reverse. A static member
(group.instance.id) restarted within its session gets its partitions back without a rebalance.
A group cannot mix protocols."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
import requests

from harness import shutdown_all, start_node, wait_for
from kafka_group_clients import GroupMember, split_evenly
from kraft.api.client import Admin, Producer

KRAFT = [sys.executable, "-c", "from kraft.api.cli import main; main()"]
PARTITIONS = 6
RECORDS = 60


DATA_PATH_APIS = {3: "Metadata", 10: "FindCoordinator", 1: "Fetch", 2: "ListOffsets"}


def served_apis(node) -> set[int]:
    import socket

    from kafka_wire import API_VERSIONS, read_frame_blocking, read_response, request_bytes

    host, port = node.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request_bytes(API_VERSIONS, 3, 1, client_software_name="kraft-test",
                                   client_software_version="1"))
        _, answer = read_response(read_frame_blocking(sock), API_VERSIONS, 3)
    return {int(k.api_key) for k in answer.api_keys}


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = start_node(tmp_path_factory.mktemp("kafka-groups"), group_initial_rebalance_delay_ms=300,
                   offsets_topic_num_partitions=3)
    try:
        missing = [name for key, name in DATA_PATH_APIS.items() if key not in served_apis(n)]
        # the consumers need them before any group API: a missing one fails, it does not skip
        assert not missing, f"the Kafka listener does not serve {', '.join(missing)}"
        yield n
    finally:
        shutdown_all([n])


def new_topic(node, records: int = RECORDS) -> str:
    topic = f"kg-{uuid.uuid4().hex[:8]}"
    with Admin(node.bootstrap) as admin:
        admin.create_topic(topic, PARTITIONS, 1)
    produce(node, topic, records)
    return topic


def produce(node, topic: str, records: int) -> None:
    with Producer(node.bootstrap, acks="all") as p:
        for i in range(records):
            p.send(topic, value=f"v{i}".encode(), partition=i % PARTITIONS)
        p.flush()


def committed(node, group: str) -> dict[tuple[str, int], int]:
    answer = requests.get(f"{node.url}/v1/groups/{group}/offsets", timeout=10).json()
    return {(o["topic"], o["partition"]): o["offset"] for o in answer.get("offsets", [])}


def kraft(node, *args: str) -> str:
    proc = subprocess.run(KRAFT + list(args[:1]) + ["--bootstrap-server", node.bootstrap] + list(args[1:]),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc.stdout


@pytest.mark.parametrize("client,assignor", [
    ("kafka-python", "range"), ("kafka-python", "cooperative-sticky"),
    ("confluent-kafka", "roundrobin"), ("confluent-kafka", "cooperative-sticky"),
    ("aiokafka", "range"),
])
def test_a_group_of_three_rebalances_when_one_leaves_and_commits(node, client: str, assignor: str) -> None:
    topic = new_topic(node)
    group = f"{client}-{assignor}-{uuid.uuid4().hex[:6]}"
    partitions = {(topic, p) for p in range(PARTITIONS)}
    ends = {tp: RECORDS // PARTITIONS for tp in partitions}
    members = [GroupMember(client, node.bootstrap, group, topic, assignor, client_id=f"c{i}").start()
               for i in range(3)]
    try:
        wait_for(lambda: split_evenly(members, partitions), 60, what=f"{client}: 6 partitions over 3 members")
        wait_for(lambda: committed(node, group) == ends, 60, what="every record read and committed")
        described = requests.get(f"{node.url}/v1/groups/{group}", timeout=10).json()
        assert (described["group_type"], described["protocol_type"], described["state"]) == \
            ("classic", "consumer", "Stable")
        assert len(described["members"]) == 3 and described["assignor"] == assignor
        owned = {(a["topic"], p) for m in described["members"] for a in m["assignment"] for p in a["partitions"]}
        assert owned == partitions  # the members' assignments as the leader computed them

        members.pop(0).stop()  # leaves the group
        wait_for(lambda: split_evenly(members, partitions), 60, what=f"{client}: 6 partitions over 2 members")
        produce(node, topic, PARTITIONS)
        wait_for(lambda: committed(node, group) == {tp: end + 1 for tp, end in ends.items()}, 60,
                 what="the new records read and committed by the two left")
        lines = kraft(node, "consumer-groups", "--describe", "--group", group).splitlines()
        rows = [line.split() for line in lines if topic in line]
        assert len(rows) == PARTITIONS and {row[5] for row in rows} == {"0"}, lines  # LAG 0 each

        # A group cannot mix protocols: a KIP-848 member is refused while the classic ones are in.
        mixed = requests.post(f"{node.url}/v1/groups/{group}/heartbeat", timeout=10, json={
            "member_id": "", "member_epoch": 0, "subscribed_topics": [topic], "rebalance_timeout_ms": 5000})
        assert mixed.status_code == 409 and mixed.json()["error_code"] == "INCONSISTENT_GROUP_PROTOCOL"
    finally:
        for m in members:
            m.stop()


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
def test_offsets_committed_over_http_are_where_a_kafka_consumer_starts(node, client: str) -> None:
    topic = new_topic(node)
    group = f"http-{client}-{uuid.uuid4().hex[:6]}"
    start = {(topic, p): 7 for p in range(PARTITIONS)}
    answer = requests.post(f"{node.url}/v1/groups/{group}/offsets", timeout=10, json={
        "member_id": "", "member_epoch": -1,
        "offsets": [{"topic": t, "partition": p, "offset": o, "metadata": ""} for (t, p), o in start.items()]})
    assert answer.status_code == 200, answer.text
    member = GroupMember(client, node.bootstrap, group, topic, "range").start()
    try:
        wait_for(lambda: member.records == RECORDS - 7 * PARTITIONS, 60, what="the records after the offsets")
        assert min(member.read.values()) == RECORDS // PARTITIONS
    finally:
        member.stop()


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_a_static_member_restarted_within_its_session_keeps_its_partitions(node, client: str) -> None:
    topic = new_topic(node)
    group = f"static-{client}-{uuid.uuid4().hex[:6]}"
    partitions = {(topic, p) for p in range(PARTITIONS)}
    members = [GroupMember(client, node.bootstrap, group, topic, "range", instance_id=f"instance-{i}").start()
               for i in range(3)]
    try:
        wait_for(lambda: split_evenly(members, partitions), 60, what="6 partitions over 3 static members")
        before = requests.get(f"{node.url}/v1/groups/{group}", timeout=10).json()
        owned_before = [m.assigned for m in members]
        members[1].stop()  # a static member does not leave: its session keeps its place
        members[1] = GroupMember(client, node.bootstrap, group, topic, "range", instance_id="instance-1").start()
        wait_for(lambda: members[1].assigned == owned_before[1], 60, what="the restarted member's partitions")
        after = requests.get(f"{node.url}/v1/groups/{group}", timeout=10).json()
        assert after["group_epoch"] == before["group_epoch"]  # the same generation: no rebalance
        assert [m.assigned for m in members] == owned_before
        old_ids = {m["member_id"] for m in before["members"]}
        new_ids = {m["member_id"] for m in after["members"]}
        assert len(old_ids - new_ids) == 1 and len(new_ids - old_ids) == 1  # a new member id, the same place
    finally:
        for m in members:
            m.stop()
