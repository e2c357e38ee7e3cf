"""Retention: which oldest segments a partition may delete, after Kafka's UnifiedLog.deleteOldSegments.

Three rules, each deleting a prefix of the segments: `retention.ms` (the segment's largest
timestamp is older than now - retention.ms) and `retention.bytes` (the log minus the segment is
still at least retention.bytes), both only for cleanup.policy containing delete; and, always,
segments wholly below the log start offset. A segment goes only when everything in it is below the
high watermark; an empty last segment never does. Pure: reads segment sizes and timestamps only.
"""

from __future__ import annotations

from typing import Callable, Protocol, Sequence

from kraft.log.config import LogConfig


class SegmentInfo(Protocol):
    base_offset: int
    size: int

    @property
    def largest_timestamp(self) -> int: ...


def segments_to_delete(
    segments: Sequence[SegmentInfo],
    config: LogConfig,
    *,
    log_start_offset: int,
    high_watermark: int,
    log_end_offset: int,
    now_ms: int,
) -> int:
    """How many of the oldest segments retention deletes (the caller rolls first if all)."""

    def prefix(predicate: Callable[[int], bool]) -> int:
        count = 0
        for i, segment in enumerate(segments):
            is_last = i + 1 == len(segments)
            upper = log_end_offset if is_last else segments[i + 1].base_offset
            if (is_last and segment.size == 0) or high_watermark < upper or not predicate(i):
                break
            count += 1
        return count

    def below_log_start(i: int) -> bool:
        return i + 1 < len(segments) and segments[i + 1].base_offset <= log_start_offset

    counts = [prefix(below_log_start)]
    if config.delete and config.retention_ms >= 0:
        counts.append(
            prefix(lambda i: now_ms - segments[i].largest_timestamp > config.retention_ms)
        )
    if config.delete and config.retention_bytes >= 0:
        excess = [sum(s.size for s in segments) - config.retention_bytes]

        def over_size(i: int) -> bool:
            if excess[0] - segments[i].size < 0:
                return False
            excess[0] -= segments[i].size
            return True

        counts.append(prefix(over_size))
    return max(counts)
