"""The group APIs besides the classic protocol's, on the wire of a real node from raw sockets with
kio's types: OffsetCommit (with the classic generation) and OffsetFetch (one group, and v8's
batch), read back over HTTP too; ListGroups with the state and type filters; DescribeGroups of a
classic group (its members' own bytes) and of a KIP-848 group (their subscriptions and
assignments in the consumer protocol); OffsetDelete refused for a subscribed topic; DeleteGroups
per group; ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848, topics by id)."""

from __future__ import annotations

import asyncio
import datetime
import uuid

import pytest
import requests
from kio.schema.errors import ErrorCode

from harness import shutdown_all, start_node
from kafka_wire import Connection
from kraft.api.client import Admin
from kraft.broker.groups.consumer_protocol import assigned_partitions, encode_assignment, encode_subscription

JOIN_GROUP, SYNC_GROUP, LEAVE_GROUP = 11, 14, 13
OFFSET_COMMIT, OFFSET_FETCH, LIST_GROUPS, DESCRIBE_GROUPS, DELETE_GROUPS, OFFSET_DELETE = 8, 9, 16, 15, 42, 47
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = start_node(tmp_path_factory.mktemp("kafka-group-apis"), group_initial_rebalance_delay_ms=100,
                   offsets_topic_num_partitions=1)
    yield n
    shutdown_all([n])


def topic_and_group(node, topic_prefix: str, group_prefix: str, partitions: int) -> tuple[str, str]:
    """A new topic of `partitions` (RF 1) and a new group's name."""
    topic, group = f"{topic_prefix}-{uuid.uuid4().hex[:6]}", f"{group_prefix}-{uuid.uuid4().hex[:6]}"
    with Admin(node.bootstrap) as admin:
        admin.create_topic(topic, partitions, 1)
    return topic, group


async def classic_member(conn: Connection, group: str, topic: str) -> tuple[str, bytes, bytes]:
    """A one-member classic group, Stable: (member id, its metadata, its assignment)."""
    metadata = encode_subscription((topic,))
    fields = dict(group_id=group, session_timeout=30_000, rebalance_timeout=30_000, group_instance_id=None,
                  protocol_type="consumer", protocols=[{"name": "range", "metadata": metadata}])
    required = await conn.call(JOIN_GROUP, 5, member_id="", **fields)
    joined = await conn.call(JOIN_GROUP, 5, member_id=required.member_id, **fields)
    assert joined.error_code == ErrorCode.none and joined.leader == joined.member_id
    assignment = encode_assignment({(topic, 0), (topic, 1)})
    synced = await conn.call(SYNC_GROUP, 3, group_id=group, generation_id=joined.generation_id,
                             member_id=joined.member_id, group_instance_id=None,
                             assignments=[{"member_id": joined.member_id, "assignment": assignment}])
    assert synced.error_code == ErrorCode.none
    return joined.member_id, metadata, assignment


async def commit(conn: Connection, group: str, member_id: str, generation: int, offsets: dict[int, int], topic: str):
    answer = await conn.call(OFFSET_COMMIT, 8, group_id=group, generation_id_or_member_epoch=generation,
                             member_id=member_id, group_instance_id=None, topics=[{"name": topic, "partitions": [
                                 {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                                  "committed_metadata": "m"} for p, o in offsets.items()]}])
    return {(t.name, p.partition_index): p.error_code for t in answer.topics for p in t.partitions}


def test_offsets_list_describe_delete_of_a_classic_group(node) -> None:
    topic, group = topic_and_group(node, "ga", "classic", 2)

    async def scenario() -> None:
        conn = await Connection.open(node.bootstrap)
        try:
            member_id, metadata, assignment = await classic_member(conn, group, topic)
            assert await commit(conn, group, member_id, 1, {0: 5, 1: 7}, topic) == \
                {(topic, 0): ErrorCode.none, (topic, 1): ErrorCode.none}
            assert set((await commit(conn, group, member_id, 0, {0: 6}, topic)).values()) == \
                {ErrorCode.illegal_generation}

            fetched = await conn.call(OFFSET_FETCH, 7, group_id=group, topics=None, require_stable=False)
            assert fetched.error_code == ErrorCode.none
            assert {(t.name, p.partition_index): p.committed_offset for t in fetched.topics for p in t.partitions} \
                == {(topic, 0): 5, (topic, 1): 7}
            batch = await conn.call(OFFSET_FETCH, 8, require_stable=False, groups=[
                {"group_id": group, "topics": None},
                {"group_id": "never-was", "topics": [{"name": topic, "partition_indexes": [0]}]}])
            answered = {g.group_id: {(t.name, p.partition_index): p.committed_offset for t in g.topics
                                     for p in t.partitions} for g in batch.groups}
            assert answered == {group: {(topic, 0): 5, (topic, 1): 7}, "never-was": {(topic, 0): -1}}
            http = requests.get(f"{node.url}/v1/groups/{group}/offsets", timeout=10).json()["offsets"]
            assert {(o["topic"], o["partition"]): o["offset"] for o in http} == {(topic, 0): 5, (topic, 1): 7}

            listed = await conn.call(LIST_GROUPS, 5, states_filter=(), types_filter=("classic",))
            assert [(g.group_id, g.group_state, g.group_type, g.protocol_type) for g in listed.groups
                    if g.group_id == group] == [(group, "Stable", "classic", "consumer")]
            empty_only = await conn.call(LIST_GROUPS, 4, states_filter=("Empty",))
            assert group not in {g.group_id for g in empty_only.groups}

            described = await conn.call(DESCRIBE_GROUPS, 5, groups=(group, "never-was"),
                                        include_authorized_operations=False)
            mine, dead = described.groups
            assert (mine.error_code, mine.group_state, mine.protocol_type, mine.protocol_data) == \
                (ErrorCode.none, "Stable", "consumer", "range")
            assert [(m.member_id, m.member_metadata, m.member_assignment) for m in mine.members] == \
                [(member_id, metadata, assignment)]
            assert (dead.error_code, dead.group_state, dead.members) == (ErrorCode.none, "Dead", ())

            refused = await conn.call(OFFSET_DELETE, 0, group_id=group, topics=[
                {"name": topic, "partitions": [{"partition_index": 0}]}])
            assert [p.error_code for t in refused.topics for p in t.partitions] == \
                [ErrorCode.group_subscribed_to_topic]

            busy = await conn.call(DELETE_GROUPS, 2, groups_names=(group,))
            assert [r.error_code for r in busy.results] == [ErrorCode.non_empty_group]
            left = await conn.call(LEAVE_GROUP, 3, group_id=group,
                                   members=[{"member_id": member_id, "group_instance_id": None}])
            assert left.error_code == ErrorCode.none
            deleted = await conn.call(DELETE_GROUPS, 2, groups_names=(group, "never-was"))
            assert [(r.group_id, r.error_code) for r in deleted.results] == \
                [(group, ErrorCode.none), ("never-was", ErrorCode.group_id_not_found)]
            assert requests.get(f"{node.url}/v1/groups/{group}", timeout=10).status_code == 404
        finally:
            conn.close()

    asyncio.run(scenario())


def test_a_commit_to_an_unknown_topic_or_partition_is_refused_on_both_apis(node) -> None:
    """Kafka's handleOffsetCommitRequest: a partition of a topic that does not exist, or one the
    topic lacks, answers UNKNOWN_TOPIC_OR_PARTITION and is not stored; the others are committed.
    The HTTP API answers the same per offset, and a commit with nothing committed is one 404."""
    topic, group = topic_and_group(node, "gu", "unknown", 2)
    missing = f"never-{uuid.uuid4().hex[:6]}"

    async def scenario() -> None:
        conn = await Connection.open(node.bootstrap)
        try:
            answered = await commit(conn, group, "", -1, {0: 3, 1: 4, 2: 9}, topic)
            answered.update(await commit(conn, group, "", -1, {0: 1}, missing))
            assert answered == {(topic, 0): ErrorCode.none, (topic, 1): ErrorCode.none,
                                (topic, 2): ErrorCode.unknown_topic_or_partition,
                                (missing, 0): ErrorCode.unknown_topic_or_partition}
        finally:
            conn.close()

    asyncio.run(scenario())
    url = f"{node.url}/v1/groups/{group}/offsets"
    partial = requests.post(url, json={"offsets": [{"topic": topic, "partition": 0, "offset": 5, "metadata": ""},
                                                   {"topic": missing, "partition": 0, "offset": 5, "metadata": ""}]},
                            timeout=10)
    assert partial.status_code == 200, partial.text
    assert {(o["topic"], o["partition"]): o.get("error_code") for o in partial.json()["offsets"]} == \
        {(topic, 0): None, (missing, 0): "UNKNOWN_TOPIC_OR_PARTITION"}
    refused = requests.post(url, json={"offsets": [{"topic": topic, "partition": 7, "offset": 5, "metadata": ""}]},
                            timeout=10)
    assert (refused.status_code, refused.json()["error_code"]) == (404, "UNKNOWN_TOPIC_OR_PARTITION"), refused.text
    stored = requests.get(url, timeout=10).json()["offsets"]
    assert {(o["topic"], o["partition"]): o["offset"] for o in stored} == {(topic, 0): 5, (topic, 1): 4}


def test_a_commit_the_group_refuses_still_answers_unknown_partitions_their_own_error(node) -> None:
    """Kafka's handleOffsetCommitRequest checks the topics before the group: with a stale
    generation, the known partitions answer ILLEGAL_GENERATION, a partition that does not exist
    UNKNOWN_TOPIC_OR_PARTITION (it used to answer the group's error too)."""
    topic, group = topic_and_group(node, "gi", "stale", 1)

    async def scenario() -> None:
        conn = await Connection.open(node.bootstrap)
        try:
            member_id, _, _ = await classic_member(conn, group, topic)
            assert await commit(conn, group, member_id, 0, {0: 6, 5: 1}, topic) == \
                {(topic, 0): ErrorCode.illegal_generation, (topic, 5): ErrorCode.unknown_topic_or_partition}
            assert await commit(conn, group, "ghost", 1, {0: 6, 5: 1}, topic) == \
                {(topic, 0): ErrorCode.unknown_member_id, (topic, 5): ErrorCode.unknown_topic_or_partition}
        finally:
            conn.close()

    asyncio.run(scenario())


def test_a_kip848_group_over_the_kafka_protocol(node) -> None:
    topic, group = topic_and_group(node, "ga", "kip848", 2)
    topic_id = uuid.UUID(requests.get(f"{node.url}/v1/topics/{topic}", timeout=10).json()["topic_id"])

    async def scenario() -> None:
        conn = await Connection.open(node.bootstrap)
        try:
            joined = await conn.call(CONSUMER_GROUP_HEARTBEAT, 0, group_id=group, member_id="", member_epoch=0,
                                     instance_id=None, rack_id=None, rebalance_timeout=30_000,
                                     subscribed_topic_names=[topic], server_assignor=None, topic_partitions=[])
            assert joined.error_code == ErrorCode.none and joined.member_id and joined.member_epoch > 0
            assert joined.heartbeat_interval > datetime.timedelta(0)
            assert [(tp.topic_id, tuple(tp.partitions)) for tp in joined.assignment.topic_partitions] == \
                [(topic_id, (0, 1))]

            described = await conn.call(CONSUMER_GROUP_DESCRIBE, 0, group_ids=(group,),
                                        include_authorized_operations=False)
            [g] = described.groups
            assert (g.error_code, g.group_state, g.assignor_name) == (ErrorCode.none, "Stable", "uniform")
            [m] = g.members
            assert (m.member_id, m.subscribed_topic_names) == (joined.member_id, (topic,))
            assert [(tp.topic_name, tuple(tp.partitions)) for tp in m.assignment.topic_partitions] == [(topic, (0, 1))]

            classic_view = await conn.call(DESCRIBE_GROUPS, 5, groups=(group,), include_authorized_operations=False)
            [d] = classic_view.groups
            assert (d.group_state, d.protocol_type) == ("Stable", "consumer")
            assert assigned_partitions(d.members[0].member_assignment) == {(topic, 0), (topic, 1)}

            mixed = await conn.call(JOIN_GROUP, 5, group_id=group, session_timeout=30_000, rebalance_timeout=30_000,
                                    member_id="", group_instance_id=None, protocol_type="consumer",
                                    protocols=[{"name": "range", "metadata": b""}])
            assert mixed.error_code == ErrorCode.inconsistent_group_protocol
        finally:
            conn.close()

    asyncio.run(scenario())


def test_the_python_consumer_raises_an_offset_the_coordinator_refused(node) -> None:
    """kraft's consumer committing offsets of a partition that does not exist beside one that
    does: the one is committed, the other raised to the application with its partition, as
    kafka-python's commit raises a partition's error (the 200 answer's per-offset error used to
    be ignored)."""
    from kraft.api.client import Consumer, TopicPartition
    from kraft.api.errors import KraftError

    topic, group = topic_and_group(node, "gc", "client", 1)
    consumer = Consumer(bootstrap_servers=node.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        with pytest.raises(KraftError) as refused:
            consumer.commit({TopicPartition(topic, 0): 3, TopicPartition(topic, 5): 4})
        assert refused.value.error_code == "UNKNOWN_TOPIC_OR_PARTITION"
        assert refused.value.extra["partitions"] == [f"{topic}-5"]
        assert consumer.committed(TopicPartition(topic, 0)) == 3
    finally:
        consumer.close()
