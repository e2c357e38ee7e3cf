"""LogSegment: one `.log` file of record batches with its `.index` and `.timeindex`, after Kafka's.

Files are named by the 20-digit base offset (`00000000000000000000.log`). The segment appends
already-validated batches, reads raw bytes from a position, translates offsets and timestamps to
positions through its sparse indexes, truncates, decides when to roll, and recovers (re-validates
every batch, rebuilds the indexes, cuts a torn tail or quarantines a corrupt region, which its
header scans then skip and its lookups refuse). File I/O goes straight to the OS
(pwrite/pread on a raw descriptor): an append has reached the page cache when it returns, so a
killed process loses nothing acknowledged, and readers never share a file position with writers.
A new segment (`new=True`: a new partition's, or the one a roll starts) has no files until
`create_files`, which the partition log calls before its first append: an idle partition costs
no file and no descriptor. Its `.txnindex` (aborted transactions, `log/txn_index.py`) exists only
once it holds an entry: the partition log appends them, and repairs it after recovery.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence

from kraft.log.batch import (
    HEADER_SIZE, LOG_OVERHEAD, STORED_MAGICS, BatchHeader, Record, validate_stored,
)
from kraft.log import fault_injection
from kraft.log.config import INT_MAX, LogConfig
from kraft.log.errors import CorruptRecordError
from kraft.log.file_cache import OPEN_FILES, CachedFile
from kraft.log.index import OffsetIndex, TimeIndex
from kraft.log.records import decode_records
from kraft.log.scan import BadOffsetsError, CorruptRange, Frame, scan
from kraft.log.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

if TYPE_CHECKING:
    from kraft.log.epoch_cache import LeaderEpochFileCache

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
_SCAN_CHUNK = 16 * 1024  # header scans read this much at a time (index entries are ~4 KiB apart)
_MAGIC_POS = 16  # where the magic byte sits in a batch header
_MAGIC_BYTES = re.compile(b"[" + re.escape(bytes(STORED_MAGICS)) + b"]")  # resync candidates
_LENGTH = struct.Struct(">i")  # batch_length, after the base offset
_LENGTH_POS = 8


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True)
class CorruptRegion:
    """Offsets [start_offset, end_offset) of a segment that recovery (or a read, see
    `quarantine_corruption`) found corrupt and kept (quarantined) rather than cut: reads of them
    raise CorruptRecordError. The bytes sit at [position, end_position) of the segment file."""

    segment_base_offset: int
    start_offset: int
    end_offset: int
    position: int
    end_position: int
    reason: str


@dataclass(frozen=True)
class SegmentRecovery:
    """What `LogSegment.recover` kept, cut and quarantined; `error` says why the tail was cut."""

    valid_bytes: int
    truncated_bytes: int
    error: str | None
    quarantined: tuple[CorruptRegion, ...] = ()


class LogSegment:
    def __init__(self, directory: Path, base_offset: int, config: LogConfig, now_ms: int,
                 *, new: bool = False) -> None:
        """Opens the segment's files (created if missing), or with `new` an empty segment that
        creates them at `create_files`."""
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = config.index_interval_bytes
        self.log_path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        self.created_ms = now_ms
        index_path = directory / segment_file_name(base_offset, INDEX_SUFFIX)
        time_index_path = directory / segment_file_name(base_offset, TIME_INDEX_SUFFIX)
        if new:
            self._fd = OPEN_FILES.file(self.log_path)
            self.size = 0
            self.offset_index = OffsetIndex(index_path, base_offset, config.segment_index_bytes, new=True)
            self.time_index = TimeIndex(time_index_path, base_offset, config.segment_index_bytes, new=True)
        else:
            # a CachedFile, not a descriptor: lent per call, so a closed segment holds none
            self._fd = OPEN_FILES.open(self.log_path)
            opened: list[CachedFile | OffsetIndex] = [self._fd]
            try:
                self.size = self.log_path.stat().st_size
                self.offset_index = OffsetIndex(index_path, base_offset, config.segment_index_bytes)
                opened.append(self.offset_index)
                self.time_index = TimeIndex(time_index_path, base_offset, config.segment_index_bytes)
            except BaseException:  # out of descriptors, say: leave nothing open
                for cached in opened:
                    cached.close()
                raise
        self.txn_index = TransactionIndex(directory / segment_file_name(base_offset, TXN_INDEX_SUFFIX),
                                          base_offset, new=new)
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.next_offset = base_offset  # offset after the last batch's last offset
        self.rolling_based_timestamp: int | None = None  # first batch's max timestamp
        self._bytes_since_last_index_entry = 0
        self.corrupt_regions: tuple[CorruptRegion, ...] = ()  # set by `recover`
        # set by `recover`: the segment was re-validated (its .txnindex is repaired by the
        # partition log's producer-state replay), and whether the .txnindex survived intact
        self.recovered = False
        self.txn_index_intact = True

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
            segment.txn_index.sanity_check(segment.next_offset)
        except CorruptRecordError:
            segment.close()
            raise
        return segment

    @property
    def has_files(self) -> bool:
        """False for a new segment until `create_files` (nothing of it is on disk)."""
        return self._fd.created

    def create_files(self) -> None:
        """Creates the files of a new segment (its directory must exist): `.log`, `.index`
        and `.timeindex` together, so a restart finds a whole segment."""
        with self._fd:
            pass
        self.offset_index.create()
        self.time_index.create()

    # -- appending ------------------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview, batches: Sequence[tuple[int, BatchHeader]]) -> None:
        """Appends validated batches; `batches` holds each batch's position within `data`.
        A new segment's files are created first (its directory must exist)."""
        if not self.has_files:
            self.create_files()
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

    def batches(
        self, start_position: int = 0, first_offset: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """Headers of the batches from `start_position` on, each checked as far as a header
        alone can be: length, magic, and offsets in order. `first_offset` is the offset the
        batch at `start_position` starts at (an index entry's). Raises CorruptRecordError, so a
        corrupt header can make a scan neither skip data nor loop."""
        pos = start_position
        end = self.size
        expected, exact = (self.base_offset, False) if first_offset is None else (first_offset, True)
        skips = {r.position: r for r in self.corrupt_regions}
        while end - pos >= HEADER_SIZE:
            chunk = _pread_all(self._fd, min(_SCAN_CHUNK, end - pos), pos)
            off = 0
            while len(chunk) - off >= HEADER_SIZE:
                region = skips.get(pos + off)
                if region is not None:  # known bad bytes: resume after them
                    off = region.end_position - pos
                    expected, exact = region.end_offset, False
                    continue
                header = BatchHeader.parse(chunk, off)
                self._check_header(header, pos + off, expected, exact)
                yield pos + off, header
                expected, exact = header.next_offset, False
                off += header.size_in_bytes
            pos += off

    def _check_header(self, header: BatchHeader, position: int, expected: int, exact: bool) -> None:
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or position + header.size_in_bytes > self.size:
            problem = f"bad batch length {header.batch_length}"
        elif header.magic not in STORED_MAGICS:
            problem = f"magic {header.magic}, expected {' or '.join(map(str, STORED_MAGICS))}"
        elif header.base_offset != expected if exact else header.base_offset < expected:
            problem = (f"base offset {header.base_offset} out of order (expected "
                       f"{'' if exact else 'at least '}{expected})")
        elif header.last_offset_delta < 0 or header.last_offset - self.base_offset > INT_MAX:
            problem = f"last offset delta {header.last_offset_delta} out of range"
        else:
            return
        raise CorruptRecordError(f"{self.log_path.name}: batch at position {position}: {problem}")

    def corrupt_region_of(self, offset: int) -> CorruptRegion | None:
        for region in self.corrupt_regions:
            if region.start_offset <= offset < region.end_offset:
                return region
        return None

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= `offset` (the batch holding it, or the next
        one after a gap), found from the offset index then a short header scan. Raises
        CorruptRecordError for a quarantined offset or a corrupt header on the way."""
        region = self.corrupt_region_of(offset)
        if region is not None:
            raise CorruptRecordError(
                f"offset {offset} is in the quarantined corrupt range [{region.start_offset}, "
                f"{region.end_offset}) of segment {self.base_offset}: {region.reason}"
            )
        indexed, position = self.index_lookup(offset)
        for pos, header in self.batches(position, indexed if position > 0 else None):
            if header.last_offset >= offset:
                return pos, header
        return None

    def index_lookup(self, offset: int) -> tuple[int, int]:
        """The offset index's (offset, position) to start a scan for `offset` from, never inside
        a quarantined region: an entry written before a read quarantined bytes around it points
        into them, so the scan starts after the region instead (the batch there starts at its end
        offset; `offset` is past it, since offsets inside raise before any lookup)."""
        indexed, position = self.offset_index.lookup(offset)
        for region in self.corrupt_regions:
            if region.position < position < region.end_position:
                return region.end_offset, region.end_position
        return indexed, position

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `starting_offset` with a timestamp
        >= `timestamp`; decodes only the one batch that holds it."""
        if self.max_timestamp < timestamp:
            return None
        entry = self.time_index.lookup(timestamp)
        start = max(entry[1] if entry else self.base_offset, starting_offset)
        _, position = self.index_lookup(start)
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
        if not self.has_files:
            return self.created_ms
        return int(self.log_path.stat().st_mtime * 1000)

    # -- truncation and recovery ----------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Removes every batch whose last offset is >= `offset` (and any quarantined region
        there); returns bytes removed."""
        region = self.corrupt_region_of(offset)
        if region is not None:
            position, cut_offset = region.position, region.start_offset
        else:
            found = self.find_batch(offset)
            if found is None:
                return 0
            position, cut_offset = found[0], found[1].base_offset
        removed = self.size - position
        with self._fd as fd:
            os.ftruncate(fd, position)
        self.size = position
        self.corrupt_regions = tuple(r for r in self.corrupt_regions if r.position < position)
        self.offset_index.truncate_to(cut_offset)
        self.time_index.truncate_to(cut_offset)
        self.txn_index.truncate_to(cut_offset)
        self._restore_tail_state()
        return removed

    def recover(
        self,
        epoch_cache: LeaderEpochFileCache | None = None,
        *,
        upper_offset: int | None = None,
    ) -> SegmentRecovery:
        """Re-validates every batch (framing, CRC, offsets), rebuilds both indexes and assigns
        batch epochs to `epoch_cache` as it goes, by the scan rule (`log/scan.py`).
        `upper_offset` is where the next segment starts (None for the active segment): no batch
        may reach it. A corrupt range followed by a valid batch is bit rot: it is quarantined
        (`corrupt_regions`) and every later batch kept. An invalid suffix of the active segment
        is a torn tail, cut after the last valid batch; in a closed segment the next segment
        holds valid data, so its invalid suffix is rot too, quarantined up to `upper_offset`."""
        self.offset_index.reset()
        self.time_index.reset()
        self._reset_tail_state()
        regions: list[CorruptRegion] = []
        error: str | None = None
        valid_end = self.size
        framing = BatchFraming(self.base_offset, upper_offset)
        for event in scan(self._read_raw, self.size, framing, expected=self.base_offset):
            if isinstance(event, Frame):
                header = event.item
                self._track_batch(event.position, header)
                if epoch_cache is not None and header.partition_leader_epoch >= 0:
                    epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
                continue
            if isinstance(event, CorruptRange):
                end_position, end_offset = event.end_position, event.end_offset
                if upper_offset is not None and (end_position == self.size or end_offset > upper_offset):
                    end_offset = upper_offset  # nothing after it here: the next segment's base
            elif upper_offset is not None and event.start_offset < upper_offset:
                end_position, end_offset = self.size, upper_offset
            else:  # a torn tail (or garbage after a closed segment's last offset): cut
                error, valid_end = f"position {event.position}: {event.reason}", event.position
                break
            regions.append(CorruptRegion(self.base_offset, event.start_offset, end_offset,
                                         event.position, end_position,
                                         f"position {event.position}: {event.reason}"))
            self.next_offset = end_offset
            # index the batch after the region: lookups past it never scan into it
            self._bytes_since_last_index_entry = self.index_interval_bytes + 1
        self.corrupt_regions = tuple(regions)
        truncated = self.size - valid_end
        if truncated:
            with self._fd as fd:
                os.ftruncate(fd, valid_end)
            self.size = valid_end
        self.recovered = True
        self.txn_index_intact = self.txn_index.repair(self.next_offset)
        return SegmentRecovery(valid_bytes=valid_end, truncated_bytes=truncated, error=error,
                               quarantined=self.corrupt_regions)

    def quarantine_corruption(
        self, start_position: int, start_offset: int, upper_offset: int
    ) -> CorruptRegion | None:
        """A read met a corrupt batch that recovery never saw (a clean restart trusts closed
        segments; bit rot comes later): re-validate the batches from `start_position` (a batch
        boundary, e.g. an offset index entry's; `start_offset` the lowest offset that may start
        there) by the scan rule, and quarantine the first corrupt range: up to the next valid
        batch, or up to the segment's end and `upper_offset` (where the next segment, or for the
        active one the log end, starts) when none follows. Returns the new region, or None when
        every batch from there is valid. Regions already known are stepped over."""
        known = {r.position: (r.end_position, r.end_offset) for r in self.corrupt_regions}
        framing = BatchFraming(self.base_offset, upper_offset)
        for event in scan(self._read_raw, self.size, framing, position=start_position,
                          expected=start_offset, known=known):
            if isinstance(event, Frame):
                continue
            if isinstance(event, CorruptRange):
                end_position, end_offset = event.end_position, event.end_offset
                if end_position == self.size or end_offset > upper_offset:
                    end_offset = max(upper_offset, event.start_offset)
            else:
                end_position, end_offset = self.size, max(upper_offset, event.start_offset)
            new = CorruptRegion(self.base_offset, event.start_offset, end_offset, event.position,
                                end_position, f"position {event.position}: {event.reason}")
            self.add_corrupt_region(new)
            return new
        return None

    def mark_missing(self, end_offset: int, reason: str) -> CorruptRegion:
        """Offsets [next_offset, end_offset) that no file holds (the next segment starts at
        `end_offset`): quarantined as a region of no bytes at the end of this segment, so reads
        of them answer CORRUPT_MESSAGE naming the range, and a follower refetches them."""
        assert end_offset > self.next_offset, (self, end_offset)
        region = CorruptRegion(self.base_offset, self.next_offset, end_offset, self.size, self.size,
                               reason)
        self.add_corrupt_region(region)
        self.next_offset = end_offset
        return region

    def add_corrupt_region(self, region: CorruptRegion) -> None:
        self.corrupt_regions = tuple(sorted((*self.corrupt_regions, region),
                                            key=lambda r: (r.position, r.start_offset)))

    def _read_raw(self, position: int, size: int) -> bytes:
        return _pread_all(self._fd, size, position)

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
        offset, position = self.index_lookup(2**63 - 1)
        self.next_offset = offset
        end = position
        for pos, header in self.batches(position, offset if position > 0 else None):
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.base_offset
            self._bytes_since_last_index_entry += header.size_in_bytes
            self.next_offset = header.next_offset
            end = pos + header.size_in_bytes
        for region in self.corrupt_regions:  # a quarantined region may end the file
            if region.position >= end:
                end, self.next_offset = region.end_position, region.end_offset
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
        if not self.has_files:
            return
        with self._fd as fd:
            fault_injection.fsync(fd, self.log_path)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        self._fd.close()

    def delete(self) -> None:
        self.close()
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self.log_path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, next_offset={self.next_offset})"


class BatchFraming:
    """Record batches for the scan rule (`log/scan.py`): a segment starting at `base_offset`,
    whose batches stay below `upper_offset` (the next segment's base; None for the active one)."""

    header_size = HEADER_SIZE
    offsets_checksummed = False  # base offset and leader epoch sit outside the CRC, as in Kafka

    def __init__(self, base_offset: int, upper_offset: int | None) -> None:
        self.base_offset = base_offset
        self.upper_offset = upper_offset

    def frame_size(self, buf: bytes, off: int) -> int:
        return LOG_OVERHEAD + _LENGTH.unpack_from(buf, off + _LENGTH_POS)[0]

    def check(self, buf: bytes, off: int, position: int, expected: int) -> Frame:
        header = validate_stored(buf, off)
        if header.last_offset_delta < max(0, header.record_count - 1):
            raise CorruptRecordError(f"batch at offset {header.base_offset} has last_offset_delta "
                                     f"{header.last_offset_delta} for {header.record_count} records")
        # base_offset sits outside the CRC, so a flipped bit there must be caught here
        problem = None
        if header.base_offset < expected:
            problem = f"breaks offset order (expected >= {expected})"
        elif header.last_offset - self.base_offset > INT_MAX:
            problem = f"is out of range of segment {self.base_offset}"
        elif self.upper_offset is not None and header.last_offset >= self.upper_offset:
            problem = f"reaches the next segment's {self.upper_offset}"
        if problem is not None:
            raise BadOffsetsError(
                f"batch at offset {header.base_offset} {problem}", size=header.size_in_bytes,
                span=header.last_offset_delta + 1, next_offset=header.next_offset,
                overlaps=header.base_offset < expected)
        return Frame(position, header.size_in_bytes, header.base_offset, header.next_offset, header)

    def candidates(self, buf: bytes, stop: int) -> Iterator[int]:
        for match in _MAGIC_BYTES.finditer(buf, _MAGIC_POS):
            if match.start() - _MAGIC_POS >= stop:
                return
            yield match.start() - _MAGIC_POS

    def plausible(self, buf: bytes, off: int, expected: int, room: int) -> bool:
        header = BatchHeader.parse(buf, off)
        return header.base_offset >= expected and HEADER_SIZE <= header.size_in_bytes <= room


def _pwrite_all(file: CachedFile, data: bytes | bytearray, position: int) -> None:
    fault_injection.before_write(file.path)
    view = memoryview(data)
    with file as fd:
        while view:
            written = os.pwrite(fd, view, position)
            view = view[written:]
            position += written


def _pread_all(file: CachedFile, size: int, position: int) -> bytes:
    fault_injection.check_log_dir(file.path)
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
