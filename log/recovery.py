"""LogLoader: opens a partition directory and recovers it after a crash, after Kafka's LogLoader.

Leftovers of interrupted work (`*.tmp`, `*.cleaned`, indexes without a `.log`) are removed. Segments
ending at or below the recovery point are trusted and opened from their indexes (rebuilt if missing
or corrupt). Every segment holding offsets at or above the recovery point is re-validated batch by
batch: a torn or corrupt tail is cut at the last valid batch and logged, and every later segment
is deleted, as Kafka does, so corrupt data is never served. The leader-epoch cache is trimmed to the
recovered log, and rebuilt from batch headers when its checkpoint is missing.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from log.checkpoint import PartitionCheckpoint
from log.config import LogConfig
from log.epoch_cache import LeaderEpochFileCache
from log.errors import CorruptRecordError
from log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment

logger = logging.getLogger(__name__)

_SEGMENT_NAME = re.compile(r"^(\d{20})\.(log|index|timeindex)$")
_LEFTOVER_SUFFIXES = (".tmp", ".cleaned", ".deleted")


@dataclass
class LoadedLog:
    segments: list[LogSegment]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    high_watermark: int
    leader_epoch_cache: LeaderEpochFileCache


class LogLoader:
    def __init__(self, directory: Path, config: LogConfig, now_ms: int) -> None:
        self.directory = directory
        self.config = config
        self.now_ms = now_ms

    def load(self) -> LoadedLog:
        self.directory.mkdir(parents=True, exist_ok=True)
        base_offsets = self._clean_directory()
        checkpoint = PartitionCheckpoint.read(self.directory)
        if checkpoint is None and base_offsets:
            logger.warning("%s: no partition checkpoint, recovering every segment", self.directory)
        checkpoint = checkpoint or PartitionCheckpoint()
        epoch_cache = LeaderEpochFileCache.load(self.directory)
        rebuild_epochs = not epoch_cache.entries

        segments: list[LogSegment] = []
        for i, base_offset in enumerate(base_offsets):
            segment, truncated = self._load_segment(
                base_offset, checkpoint.recovery_point, epoch_cache, rebuild_epochs
            )
            segments.append(segment)
            if truncated and i + 1 < len(base_offsets):
                self._delete_later_segments(base_offsets[i + 1 :])
                break

        log_start_offset = max(checkpoint.log_start_offset, segments[0].base_offset if segments else 0)
        if not segments or log_start_offset > segments[-1].next_offset:
            if segments:
                logger.warning(
                    "%s: log start offset %d is past the log end %d; starting an empty log there",
                    self.directory, log_start_offset, segments[-1].next_offset,
                )
                for segment in segments:
                    segment.delete()
                epoch_cache.clear()
            segments = [LogSegment(self.directory, log_start_offset, self.config, self.now_ms)]

        log_end_offset = segments[-1].next_offset
        epoch_cache.truncate_from_end(log_end_offset)
        epoch_cache.truncate_from_start(log_start_offset)
        return LoadedLog(
            segments=segments,
            log_start_offset=log_start_offset,
            log_end_offset=log_end_offset,
            recovery_point=max(log_start_offset, min(checkpoint.recovery_point, log_end_offset)),
            high_watermark=max(log_start_offset, min(checkpoint.high_watermark, log_end_offset)),
            leader_epoch_cache=epoch_cache,
        )

    def _clean_directory(self) -> list[int]:
        """Removes leftovers and orphan indexes; returns the segments' base offsets, sorted."""
        logs: set[int] = set()
        indexes: list[tuple[int, Path]] = []
        for path in self.directory.iterdir():
            if path.name.endswith(_LEFTOVER_SUFFIXES):
                logger.info("%s: removing leftover %s", self.directory, path.name)
                path.unlink()
                continue
            match = _SEGMENT_NAME.match(path.name)
            if match is None:
                continue
            if match.group(2) == "log":
                logs.add(int(match.group(1)))
            else:
                indexes.append((int(match.group(1)), path))
        for base_offset, path in indexes:
            if base_offset not in logs:
                logger.info("%s: removing orphan index %s", self.directory, path.name)
                path.unlink()
        return sorted(logs)

    def _load_segment(
        self,
        base_offset: int,
        recovery_point: int,
        epoch_cache: LeaderEpochFileCache,
        rebuild_epochs: bool,
    ) -> tuple[LogSegment, bool]:
        """Opens one segment, trusting it when it ends at or below the recovery point (so a
        cleanly closed log starts without a scan) and re-validating it otherwise; returns it and
        whether its tail was cut."""
        if recovery_point > base_offset:
            try:
                segment = LogSegment.open(self.directory, base_offset, self.config, self.now_ms)
            except CorruptRecordError as e:
                logger.warning("%s: rebuilding segment %d: %s", self.directory, base_offset, e)
            else:
                if segment.next_offset <= recovery_point:
                    if rebuild_epochs:
                        for _, header in segment.batches():
                            if header.partition_leader_epoch >= 0:
                                epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
                    return segment, False
                segment.close()
        segment = LogSegment(self.directory, base_offset, self.config, self.now_ms)
        result = segment.recover(epoch_cache)
        if result.truncated_bytes:
            logger.warning(
                "%s: truncated %d bytes of segment %s after %d valid bytes (log end offset now "
                "%d): %s",
                self.directory, result.truncated_bytes, segment.log_path.name, result.valid_bytes,
                segment.next_offset, result.error,
            )
        return segment, result.truncated_bytes > 0

    def _delete_later_segments(self, base_offsets: list[int]) -> None:
        for base_offset in base_offsets:
            logger.warning(
                "%s: deleting segment %d, which follows a corrupt segment",
                self.directory, base_offset,
            )
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                (self.directory / f"{base_offset:020d}{suffix}").unlink(missing_ok=True)
