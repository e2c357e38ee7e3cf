"""The classic group protocol on the wire of a real node, from raw sockets with kio's types:
JoinGroup v5 answers MEMBER_ID_REQUIRED, then the joins wait for the delayed first rebalance and
are answered together (the leader with both members' metadata); a follower's SyncGroup waits for
the leader's; Heartbeat, a LeaveGroup v3 batch, REBALANCE_IN_PROGRESS for the member left, and
its rejoin completing the next generation at once. JoinGroup v9 and SyncGroup v5 (flexible
versions) carry the protocol type and name."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
import requests
from kio.schema.errors import ErrorCode

from harness import shutdown_all, start_node
from kafka_wire import Connection

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
DELAY_MS = 500


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = start_node(tmp_path_factory.mktemp("kafka-classic"), group_initial_rebalance_delay_ms=DELAY_MS,
                   offsets_topic_num_partitions=1)
    yield n
    shutdown_all([n])


def join_fields(group: str, member_id: str, metadata: bytes) -> dict[str, Any]:
    return dict(group_id=group, session_timeout=10_000, rebalance_timeout=20_000, member_id=member_id,
                group_instance_id=None, protocol_type="consumer", protocols=[{"name": "range", "metadata": metadata}],
                reason=None)


async def join(conn: Connection, group: str, member_id: str, metadata: bytes, version: int = 5) -> Any:
    return await conn.call(JOIN_GROUP, version, **join_fields(group, member_id, metadata))


async def sync(conn: Connection, group: str, member_id: str, generation: int,
               assignments: dict[str, bytes], version: int = 3) -> Any:
    return await conn.call(SYNC_GROUP, version, group_id=group, generation_id=generation, member_id=member_id,
                           group_instance_id=None, protocol_type="consumer", protocol_name="range",
                           assignments=[{"member_id": m, "assignment": a} for m, a in assignments.items()])


async def new_member(conn: Connection, group: str, version: int = 5) -> str:
    answer = await join(conn, group, "", b"", version)
    assert answer.error_code == ErrorCode.member_id_required and answer.member_id
    return answer.member_id


def test_two_members_join_sync_heartbeat_and_leave(node) -> None:
    group = f"wire-{uuid.uuid4().hex[:6]}"

    async def scenario() -> None:
        a, b = await Connection.open(node.bootstrap), await Connection.open(node.bootstrap)
        try:
            id_a, id_b = await new_member(a, group), await new_member(b, group)
            leader, follower = await asyncio.gather(join(a, group, id_a, b"meta-a"), join(b, group, id_b, b"meta-b"))
            assert leader.error_code == follower.error_code == ErrorCode.none
            assert leader.generation_id == follower.generation_id == 1 and leader.leader == follower.leader == id_a
            assert leader.protocol_name == "range"
            assert {(m.member_id, m.metadata) for m in leader.members} == {(id_a, b"meta-a"), (id_b, b"meta-b")}
            assert follower.members == ()

            waiting = asyncio.create_task(sync(b, group, id_b, 1, {}))
            await asyncio.sleep(0.2)  # a window: the follower's SyncGroup must still be waiting
            assert not waiting.done()  # the follower waits for the leader's assignment
            mine = await sync(a, group, id_a, 1, {id_a: b"assign-a", id_b: b"assign-b"})
            assert (mine.error_code, mine.assignment) == (ErrorCode.none, b"assign-a")
            theirs = await waiting
            assert (theirs.error_code, theirs.assignment) == (ErrorCode.none, b"assign-b")

            beat = await b.call(HEARTBEAT, 3, group_id=group, generation_id=1, member_id=id_b, group_instance_id=None)
            assert beat.error_code == ErrorCode.none
            listed = requests.get(f"{node.url}/v1/groups", timeout=10).json()["groups"]
            assert [(g["state"], g["members"]) for g in listed if g["group_id"] == group] == [("Stable", 2)]

            left = await a.call(LEAVE_GROUP, 3, group_id=group, members=[
                {"member_id": id_a, "group_instance_id": None}, {"member_id": "nobody", "group_instance_id": None}])
            assert left.error_code == ErrorCode.none
            assert [(m.member_id, m.error_code) for m in left.members] == \
                [(id_a, ErrorCode.none), ("nobody", ErrorCode.unknown_member_id)]
            beat = await b.call(HEARTBEAT, 3, group_id=group, generation_id=1, member_id=id_b, group_instance_id=None)
            assert beat.error_code == ErrorCode.rebalance_in_progress
            alone = await join(b, group, id_b, b"meta-b", version=9)  # the only member: completes at once
            assert (alone.error_code, alone.generation_id, alone.leader) == (ErrorCode.none, 2, id_b)
            assert (alone.protocol_type, alone.protocol_name) == ("consumer", "range")
            synced = await sync(b, group, id_b, 2, {id_b: b"all"}, version=5)
            assert (synced.protocol_type, synced.protocol_name, synced.assignment) == ("consumer", "range", b"all")
            stale = await sync(b, group, id_b, 1, {}, version=5)
            assert stale.error_code == ErrorCode.illegal_generation
        finally:
            a.close()
            b.close()

    asyncio.run(scenario())


def test_a_join_of_another_protocol_type_is_inconsistent(node) -> None:
    group = f"wire-{uuid.uuid4().hex[:6]}"

    async def scenario() -> None:
        a, b = await Connection.open(node.bootstrap), await Connection.open(node.bootstrap)
        try:
            first = await join(a, group, "", b"x", version=3)  # before v4: joins at once, after the delay
            assert first.error_code == ErrorCode.none and first.generation_id == 1 and first.member_id
            fields = join_fields(group, "", b"y")
            fields["protocol_type"] = "connect"
            other = await b.call(JOIN_GROUP, 3, **fields)
            assert other.error_code == ErrorCode.inconsistent_group_protocol and other.generation_id == -1
        finally:
            a.close()
            b.close()

    asyncio.run(scenario())
