"""The replica manager replicating over real HTTP between three in-process brokers: acks=all, the
high watermark, ISR shrink and expand through AlterPartition, leader epochs and truncation of a
deposed leader's unacknowledged suffix, the epoch / leadership errors of fetches, and
DeleteRecords waiting for the live replicas' log start."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from harness import wait_until as until  # tests/ is on sys.path (tests/conftest.py)
from kraft.log.batch import iter_batches
from kraft.errors import KraftError
from kraft.server.records import NO_EPOCH, DeleteRecordsEntry, DeleteRecordsResult, FetchEntry
from tests.unit.replication.replication_cluster import TOPIC, Cluster, values_of


@pytest.fixture
async def cluster(tmp_path) -> Any:
    c = Cluster(tmp_path)
    await c.start()
    yield c
    await c.close()


def isr(cluster: Cluster) -> tuple[int, ...]:
    return cluster.controller.partition().isr


async def test_acks_all_waits_for_the_isr_and_replicas_match(cluster: Cluster) -> None:
    for i in range(20):
        result = await cluster.produce(1, b"a%d" % i, b"b%d" % i)
        assert result.error_code is None and result.base_offset == 2 * i
    leader = cluster.log(1)
    assert leader.high_watermark == leader.log_end_offset == 40
    # followers learn the high watermark from later fetch answers
    await until(lambda: all(cluster.log(b).high_watermark == 40 for b in (2, 3)), what="follower HW")
    assert cluster.raw(2, 40) == cluster.raw(3, 40) == cluster.raw(1, 40)
    assert values_of(cluster.raw(2, 40))[:4] == [b"a0", b"b0", b"a1", b"b1"]
    assert [e.epoch for e in cluster.log(2).leader_epoch_cache.entries] == [0]


async def test_consumer_reads_only_below_the_high_watermark(cluster: Cluster) -> None:
    await cluster.stop_node(2)
    await cluster.stop_node(3)
    result = await cluster.produce(1, b"x", acks=1)
    assert result.error_code is None
    leader = cluster.nodes[1]
    assert leader.replica(TOPIC, 0).log.log_end_offset == 1
    [fetched] = await leader.fetch([_entry(0)], 0, 1, 1 << 20)
    assert (fetched.high_watermark, fetched.records) == (0, b"")


async def test_acks_all_times_out_then_isr_shrinks_and_expands(cluster: Cluster) -> None:
    await cluster.stop_node(3)
    await cluster.stop_node(2)
    result = await cluster.produce(1, b"lost-follower", timeout_ms=100)
    assert result.error_code == "REQUEST_TIMED_OUT"
    await until(lambda: isr(cluster) == (1,), what="ISR shrink to the leader")
    # ISR 1 < min.insync.replicas 2: refused before appending
    leo = cluster.log(1).log_end_offset
    result = await cluster.produce(1, b"refused")
    assert result.error_code == "NOT_ENOUGH_REPLICAS"
    assert cluster.log(1).log_end_offset == leo
    await cluster.start_node(2)
    await until(lambda: isr(cluster) == (1, 2), what="ISR expand with broker 2")
    assert (await cluster.produce(1, b"ok")).error_code is None
    await cluster.start_node(3)
    await until(lambda: isr(cluster) == (1, 2, 3), what="ISR expand with broker 3")
    end = cluster.log(1).high_watermark
    await until(lambda: cluster.log(3).high_watermark == end, what="broker 3 caught up")
    assert cluster.raw(3, end) == cluster.raw(1, end)
    assert cluster.controller.partition().partition_epoch >= 4


async def test_an_unfenced_caught_up_follower_rejoins_the_isr_without_waiting_for_its_next_fetch(tmp_path) -> None:
    """A restarted broker catches up while fenced (it may not join the ISR yet, KIP-841); once the
    controller unfences it, its leader proposes it for the ISR from that metadata, as it would at
    a fetch. The followers here are played by the test: after broker 3's one fetch nobody fetches
    again, and the ISR check runs every 60 s (half of replica.lag.time.max.ms), so only the
    unfencing itself can expand the ISR."""
    cluster = Cluster(tmp_path, lag_ms=120_000)
    await cluster.start(running=(1,))
    try:
        leader = cluster.nodes[1]
        cluster.controller.fence(3)
        assert isr(cluster) == (1, 2)
        [caught_up] = await leader.replica_fetch(3, 103, [_entry(0, current_leader_epoch=0)], 0, 0, 1 << 20)
        assert caught_up.error_code is None
        assert isr(cluster) == (1, 2) and cluster.controller.refused == []  # fenced: not eligible, not proposed
        cluster.controller.unfence(3)
        await until(lambda: isr(cluster) == (1, 2, 3), what="broker 3 back in the ISR")
    finally:
        await cluster.close()


async def test_deposed_leader_truncates_its_unacknowledged_suffix(cluster: Cluster) -> None:
    assert (await cluster.produce(1, b"committed")).error_code is None
    await until(lambda: all(cluster.log(b).log_end_offset == 1 for b in (2, 3)), what="replicated")
    await cluster.stop_node(2)
    await cluster.stop_node(3)
    for i in range(3):  # acks=1: on the leader only, never acknowledged by the ISR
        assert (await cluster.produce(1, b"doomed%d" % i, acks=1)).error_code is None
    await cluster.stop_node(1)
    cluster.controller.fence(1)
    assert cluster.controller.partition().leader == 2
    await cluster.start_node(2)
    await cluster.start_node(3)
    assert (await cluster.produce(2, b"new-leader")).error_code is None
    await cluster.start_node(1)
    cluster.controller.unfence(1)
    end = cluster.log(2).log_end_offset
    await until(lambda: cluster.log(1).log_end_offset == end
                and cluster.raw(1, end) == cluster.raw(2, end), what="broker 1 truncated and caught up")
    assert values_of(cluster.raw(1, end)) == [b"committed", b"new-leader"]
    assert [e.epoch for e in cluster.log(1).leader_epoch_cache.entries] == [0, 1]


async def test_leader_change_fails_pending_acks_all(cluster: Cluster) -> None:
    await cluster.stop_node(3)
    await cluster.stop_node(2)
    pending = asyncio.ensure_future(cluster.produce(1, b"in-doubt", timeout_ms=5000))
    await until(lambda: cluster.log(1).log_end_offset == 1, what="appended")
    cluster.controller.fence(1)  # broker 1 learns it no longer leads
    result = await pending
    assert result.error_code == "NOT_LEADER_OR_FOLLOWER"


async def test_a_stopping_leader_fails_waiting_produces_at_once_and_shrinks_no_isr(cluster: Cluster) -> None:
    """A node that stops serving: its followers stop reaching it because it stops, so it does
    not shrink them out (the controller then elects one of them), and acks=all produces still
    waiting do not hold the shutdown until their timeout."""
    await cluster.stop_node(3)
    await cluster.stop_node(2)
    leader = cluster.nodes[1]
    pending = asyncio.ensure_future(cluster.produce(1, b"in-doubt", timeout_ms=60_000))
    await until(lambda: cluster.log(1).log_end_offset == 1, what="appended")
    leader.begin_shutdown()
    result = await asyncio.wait_for(pending, 10)
    assert result.error_code == "NOT_LEADER_OR_FOLLOWER" and "shutting down" in result.message
    # every follower now far past replica.lag.time.max.ms: a running ISR check would shrink at once
    clock = leader.clock_ms
    leader.clock_ms = lambda: clock() + 60_000
    await asyncio.sleep(4 * leader.replication.isr_check_interval_ms / 1000)  # a window: nothing may happen
    assert isr(cluster) == (1, 2, 3) and cluster.controller.refused == []


async def test_fetch_epoch_checks(cluster: Cluster) -> None:
    leader, follower = cluster.nodes[1], cluster.nodes[2]
    [unchecked] = await leader.replica_fetch(-1, -1, [_entry(0)], 0, 0, 1 << 20)  # no epoch given
    assert unchecked.error_code is None
    cluster.controller.fence(3)  # partition epoch moves, leader epoch stays 0
    [ok] = await leader.replica_fetch(-1, -1, [_entry(0, current_leader_epoch=0)], 0, 0, 1 << 20)
    assert ok.error_code is None
    [newer] = await leader.replica_fetch(-1, -1, [_entry(0, current_leader_epoch=1)], 0, 0, 1 << 20)
    assert newer.error_code == "UNKNOWN_LEADER_EPOCH"
    cluster.controller.fence(1)  # broker 2 leads at epoch 1
    [older] = await follower.replica_fetch(-1, -1, [_entry(0, current_leader_epoch=0)], 0, 0, 1 << 20)
    assert older.error_code == "FENCED_LEADER_EPOCH"
    [not_leader] = await leader.replica_fetch(3, 103, [_entry(0, current_leader_epoch=1)], 0, 0, 1 << 20)
    assert not_leader.error_code == "NOT_LEADER_OR_FOLLOWER"
    assert not_leader.leader == {"node_id": 2, "host": "127.0.0.1", "port": cluster.ports[2]}
    [stale] = await follower.replica_fetch(3, 999, [_entry(0, current_leader_epoch=1)], 0, 0, 1 << 20)
    assert stale.error_code == "STALE_BROKER_EPOCH"


async def test_offset_for_leader_epoch_answers_where_an_epoch_ends_on_the_leader(cluster: Cluster) -> None:
    """Kafka's OffsetForLeaderEpoch (KIP-320): the latest epoch ends at the log end, an older one
    where the next begins, one above every known epoch is (-1, -1); the current leader epoch the
    client names is checked, and only the leader answers."""
    assert (await cluster.produce(1, b"a", b"b")).error_code is None  # epoch 0: offsets 0-1
    leader, follower = cluster.nodes[1], cluster.nodes[2]
    assert await leader.offset_for_leader_epoch(TOPIC, 0, NO_EPOCH, 0) == (0, 2)
    assert await leader.offset_for_leader_epoch(TOPIC, 0, 0, 7) == (-1, -1)
    cluster.controller.fence(1)  # broker 2 leads at epoch 1
    await until(lambda: follower.replica(TOPIC, 0).core.is_leader, what="broker 2 leads")
    assert (await cluster.produce(2, b"c")).error_code is None  # epoch 1 starts at offset 2
    assert await follower.offset_for_leader_epoch(TOPIC, 0, 1, 0) == (0, 2)
    assert await follower.offset_for_leader_epoch(TOPIC, 0, 1, 1) == (1, 3)
    with pytest.raises(KraftError) as fenced:
        await follower.offset_for_leader_epoch(TOPIC, 0, 0, 0)
    assert fenced.value.error_code == "FENCED_LEADER_EPOCH"
    with pytest.raises(KraftError) as not_leader:
        await leader.offset_for_leader_epoch(TOPIC, 0, NO_EPOCH, 0)
    assert not_leader.value.error_code == "NOT_LEADER_OR_FOLLOWER"


def _entry(fetch_offset: int, **kw: Any) -> FetchEntry:
    return FetchEntry(TOPIC, 0, fetch_offset, 1 << 20, **kw)


async def test_fetch_route_replica_fields_over_http(cluster: Cluster) -> None:
    assert (await cluster.produce(1, b"one")).error_code is None
    url = f"http://127.0.0.1:{cluster.ports[1]}/v1/fetch"
    async with aiohttp.ClientSession() as http:
        body = {"max_wait_ms": 0, "replica_id": 2, "replica_epoch": 102, "partitions": [
            {"topic": TOPIC, "partition": 0, "fetch_offset": 5, "current_leader_epoch": 0,
             "last_fetched_epoch": 0}]}
        async with http.post(url, json=body) as resp:
            [answer] = (await resp.json())["partitions"]
        # offsets 1-4 in epoch 0 exist only on this "follower": diverging at the leader's end of 0
        assert answer["diverging_epoch"] == {"epoch": 0, "end_offset": 1}
        assert answer["log_end_offset"] == 1
        assert answer["records"] == ""
        async with http.post(url, json={**body, "replica_id": -5}) as resp:
            assert resp.status == 400 and (await resp.json())["error_code"] == "INVALID_REQUEST"


async def test_a_corrupt_batch_answers_corrupt_message_to_consumers_and_followers(
    cluster: Cluster,
) -> None:
    for value in (b"a", b"b", b"c"):
        assert (await cluster.produce(1, value)).error_code is None
    segment = cluster.log(1).segments[0]
    [_, (position, _), _] = iter_batches(segment.read(0, segment.size))
    with segment.log_path.open("r+b") as f:  # a flipped bit in batch 1's records
        f.seek(position + 62)
        byte = f.read(1)[0]
        f.seek(position + 62)
        f.write(bytes([byte ^ 0x01]))
    leader = cluster.nodes[1]
    [consumer] = await leader.replica_fetch(-1, -1, [_entry(1)], 0, 0, 1 << 20)
    assert consumer.error_code == "CORRUPT_MESSAGE" and "offset 1" in (consumer.message or "")
    [follower] = await leader.replica_fetch(
        2, 102, [_entry(1, current_leader_epoch=0, last_fetched_epoch=0)], 0, 0, 1 << 20)
    assert follower.error_code == "CORRUPT_MESSAGE" and not follower.records
    [before] = await leader.replica_fetch(-1, -1, [_entry(0)], 0, 0, 1 << 20)
    assert before.error_code is None and values_of(before.records) == [b"a"]


async def delete(cluster: Cluster, b: int, offset: int, timeout_ms: int = 5000, topic: str = TOPIC,
                 partition: int = 0) -> DeleteRecordsResult:
    [result] = await cluster.nodes[b].delete_records([DeleteRecordsEntry(topic, partition, offset)], timeout_ms)
    return result


async def test_delete_records_waits_for_every_live_replica_and_followers_follow(cluster: Cluster) -> None:
    """Kafka's DelayedDeleteRecords: answered once the low watermark (every live replica's log
    start, from its fetches) reached the offset; a stopped but unfenced follower holds it back
    until it is fenced, and learns the log start from its fetches once back."""
    for i in range(10):
        assert (await cluster.produce(1, b"a%d" % i, b"b%d" % i)).error_code is None
    await until(lambda: all(cluster.log(b).high_watermark == 20 for b in (2, 3)), what="followers' HW")
    await cluster.stop_node(3)
    timed_out = await delete(cluster, 1, 10, timeout_ms=200)
    assert (timed_out.error_code, timed_out.low_watermark) == ("REQUEST_TIMED_OUT", -1)
    assert cluster.log(1).log_start_offset == 10  # moved on the leader all the same, as in Kafka
    await until(lambda: cluster.log(2).log_start_offset == 10, what="follower 2 learns the log start")
    waiting = asyncio.ensure_future(delete(cluster, 1, 12, timeout_ms=30_000))
    followers = cluster.nodes[1].replica(TOPIC, 0).leader_state.followers
    await until(lambda: followers[2].log_start_offset == 12, what="follower 2 reports 12")
    assert not waiting.done()  # broker 3 is not fenced: it counts
    cluster.controller.fence(3)  # no longer live (and out of the ISR): the wait ends
    done = await asyncio.wait_for(waiting, 10)
    assert (done.error_code, done.low_watermark) == (None, 12)
    await cluster.start_node(3)
    cluster.controller.unfence(3)
    await until(lambda: cluster.log(3).log_start_offset == 12, what="follower 3 learns the log start")
    everything = await delete(cluster, 1, -1)  # -1: up to the high watermark
    assert (everything.error_code, everything.low_watermark) == (None, 20)
    assert [cluster.log(b).log_start_offset for b in (1, 2, 3)] == [20, 20, 20]
    [below] = await cluster.nodes[1].fetch([FetchEntry(TOPIC, 0, 5, 1 << 20)], 0, 1, 1 << 20)
    assert below.error_code == "OFFSET_OUT_OF_RANGE"


async def test_delete_records_errors_change_nothing(cluster: Cluster) -> None:
    for i in range(5):
        assert (await cluster.produce(1, b"v%d" % i)).error_code is None
    assert (await delete(cluster, 1, 6)).error_code == "OFFSET_OUT_OF_RANGE"  # above the HW (5)
    assert (await delete(cluster, 1, -7)).error_code == "OFFSET_OUT_OF_RANGE"
    assert (await delete(cluster, 2, 1)).error_code == "NOT_LEADER_OR_FOLLOWER"
    assert (await delete(cluster, 1, 1, partition=9)).error_code == "UNKNOWN_TOPIC_OR_PARTITION"
    internal = await delete(cluster, 1, 0, topic="__consumer_offsets")
    assert internal.error_code == "INVALID_TOPIC_EXCEPTION"
    assert [cluster.log(b).log_start_offset for b in (1, 2, 3)] == [0, 0, 0]


def _transactional(producer_id: int) -> bytes:
    from kraft.log.batch import build_batch
    return build_batch([(None, b"t", [], 1_700_000_000_000)], producer_id=producer_id, producer_epoch=0,
                       base_sequence=0, transactional=True)


async def test_a_new_leader_answers_an_unverified_transactional_batch_retriable_until_verified(
        cluster: Cluster) -> None:
    """KIP-890: the coordinator's verification was held by the old leader; the new one answers the
    transaction's first batch NOT_ENOUGH_REPLICAS (retriable) until the coordinator verifies it
    there too. A leader of epoch 0 (no leader before it) refuses it INVALID_TXN_STATE at once."""
    from kraft.server.records import ProduceEntry

    async def produce(b: int, producer_id: int) -> Any:
        [result] = await cluster.nodes[b].produce([ProduceEntry(TOPIC, 0, _transactional(producer_id))], -1, 5000)
        return result

    assert (await produce(1, 7)).error_code == "INVALID_TXN_STATE"
    await cluster.nodes[1].verify_transaction(TOPIC, 0, 8, 0)
    cluster.controller.fence(1)
    assert cluster.controller.partition().leader == 2
    await until(lambda: cluster.nodes[2].replica(TOPIC, 0).core.is_leader, what="broker 2 leads")
    refused = await produce(2, 8)
    assert refused.error_code == "NOT_ENOUGH_REPLICAS", refused
    await cluster.nodes[2].verify_transaction(TOPIC, 0, 8, 0)
    assert (await produce(2, 8)).error_code is None
