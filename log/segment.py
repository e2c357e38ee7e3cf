"""LogSegment: one `.log` file of record batches with its `.index` and `.timeindex`, after Kafka's.

Files are named by the 20-digit base offset (`00000000000000000000.log`). The segment appends
already-validated batches, reads raw bytes from a position, translates offsets and timestamps to
positions through its sparse indexes, truncates, decides when to roll, and recovers (re-validates
every batch, rebuilds the indexes, cuts a torn or corrupt tail). File I/O goes straight to the OS
(pwrite/pread on a raw descriptor): an append has reached the page cache when it returns, so a
killed process loses nothing acknowledged, and readers never share a file position with writers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence

from log.batch import HEADER_SIZE, BatchHeader, Record, decode_records, validate_batch
from log.config import INT_MAX, LogConfig
from log.errors import CorruptRecordError
from log.file_cache import OPEN_FILES, CachedFile
from log.index import OffsetIndex, TimeIndex

if TYPE_CHECKING:
    from log.epoch_cache import LeaderEpochFileCache

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
_SCAN_CHUNK = 16 * 1024  # header scans read this much at a time (index entries are ~4 KiB apart)
_RECOVERY_CHUNK = 4 * 1024 * 1024  # recovery validates whole batches, so reads bigger chunks


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True)
class SegmentRecovery:
    """What `LogSegment.recover` kept and cut; `error` says why the tail was cut."""

    valid_bytes: int
    truncated_bytes: int
    error: str | None


class LogSegment:
    def __init__(self, directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = config.index_interval_bytes
        self.log_path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        self.created_ms = now_ms
        # a CachedFile, not a descriptor: lent per call, so a closed segment holds none
        self._fd = OPEN_FILES.open(self.log_path)
        opened: list[CachedFile | OffsetIndex] = [self._fd]
        try:
            self.size = self.log_path.stat().st_size
            self.offset_index = OffsetIndex(
                directory / segment_file_name(base_offset, INDEX_SUFFIX),
                base_offset,
                config.segment_index_bytes,
            )
            opened.append(self.offset_index)
            self.time_index = TimeIndex(
                directory / segment_file_name(base_offset, TIME_INDEX_SUFFIX),
                base_offset,
                config.segment_index_bytes,
            )
        except BaseException:  # out of descriptors, say: leave nothing open
            for cached in opened:
                cached.close()
            raise
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.next_offset = base_offset  # offset after the last batch's last offset
        self.rolling_based_timestamp: int | None = None  # first batch's max timestamp
        self._bytes_since_last_index_entry = 0

    @classmethod
    def open(cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
        """Opens (or creates) a segment whose data is trusted: indexes are loaded and checked,
        tail state (next offset, max timestamp) is read from the last indexed position.
        Raises CorruptRecordError when an index is unusable; the caller then runs `recover`."""
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            if not (directory / segment_file_name(base_offset, suffix)).exists():
                raise CorruptRecordError(f"{segment_file_name(base_offset, suffix)} is missing")
        segment = cls(directory, base_offset, config, now_ms)
        try:
            segment.offset_index.sanity_check()
            segment.time_index.sanity_check()
            segment._check_index_bounds()
            segment._restore_tail_state()
        except CorruptRecordError:
            segment.close()
            raise
        return segment

    # -- appending ------------------------------------------------------------------------------

    def append(self, data: bytes | bytearray, batches: Sequence[tuple[int, BatchHeader]]) -> None:
        """Appends validated batches; `batches` holds each batch's position within `data`."""
        position = self.size
        try:
            _pwrite_all(self._fd, data, position)
        except OSError:  # a full disk: a torn batch must not stay after the data
            try:
                os.truncate(self.log_path, position)
            except OSError:
                pass  # the next append overwrites it; recovery cuts what is left
            raise
        self.size += len(data)
        for pos, header in batches:
            self._track_batch(position + pos, header)

    def _track_batch(self, position: int, header: BatchHeader) -> None:
        """Updates tail state and the sparse indexes for a batch now in the file."""
        if self.rolling_based_timestamp is None:
            self.rolling_based_timestamp = header.max_timestamp
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.base_offset
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            try:
                self.offset_index.append(header.base_offset, position)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                self._bytes_since_last_index_entry = 0
            except OSError:
                pass  # a full disk: entries are hints, lookups scan further; the next batch retries
        self._bytes_since_last_index_entry += header.size_in_bytes
        self.next_offset = header.next_offset

    def should_roll(
        self, config: LogConfig, messages_size: int, max_timestamp: int, max_offset: int, now_ms: int
    ) -> bool:
        """Kafka's LogSegment.shouldRoll: full by size or index, too old, or offsets that no
        longer fit the index's 32-bit relative offsets."""
        if self.size == 0:
            return False
        if self.rolling_based_timestamp is not None and self.rolling_based_timestamp >= 0:
            waited = max_timestamp - self.rolling_based_timestamp
        else:
            waited = now_ms - self.created_ms
        return (
            self.size > config.segment_bytes - messages_size
            or waited > config.segment_ms
            or self.offset_index.is_full
            or self.time_index.is_full
            or max_offset - self.base_offset > INT_MAX
        )

    def on_become_inactive(self) -> None:
        """Records the final max timestamp, so a reloaded segment knows its largest timestamp."""
        if self.max_timestamp >= 0 and not self.time_index.is_full:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    # -- reading --------------------------------------------------------------------------------

    def read(self, position: int, max_size: int) -> bytes:
        """Raw bytes from `position`, at most `max_size`, never past the end of the data."""
        size = min(max_size, self.size - position)
        return _pread_all(self._fd, size, position) if size > 0 else b""

    def batches(self, start_position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """Headers of the (already validated) batches from `start_position` on."""
        pos = start_position
        end = self.size
        while end - pos >= HEADER_SIZE:
            chunk = _pread_all(self._fd, min(_SCAN_CHUNK, end - pos), pos)
            off = 0
            while len(chunk) - off >= HEADER_SIZE:
                header = BatchHeader.parse(chunk, off)
                if header.batch_length < HEADER_SIZE - 12 or pos + off + header.size_in_bytes > end:
                    raise CorruptRecordError(
                        f"{self.log_path}: bad batch length at position {pos + off}"
                    )
                yield pos + off, header
                off += header.size_in_bytes
            pos += off

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= `offset` (the batch holding it, or the next
        one after a gap), found from the offset index then a short header scan."""
        _, position = self.offset_index.lookup(offset)
        for pos, header in self.batches(position):
            if header.last_offset >= offset:
                return pos, header
        return None

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `starting_offset` with a timestamp
        >= `timestamp`; decodes only the one batch that holds it."""
        if self.max_timestamp < timestamp:
            return None
        entry = self.time_index.lookup(timestamp)
        start = max(entry[1] if entry else self.base_offset, starting_offset)
        _, position = self.offset_index.lookup(start)
        for pos, header in self.batches(position):
            if header.last_offset < starting_offset or header.max_timestamp < timestamp:
                continue
            for record in self._decode(pos, header):
                if record.offset >= starting_offset and record.timestamp >= timestamp:
                    return record.offset, record.timestamp
        return None

    def _decode(self, position: int, header: BatchHeader) -> list[Record]:
        return decode_records(self.read(position, header.size_in_bytes))

    @property
    def largest_timestamp(self) -> int:
        """Max record timestamp, or the file's modification time when no batch has one (Kafka)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(self.log_path.stat().st_mtime * 1000)

    # -- truncation and recovery ----------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Removes every batch whose last offset is >= `offset`; returns bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        position, header = found
        removed = self.size - position
        with self._fd as fd:
            os.ftruncate(fd, position)
        self.size = position
        self.offset_index.truncate_to(header.base_offset)
        self.time_index.truncate_to(header.base_offset)
        self._restore_tail_state()
        return removed

    def recover(self, epoch_cache: LeaderEpochFileCache | None = None) -> SegmentRecovery:
        """Re-validates every batch (framing, CRC, offsets), rebuilds both indexes and cuts the
        file after the last valid batch. Assigns batch epochs to `epoch_cache` as it goes."""
        self.offset_index.reset()
        self.time_index.reset()
        self._reset_tail_state()
        error: str | None = None
        pos = 0
        buf = b""
        buf_start = 0
        while pos < self.size:
            off = pos - buf_start
            need = HEADER_SIZE
            if len(buf) - off >= HEADER_SIZE:
                need = max(HEADER_SIZE, BatchHeader.parse(buf, off).size_in_bytes)
            if len(buf) - off < need:
                buf = _pread_all(self._fd, min(max(need, _RECOVERY_CHUNK), self.size - pos), pos)
                buf_start, off = pos, 0
                if len(buf) < HEADER_SIZE:
                    error = f"{len(buf)} trailing bytes are too short for a batch header"
                    break
            try:
                header = validate_batch(buf, off)
                self._check_offsets(header)
            except CorruptRecordError as e:
                error = str(e)
                break
            self._track_batch(pos, header)
            if epoch_cache is not None and header.partition_leader_epoch >= 0:
                epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
            pos += header.size_in_bytes
        truncated = self.size - pos
        if truncated:
            with self._fd as fd:
                os.ftruncate(fd, pos)
            self.size = pos
        return SegmentRecovery(valid_bytes=pos, truncated_bytes=truncated, error=error)

    def _check_offsets(self, header: BatchHeader) -> None:
        # base_offset and the epoch sit outside the CRC, so a torn write there must be caught here
        if header.base_offset < self.next_offset or header.last_offset_delta < header.record_count - 1:
            raise CorruptRecordError(
                f"batch at offset {header.base_offset} breaks offset order "
                f"(expected >= {self.next_offset}, last_offset_delta {header.last_offset_delta})"
            )
        if header.last_offset - self.base_offset > INT_MAX or header.last_offset_delta < 0:
            raise CorruptRecordError(f"batch at offset {header.base_offset} is out of range")

    def _reset_tail_state(self) -> None:
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.next_offset = self.base_offset
        self.rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0

    def _restore_tail_state(self) -> None:
        """Rebuilds in-memory tail state from the indexes plus a scan after the last entry."""
        self._reset_tail_state()
        if self.size == 0:
            return
        first = next(self.batches(0), None)
        if first is not None:
            self.rolling_based_timestamp = first[1].max_timestamp
        time_entry = self.time_index.last_entry
        if time_entry is not None:
            self.max_timestamp, self.offset_of_max_timestamp = time_entry
        offset, position = self.offset_index.lookup(2**63 - 1)
        self.next_offset = offset
        end = position
        for pos, header in self.batches(position):
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.base_offset
            self._bytes_since_last_index_entry += header.size_in_bytes
            self.next_offset = header.next_offset
            end = pos + header.size_in_bytes
        if end != self.size:
            raise CorruptRecordError(f"{self.log_path}: {self.size - end} trailing bytes after the last batch")

    def _check_index_bounds(self) -> None:
        last = self.offset_index.last_entry
        if last is not None and (last[1] >= self.size or last[0] < self.base_offset):
            raise CorruptRecordError(f"{self.offset_index.path}: points past the end of the log")
        last_time = self.time_index.last_entry
        if last_time is not None and last_time[1] < self.base_offset:
            raise CorruptRecordError(f"{self.time_index.path}: offset below the base offset")

    # -- lifecycle ------------------------------------------------------------------------------

    def flush(self) -> None:
        with self._fd as fd:
            os.fsync(fd)
        self.offset_index.flush()
        self.time_index.flush()

    def pin_files(self) -> None:
        """Keeps the files open outside the cache's bound while this is the active segment."""
        for cached in (self._fd, self.offset_index, self.time_index):
            cached.pin()

    def unpin_files(self) -> None:
        """Hands the files back to the cache, which may close them (a closed segment)."""
        for cached in (self._fd, self.offset_index, self.time_index):
            cached.unpin()

    def close(self) -> None:
        self.offset_index.close()
        self.time_index.close()
        self._fd.close()

    def delete(self) -> None:
        self.close()
        self.offset_index.delete()
        self.time_index.delete()
        self.log_path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, next_offset={self.next_offset})"


def _pwrite_all(file: CachedFile, data: bytes | bytearray, position: int) -> None:
    view = memoryview(data)
    with file as fd:
        while view:
            written = os.pwrite(fd, view, position)
            view = view[written:]
            position += written


def _pread_all(file: CachedFile, size: int, position: int) -> bytes:
    with file as fd:
        data = os.pread(fd, size, position)
        if len(data) == size:
            return data
        parts = [data]
        got = len(data)
        while got < size:
            more = os.pread(fd, size - got, position + got)
            if not more:
                break
            parts.append(more)
            got += len(more)
    return b"".join(parts)
