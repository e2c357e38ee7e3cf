"""LogCleaner: compaction for cleanup.policy=compact, after Kafka's LogCleaner.

The cleanable range is the prefix of inactive segments wholly below the high watermark and older
than min.compaction.lag.ms; the active segment is never touched. An offset map (key -> last offset
in that range) decides which records survive: the last record of each key, except tombstones
(value None) in segments whose largest timestamp is older than delete.retention.ms. Offsets are
preserved: a batch that loses records is re-encoded with its first kept offset as base offset and
offset deltas that keep every original offset (and its original last offset); an untouched batch is
copied byte for byte. Each segment is rewritten to `<base>.log.cleaned`, fsynced, then its indexes
are removed and the cleaned file renamed over the `.log` (a crash leaves the old or the new
segment; the loader rebuilds missing indexes and removes leftover `.cleaned` files). A segment
left empty is deleted.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from kraft.log.batch import TIMESTAMP_TYPE_FLAG, BatchHeader, Record, decode_records, encode_batch
from kraft.log.checkpoint import fsync_dir
from kraft.log.config import LogConfig
from kraft.log.segment import LogSegment

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CleanerStats:
    segments_cleaned: int = 0
    segments_removed: int = 0
    records_read: int = 0
    records_removed: int = 0
    bytes_before: int = 0
    bytes_after: int = 0


class LogCleaner:
    def __init__(self, directory: Path, config: LogConfig) -> None:
        self.directory = directory
        self.config = config

    def cleanable_count(self, segments: Sequence[LogSegment], high_watermark: int, now_ms: int) -> int:
        """How many leading segments may be cleaned (never the last, the active one)."""
        count = 0
        for i in range(len(segments) - 1):
            segment, following = segments[i], segments[i + 1]
            if following.base_offset > high_watermark:
                break
            if now_ms - segment.largest_timestamp < self.config.min_compaction_lag_ms:
                break
            if segment.corrupt_regions:  # rewriting it would turn quarantined data into a gap
                break
            count += 1
        return count

    def clean(
        self, segments: list[LogSegment], high_watermark: int, now_ms: int
    ) -> tuple[list[LogSegment], CleanerStats]:
        """Compacts the cleanable prefix; returns the new segment list and what changed."""
        count = self.cleanable_count(segments, high_watermark, now_ms)
        if count == 0:
            return segments, CleanerStats()
        offset_map = self._build_offset_map(segments[:count])
        tombstone_horizon = now_ms - self.config.delete_retention_ms
        result: list[LogSegment] = []
        totals = dict(segments_cleaned=0, segments_removed=0, records_read=0, records_removed=0,
                      bytes_before=0, bytes_after=0)
        for segment in segments[:count]:
            drop_tombstones = segment.largest_timestamp < tombstone_horizon
            totals["bytes_before"] += segment.size
            cleaned, read, removed = self._clean_segment(segment, offset_map, drop_tombstones, now_ms)
            totals["records_read"] += read
            totals["records_removed"] += removed
            if cleaned is None:
                totals["segments_removed"] += 1
                continue
            if cleaned is not segment:
                totals["segments_cleaned"] += 1
            totals["bytes_after"] += cleaned.size
            result.append(cleaned)
        stats = CleanerStats(**totals)
        if stats.records_removed:
            logger.info("%s: compaction %s", self.directory, stats)
        return result + segments[count:], stats

    def _build_offset_map(self, segments: Sequence[LogSegment]) -> dict[bytes, int]:
        offset_map: dict[bytes, int] = {}
        for segment in segments:
            for _, _, records in _decoded_batches(segment):
                for record in records:
                    if record.key is not None:
                        offset_map[record.key] = record.offset
        return offset_map

    def _clean_segment(
        self, segment: LogSegment, offset_map: dict[bytes, int], drop_tombstones: bool, now_ms: int
    ) -> tuple[LogSegment | None, int, int]:
        """Rewrites one segment; returns (segment or None if now empty, records read, removed)."""
        cleaned_path = segment.log_path.with_name(segment.log_path.name + ".cleaned")
        read = removed = 0
        with open(cleaned_path, "wb") as out:
            for position, header, records in _decoded_batches(segment):
                kept = [
                    r for r in records
                    if r.key is not None
                    and offset_map.get(r.key) == r.offset
                    and not (drop_tombstones and r.value is None)
                ]
                read += len(records)
                removed += len(records) - len(kept)
                if len(kept) == len(records):
                    out.write(segment.read(position, header.size_in_bytes))
                elif kept:
                    out.write(_rebuild_batch(header, kept))
            out.flush()
            os.fsync(out.fileno())
        if removed == 0:
            cleaned_path.unlink()
            return segment, read, 0
        base_offset = segment.base_offset
        segment.offset_index.delete()
        segment.time_index.delete()
        segment.close()
        if os.path.getsize(cleaned_path) == 0:
            cleaned_path.unlink()
            segment.log_path.unlink()
            fsync_dir(self.directory)
            return None, read, removed
        os.replace(cleaned_path, segment.log_path)
        fsync_dir(self.directory)
        replacement = LogSegment(self.directory, base_offset, self.config, now_ms)
        recovery = replacement.recover()
        assert recovery.truncated_bytes == 0, f"cleaned segment failed validation: {recovery}"
        return replacement, read, removed


def _decoded_batches(segment: LogSegment) -> Iterator[tuple[int, BatchHeader, list[Record]]]:
    for position, header in segment.batches():
        yield position, header, decode_records(segment.read(position, header.size_in_bytes))


def _rebuild_batch(header: BatchHeader, kept: list[Record]) -> bytes:
    """Re-encodes the surviving records of a batch, keeping every offset and the batch's base and
    last offsets (as Kafka's v2 cleaner: the producer state derives the last sequence from
    base_sequence + last_offset_delta, so both must survive)."""
    base_offset = header.base_offset
    if header.attributes & TIMESTAMP_TYPE_FLAG:
        base_timestamp = max_timestamp = header.max_timestamp  # LogAppendTime: one batch time
    else:
        base_timestamp = kept[0].timestamp
        max_timestamp = max(r.timestamp for r in kept)
    rows = [
        [r.offset - base_offset, r.timestamp - base_timestamp, r.key, r.value, list(r.headers)]
        for r in kept
    ]
    return encode_batch(
        rows,
        base_offset=base_offset,
        last_offset_delta=header.last_offset - base_offset,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        attributes=header.attributes,
        partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
    )
