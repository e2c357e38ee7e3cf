"""LogSegment: append/read, offset and time lookups, truncation, recovery, roll decisions."""

from __future__ import annotations

from pathlib import Path

from kraft.log.batch import BatchHeader, stamp
from kraft.log.config import LogConfig
from kraft.log.segment import LogSegment
from log_testing import all_records, make_batch

CONFIG = LogConfig(index_interval_bytes=100, segment_bytes=10_000)


def _fill(segment: LogSegment, count: int, base: int = 0, records_per_batch: int = 2) -> list[int]:
    """Appends `count` batches with offsets from `base`; returns their positions."""
    positions = []
    offset = base
    for i in range(count):
        data = bytearray(make_batch(records_per_batch, ts=1000 + 10 * i))
        stamp(data, 0, offset, 1)
        positions.append(segment.size)
        segment.append(data, [(0, BatchHeader.parse(data))])
        offset += records_per_batch
    return positions


def test_append_find_read_and_indexes(tmp_path: Path) -> None:
    seg = LogSegment(tmp_path, 100, CONFIG, now_ms=0)
    positions = _fill(seg, 20, base=100)
    assert (tmp_path / "00000000000000000100.log").exists()
    assert seg.next_offset == 140 and len(seg.offset_index) > 3
    for offset in range(100, 140):
        pos, header = seg.find_batch(offset)
        assert header.base_offset <= offset <= header.last_offset
        assert pos == positions[(offset - 100) // 2]
    assert seg.find_batch(140) is None
    records = all_records(seg.read(positions[3], 10**6))
    assert [r.offset for r in records] == list(range(106, 140))
    seg.close()


def test_find_offset_by_timestamp(tmp_path: Path) -> None:
    seg = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    _fill(seg, 20)  # batch i holds timestamps 1000+10i, 1001+10i at offsets 2i, 2i+1
    assert seg.find_offset_by_timestamp(0, 0) == (0, 1000)
    assert seg.find_offset_by_timestamp(1051, 0) == (11, 1051)
    assert seg.find_offset_by_timestamp(1052, 0) == (12, 1060)
    assert seg.find_offset_by_timestamp(1000, 7) == (7, 1031)
    assert seg.find_offset_by_timestamp(5000, 0) is None
    seg.close()


def test_truncate_to_and_reopen(tmp_path: Path) -> None:
    seg = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    positions = _fill(seg, 20)
    removed = seg.truncate_to(21)  # mid-batch: the batch holding 21 goes
    assert seg.size == positions[10] and removed > 0
    assert seg.next_offset == 20 and seg.max_timestamp == 1091
    seg.close()
    again = LogSegment.open(tmp_path, 0, CONFIG, now_ms=0)
    assert again.next_offset == 20 and again.size == positions[10]
    assert again.find_batch(19)[1].base_offset == 18
    again.close()


def test_recover_cuts_torn_tail_and_rebuilds_indexes(tmp_path: Path) -> None:
    seg = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    positions = _fill(seg, 10)
    seg.close()
    log_path = tmp_path / "00000000000000000000.log"
    with log_path.open("r+b") as f:
        f.truncate(positions[7] + 30)  # torn write inside batch 7
    (tmp_path / "00000000000000000000.index").unlink()
    seg = LogSegment(tmp_path, 0, CONFIG, now_ms=0)
    result = seg.recover()
    assert result.valid_bytes == positions[7] and result.truncated_bytes == 30 and result.error
    assert seg.next_offset == 14 and log_path.stat().st_size == positions[7]
    assert seg.find_batch(13)[1].base_offset == 12 and len(seg.offset_index) > 0
    seg.close()


def test_roll_decisions(tmp_path: Path) -> None:
    seg = LogSegment(tmp_path, 0, LogConfig(), now_ms=1_000)
    config = LogConfig(segment_bytes=1000, segment_ms=100)
    assert not seg.should_roll(config, 5000, 0, 0, now_ms=10**9)  # empty never rolls
    _fill(seg, 1)  # first batch max timestamp 1001
    assert not seg.should_roll(config, 10, 1050, 2, now_ms=0)
    assert seg.should_roll(config, 1000, 1050, 2, now_ms=0)  # size
    assert seg.should_roll(config, 10, 1102, 2, now_ms=0)  # by the batches' timestamps
    assert seg.should_roll(config, 10, 1050, 2**31 + 5, now_ms=0)  # relative offset overflow
    seg.close()


def test_roll_by_creation_time_without_timestamps(tmp_path: Path) -> None:
    seg = LogSegment(tmp_path, 0, LogConfig(), now_ms=1_000)
    data = bytearray(make_batch(1, ts=-1))
    seg.append(data, [(0, BatchHeader.parse(data))])
    config = LogConfig(segment_ms=100)
    assert not seg.should_roll(config, 10, -1, 1, now_ms=1_050)
    assert seg.should_roll(config, 10, -1, 1, now_ms=1_101)
    seg.close()
