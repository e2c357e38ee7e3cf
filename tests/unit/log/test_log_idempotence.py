"""PartitionLog with idempotent producers: a retried batch keeps its original offsets and is not
written twice; the state survives a restart (snapshot, or a rebuild from batch headers), follows
replication, and rolls back with truncation."""

from __future__ import annotations

import pytest

from kraft.log.batch import build_batch
from kraft.log.checkpoint import PRODUCER_STATE_SNAPSHOT
from kraft.log.errors import InvalidProducerEpochError, OutOfOrderSequenceError, UnknownProducerIdError
from log_testing import all_records

PID = 4242


def batch(seq: int, n: int = 2, epoch: int = 0, pid: int = PID, ts: int = 1_000) -> bytes:
    return build_batch([(None, b"v%d" % (seq + i), None, ts + i) for i in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def values(log) -> list[bytes]:
    return [r.value for r in all_records(log.read(0, 10**7).records)]


def test_a_retried_batch_is_answered_with_its_original_offsets_and_written_once(open_log) -> None:
    log = open_log()
    first = log.append_as_leader(batch(0), 0, 0)
    log.append_as_leader(batch(2), 0, 0)
    retry = log.append_as_leader(batch(0), 0, 0)
    assert (retry.first_offset, retry.last_offset, retry.duplicate) == (0, 1, True)
    assert (first.first_offset, first.duplicate) == (0, False)
    assert retry.record_count == 0 and log.log_end_offset == 4
    assert values(log) == [b"v0", b"v1", b"v2", b"v3"]


def test_a_retry_on_a_log_append_time_topic_answers_the_first_append_time(open_log) -> None:
    """Kafka answers a duplicate with its batch metadata's time, as with its offsets; it
    survives a restart through the producer state snapshot."""
    log = open_log(message_timestamp_type="LogAppendTime")
    first = log.append_as_leader(batch(0), 0, 5_000)
    retry = log.append_as_leader(batch(0), 0, 9_000)
    assert (first.log_append_time, retry.duplicate, retry.log_append_time) == (5_000, True, 5_000)
    log.close()
    assert open_log(message_timestamp_type="LogAppendTime").append_as_leader(
        batch(0), 0, 9_000).log_append_time == 5_000


def test_a_retry_on_a_create_time_topic_answers_no_log_append_time(open_log) -> None:
    log = open_log()
    log.append_as_leader(batch(0), 0, 5_000)
    assert log.append_as_leader(batch(0), 0, 9_000).log_append_time == -1


def test_errors_write_nothing(open_log) -> None:
    log = open_log()
    log.append_as_leader(batch(0, epoch=3), 0, 0)
    for bad, error in ((batch(5, epoch=3), OutOfOrderSequenceError),
                       (batch(2, epoch=2), InvalidProducerEpochError),
                       (batch(1, pid=99), UnknownProducerIdError),
                       (batch(2, epoch=3) + batch(9, epoch=3), OutOfOrderSequenceError)):
        with pytest.raises(error):
            log.append_as_leader(bad, 0, 0)
    assert log.log_end_offset == 2


def test_a_replay_of_more_than_five_batches_is_recognised_whole(open_log) -> None:
    log = open_log()
    replay = b"".join(batch(seq) for seq in range(0, 16, 2))  # eight batches in one request
    assert log.append_as_leader(replay, 0, 0).first_offset == 0
    again = log.append_as_leader(replay, 0, 0)
    assert again.duplicate and (again.first_offset, again.last_offset) == (6, 15)  # the kept five
    assert log.log_end_offset == 16


def test_a_request_mixing_a_retry_and_new_batches_appends_only_the_new(open_log) -> None:
    log = open_log()
    log.append_as_leader(batch(0), 0, 0)
    info = log.append_as_leader(batch(0) + batch(2) + batch(4), 0, 0)
    assert (info.first_offset, info.last_offset, info.record_count, info.duplicate) == (0, 5, 4, False)
    assert values(log) == [b"v%d" % i for i in range(6)]


def test_state_survives_a_clean_restart_and_a_lost_snapshot(open_log, tmp_path) -> None:
    log = open_log()
    for seq in range(0, 10, 2):
        log.append_as_leader(batch(seq), 0, 0)
    log.close()
    reopened = open_log()
    assert reopened.append_as_leader(batch(8), 0, 0).first_offset == 8
    reopened.close()
    (tmp_path / "t-0" / PRODUCER_STATE_SNAPSHOT).unlink()
    rebuilt = open_log()  # from every batch header
    assert rebuilt.append_as_leader(batch(6), 0, 0).duplicate
    assert rebuilt.append_as_leader(batch(10), 0, 0).first_offset == 10


def test_the_log_after_the_snapshot_is_replayed(open_log) -> None:
    log = open_log()
    log.append_as_leader(batch(0), 0, 0)
    log.flush()  # snapshot at offset 2
    log.append_as_leader(batch(2), 0, 0)
    log._closed = True  # a crash: no checkpoint, the snapshot stays at offset 2
    assert open_log().append_as_leader(batch(2), 0, 0).duplicate


def test_a_snapshot_past_the_recovered_log_end_is_ignored(open_log, tmp_path) -> None:
    log = open_log()
    log.append_as_leader(batch(0), 0, 0)
    log.append_as_leader(batch(2), 0, 0)
    log.close()  # snapshot at offset 4
    segment = next((tmp_path / "t-0").glob("*.log"))
    with open(segment, "r+b") as f:  # a lost tail: only the first batch survives
        f.truncate(len(batch(0)))
    reopened = open_log()
    assert reopened.log_end_offset == 2
    info = reopened.append_as_leader(batch(2), 0, 0)
    assert (info.first_offset, info.duplicate) == (2, False)


def test_truncation_rolls_the_state_back(open_log) -> None:
    log = open_log()
    for seq in range(0, 6, 2):
        log.append_as_leader(batch(seq), 0, 0)
    log.flush()
    log.truncate_to(2)  # below the snapshot: it is dropped, the state rebuilt
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(batch(4), 1, 0)
    again = log.append_as_leader(batch(2), 1, 0)
    assert (again.first_offset, again.duplicate) == (2, False)
    assert log.append_as_leader(batch(0), 1, 0).duplicate
    log.truncate_fully_and_start_at(100)
    with pytest.raises(UnknownProducerIdError):
        log.append_as_leader(batch(6), 1, 0)


def test_a_follower_learns_the_state_from_replicated_batches(open_log, tmp_path) -> None:
    from kraft.log.config import LogConfig
    from kraft.log.partition_log import PartitionLog

    leader = PartitionLog.open(tmp_path / "leader", LogConfig(), 0)
    try:
        leader.append_as_leader(batch(0), 5, 0)
        leader.append_as_leader(batch(2), 5, 0)
        follower = open_log()
        follower.append_as_follower(leader.read(0, 10**6).records, 0)
        # the follower becomes leader: a producer's retry is still recognised
        assert follower.append_as_leader(batch(2), 6, 0).first_offset == 2
        assert follower.append_as_leader(batch(4), 6, 0).first_offset == 4
    finally:
        leader.close()


def test_idle_producers_expire_with_retention(open_log) -> None:
    log = open_log(producer_id_expiration_ms=1_000)
    log.append_as_leader(batch(0, ts=5_000), 0, 0)
    log.delete_old_segments(now_ms=5_500)
    assert log.append_as_leader(batch(2, ts=5_600), 0, 0).first_offset == 2
    log.delete_old_segments(now_ms=6_601)
    with pytest.raises(UnknownProducerIdError):
        log.append_as_leader(batch(4), 0, 0)


def test_compaction_keeps_the_sequences_derivable_from_headers(open_log, tmp_path) -> None:
    log = open_log(cleanup_policy="compact")

    def keyed(seq: int, *keys: bytes, pid: int = PID) -> bytes:
        return build_batch([(k, b"x", None, 1_000) for k in keys], producer_id=pid,
                           producer_epoch=0 if pid >= 0 else -1, base_sequence=seq if pid >= 0 else -1)

    log.append_as_leader(keyed(0, b"a", b"b"), 0, 0)
    log.append_as_leader(keyed(2, b"c", b"a"), 0, 0)  # sequences 2-3, offsets 2-3
    log.roll(0)
    log.append_as_leader(keyed(0, b"c", pid=-1), 0, 0)  # supersedes offset 2, the batch's first
    log.roll(0)
    log.high_watermark = log.log_end_offset
    assert log.compact(10_000).records_removed == 2  # a (offset 0) and c (offset 2)
    log.close()
    (tmp_path / "t-0" / PRODUCER_STATE_SNAPSHOT).unlink()
    assert open_log(cleanup_policy="compact").append_as_leader(keyed(4, b"d"), 0, 0).first_offset == 5
