"""Corrupt batches: reads answer CORRUPT_MESSAGE (never an empty read), recovery quarantines bit
rot instead of cutting the log, and the periodic recovery-point checkpoint bounds what an unclean
restart re-validates."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest

from kraft.log.batch import iter_batches
from kraft.log.checkpoint import PARTITION_CHECKPOINT, PartitionCheckpoint
from kraft.log.config import LogConfig
from kraft.log.errors import CorruptRecordError
from kraft.log.partition_log import PartitionLog
from log_testing import make_batch

CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=200)
RECORD_COUNT_POS = 57  # the last int32 of the 61-byte header, covered by the CRC


def _filled(directory: Path, batches: int = 60) -> PartitionLog:
    log = PartitionLog.open(directory, CONFIG, 0)
    for _ in range(batches):
        log.append_as_leader(make_batch(5, size=20), 0, 0)
    log.high_watermark = log.log_end_offset
    assert len(log.segments) >= 4
    return log


def _crash(log: PartitionLog) -> None:
    """What kill -9 leaves: the files as written, no flush, no checkpoint written at close."""
    for segment in log.segments:
        segment.close()


def _batch_of(log: PartitionLog, segment_index: int, nth: int) -> tuple[Path, int, int, int]:
    """(segment file, position, base offset, next offset) of the nth batch of a segment."""
    segment = log.segments[segment_index]
    data = segment.read(0, segment.size)
    pos, header = list(iter_batches(data))[nth]
    return segment.log_path, pos, header.base_offset, header.next_offset


def _flip(path: Path, position: int, mask: int = 0x40) -> None:
    with path.open("r+b") as f:
        f.seek(position)
        byte = f.read(1)[0]
        f.seek(position)
        f.write(bytes([byte ^ mask]))


def _read_all_but(log: PartitionLog, start: int, end: int) -> int:
    """Reads every offset outside [start, end) batch by batch; returns the records read. Reads
    inside the range must raise CorruptRecordError."""
    with pytest.raises(CorruptRecordError, match=f"offset {start}"):
        log.read(start, 10**6)
    with pytest.raises(CorruptRecordError):
        log.read(end - 1, 10**6)
    count, offset = 0, log.log_start_offset
    while offset < log.log_end_offset:
        if offset == start:
            offset = end
            continue
        chunk = log.read(offset, 300)
        assert chunk.records, f"empty read at {offset}"
        assert chunk.next_offset > offset and not (offset < start < chunk.next_offset)
        count += sum(h.record_count for _, h in iter_batches(chunk.records))
        offset = chunk.next_offset
    return count


@pytest.mark.parametrize("restart", ["clean", "unclean"])
def test_flipped_header_byte_in_a_closed_segment(tmp_path: Path, restart: str) -> None:
    directory = tmp_path / "t-0"
    log = _filled(directory)
    total, segments = log.log_end_offset, len(log.segments)
    path, pos, start, end = _batch_of(log, 1, 2)
    if restart == "clean":
        log.close()
    else:
        _crash(log)
        assert not (directory / PARTITION_CHECKPOINT).exists()  # never checkpointed: all re-validated
    _flip(path, pos + RECORD_COUNT_POS + 3)

    again = PartitionLog.open(directory, CONFIG, 0)
    try:
        assert again.log_end_offset == total and len(again.segments) == segments
        assert _read_all_but(again, start, end) == total - (end - start)
        if restart == "unclean":  # found by recovery: quarantined, kept, checkpointed
            [region] = again.quarantined
            assert (region.start_offset, region.end_offset) == (start, end)
            again.checkpoint()
            assert PartitionCheckpoint.read(directory).quarantined == ((start, end),)
        # the log keeps taking appends after it
        assert again.append_as_leader(make_batch(1), 0, 0).first_offset == total
    finally:
        again.close()
    if restart == "unclean":  # a quarantined segment is re-validated at every start
        third = PartitionLog.open(directory, CONFIG, 0)
        try:
            assert [(r.start_offset, r.end_offset) for r in third.quarantined] == [(start, end)]
        finally:
            third.close()


def test_a_read_reaching_a_corrupt_batch_serves_what_precedes_it(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = _filled(directory)
    path, pos, start, _ = _batch_of(log, 1, 2)
    log.close()
    _flip(path, pos + RECORD_COUNT_POS + 3)
    again = PartitionLog.open(directory, CONFIG, 0)
    try:
        segment_start = again.segments[1].base_offset
        chunk = again.read(segment_start, 10**6)
        assert chunk.records and chunk.next_offset == start
    finally:
        again.close()


def test_inflated_base_offset_answers_corrupt_not_empty(tmp_path: Path) -> None:
    """The base offset is outside the CRC: a flipped high bit made the batch look far ahead, and
    reads of it answered nothing, forever."""
    directory = tmp_path / "t-0"
    log = _filled(directory)
    path, pos, start, _ = _batch_of(log, 1, 2)
    log.close()
    with path.open("r+b") as f:
        f.seek(pos)
        (base,) = struct.unpack(">q", f.read(8))
        f.seek(pos)
        f.write(struct.pack(">q", base | 1 << 40))
    again = PartitionLog.open(directory, CONFIG, 0)
    try:
        with pytest.raises(CorruptRecordError):
            again.read(start, 10**6, max_offset=again.high_watermark)
    finally:
        again.close()


def test_unclean_restart_validates_only_from_the_recovery_point(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = _filled(directory, 40)
    log.flush_closed_segments()
    checkpointed = log.segments[-1].base_offset
    assert log.recovery_point == checkpointed
    assert PartitionCheckpoint.read(directory).recovery_point == checkpointed
    for _ in range(40):  # rolled after the checkpoint: not known flushed
        log.append_as_leader(make_batch(5, size=20), 0, 0)
    below = _batch_of(log, 1, 1)
    above_index = next(i for i, s in enumerate(log.segments) if s.base_offset >= checkpointed) + 1
    above = _batch_of(log, above_index, 1)
    total = log.log_end_offset
    _crash(log)
    for path, pos, _, _ in (below, above):
        _flip(path, pos + RECORD_COUNT_POS + 3)

    again = PartitionLog.open(directory, CONFIG, 0)
    try:
        # only the segment past the recovery point was re-validated and its batch quarantined;
        # the one below was trusted, and reads of its corrupt batch fail all the same
        assert [(r.start_offset, r.end_offset) for r in again.quarantined] == [above[2:]]
        with pytest.raises(CorruptRecordError):
            again.read(below[2], 10**6)
        assert again.log_end_offset == total and again.recovery_point == checkpointed
    finally:
        again.close()


def test_compaction_stops_at_a_quarantined_segment(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = _filled(directory)
    path, pos, start, end = _batch_of(log, 1, 2)
    _crash(log)
    _flip(path, pos + RECORD_COUNT_POS + 3)
    compacted = LogConfig(segment_bytes=2000, index_interval_bytes=200, cleanup_policy="compact")
    again = PartitionLog.open(directory, compacted, 0)
    try:
        again.high_watermark = again.log_end_offset
        again.compact(10**12)
        assert [(r.start_offset, r.end_offset) for r in again.quarantined] == [(start, end)]
        with pytest.raises(CorruptRecordError):
            again.read(start, 10**6)
    finally:
        again.close()


# -- corruption met by a read (issue 11 item 3: recovery never scanned it) ---------------------------


@pytest.mark.parametrize("damage", ["crc", "length"])
def test_a_read_quarantines_corruption_recovery_never_saw(tmp_path: Path, damage: str, caplog) -> None:
    """After a clean restart closed segments are trusted, not scanned: a flipped byte there was
    met only by a read, which answered CORRUPT_MESSAGE but quarantined, logged and counted
    nothing (so a follower never refetched it). Now the read quarantines the region as recovery
    would, and every later batch and segment stays readable."""
    directory = tmp_path / "t-0"
    log = _filled(directory)
    total, segments = log.log_end_offset, len(log.segments)
    path, pos, start, end = _batch_of(log, 1, 2)
    log.close()
    # crc: a field the CRC covers; length: the batch length (outside the CRC), so even header
    # scans of the segment stop there
    _flip(path, pos + (RECORD_COUNT_POS + 3 if damage == "crc" else 8))

    again = PartitionLog.open(directory, CONFIG, 0)
    try:
        assert again.quarantined == ()  # a clean restart: nothing scanned, nothing found
        with caplog.at_level(logging.ERROR, logger="log.recovery"):
            with pytest.raises(CorruptRecordError, match=f"offset {start}"):
                again.read(start, 10**6)
        [region] = again.quarantined  # what kraft_log_quarantined_regions counts
        assert (region.start_offset, region.end_offset) == (start, end)
        assert (region.segment_base_offset, region.position) == (again.segments[1].base_offset, pos)
        assert (f"t-0: offsets [{start}, {end}) of segment {path.name} (bytes {pos}-" in caplog.text
                and "are corrupt and quarantined (found by a read)" in caplog.text)
        # the region keeps answering CORRUPT_MESSAGE, reads before it stop at it, the rest is
        # intact: no segment deleted, no offset lost
        assert again.log_end_offset == total and len(again.segments) == segments
        chunk = again.read(again.segments[1].base_offset, 10**6)
        assert chunk.records and chunk.next_offset == start
        assert _read_all_but(again, start, end) == total - (end - start)
        assert len(again.quarantined) == 1  # met again: not quarantined twice
        assert again.append_as_leader(make_batch(1), 0, 0).first_offset == total
    finally:
        again.close()  # checkpoints the region: the next start re-validates the segment
    assert PartitionCheckpoint.read(directory).quarantined == ((start, end),)
    third = PartitionLog.open(directory, CONFIG, 0)
    try:
        assert [(r.start_offset, r.end_offset) for r in third.quarantined] == [(start, end)]
        assert _read_all_but(third, start, end) == total + 1 - (end - start)
    finally:
        third.close()


def test_a_region_a_read_quarantined_in_the_active_segment_survives_kill_9(tmp_path: Path) -> None:
    """Above the recovery point of the active segment recovery cuts a torn tail; a region a read
    quarantined there (and the periodic checkpoint listed) is rot, not a torn tail: after kill -9
    it stays quarantined and the batches after it are kept."""
    directory = tmp_path / "t-0"
    log = _filled(directory, 40)
    log.flush_closed_segments()
    active = len(log.segments) - 1
    for _ in range(3):
        log.append_as_leader(make_batch(5, size=20), 0, 0)
    assert len(log.segments) - 1 == active
    path, pos, start, end = _batch_of(log, active, 1)
    total = log.log_end_offset
    assert end < total and start >= log.recovery_point
    _flip(path, pos + RECORD_COUNT_POS + 3)
    with pytest.raises(CorruptRecordError):
        log.read(start, 10**6)
    assert [(r.start_offset, r.end_offset) for r in log.quarantined] == [(start, end)]
    log.flush_closed_segments()  # the periodic checkpoint records it
    assert PartitionCheckpoint.read(directory).quarantined == ((start, end),)
    _crash(log)

    again = PartitionLog.open(directory, CONFIG, 0)
    try:
        assert again.log_end_offset == total
        assert [(r.start_offset, r.end_offset) for r in again.quarantined] == [(start, end)]
        assert _read_all_but(again, start, end) == total - (end - start)
    finally:
        again.close()


# -- offsets no file holds (issue 22 item 14) -----------------------------------------------------


@pytest.mark.parametrize("restart", ["clean", "unclean"])
@pytest.mark.parametrize("damage", ["cut at a batch boundary", "deleted"])
def test_a_truncated_or_deleted_closed_segment_is_quarantined_not_skipped(
        tmp_path: Path, restart: str, damage: str, caplog) -> None:
    """A closed segment cut to half at a batch boundary, or deleted: reads of the missing
    offsets answered the next segment's records and nothing was logged. Now the range between
    the segment's end and the next segment's base offset is quarantined: reads answer
    CORRUPT_MESSAGE naming it, it is logged at ERROR, a follower's truncation clears it."""
    directory = tmp_path / "t-0"
    log = _filled(directory)
    total, segment = log.log_end_offset, log.segments[2]
    following = log.segments[3].base_offset
    if damage == "deleted":
        start = segment.base_offset
    else:
        path, cut, start, _ = _batch_of(log, 2, len(list(iter_batches(segment.read(0, segment.size)))) // 2)
    if restart == "clean":
        log.close()
    else:
        _crash(log)
    if damage == "deleted":
        for suffix in (".log", ".index", ".timeindex"):
            (directory / f"{segment.base_offset:020d}{suffix}").unlink()
    else:
        with path.open("r+b") as f:
            f.truncate(cut)

    with caplog.at_level(logging.ERROR, logger="log.recovery"):
        again = PartitionLog.open(directory, CONFIG, 0)
    try:
        assert again.log_end_offset == total
        assert [(r.start_offset, r.end_offset) for r in again.quarantined] == [(start, following)]
        assert f"offsets [{start}, {following}) of segment" in caplog.text and "missing" in caplog.text
        with pytest.raises(CorruptRecordError, match=rf"\[{start}, {following}\)"):
            again.read(start, 10**6)
        assert _read_all_but(again, start, following) == total - (following - start)
        again.checkpoint()
        assert PartitionCheckpoint.read(directory).quarantined == ((start, following),)
        again.truncate_to(start)  # what a follower does to refetch the range from its leader
        assert again.quarantined == () and again.log_end_offset == start
        assert again.append_as_leader(make_batch(1), 0, 0).first_offset == start
    finally:
        again.close()


def test_gaps_compaction_left_are_not_missing_offsets(tmp_path: Path) -> None:
    """Compaction removes whole batches and segments: the gaps below its checkpointed offset
    are its own, not data lost."""
    compacted = LogConfig(segment_bytes=300, index_interval_bytes=64, cleanup_policy="compact",
                          min_compaction_lag_ms=0, delete_retention_ms=0)
    log = PartitionLog.open(tmp_path / "c-0", compacted, 0)
    log.append_as_leader(make_batch(1, key=b"kept", size=40), 0, 0)
    for i in range(30):  # then keys k0-k2 over and over: the segments between hold only old ones
        log.append_as_leader(make_batch(1, key=f"k{i % 3}".encode(), size=40), 0, 0)
    log.high_watermark = log.log_end_offset
    bases = [s.base_offset for s in log.segments]
    stats = log.compact(10**12)
    assert stats.records_removed and [s.base_offset for s in log.segments] != bases
    segments = log.segments
    assert any(a.next_offset < b.base_offset for a, b in zip(segments, segments[1:]))
    _crash(log)
    again = PartitionLog.open(tmp_path / "c-0", compacted, 0)
    try:
        assert again.quarantined == ()
    finally:
        again.close()
    # the same log under cleanup.policy=delete now: the old gaps are still compaction's
    deleting = PartitionLog.open(tmp_path / "c-0", LogConfig(segment_bytes=300, index_interval_bytes=64), 0)
    try:
        assert deleting.quarantined == ()
    finally:
        deleting.close()


def test_a_flip_in_the_active_segment_before_the_first_checkpoint_is_rot(tmp_path: Path) -> None:
    """Issue 22 item 15: no recovery-point checkpoint yet, a bit flipped at position 100 of the
    active segment, kill -9: recovery took it for a torn tail and cut every later batch. Valid
    batches after it make it rot: only the hit batch is quarantined."""
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, LogConfig(), 0)
    for _ in range(20):
        log.append_as_leader(make_batch(10, size=20), 0, 0)
    path, pos, start, end = _batch_of(log, 0, 0)
    assert pos <= 100 < pos + 61 + 10 * 20 and log.recovery_point == 0
    _crash(log)
    _flip(path, 100)
    again = PartitionLog.open(directory, LogConfig(), 0)
    try:
        assert again.log_end_offset == 200
        assert [(r.start_offset, r.end_offset) for r in again.quarantined] == [(start, end)]
        assert _read_all_but(again, start, end) == 190
    finally:
        again.close()
