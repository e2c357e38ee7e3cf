"""The producer's record accumulator and the pure halves of the sender (no network)."""

from __future__ import annotations

from dataclasses import replace

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.api.client.accumulator import RECORD_OVERHEAD, RecordAccumulator
from kraft.api.client.sender import SenderConfig, partition_outcomes, produce_body
from kraft.api.client.types import TopicPartition
from kraft.api.errors import KraftError
from kraft.log.batch import HEADER_SIZE, build_batch, decode_records, iter_batches

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
LEADERS = {T0: 1, T1: 2}.get
CONFIG = SenderConfig(acks=1, compression_type="none", retries=3, retry_backoff_ms=100,
                      request_timeout_ms=1000, delivery_timeout_ms=10_000, max_request_size=10_000)


def rec(value: bytes = b"v" * 10, ts: int = 1000) -> tuple:
    return (None, value, (), ts)


def size_of(r: tuple) -> int:
    return len(r[1]) + RECORD_OVERHEAD


def append(acc: RecordAccumulator, tp: TopicPartition, now: int, value: bytes = b"v" * 10, abort: bool = False):
    r = rec(value)
    return acc.append(tp, r, size_of(r), now, abort_on_new_batch=abort)


def test_records_share_a_batch_until_it_is_full() -> None:
    acc = RecordAccumulator(batch_size=200, linger_ms=5)
    futures = []
    for _ in range(8):
        appended = append(acc, T0, now=0)
        assert appended is not None
        futures.append(appended)
    batches = acc.queued(T0)
    # 61-byte header + 26 bytes per record: 5 records fit in 200 bytes, then a new batch opens.
    assert [b.record_count for b in batches] == [5, 3]
    assert [f.index for f, _ in futures] == [0, 1, 2, 3, 4, 0, 1, 2]
    assert [wake for _, wake in futures] == [True, False, False, False, False, True, False, False]
    assert acc.buffered_bytes == 8 * 26


def test_abort_on_new_batch_returns_none_instead_of_opening_one() -> None:
    acc = RecordAccumulator(batch_size=150, linger_ms=5)
    assert append(acc, T0, 0, abort=True) is None  # nothing open yet
    assert append(acc, T0, 0) is not None
    assert append(acc, T0, 0, abort=True) is not None  # fits in the open batch
    assert append(acc, T0, 0, value=b"x" * 60, abort=True) is None
    assert len(acc.queued(T0)) == 1


def test_ready_after_linger_or_when_full_or_forced() -> None:
    acc = RecordAccumulator(batch_size=1000, linger_ms=5)
    append(acc, T0, now=100)
    check = acc.ready(102, LEADERS, busy_nodes=(), force=False)
    assert check.ready_nodes == frozenset() and check.next_ready_ms == 105
    assert acc.ready(102, LEADERS, (), force=True).ready_nodes == {1}
    assert acc.ready(105, LEADERS, (), force=False).ready_nodes == {1}
    for _ in range(40):
        append(acc, T1, now=102)  # overflows into a second batch: the first is full
    assert acc.ready(102, LEADERS, (), force=False).ready_nodes == {2}


def test_busy_leaders_and_unknown_leaders_are_not_ready() -> None:
    acc = RecordAccumulator(batch_size=1000, linger_ms=0)
    append(acc, T0, 0)
    append(acc, TopicPartition("orphan", 0), 0)
    check = acc.ready(10, LEADERS, busy_nodes={1}, force=False)
    assert check.ready_nodes == frozenset()
    assert check.unknown_leader_topics == {"orphan"}


def test_drain_takes_every_batch_of_the_leader_within_max_request_size() -> None:
    acc = RecordAccumulator(batch_size=150, linger_ms=0)
    for _ in range(12):
        append(acc, T0, 0)  # 3 per batch: 4 batches of ~139 bytes
    drained = acc.drain({1}, LEADERS, max_request_size=300, now_ms=0)
    assert [b.record_count for b in drained[1]] == [3, 3]
    assert all(b.closed and b.attempts == 1 for b in drained[1])
    # Always at least one batch, even above max_request_size.
    assert len(acc.drain({1}, LEADERS, max_request_size=1, now_ms=0)[1]) == 1
    # A drained open batch is closed: the next record opens a new one.
    append(acc, T0, 0)
    assert acc.queued(T0)[-1].record_count == 1


def test_reenqueued_batches_go_first_in_order_and_wait_for_backoff() -> None:
    acc = RecordAccumulator(batch_size=150, linger_ms=0)
    for _ in range(6):
        append(acc, T0, 0)
    first, second = acc.drain({1}, LEADERS, 10_000, 0)[1]
    append(acc, T0, 0)
    acc.reenqueue([first, second], retry_at_ms=50)
    assert acc.queued(T0)[:2] == [first, second]
    assert acc.ready(10, LEADERS, (), force=True).ready_nodes == frozenset()
    assert acc.ready(10, LEADERS, (), force=True).next_ready_ms == 50
    again = acc.drain({1}, LEADERS, 10_000, 50)[1]
    assert again[:2] == [first, second] and first.attempts == 2


def test_expire_and_deallocate_release_memory() -> None:
    acc = RecordAccumulator(batch_size=150, linger_ms=0)
    for _ in range(4):
        append(acc, T0, 0)
    append(acc, T1, 500)
    expired = acc.expire(now_ms=1000, delivery_timeout_ms=1000)
    assert [b.tp for b in expired] == [T0, T0]
    for b in expired:
        acc.deallocate(b)
    assert acc.buffered_bytes == 26
    assert acc.has_queued()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([T0, T1]), st.integers(0, 300)), min_size=1, max_size=200),
       st.integers(50, 2000))
def test_drain_preserves_per_partition_order_and_loses_nothing(appends: list, batch_size: int) -> None:
    acc = RecordAccumulator(batch_size=batch_size, linger_ms=0)
    sent: dict[TopicPartition, list[bytes]] = {T0: [], T1: []}
    for i, (tp, n) in enumerate(appends):
        value = i.to_bytes(4, "big") * (n // 4 + 1)
        r = (None, value, (), 0)
        assert acc.append(tp, r, size_of(r), 0) is not None
        sent[tp].append(value)
    got: dict[TopicPartition, list[bytes]] = {T0: [], T1: []}
    while acc.has_queued():
        for batches in acc.drain({1, 2}, LEADERS, 1000, 0).values():
            for b in batches:
                got[b.tp].extend(r.value for r in decode_records(b.encode("none")))
                acc.deallocate(b)
    assert got == sent
    assert acc.buffered_bytes == 0 and not acc.incomplete


def test_produce_body_concatenates_batches_per_partition() -> None:
    acc = RecordAccumulator(batch_size=100, linger_ms=0)
    for i in range(5):
        r = (b"k", f"v{i}".encode(), (("h", b"1"),), 1000 + i)
        acc.append(T0, r, 40, 0)
    batches = acc.drain({1}, LEADERS, 10_000, 0)[1]
    packed, by_tp = produce_body(batches, CONFIG)
    body = msgpack.unpackb(b"".join(packed.parts))
    assert list(by_tp) == [T0] and body["acks"] == 1
    [entry] = body["partitions"]
    assert len(list(iter_batches(entry["records"]))) == 5  # one record per 100-byte batch
    records = [r for pos, _ in iter_batches(entry["records"]) for r in decode_records(entry["records"], pos)]
    assert [r.value for r in records] == [b"v0", b"v1", b"v2", b"v3", b"v4"]
    assert records[3].timestamp == 1003 and records[0].headers == (("h", b"1"),)


def test_produce_body_is_msgpacks_body_with_the_batches_as_parts_of_their_own() -> None:
    """The parts are the bytes msgpack packs for the body (bin headers of each size included),
    and each batch is its own part, the producer's framed bytes themselves: nothing joined."""
    for config in (CONFIG, replace(CONFIG, transactional_id="t-1")):
        acc = RecordAccumulator(batch_size=200_000, linger_ms=0)
        tps = [TopicPartition("a", 0), TopicPartition("b", 3), TopicPartition("c", 1)]
        for tp, size in zip(tps, (100, 1_000, 100_000)):  # records bins of bin8, bin16, bin32
            acc.append(tp, (None, b"x" * size, (), 1000), size + RECORD_OVERHEAD, 0)
            acc.append(tp, (None, b"y", (), 1001), 1 + RECORD_OVERHEAD, 0)
        batches = acc.drain({1}, lambda tp: 1, 10_000_000, 0)[1]
        packed, by_tp = produce_body(batches, config)
        expected = {"acks": config.acks, "timeout_ms": config.request_timeout_ms, "partitions": [
            {"topic": tp.topic, "partition": tp.partition, "records": b"".join(b.encoded for b in bl)}
            for tp, bl in by_tp.items()]}
        if config.transactional_id is not None:
            expected["transactional_id"] = config.transactional_id
        assert b"".join(packed.parts) == msgpack.packb(expected, use_bin_type=True)
        assert packed.size == len(b"".join(packed.parts))
        assert all(any(part is b.encoded for part in packed.parts) for b in batches)


def test_a_transactional_producers_body_names_its_transactional_id() -> None:
    """The broker refuses transactional batches without the request's transactional id (Kafka's
    rule): a transactional producer's body names it, an idempotent or plain one's names none."""
    for config, transactional_id in ((replace(CONFIG, transactional_id="billing-1"), "billing-1"), (CONFIG, None)):
        acc = RecordAccumulator(batch_size=100, linger_ms=0)
        acc.append(T0, rec(), 40, 0)
        packed, _ = produce_body(acc.drain({1}, LEADERS, 10_000, 0)[1], config)
        body = msgpack.unpackb(b"".join(packed.parts))
        assert body.get("transactional_id") == transactional_id
        [(_, header)] = iter_batches(body["partitions"][0]["records"])
        assert header.is_transactional == (transactional_id is not None)


def test_partition_outcomes() -> None:
    by_tp = {T0: [], T1: [], TopicPartition("t", 2): []}
    answer = {"partitions": [
        {"topic": "t", "partition": 0, "base_offset": 42, "log_start_offset": 0},
        {"topic": "t", "partition": 1, "base_offset": -1, "error_code": "NOT_LEADER_OR_FOLLOWER", "message": "moved"},
    ]}
    out = partition_outcomes(answer, by_tp, acks=1)
    assert out[T0] == 42
    assert isinstance(out[T1], KraftError) and out[T1].error_code == "NOT_LEADER_OR_FOLLOWER" and out[T1].retriable
    missing = out[TopicPartition("t", 2)]
    assert isinstance(missing, KraftError) and missing.error_code == "UNKNOWN_SERVER_ERROR"
    assert partition_outcomes({}, by_tp, acks=0) == {tp: -1 for tp in by_tp}


def test_waiting_for_buffer_memory_makes_batches_ready() -> None:
    acc = RecordAccumulator(batch_size=1000, linger_ms=60_000)
    append(acc, T0, 0)
    assert acc.ready(1, LEADERS, (), force=False).ready_nodes == frozenset()
    acc.space_waiters = 1
    assert acc.ready(1, LEADERS, (), force=False).ready_nodes == {1}


def test_try_append_fills_the_open_batch_and_encodes_what_build_batch_would() -> None:
    acc = RecordAccumulator(batch_size=1000, linger_ms=5)
    assert acc.try_append(T0, None, b"a", (), 50, 20) is None  # no open batch yet
    first = acc.append_new_batch(T0, b"k", b"a", (("h", b"1"),), 50, 20, now_ms=7)
    second = acc.try_append(T0, None, b"b", (), 40, 20)
    assert second is not None and (first.index, second.index) == (0, 1)
    assert first.produce_result is second.produce_result and second.timestamp == 40
    assert acc.try_append(T0, None, b"x" * 900, (), 60, 916) is None  # would overflow the batch
    [batch] = acc.queued(T0)
    assert (batch.record_count, batch.size, batch.created_ms, acc.buffered_bytes) == (2, HEADER_SIZE + 40, 7, 40)
    encoded = batch.encode("zstd")
    assert encoded == build_batch([(b"k", b"a", [("h", b"1")], 50), (None, b"b", None, 40)], compression="zstd")
    assert batch.encode("none") is encoded  # framed once


def test_drained_batch_is_closed_and_the_next_record_opens_a_new_one() -> None:
    acc = RecordAccumulator(batch_size=1000, linger_ms=0)
    acc.append_new_batch(T0, None, b"a", (), 1, 20, now_ms=0)
    [drained] = acc.drain({1}, LEADERS, 10_000, 0)[1]
    assert drained.closed and acc.try_append(T0, None, b"b", (), 1, 20) is None
    future, opened = acc.append(T0, (None, b"b", (), 1), 20, 0)
    assert opened and future.produce_result is not drained.result
    for batches in (acc.expire(10**9, 1), acc.abort_all()):
        for b in batches:
            assert b.closed
    assert acc.try_append(T0, None, b"c", (), 1, 20) is None
