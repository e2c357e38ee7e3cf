"""Retention: time, size and log-start rules delete whole old segments below the high watermark."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from kraft.log.config import LogConfig
from kraft.log.retention import segments_to_delete
from log_testing import all_records, make_batch


@dataclass
class FakeSegment:
    base_offset: int
    size: int
    largest_timestamp: int


def _segments(sizes_and_ts: list[tuple[int, int]]) -> list[FakeSegment]:
    return [FakeSegment(i * 10, size, ts) for i, (size, ts) in enumerate(sizes_and_ts)]


def _count(segments, config, hw=None, log_start=0, now=10_000) -> int:
    leo = segments[-1].base_offset + 10
    return segments_to_delete(
        segments, config, log_start_offset=log_start,
        high_watermark=leo if hw is None else hw, log_end_offset=leo, now_ms=now,
    )


def test_time_retention_deletes_expired_prefix_only() -> None:
    segs = _segments([(100, 1000), (100, 8000), (100, 1000), (100, 9000)])
    config = LogConfig(retention_ms=4000)
    assert _count(segs, config) == 1  # the third is old too, but the second stops the prefix
    assert _count(segs, LogConfig(retention_ms=-1)) == 0
    assert _count(segs, LogConfig(retention_ms=100)) == 4  # everything, active included
    assert _count(segs, LogConfig(retention_ms=100), hw=25) == 2  # only wholly below the HW


def test_compact_only_topics_keep_old_segments() -> None:
    segs = _segments([(100, 0), (100, 0)])
    assert _count(segs, LogConfig(retention_ms=1, cleanup_policy="compact")) == 0
    assert _count(segs, LogConfig(retention_ms=1, cleanup_policy="compact,delete")) == 2


def test_empty_active_segment_is_never_deleted() -> None:
    segs = _segments([(100, 0), (0, 0)])
    assert _count(segs, LogConfig(retention_ms=1)) == 1


def test_log_start_breach() -> None:
    segs = _segments([(100, 9999), (100, 9999), (100, 9999)])
    assert _count(segs, LogConfig(retention_ms=-1), log_start=20) == 2
    assert _count(segs, LogConfig(retention_ms=-1), log_start=19) == 1


@given(
    sizes=st.lists(st.integers(0, 500), min_size=1, max_size=10),
    retention_bytes=st.integers(0, 3000),
)
def test_size_retention_keeps_at_least_retention_bytes(sizes, retention_bytes) -> None:
    segs = _segments([(s, 10_000) for s in sizes])
    segs[-1].size = max(segs[-1].size, 1)
    count = _count(segs, LogConfig(retention_ms=-1, retention_bytes=retention_bytes))
    remaining = sum(s.size for s in segs[count:])
    assert count == 0 or remaining >= retention_bytes
    if count < len(segs):  # deleting one more would have gone below the limit
        assert remaining - segs[count].size < retention_bytes


def test_partition_log_retention_advances_log_start(open_log) -> None:
    log = open_log(segment_bytes=300, retention_ms=1000)
    for i in range(10):
        log.append_as_leader(make_batch(2, ts=i * 100), 0, 0)
    log.high_watermark = log.log_end_offset
    total = len(log.segments)
    deleted = log.delete_old_segments(now_ms=1500)  # timestamps < 500 expired
    assert 0 < deleted < total
    assert log.log_start_offset == log.segments[0].base_offset > 0
    remaining = all_records(log.read(log.log_start_offset, 10**6).records)
    assert remaining[0].offset == log.log_start_offset
    left = len(log.segments)
    assert log.delete_old_segments(now_ms=10**9) == left  # all, after rolling a fresh segment
    assert len(log.segments) == 1 and log.segments[0].size == 0
    assert log.log_start_offset == log.log_end_offset == 20
    assert log.read(20, 100).records == b""
    log.close()
    again = open_log()
    assert (again.log_start_offset, again.log_end_offset) == (20, 20)


def test_follower_log_start_increment_then_retention(open_log) -> None:
    log = open_log(segment_bytes=300, retention_ms=-1)
    for _ in range(10):
        log.append_as_leader(make_batch(2), 0, 0)
    log.high_watermark = 20
    assert log.maybe_increment_log_start_offset(9)
    assert log.log_start_offset == 9
    deleted = log.delete_old_segments(now_ms=0)
    assert deleted >= 1 and log.segments[0].base_offset <= 9
