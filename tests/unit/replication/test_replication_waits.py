"""Where an acks=all acknowledgement waits, counted rather than timed (issue 25): a parked follower
fetch is answered by the append itself (Kafka's DelayedFetch), even when the append lands while
the fetch waits for another partition's lock; a produce waiting on acks=all is woken by the high
watermark advance that covers it and by no other; fetches serve the stored batches byte for
byte; the stage trace follows a record through leader and followers in order; followers fetch
over one persistent channel each.

The leader is a real ReplicaManager; with `running=(1,)` the test plays the followers by calling
its `replica_fetch` as their fetchers would. The `asyncio.wait_for` bounds only keep a broken
build from hanging: every fetch here long-polls for ten minutes, so an answer within the bound
came from a wake-up, not a timeout.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from typing import Any, Callable

import aiohttp
import msgpack
import pytest

from harness import wait_until  # tests/ is on sys.path (tests/conftest.py)
from kraft.api.client.types import TopicPartition
from kraft.api.routes.replication_channel import CHANNELS
from kraft.bench.trace import CLIENT_ACK, CLIENT_ENQUEUE, CLIENT_SEND, WAY, StageIndex
from kraft.broker.stage_trace import StageTrace
from kraft.log.batch import build_batch
from kraft.metadata.records import Partition
from kraft.server.records import FetchEntry, ProduceEntry
from tests.unit.replication.replication_cluster import TOPIC, TOPIC_ID, Cluster, batch_of, values_of

PARKED_MS = 600_000  # a long poll that only a wake-up can end within the test's bound
HANG_GUARD_S = 30


class Calls:
    """Counts the calls of one method of an object; the method itself runs as before."""

    def __init__(self, obj: Any, name: str) -> None:
        self.args: list[tuple[Any, ...]] = []
        original = getattr(obj, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.args.append(args)
            return original(*args, **kwargs)

        setattr(obj, name, counted)

    @property
    def count(self) -> int:
        return len(self.args)


async def until(condition: Callable[[], Any], what: str) -> None:
    await wait_until(condition, HANG_GUARD_S, interval=0.001, what=what)


def follower_entry(offset: int, partition: int = 0, high_watermark: int = 0) -> FetchEntry:
    """A follower's fetch that has nothing to learn yet (its high watermark and log start are the
    leader's), so the leader parks it."""
    return FetchEntry(TOPIC, partition, offset, 1 << 20, current_leader_epoch=0,
                             last_fetched_epoch=0 if offset else -1, high_watermark=high_watermark,
                             log_start_offset=0)


@pytest.fixture
async def c(tmp_path: Path) -> Any:
    """The three brokers, each replicating from the others."""
    cluster = Cluster(tmp_path)
    await cluster.start()
    yield cluster
    await cluster.close()


@pytest.fixture
async def leader_only(tmp_path: Path) -> Any:
    c = Cluster(tmp_path, lag_ms=PARKED_MS)  # no ISR shrink while the test plays the followers
    await c.start(running=(1,))
    yield c
    await c.close()


async def reported(leader: Any, follower: int, *partitions: int) -> None:
    """The follower's first fetch (max_wait_ms 0): the leader learns its position and log start,
    which would otherwise wake the next fetch once."""
    await leader.replica_fetch(follower, 100 + follower, [follower_entry(0, p) for p in partitions or (0,)],
                               0, 1, 1 << 20)


async def test_a_parked_follower_fetch_is_answered_by_the_append(leader_only: Cluster) -> None:
    leader = leader_only.nodes[1]
    await reported(leader, 2)
    reads = Calls(leader, "_read_for_follower")
    fetch = asyncio.ensure_future(leader.replica_fetch(2, 102, [follower_entry(0)], PARKED_MS, 1, 1 << 20))
    await until(lambda: reads.count == 1, "the fetch's first pass")
    assert not fetch.done()  # parked: nothing to read
    assert (await leader_only.produce(1, b"x", acks=1)).error_code is None
    [answer] = await asyncio.wait_for(fetch, HANG_GUARD_S)
    assert values_of(answer.records) == [b"x"]
    assert reads.count == 2  # one wake-up: the append's


async def test_an_append_while_the_fetch_waits_for_another_partitions_lock_wakes_it(
    leader_only: Cluster,
) -> None:
    """The fetch read partition 0, then waited for partition 1's lock (held by a retention or
    checkpoint pass); an append to partition 0 meanwhile must still end the long poll. Before
    the wake-up was registered ahead of the read, the fetch slept until max_wait_ms."""
    controller, leader = leader_only.controller, leader_only.nodes[1]
    controller.commit([Partition(topic_id=TOPIC_ID, partition=1, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1)])
    second = leader.replica(TOPIC, 1)
    await second.wait_ready()
    await reported(leader, 2, 0, 1)
    reads = Calls(leader, "_read_for_follower")
    await second.lock.acquire()
    try:
        fetch = asyncio.ensure_future(leader.replica_fetch(
            2, 102, [follower_entry(0), follower_entry(0, partition=1)], PARKED_MS, 1, 1 << 20))
        await until(lambda: reads.count == 1, "partition 0 read")  # now waiting for partition 1's lock
        assert (await leader_only.produce(1, b"meanwhile", acks=1)).error_code is None
    finally:
        second.lock.release()
    first, _ = await asyncio.wait_for(fetch, HANG_GUARD_S)
    assert values_of(first.records) == [b"meanwhile"]


async def test_a_parked_follower_fetch_learns_the_high_watermark_with_the_next_data(leader_only: Cluster) -> None:
    """The advance a follower's report causes does not answer the other follower's parked fetch
    (it used to: a second exchange per append with every follower, and the fetch was not parked
    when the next append came); that fetch carries the new high watermark with the next data."""
    leader = leader_only.nodes[1]
    replica = leader.replica(TOPIC, 0)
    await reported(leader, 2)
    await reported(leader, 3)
    acked = asyncio.ensure_future(leader_only.produce(1, b"a", timeout_ms=PARKED_MS))
    await until(lambda: leader_only.log(1).log_end_offset == 1, "appended")
    for follower in (2, 3):  # both fetch the record
        await leader.replica_fetch(follower, 100 + follower, [follower_entry(0)], 0, 1, 1 << 20)
    parked = asyncio.ensure_future(leader.replica_fetch(2, 102, [follower_entry(1)], PARKED_MS, 1, 1 << 20))
    await until(lambda: len(replica._append_waiters or ()) == 1, "follower 2's fetch parked")
    await leader.replica_fetch(3, 103, [follower_entry(1)], 0, 1, 1 << 20)  # follower 3 has it: HW 1
    assert leader_only.log(1).high_watermark == 1
    assert (await asyncio.wait_for(acked, HANG_GUARD_S)).base_offset == 0
    [waiting] = replica._append_waiters or ()  # follower 2's wake-up, not resolved by the advance
    assert not waiting.done() and not parked.done()
    assert (await leader_only.produce(1, b"b", acks=1)).error_code is None
    [answer] = await asyncio.wait_for(parked, HANG_GUARD_S)
    assert values_of(answer.records) == [b"b"] and answer.high_watermark == 1


async def test_acks_all_is_woken_by_the_high_watermark_that_covers_it_only(leader_only: Cluster) -> None:
    leader = leader_only.nodes[1]
    core = leader.replica(TOPIC, 0).core
    checks = Calls(core, "produce_completed")  # asked once per wake-up of a waiting produce
    first = asyncio.ensure_future(leader_only.produce(1, b"a", timeout_ms=PARKED_MS))
    second = asyncio.ensure_future(leader_only.produce(1, b"b", timeout_ms=PARKED_MS))
    await until(lambda: leader_only.log(1).log_end_offset == 2, "both appended")
    for follower in (2, 3):  # both followers have offset 0 only: the HW moves to 1
        await leader.replica_fetch(follower, 100 + follower, [follower_entry(1)], 0, 1, 1 << 20)
    assert leader_only.log(1).high_watermark == 1
    assert (await asyncio.wait_for(first, HANG_GUARD_S)).base_offset == 0
    assert not second.done()
    for follower in (2, 3):
        await leader.replica_fetch(follower, 100 + follower, [follower_entry(2, high_watermark=1)], 0, 1, 1 << 20)
    assert (await asyncio.wait_for(second, HANG_GUARD_S)).base_offset == 1
    asked_for_second = [args for args in checks.args if args[1] == 2]
    assert len(asked_for_second) == 2  # when appended, then at the advance to 2; not at 1


async def idempotent(cluster: Cluster, sequence: int, value: bytes) -> Any:
    """One idempotent producer's one-record batch at `sequence` to the leader, acks=1."""
    batch = build_batch([(None, value, [], 1_700_000_000_000)], producer_id=7, producer_epoch=0,
                        base_sequence=sequence)
    [result] = await cluster.nodes[1].produce([ProduceEntry(TOPIC, 0, batch)], 1, PARKED_MS)
    return result


async def test_requests_overtaking_their_predecessors_wait_for_them_not_refused(tmp_path: Path) -> None:
    """A producer's requests in flight travel on separate connections; two that arrive before
    their predecessor (sequences 3 and 2 before 1) wait for it and are appended in sequence
    order: none refused, so none retried."""
    cluster = Cluster(tmp_path)
    cluster.settings = dataclasses.replace(cluster.settings, sequence_wait_ms=PARKED_MS)
    await cluster.start(running=(1,))
    try:
        assert (await idempotent(cluster, 0, b"s0")).error_code is None
        replica = cluster.nodes[1].replica(TOPIC, 0)

        def waiting() -> int:  # the appends waited for (the replica is slotted: no patching)
            return len(replica._append_waiters or ())

        third = asyncio.ensure_future(idempotent(cluster, 3, b"s3"))
        await until(lambda: third.done() or waiting() == 1, "sequence 3 refused or waiting")
        second = asyncio.ensure_future(idempotent(cluster, 2, b"s2"))
        await until(lambda: second.done() or waiting() == 2, "sequence 2 refused or waiting")
        assert not third.done() and not second.done()  # both wait: neither was refused
        first = await idempotent(cluster, 1, b"s1")
        results = [first, await asyncio.wait_for(second, HANG_GUARD_S), await asyncio.wait_for(third, HANG_GUARD_S)]
        assert [(r.error_code, r.base_offset) for r in results] == [(None, 1), (None, 2), (None, 3)]
        assert values_of(cluster.raw(1, 4)) == [b"s0", b"s1", b"s2", b"s3"]
    finally:
        await cluster.close()


async def test_a_predecessor_that_never_comes_is_out_of_order_after_the_wait(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    cluster.settings = dataclasses.replace(cluster.settings, sequence_wait_ms=50)
    await cluster.start(running=(1,))
    try:
        assert (await idempotent(cluster, 0, b"s0")).error_code is None
        lost = await asyncio.wait_for(idempotent(cluster, 2, b"s2"), HANG_GUARD_S)
        assert lost.error_code == "OUT_OF_ORDER_SEQUENCE_NUMBER"
        assert not cluster.nodes[1].replica(TOPIC, 0)._append_waiters  # its wake-up is gone
        assert (await idempotent(cluster, 1, b"s1")).error_code is None  # nothing written meanwhile
        assert values_of(cluster.raw(1, 2)) == [b"s0", b"s1"]
    finally:
        await cluster.close()


async def test_the_sequence_wait_ends_with_the_requests_timeout(tmp_path: Path) -> None:
    """The wait for a predecessor counts against the produce request's timeout (one deadline for
    the request, Kafka's request timeout): with a ten-minute sequence wait, a request of 50 ms
    is refused when its own time is up, and nothing of it is written."""
    cluster = Cluster(tmp_path)
    cluster.settings = dataclasses.replace(cluster.settings, sequence_wait_ms=PARKED_MS)
    await cluster.start(running=(1,))
    try:
        assert (await idempotent(cluster, 0, b"s0")).error_code is None
        ahead = build_batch([(None, b"s2", [], 1_700_000_000_000)], producer_id=7, producer_epoch=0, base_sequence=2)
        for acks in (1, -1):
            [result] = await asyncio.wait_for(
                cluster.nodes[1].produce([ProduceEntry(TOPIC, 0, ahead)], acks, 50), HANG_GUARD_S)
            assert result.error_code == "OUT_OF_ORDER_SEQUENCE_NUMBER"
        assert not cluster.nodes[1].replica(TOPIC, 0)._append_waiters
        assert values_of(cluster.raw(1, 1)) == [b"s0"]
    finally:
        await cluster.close()


async def turns_until(done: Callable[[], bool]) -> int:
    """Turns of the event loop until `done()`: each `sleep(0)` lets everything ready run once.
    A hop through the loop waits behind whatever else is ready there, so the hot path counts
    them, not time."""
    turns = 0
    while not done():
        await asyncio.sleep(0)
        turns += 1
        assert turns < 1000, "never done"
    return turns


async def test_acks_all_and_a_parked_fetch_answer_in_the_turn_after_their_event(leader_only: Cluster) -> None:
    """The produce waiting on acks=all answers in the loop's turn after the advance that covers
    it, and the parked follower fetch in the turn after the append (the append's own task takes
    the first): no task per partition, no extra turn per wake-up (asyncio.wait_for's callback
    cost one)."""
    leader = leader_only.nodes[1]
    await reported(leader, 2)
    await reported(leader, 3)
    acked = asyncio.ensure_future(leader.produce([ProduceEntry(TOPIC, 0, batch_of(b"a"))], -1, PARKED_MS))
    await until(lambda: leader_only.log(1).log_end_offset == 1, "appended")
    for follower in (2, 3):  # max_wait_ms 0: no suspension; the second report advances the HW
        await leader.replica_fetch(follower, 100 + follower, [follower_entry(1)], 0, 1, 1 << 20)
    assert leader_only.log(1).high_watermark == 1
    assert await turns_until(acked.done) == 1
    [result] = acked.result()
    assert result.error_code is None and result.base_offset == 0
    parked = asyncio.ensure_future(leader.replica_fetch(2, 102, [follower_entry(1, high_watermark=1)],
                                                        PARKED_MS, 1, 1 << 20))
    await until(lambda: len(leader.replica(TOPIC, 0)._append_waiters or ()) == 1, "follower 2's fetch parked")
    appended = asyncio.ensure_future(leader.produce([ProduceEntry(TOPIC, 0, batch_of(b"b"))], 1, PARKED_MS))
    assert await turns_until(parked.done) == 2
    assert values_of(parked.result()[0].records) == [b"b"]
    await appended


async def test_fetches_serve_the_stored_batches_byte_for_byte(c: Cluster) -> None:
    for values in ([b"a"], [b"bb", b"ccc"], [b"d" * 5000]):
        assert (await c.produce(1, *values)).error_code is None
    end = c.log(1).high_watermark
    assert end == 4
    stored = b"".join(s.log_path.read_bytes() for s in c.log(1).segments)
    url = f"http://127.0.0.1:{c.ports[1]}/v1/fetch"
    headers = {"Content-Type": "application/msgpack", "Accept": "application/msgpack"}
    body = {"max_wait_ms": 0, "partitions": [{"topic": TOPIC, "partition": 0, "fetch_offset": 0}]}
    async with aiohttp.ClientSession() as http:
        async with http.post(url, data=msgpack.packb(body), headers=headers) as resp:
            [consumer] = msgpack.unpackb(await resp.read())["partitions"]
    assert consumer["records"] == stored
    [follower] = await c.nodes[1].replica_fetch(2, 102, [follower_entry(0)], 0, 1, 1 << 20)
    assert follower.records == stored
    await until(lambda: c.log(2).log_end_offset == end, "replicated")
    assert b"".join(s.log_path.read_bytes() for s in c.log(2).segments) == stored


async def test_stage_timestamps_follow_a_record_in_order(c: Cluster) -> None:
    traces = {b: StageTrace(10_000) for b in c.nodes}
    for b, node in c.nodes.items():
        node.trace = traces[b]
    assert (await c.produce(1, b"warm")).error_code is None
    enqueue_ns = time.time_ns()
    send_ns = time.time_ns()
    result = await c.produce(1, b"traced")
    ack_ns = time.time_ns()
    assert result.error_code is None and result.base_offset == 1
    index = StageIndex([e for t in traces.values() for e in t.events()])
    way = index.way(TopicPartition(TOPIC, 0), 1, enqueue_ns, send_ns, ack_ns)
    assert list(way) != [] and set(way) == set(WAY), sorted(set(WAY) - set(way))
    times = [way[stage] for stage in WAY]
    assert times == sorted(times), list(zip(WAY, times))
    assert way[CLIENT_ENQUEUE] <= way[CLIENT_SEND] < way[CLIENT_ACK]


async def test_followers_replicate_over_one_persistent_channel_each(c: Cluster) -> None:
    assert (await c.produce(1, b"first")).error_code is None
    channels = c.runners[1].app[CHANNELS]
    await until(lambda: len(channels) == 2, "a channel from each follower")
    opened = set(channels)
    for i in range(20):
        assert (await c.produce(1, b"r%d" % i)).error_code is None  # acks=all: both followers
    assert set(channels) == opened  # the same two connections carried every fetch


async def test_a_channel_refuses_another_replicas_fetch_and_closes_on_garbage(leader_only: Cluster) -> None:
    url = f"http://127.0.0.1:{leader_only.ports[1]}/v1/replication?replica_id=2"
    fetch = {"max_wait_ms": 0, "replica_id": 3, "replica_epoch": 103,
             "partitions": [{"topic": TOPIC, "partition": 0, "fetch_offset": 0}]}
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url) as ws:
            await ws.send_bytes(msgpack.packb({"id": 1, "fetch": fetch}))
            refused = msgpack.unpackb((await ws.receive()).data)
            assert (refused["id"], refused["error_code"]) == (1, "INVALID_REQUEST")
            await ws.send_bytes(msgpack.packb({"id": 2, "fetch": {**fetch, "replica_id": 2, "replica_epoch": 102}}))
            answer = msgpack.unpackb((await ws.receive()).data)
            assert answer["id"] == 2 and answer["fetch"]["partitions"][0].get("error_code") is None
            await ws.send_bytes(b"\xc1")  # not msgpack
            closing = await ws.receive()
            assert closing.type == aiohttp.WSMsgType.CLOSE and ws.close_code == 1003
