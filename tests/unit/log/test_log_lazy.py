"""Lazy partition logs (issue 13): a new partition's log creates no file, holds no descriptor and
does no fsync until its first append; empty, it answers as an empty log (offsets 0, epochs in
memory), restarts as one, and deletes as one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kraft.log.batch import build_batch
from kraft.log.config import LogConfig
from kraft.log.epoch_cache import LEADER_EPOCH_CHECKPOINT, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, EpochEntry
from kraft.log.partition_log import LATEST_TIMESTAMP, PartitionLog
from log_testing import all_records, make_batch

PARTITIONS = 1_000


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every os.fsync of the test, by descriptor."""
    calls: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    return calls


def test_a_thousand_new_logs_create_no_file_and_hold_no_descriptor(tmp_path: Path, fsyncs) -> None:
    before = open_descriptors()
    logs = [PartitionLog.open(tmp_path / f"t-{i}", LogConfig(), 0) for i in range(PARTITIONS)]
    for plog in logs:  # becoming leader at epoch 3 (the replica manager's `_open_logs`)
        assert plog.assign_epoch_start(3, plog.log_end_offset)
        plog.flush_closed_segments()  # the periodic checkpoint: nothing to write
    assert os.listdir(tmp_path) == []
    assert open_descriptors() == before
    assert fsyncs == []
    plog = logs[0]
    assert (plog.log_start_offset, plog.log_end_offset, plog.high_watermark) == (0, 0, 0)
    assert not plog.on_disk and plog.size_in_bytes == 0 and len(plog.segments) == 1
    answer = plog.read(0, 1024)
    assert (answer.records, answer.next_offset, answer.high_watermark) == (b"", 0, 0)
    assert plog.read(0, 1024, max_offset=0).records == b""
    assert plog.offset_for_timestamp(LATEST_TIMESTAMP) == (0, -1)
    assert plog.offset_for_timestamp(0) is None
    assert plog.delete_old_segments(now_ms=10**12) == 0
    plog.compact(now_ms=0)
    for plog in logs:
        plog.close()
    assert os.listdir(tmp_path) == [] and fsyncs == []


def test_the_first_append_creates_the_files_and_the_epoch_checkpoint(tmp_path: Path, fsyncs) -> None:
    directory = tmp_path / "t-0"
    plog = PartitionLog.open(directory, LogConfig(), 0)
    plog.assign_epoch_start(2, 0)
    assert not directory.exists()
    assert plog.append_as_leader(make_batch(3), 2, 0).first_offset == 0
    names = sorted(os.listdir(directory))
    assert names == ["00000000000000000000.index", "00000000000000000000.log",
                     "00000000000000000000.timeindex", LEADER_EPOCH_CHECKPOINT]
    assert (directory / LEADER_EPOCH_CHECKPOINT).read_text().split("\n")[:3] == ["0", "1", "2 0"]
    assert fsyncs == []  # durability comes from replication, and from the next flush
    plog.close()
    assert fsyncs  # the clean shutdown's flush
    again = PartitionLog.open(directory, LogConfig(), 0)
    try:
        assert again.log_end_offset == 3 and again.leader_epoch_cache.entries == (EpochEntry(2, 0),)
        assert [r.offset for r in all_records(again.read(0, 4096).records)] == [0, 1, 2]
    finally:
        again.close()


def test_a_follower_fetch_with_data_creates_the_files(tmp_path: Path) -> None:
    leader = PartitionLog.open(tmp_path / "leader", LogConfig(), 0)
    follower = PartitionLog.open(tmp_path / "follower", LogConfig(), 0)
    try:
        leader.append_as_leader(make_batch(2), 4, 0)
        assert not (tmp_path / "follower").exists()
        follower.append_as_follower(leader.read(0, 4096).records, 0)
        assert (tmp_path / "follower" / "00000000000000000000.log").stat().st_size > 0
        assert follower.leader_epoch_cache.entries == (EpochEntry(4, 0),)
        assert (tmp_path / "follower" / LEADER_EPOCH_CHECKPOINT).exists()
    finally:
        leader.close()
        follower.close()


def test_an_empty_log_answers_offsets_for_leader_epoch(tmp_path: Path) -> None:
    """KIP-101/279 on a log with no record: the leader's epoch starts at 0, so an older epoch a
    follower asks about ends at 0 (it truncates everything); with no epoch at all (a follower's
    empty log) the answer is undefined, as Kafka's."""
    leader = PartitionLog.open(tmp_path / "t-0", LogConfig(), 0)
    leader.assign_epoch_start(5, 0)
    assert leader.end_offset_for_epoch(5) == (5, 0)
    assert leader.end_offset_for_epoch(2) == (2, 0)
    assert leader.end_offset_for_epoch(7) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    empty = PartitionLog.open(tmp_path / "t-1", LogConfig(), 0)
    assert empty.end_offset_for_epoch(0) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    # a follower holding records of epoch 2 asks the lazy leader and truncates to 0
    follower = PartitionLog.open(tmp_path / "t-2", LogConfig(), 0)
    follower.append_as_leader(make_batch(4), 2, 0)
    epoch, end = leader.end_offset_for_epoch(follower.leader_epoch_cache.latest_epoch)
    follower.truncate_to(end)
    assert (epoch, follower.log_end_offset, follower.leader_epoch_cache.entries) == (2, 0, ())
    for plog in (leader, empty, follower):
        plog.close()
    assert not (tmp_path / "t-0").exists() and not (tmp_path / "t-1").exists()


@pytest.mark.parametrize("directory_exists", [False, True])
def test_an_empty_partition_restarts_empty(tmp_path: Path, directory_exists: bool) -> None:
    directory = tmp_path / "t-0"
    if directory_exists:
        directory.mkdir()
    plog = PartitionLog.open(directory, LogConfig(), 0)
    plog.assign_epoch_start(1, 0)
    plog.close()
    assert directory.exists() == directory_exists
    assert not directory_exists or not any(name.endswith(".log") for name in os.listdir(directory))
    again = PartitionLog.open(directory, LogConfig(), 0)
    try:
        assert (again.log_start_offset, again.log_end_offset, again.high_watermark) == (0, 0, 0)
        assert again.leader_epoch_cache.entries == ()  # no record at epoch 1: nothing lost
        assert again.append_as_leader(make_batch(1), 2, 0).first_offset == 0
    finally:
        again.close()


def test_a_never_written_log_deletes(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(), 0)
    plog.assign_epoch_start(1, 0)
    plog.delete()
    assert os.listdir(tmp_path) == []
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(), 0)
    plog.append_as_leader(make_batch(1), 1, 0)
    plog.delete()
    assert os.listdir(tmp_path) == []


def test_truncate_fully_keeps_the_new_log_start_across_a_restart(tmp_path: Path) -> None:
    """A follower told its fetch offset is below the leader's log start restarts empty there:
    the log start is checkpointed (the only files then), the segment comes with the data."""
    directory = tmp_path / "t-0"
    plog = PartitionLog.open(directory, LogConfig(), 0)
    plog.truncate_fully_and_start_at(0, now_ms=0)
    assert not directory.exists()  # what it would recover anyway
    plog.truncate_fully_and_start_at(40, now_ms=0)
    assert not any(name.endswith(".log") for name in os.listdir(directory))
    plog.close()
    again = PartitionLog.open(directory, LogConfig(), 0)
    try:
        assert (again.log_start_offset, again.log_end_offset) == (40, 40)
        assert again.append_as_follower(_batch_at(40, epoch=3), 0).first_offset == 40
        assert again.leader_epoch_cache.entries == (EpochEntry(3, 40),)
    finally:
        again.close()


def test_a_log_emptied_by_retention_keeps_its_start_and_producers(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    config = LogConfig(segment_bytes=300, retention_ms=1000)
    plog = PartitionLog.open(directory, config, 0)
    for i in range(10):
        plog.append_as_leader(build_batch([(None, b"v", None, i * 100)], producer_id=7,
                                          producer_epoch=0, base_sequence=i), 0, 0)
    plog.high_watermark = plog.log_end_offset
    assert plog.delete_old_segments(now_ms=5_000) > 0  # every record expired, no producer
    assert not any(name.endswith(".log") for name in os.listdir(directory))
    plog.close()
    again = PartitionLog.open(directory, config, 0)
    try:
        assert (again.log_start_offset, again.log_end_offset) == (10, 10)
        retry = again.append_as_leader(build_batch([(None, b"v", None, 0)], producer_id=7,
                                                   producer_epoch=0, base_sequence=9), 0, 0)
        assert retry.duplicate  # the producer state survived the empty log
        assert again.append_as_leader(build_batch([(None, b"v", None, 0)], producer_id=7,
                                                  producer_epoch=0, base_sequence=10), 0, 0).first_offset == 10
    finally:
        again.close()


def _batch_at(offset: int, epoch: int) -> bytes:
    """A follower's batch: stamped with its leader's offsets and epoch."""
    from kraft.log.validator import LogValidator

    validator = LogValidator(LogConfig())
    validated = validator.assign_offsets(validator.validate_for_leader(make_batch(1)), offset, epoch, 0)
    return bytes(validated.buffer)
