"""PartitionLog: append/read semantics, high watermark, epochs, truncation, flush, reopen."""

from __future__ import annotations

import pytest

from kraft.log.batch import iter_batches
from kraft.log.config import LogConfig
from kraft.log.errors import CorruptRecordError, OffsetOutOfRangeError
from kraft.log.partition_log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, PartitionLog
from log_testing import all_records, make_batch


def test_append_assigns_offsets_and_read_returns_whole_batches(open_log) -> None:
    log = open_log(segment_bytes=600, index_interval_bytes=50)
    infos = [log.append_as_leader(make_batch(3, ts=100 * i), 1, now_ms=0) for i in range(20)]
    assert [(i.first_offset, i.last_offset, i.record_count) for i in infos[:2]] == [(0, 2, 3), (3, 5, 3)]
    assert log.log_end_offset == 60 and len(log.segments) > 3
    data = log.read(31, max_bytes=10**6)
    assert data.records and data.fetch_offset == 31
    first = next(iter_batches(data.records))[1]
    assert first.base_offset == 30  # the batch holding 31
    offsets = [r.offset for r in all_records(data.records)]
    assert offsets == list(range(30, offsets[-1] + 1)) and data.next_offset == offsets[-1] + 1
    # reads never cross a segment, and each call makes progress until the end
    seen, offset = [], 0
    while offset < log.log_end_offset:
        chunk = log.read(offset, max_bytes=250)
        seen += [r.offset for r in all_records(chunk.records)]
        offset = chunk.next_offset
    assert seen == list(range(60))


def test_max_offset_and_max_bytes(open_log) -> None:
    log = open_log()
    for _ in range(5):
        log.append_as_leader(make_batch(2, size=100), 0, 0)
    log.high_watermark = 6
    batch_size = len(make_batch(2, size=100))
    assert [r.offset for r in all_records(log.read(0, 10**6, max_offset=log.high_watermark).records)] == list(range(6))
    assert log.read(6, 10**6, max_offset=6).records == b""
    assert len(log.read(0, batch_size + 10).records) == batch_size
    assert len(log.read(0, 5).records) == batch_size  # min_one_batch
    assert log.read(0, 5, min_one_batch=False).records == b""
    assert log.read(10, 100).records == b"" and log.read(10, 100).next_offset == 10
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, 100)


def test_high_watermark_is_clamped(open_log) -> None:
    log = open_log()
    log.append_as_leader(make_batch(4), 0, 0)
    log.high_watermark = 99
    assert log.high_watermark == 4
    log.high_watermark = -3
    assert log.high_watermark == 0


def test_failed_append_writes_nothing(open_log) -> None:
    log = open_log()
    bad = bytearray(make_batch(1))
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(make_batch(2) + bytes(bad), 0, 0)
    assert log.log_end_offset == 0 and log.segments[0].size == 0


def test_epochs_truncation_and_divergence(open_log) -> None:
    log = open_log()
    log.append_as_leader(make_batch(5), 1, 0)
    log.append_as_leader(make_batch(5), 1, 0)
    log.append_as_leader(make_batch(5), 3, 0)
    assert log.end_offset_for_epoch(1) == (1, 10)
    assert log.end_offset_for_epoch(2) == (1, 10)
    assert log.end_offset_for_epoch(3) == (3, 15)
    with pytest.raises(ValueError):
        log.append_as_leader(make_batch(1), 2, 0)  # epochs never go backwards
    log.high_watermark = 15
    log.truncate_to(10)  # a follower truncating its divergent suffix
    assert log.log_end_offset == 10 and log.high_watermark == 10
    assert log.leader_epoch_cache.latest_epoch == 1
    assert [r.offset for r in all_records(log.read(0, 10**6).records)] == list(range(10))


def test_new_leader_epoch_starts_at_the_log_end(open_log) -> None:
    log = open_log()
    log.append_as_leader(make_batch(5), 1, 0)
    log.append_as_leader(make_batch(5), 3, 0)
    assert log.assign_epoch_start(5, log.log_end_offset)
    assert not log.assign_epoch_start(5, log.log_end_offset)  # already there
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(1, 0), (3, 5), (5, 10)]
    assert log.end_offset_for_epoch(3) == (3, 10)  # a follower of epoch 3 learns where it ends


@pytest.mark.parametrize("offset_past_end", [0, 1, 7])
def test_truncate_at_or_past_the_log_end_drops_an_epoch_without_records(open_log, offset_past_end) -> None:
    """As Kafka's truncateTo: a broker that led epoch 5 without appending, then follows the
    leader of epoch 6, must not keep (5, LEO) in its cache: a later epoch-5 batch from the new
    leader would be placed in it, and the divergence check would answer from a phantom epoch."""
    log = open_log()
    log.append_as_leader(make_batch(5), 1, 0)
    log.append_as_leader(make_batch(5), 3, 0)
    log.assign_epoch_start(5, log.log_end_offset)
    log.truncate_to(log.log_end_offset + offset_past_end)
    assert log.log_end_offset == 10
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries] == [(1, 0), (3, 5)]
    log.truncate_to(log.log_end_offset)  # nothing at the end to drop: the records' epochs stay
    assert log.leader_epoch_cache.latest_epoch == 3


def test_follower_append_keeps_leader_offsets_and_epochs(open_log, tmp_path) -> None:
    leader = open_log()
    for epoch in (1, 1, 2):
        leader.append_as_leader(make_batch(3), epoch, 0)
    follower = PartitionLog.open(tmp_path / "t-0-follower", LogConfig(), 0)
    try:
        fetched = leader.read(0, 10**6)
        info = follower.append_as_follower(fetched.records, now_ms=0)
        assert (info.first_offset, info.last_offset) == (0, 8)
        assert follower.read(0, 10**6).records == fetched.records
        assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries
    finally:
        follower.close()


def test_truncate_fully_and_start_at(open_log) -> None:
    log = open_log(segment_bytes=300)
    for _ in range(10):
        log.append_as_leader(make_batch(2), 0, 0)
    log.truncate_fully_and_start_at(500, now_ms=0)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (500, 500, 500)
    assert len(log.segments) == 1 and log.segments[0].base_offset == 500
    assert log.append_as_leader(make_batch(1), 1, 0).first_offset == 500
    log.close()
    again = open_log()
    assert (again.log_start_offset, again.log_end_offset) == (500, 501)


def test_offset_for_timestamp(open_log) -> None:
    log = open_log(segment_bytes=400, index_interval_bytes=10)
    for i in range(10):
        log.append_as_leader(make_batch(2, ts=1000 + 10 * i), 0, 0)
    assert log.offset_for_timestamp(1035) == (8, 1040)
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(10**6) is None
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == (0, -1)
    assert log.offset_for_timestamp(LATEST_TIMESTAMP) == (20, -1)
    assert log.offset_for_timestamp(1035, max_offset=8) is None


def test_reopen_after_close_recovers_nothing_and_keeps_state(open_log) -> None:
    log = open_log(segment_bytes=500)
    for i in range(12):
        log.append_as_leader(make_batch(2, ts=i), 2, 0)
    log.high_watermark = 20
    before = log.read(0, 10**6).records
    log.close()
    again = open_log()
    assert (again.log_end_offset, again.high_watermark, again.recovery_point) == (24, 20, 24)
    assert again.read(0, 10**6).records == before
    assert again.leader_epoch_cache.latest_epoch == 2
    assert again.append_as_leader(make_batch(1), 2, 0).first_offset == 24


def test_flush_messages_policy_moves_recovery_point(open_log) -> None:
    log = open_log(flush_messages=4)
    log.append_as_leader(make_batch(3), 0, 0)
    assert log.recovery_point == 0
    log.append_as_leader(make_batch(1), 0, 0)
    assert log.recovery_point == 4


def test_flush_ms_policy(open_log) -> None:
    log = open_log(now_ms=0, flush_ms=1000)
    log.append_as_leader(make_batch(1), 0, now_ms=500)
    assert log.recovery_point == 0
    log.append_as_leader(make_batch(1), 0, now_ms=1500)
    assert log.recovery_point == 2


def test_unflushed_appends_survive_an_unclean_reopen(open_log, tmp_path) -> None:
    """Nothing flushed, nothing checkpointed: a crashed process's writes are in the OS."""
    log = open_log()
    for _ in range(5):
        log.append_as_leader(make_batch(2), 0, 0)
    expected = log.read(0, 10**6).records
    crashed_view = PartitionLog.open(tmp_path / "t-0", LogConfig(), 0)  # no close() before
    try:
        assert crashed_view.log_end_offset == 10
        assert crashed_view.read(0, 10**6).records == expected
    finally:
        crashed_view.close()


def test_delete_removes_directory(open_log, tmp_path) -> None:
    log = open_log()
    log.append_as_leader(make_batch(1), 0, 0)
    log.delete()
    assert not (tmp_path / "t-0").exists()
