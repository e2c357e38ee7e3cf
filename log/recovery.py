"""LogLoader: opens a partition directory and recovers it after a crash, after Kafka's LogLoader.

Leftovers of interrupted work (`*.tmp`, `*.cleaned`, indexes without a `.log`) are removed. Segments
ending at or below the recovery point are trusted and opened from their indexes (rebuilt if missing
or corrupt), unless the checkpoint lists a quarantined region in them. Every other segment is
re-validated batch by batch by the scan rule (`log/scan.py`): a corrupt range followed by a valid
batch is bit rot, quarantined (kept, never served: reads answer CORRUPT_MESSAGE), logged at ERROR,
and every later batch and segment is kept; only an invalid suffix of the active segment (nothing
valid after it) is a torn tail, cut and logged at WARNING. A closed segment's invalid suffix is rot
too (the next segment holds valid data). Offsets no file holds (a segment ending before the next
one's base offset: a truncated or deleted segment file) are quarantined the same way, except where
compaction removed them (below the checkpoint's `first_dirty_offset`).
`PartitionLog.read` quarantines the same way what recovery never scanned (`report_quarantined`).
The leader-epoch cache is trimmed to the recovered log, and rebuilt from batch headers when its
checkpoint is missing.
A directory that does not exist (a partition never written) or holds no segment is an empty log:
its active segment is a new one (no files until the first append), nothing is created here.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from kraft.log.checkpoint import PartitionCheckpoint
from kraft.log.config import LogConfig
from kraft.log.epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from kraft.log.errors import CorruptRecordError
from kraft.log.segment import CorruptRegion, LogSegment

logger = logging.getLogger(__name__)

_SEGMENT_NAME = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex)$")
_LEFTOVER_SUFFIXES = (".tmp", ".cleaned", ".deleted")


def report_quarantined(directory: Path, segment_name: str, region: CorruptRegion,
                       found_by: str = "recovery") -> None:
    """The ERROR line of a quarantined region (found by recovery or by a read)."""
    logger.error(
        "%s: offsets [%d, %d) of segment %s (%s) are %s and quarantined%s: %s. "
        "Reads of them answer CORRUPT_MESSAGE; later data is kept. A follower refetches them "
        "from its leader; if this broker leads the partition, elect an in-sync replica leader "
        "(or reassign the partition) so this one refetches them",
        directory, region.start_offset, region.end_offset, segment_name,
        *((f"bytes {region.position}-{region.end_position}", "corrupt")
          if region.end_position > region.position else ("no bytes on disk", "missing")),
        "" if found_by == "recovery" else f" (found by {found_by})",
        region.reason,
    )


@dataclass
class LoadedLog:
    segments: list[LogSegment]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    high_watermark: int
    leader_epoch_cache: LeaderEpochFileCache
    quarantined: list[CorruptRegion]
    directory_exists: bool = True
    first_dirty_offset: int = 0  # compaction rewrote the log below it (see PartitionCheckpoint)


class LogLoader:
    def __init__(self, directory: Path, config: LogConfig, now_ms: int) -> None:
        self.directory = directory
        self.config = config
        self.now_ms = now_ms

    def load(self) -> LoadedLog:
        if not self.directory.is_dir():  # never written: an empty log, created at its first append
            return LoadedLog(
                segments=[LogSegment(self.directory, 0, self.config, self.now_ms, new=True)],
                log_start_offset=0, log_end_offset=0, recovery_point=0, high_watermark=0,
                leader_epoch_cache=LeaderEpochFileCache(self.directory / LEADER_EPOCH_CHECKPOINT,
                                                        deferred=True),
                quarantined=[], directory_exists=False,
            )
        base_offsets = self._clean_directory()
        checkpoint = PartitionCheckpoint.read(self.directory)
        if checkpoint is None and base_offsets:
            logger.warning("%s: no partition checkpoint, recovering every segment", self.directory)
        checkpoint = checkpoint or PartitionCheckpoint()
        epoch_cache = LeaderEpochFileCache.load(self.directory)
        rebuild_epochs = not epoch_cache.entries

        segments: list[LogSegment] = []
        for i, base_offset in enumerate(base_offsets):
            upper = base_offsets[i + 1] if i + 1 < len(base_offsets) else None
            suspect = any(base_offset <= start < (upper if upper is not None else 2**63)
                          for start, _ in checkpoint.quarantined)
            segments.append(self._load_segment(
                base_offset, upper, checkpoint.recovery_point, epoch_cache, rebuild_epochs, suspect,
            ))

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
            segments = [LogSegment(self.directory, log_start_offset, self.config, self.now_ms,
                                   new=True)]
            epoch_cache.defer_writes()  # written with the first segment file
        first_dirty_offset = checkpoint.first_dirty_offset
        if first_dirty_offset is None:  # a checkpoint of a kraft before it was kept
            first_dirty_offset = segments[-1].next_offset if self.config.compact else 0
        self._quarantine_missing(segments, log_start_offset, first_dirty_offset)

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
            quarantined=[r for s in segments for r in s.corrupt_regions],
            first_dirty_offset=first_dirty_offset,
        )

    def _quarantine_missing(self, segments: list[LogSegment], log_start_offset: int,
                            first_dirty_offset: int) -> None:
        """Offsets between a segment's end and the next segment's base offset are missing (a
        truncated segment file, a deleted segment): quarantined at the end of the segment before
        them and reported, never skipped silently. Below `first_dirty_offset` compaction may
        have removed whole batches or segments, so gaps there are its own (as in Kafka)."""
        for segment, following in zip(segments, segments[1:]):
            if segment.next_offset >= following.base_offset or following.base_offset <= log_start_offset:
                continue
            if following.base_offset <= first_dirty_offset:
                continue
            region = segment.mark_missing(following.base_offset, (
                f"{segment.log_path.name} ends at offset {segment.next_offset} but the next "
                f"segment {following.log_path.name} starts at {following.base_offset} (the file was "
                f"truncated or a segment deleted)"))
            report_quarantined(self.directory, segment.log_path.name, region)

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
        upper_offset: int | None,
        recovery_point: int,
        epoch_cache: LeaderEpochFileCache,
        rebuild_epochs: bool,
        suspect: bool,
    ) -> LogSegment:
        """Opens one segment, trusting it when it ends at or below the recovery point (so a
        cleanly closed log starts without a scan) and re-validating it otherwise or when it
        held a quarantined region (`suspect`). `upper_offset` is the next segment's base offset
        (None for the active segment)."""
        if recovery_point > base_offset and not suspect:
            try:
                segment = LogSegment.open(self.directory, base_offset, self.config, self.now_ms)
            except CorruptRecordError as e:
                logger.warning("%s: rebuilding segment %d: %s", self.directory, base_offset, e)
            else:
                bound = recovery_point if upper_offset is None else min(recovery_point, upper_offset)
                if segment.next_offset <= bound:
                    if rebuild_epochs:
                        for _, header in segment.batches():
                            if header.partition_leader_epoch >= 0:
                                epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
                    return segment
                segment.close()
        segment = LogSegment(self.directory, base_offset, self.config, self.now_ms)
        result = segment.recover(epoch_cache, upper_offset=upper_offset)
        for region in result.quarantined:
            report_quarantined(self.directory, segment.log_path.name, region)
        if result.truncated_bytes:
            logger.warning(
                "%s: truncated %d bytes of segment %s after %d valid bytes (log end offset now "
                "%d): a torn tail, no valid batch after it: %s",
                self.directory, result.truncated_bytes, segment.log_path.name, result.valid_bytes,
                segment.next_offset, result.error,
            )
        return segment
