"""PartitionLog: the log of one partition replica, after Kafka's UnifiedLog/LocalLog.

Owns the ordered segments of a `<topic>-<partition>` directory, the offsets (log start, log end,
high watermark, last stable offset, recovery point), the leader-epoch cache, the producer state
(`log/producer_state.py`: idempotence and open transactions, snapshotted with the checkpoints and
rebuilt from the log by `log/producer_replay.py`, which also repairs the aborted-transaction
indexes of re-validated segments) and the checkpoints. Transaction markers are written by the
leader for the coordinator (`append_control`); a read_committed read stops at the last stable
offset and answers the aborted transactions it overlaps (docs/transactions.md). Appends are batch-oriented (validate all, stamp, one write); reads return whole raw
batches from one segment.
Blocking file I/O: the broker calls it from a worker thread; a lock makes calls atomic.
A log is created lazily: opening one whose directory does not exist creates nothing, holds no
file descriptor and does no fsync; it answers as an empty log (log start, log end and high
watermark 0), keeps its leader epochs in memory, and creates its directory, its first segment's
files and its epoch checkpoint at its first append. See docs/internals.md §2.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from bisect import bisect_right
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterator, Sequence

from kraft.log import producer_replay
from kraft.log.batch import HEADER_SIZE, BatchHeader, iter_batches, validate_stored
from kraft.log.checkpoint import PartitionCheckpoint, ProducerStateSnapshot, fsync_dir
from kraft.log.cleaner import CleanerStats, LogCleaner
from kraft.log.config import LogConfig
from kraft.log.control import build_marker_batch, read_marker
from kraft.log.errors import CorruptRecordError, OffsetOutOfRangeError
from kraft.log.partition_metadata import (
    PARTITION_METADATA, check_topic_id, sync_topic_id, write_topic_id,
)
from kraft.log.producer_state import Duplicate, ProducerStateManager
from kraft.log.recovery import LogLoader, report_quarantined
from kraft.log.retention import segments_to_delete
from kraft.log.segment import CorruptRegion, LogSegment
from kraft.log.txn_index import AbortedTxn
from kraft.log.validator import LogValidator, ValidatedBatches

logger = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2  # Kafka ListOffsets sentinels
LATEST_TIMESTAMP = -1


@dataclass(frozen=True)
class LogAppendInfo:
    """`first_offset`/`last_offset` span the request's batches in order, a duplicate batch at the
    offsets it was first appended at; `record_count`/`valid_bytes` count what was written."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    record_count: int
    valid_bytes: int
    duplicate: bool = False  # every batch was a retry of an appended one: nothing was written
    log_append_time: int = -1  # a LogAppendTime topic's time stamped on the batches (-1: CreateTime)


@dataclass(frozen=True)
class FetchDataInfo:
    records: bytes | memoryview  # whole batches as stored (one read, no copy), possibly empty
    fetch_offset: int
    next_offset: int  # offset after the last returned batch (fetch_offset when empty)
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int = -1
    # read_committed reads: the aborted transactions overlapping the records (None otherwise)
    aborted_transactions: tuple[AbortedTxn, ...] | None = None


class PartitionLog:
    def __init__(self, directory: Path, config: LogConfig, now_ms: int,
                 topic_id: str | None = None) -> None:
        """Use `PartitionLog.open`."""
        adopt = topic_id is not None and check_topic_id(directory, topic_id)
        loaded = LogLoader(directory, config, now_ms).load()
        self.directory = directory
        self.topic_id = topic_id
        self._topic_id_dirty = False  # partition.metadata written without fsync since the last flush
        self._config = config
        self._validator = LogValidator(config)
        self._segments = loaded.segments
        self._directory_exists = loaded.directory_exists
        self._parent_dirty = False  # this log created its directory since the last flush
        self._log_start_offset = loaded.log_start_offset
        self._log_end_offset = loaded.log_end_offset
        self._recovery_point = loaded.recovery_point
        self._high_watermark = loaded.high_watermark
        self._first_dirty_offset = loaded.first_dirty_offset
        self.leader_epoch_cache = loaded.leader_epoch_cache
        self._last_flush_ms = now_ms
        self._dir_dirty = False  # a segment file was created or removed since the last flush
        self._lock = threading.RLock()
        self._read_quarantined = False  # a read quarantined a region since `take_read_quarantine`
        self._closed = False
        self._checkpointed: tuple[object, ...] | None = None  # what the last checkpoint() wrote
        if loaded.directory_exists:
            recovered = [s for s in self._segments if s.recovered]
            self._producer_state = self._load_producer_state(
                recovered, trust_snapshot=all(s.txn_index_intact for s in recovered))
        else:
            self._producer_state = ProducerStateManager(config.producer_id_expiration_ms)
        if not self._segments[0].has_files:  # nothing but checkpoints (or nothing) on disk
            self._checkpointed = self._checkpoint_state()
        if adopt and loaded.directory_exists:
            assert topic_id is not None
            logger.info("%s: no %s (an older kraft wrote it): adopting topic id %s", directory,
                        PARTITION_METADATA, topic_id)
            write_topic_id(directory, topic_id, sync=True)
        self._check_invariants()

    @classmethod
    def open(cls, directory: Path | str, config: LogConfig, now_ms: int,
             topic_id: str | None = None) -> PartitionLog:
        """Opens or creates the partition log in `directory`, running crash recovery. With
        `topic_id`, the directory's `partition.metadata` must name it (else
        InconsistentTopicIdError, before anything is read), and a directory this log creates
        gets one."""
        return cls(Path(directory), config, now_ms, topic_id)

    # -- offsets --------------------------------------------------------------------------------

    @property
    def on_disk(self) -> bool:
        """Whether the partition's directory exists (a new log creates it at its first append):
        a log that is not on disk has nothing to flush, checkpoint, retain or compact."""
        return self._directory_exists

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        """Clamped to [log_start_offset, log_end_offset], like Kafka's updateHighWatermark."""
        with self._lock:
            self._high_watermark = min(max(offset, self._log_start_offset), self._log_end_offset)

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: the first offset of the oldest transaction still open (or whose marker
        is not below the high watermark yet), bounded by the high watermark and the log start.
        read_committed readers see nothing at or past it."""
        with self._lock:
            state = self._producer_state
            state.on_high_watermark_updated(self._high_watermark)
            first = state.first_unstable_offset()
            if first is None or first >= self._high_watermark:
                return self._high_watermark
            return max(first, self._log_start_offset)

    @property
    def oldest_transaction_last_timestamp(self) -> int | None:
        with self._lock:
            return self._producer_state.oldest_transaction_last_timestamp()

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        """Applies altered topic configs; they take effect from the next append or roll."""
        with self._lock:
            self._config = config
            self._validator = LogValidator(config)
            self._active.index_interval_bytes = config.index_interval_bytes
            self._producer_state.producer_id_expiration_ms = config.producer_id_expiration_ms

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def quarantined(self) -> tuple[CorruptRegion, ...]:
        """The corrupt regions recovery, or a read that met them, kept but will not serve
        (reads raise CORRUPT_MESSAGE)."""
        return tuple(r for s in self._segments for r in s.corrupt_regions)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def quarantined_count(self) -> int:
        return sum(len(s.corrupt_regions) for s in self._segments)

    def take_read_quarantine(self) -> bool:
        """Whether a read quarantined a region since the last call (a follower's cue to refetch;
        one flag, so the fetch path does not walk every segment's regions)."""
        with self._lock:
            taken, self._read_quarantined = self._read_quarantined, False
            return taken

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def _active(self) -> LogSegment:
        return self._segments[-1]

    def _check_invariants(self) -> None:
        assert self._log_start_offset <= self.last_stable_offset <= self._high_watermark <= self._log_end_offset, (
            self._log_start_offset, self.last_stable_offset, self._high_watermark, self._log_end_offset,
        )
        assert self._recovery_point <= self._log_end_offset

    # -- append ---------------------------------------------------------------------------------

    def append_as_leader(self, batches: bytes, leader_epoch: int, now_ms: int, *,
                         coordinator: bool = False) -> LogAppendInfo:
        """Validates every batch (all or nothing, producer sequences included), stamps offsets
        from the log end offset and `leader_epoch`, and appends. A batch an idempotent producer
        retried is not appended again: it keeps its original offsets. Raises a `log.errors` error
        without writing anything. `coordinator`: a coordinator writes for a producer (no
        sequences, `ProducerStateManager.check_batches`)."""
        with self._lock:
            validated = self._validator.validate_for_leader(batches, now_ms)
            latest = self.leader_epoch_cache.latest_epoch
            if latest is not None and leader_epoch < latest:
                raise ValueError(f"leader epoch {leader_epoch} is below the latest epoch {latest}")
            verdicts = self._producer_state.check_batches([h for _, h in validated.batches],
                                                          coordinator=coordinator)
            fresh = [not isinstance(v, Duplicate) for v in verdicts]
            if not all(fresh):
                validated = validated.subset(fresh)
            if validated.batches:
                validated = self._validator.assign_offsets(
                    validated, self._log_end_offset, leader_epoch, now_ms
                )
                if latest != leader_epoch:
                    self.leader_epoch_cache.assign(leader_epoch, validated.first_offset)
                info = self._append(validated, now_ms)
                if self._config.log_append_time:  # what assign_offsets stamped (Kafka's ProduceResponse field)
                    info = replace(info, log_append_time=now_ms)
                if all(fresh):
                    return info
            else:
                # Kafka answers a retry with the first append's time, as with its offsets
                first = next((v for v in verdicts if v.first_offset >= 0), None)
                stamped_at = first.timestamp if first is not None and self._config.log_append_time else -1
                info = LogAppendInfo(-1, -1, -1, 0, 0, duplicate=True, log_append_time=stamped_at)
            stamped = iter(validated.batches)
            spans = [(v.first_offset, v.last_offset) if isinstance(v, Duplicate)
                     else _span(next(stamped)[1]) for v in verdicts]
            known = [span for span in spans if span[0] >= 0]  # old duplicates' offsets are unknown
            return replace(info, first_offset=known[0][0] if known else -1,
                           last_offset=known[-1][1] if known else -1)

    def append_as_follower(self, batches: bytes, now_ms: int | None = None) -> LogAppendInfo:
        """Appends batches replicated from the leader, keeping their offsets and epochs."""
        now_ms = _now_ms() if now_ms is None else now_ms
        with self._lock:
            validated = self._validator.validate_for_follower(batches, self._log_end_offset)
            for _, header in validated.batches:
                if header.partition_leader_epoch >= 0:
                    self.leader_epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
            return self._append(validated, now_ms)

    def append_control(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                       commit: bool, leader_epoch: int, now_ms: int) -> LogAppendInfo:
        """Writes a COMMIT or ABORT marker ending `producer_id`'s transaction, as leader at
        `leader_epoch`, for the transaction coordinator of `coordinator_epoch` (Kafka's
        WriteTxnMarkers). Raises INVALID_PRODUCER_EPOCH for an epoch below the producer's,
        TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch, writing nothing. A marker
        for a producer with no transaction open here is written too (the coordinator's
        partitions that got no data): it completes nothing."""
        with self._lock:
            self._producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
            latest = self.leader_epoch_cache.latest_epoch
            if latest is not None and leader_epoch < latest:
                raise ValueError(f"leader epoch {leader_epoch} is below the latest epoch {latest}")
            batch = build_marker_batch(producer_id=producer_id, producer_epoch=producer_epoch,
                                       coordinator_epoch=coordinator_epoch, commit=commit,
                                       timestamp=now_ms)
            validated = self._validator.assign_offsets(
                self._validator.validate_for_follower(bytearray(batch), 0),  # stamped in place
                self._log_end_offset, leader_epoch,
                now_ms)
            if latest != leader_epoch:
                self.leader_epoch_cache.assign(leader_epoch, validated.first_offset)
            return self._append(validated, now_ms)

    def verify_transaction(self, producer_id: int, producer_epoch: int) -> None:
        """KIP-890: the coordinator added this partition to the transaction of (producer id,
        epoch); its first transactional batch may now begin it here (`ProducerStateManager`)."""
        with self._lock:
            self._producer_state.verify_transaction(producer_id, producer_epoch)

    def _append(self, validated: ValidatedBatches, now_ms: int) -> LogAppendInfo:
        if self._active.should_roll(
            self._config, validated.size_in_bytes, validated.max_timestamp,
            validated.last_offset, now_ms,
        ):
            self.roll(now_ms)
        if not self._active.has_files or self.leader_epoch_cache.deferred:
            self._create_files()
        self._active.append(validated.buffer, validated.batches)
        try:
            self._update_producer_state(validated)
        except OSError:
            self._undo_append(validated)
            raise
        self._log_end_offset = validated.last_offset + 1
        info = LogAppendInfo(
            first_offset=validated.first_offset,
            last_offset=validated.last_offset,
            max_timestamp=validated.max_timestamp,
            record_count=validated.record_count,
            valid_bytes=validated.size_in_bytes,
        )
        if (
            self._log_end_offset - self._recovery_point >= self._config.flush_messages
            or now_ms - self._last_flush_ms >= self._config.flush_ms
        ):
            try:
                self.flush(now_ms)
            except OSError as e:  # the batches are in the log and must be answered: the next flush retries
                logger.error("%s: flush failed: %s", self.directory.name, e)
        return info

    def _update_producer_state(self, validated: ValidatedBatches) -> None:
        """The appended batches into the producer state; the transactions their markers abort
        into the active segment's `.txnindex` (after the marker is in the segment)."""
        for pos, header in validated.batches:
            marker = read_marker(validated.buffer, pos) if header.is_control else None
            aborted = producer_replay.apply(self._producer_state, header, marker)
            if aborted is not None:
                self._active.txn_index.append(producer_replay.aborted_entry(aborted))

    def _undo_append(self, validated: ValidatedBatches) -> None:
        """The `.txnindex` could not record an aborted transaction (a full disk): the batches
        leave the segment again, so no marker is served without its entry, and the producer
        state is rebuilt from the log. The caller's append fails."""
        try:
            self._active.truncate_to(validated.first_offset)
        except OSError as e:
            logger.error("%s: cannot remove the batches whose aborted-transaction entry failed: %s",
                         self.directory, e)
        self._producer_state = self._load_producer_state()

    def roll(self, now_ms: int) -> LogSegment:
        """Starts a new active segment at the log end offset (no-op when the active one is empty);
        its files are created by the first append to it."""
        with self._lock:
            active = self._active
            if active.size == 0:
                return active
            active.on_become_inactive()
            segment = LogSegment(self.directory, self._log_end_offset, self._config, now_ms, new=True)
            self._segments.append(segment)
            return segment

    def _create_directory(self) -> None:
        if not self._directory_exists:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._directory_exists = True
            self._parent_dirty = True  # the next flush makes the new directory durable
            if self.topic_id is not None:
                write_topic_id(self.directory, self.topic_id, sync=False)  # on the append path
                self._topic_id_dirty = self._dir_dirty = True

    def _create_files(self) -> None:
        """Before an append to a segment without files: the directory, the segment's files and
        the epoch checkpoint kept in memory until now. No fsync: the next flush does it."""
        self._create_directory()
        if not self._active.has_files:
            self._active.create_files()
            self._dir_dirty = True
        self.leader_epoch_cache.write_deferred()
    # -- read -----------------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_batch: bool = True,
        read_committed: bool = False,
    ) -> FetchDataInfo:
        """Whole batches from the one holding `fetch_offset`, up to `max_bytes` (at least one
        batch when `min_one_batch`), never a batch reaching `max_offset` (the high watermark for
        consumers). `read_committed` also stops at the last stable offset and answers the aborted
        transactions the records overlap (Kafka's FetchIsolation.TXN_COMMITTED). Raises
        OffsetOutOfRangeError outside [log_start_offset, log_end_offset]."""
        with self._lock:
            if not self._log_start_offset <= fetch_offset <= self._log_end_offset:
                raise OffsetOutOfRangeError(
                    f"offset {fetch_offset} is outside [{self._log_start_offset}, "
                    f"{self._log_end_offset}]"
                )
            last_stable_offset = self.last_stable_offset
            limit = self._log_end_offset if max_offset is None else min(max_offset, self._log_end_offset)
            if read_committed:
                limit = min(limit, last_stable_offset)
            records = self._read_batches(fetch_offset, max_bytes, limit, min_one_batch)
            next_offset = fetch_offset
            for _, header in iter_batches(records):
                next_offset = header.next_offset
            aborted = None
            if read_committed:
                aborted = tuple(producer_replay.collect_aborted_transactions(
                    self._segments, fetch_offset, next_offset)) if records else ()
            return FetchDataInfo(
                records=records,
                fetch_offset=fetch_offset,
                next_offset=next_offset,
                high_watermark=self._high_watermark,
                log_start_offset=self._log_start_offset,
                log_end_offset=self._log_end_offset,
                last_stable_offset=last_stable_offset,
                aborted_transactions=aborted,
            )

    def _read_batches(self, fetch_offset: int, max_bytes: int, limit: int, min_one_batch: bool,
                      may_quarantine: bool = True) -> bytes | memoryview:
        if fetch_offset >= limit:
            return b""
        i = max(0, bisect_right([s.base_offset for s in self._segments], fetch_offset) - 1)
        try:
            return self._read_from(i, fetch_offset, max_bytes, limit, min_one_batch)
        except _CorruptRead as e:
            if not may_quarantine or not self._quarantine_read(e.segment, fetch_offset):
                raise CorruptRecordError(str(e)) from None
        # Quarantined: the same read now stops before the region, or raises for an offset in it.
        return self._read_batches(fetch_offset, max_bytes, limit, min_one_batch, may_quarantine=False)

    def _quarantine_read(self, segment: LogSegment, fetch_offset: int) -> bool:
        """A read met a corrupt batch in `segment` that no region covers yet (recovery never
        scanned it: a clean restart, or flushed data): quarantine it as recovery would, so it is
        reported (log line, `kraft_log_quarantined_regions`, the checkpoint), a follower
        refetches it, and later batches and segments stay readable. Whether a region was added."""
        if segment.corrupt_region_of(fetch_offset) is not None:
            return False  # known already: the error says so
        index = self._segments.index(segment)
        following = self._segments[index + 1 : index + 2]
        upper = following[0].base_offset if following else self._log_end_offset
        indexed, position = segment.index_lookup(max(fetch_offset, segment.base_offset))
        region = segment.quarantine_corruption(position, indexed if position > 0 else segment.base_offset,
                                               upper)
        if region is None:
            return False
        report_quarantined(self.directory, segment.log_path.name, region, found_by="a read")
        self._read_quarantined = True
        # The next periodic checkpoint (or close) records the region, so a restart re-validates
        # this segment; no fsync here, on the reader's thread.
        return True

    def _read_from(self, i: int, fetch_offset: int, max_bytes: int, limit: int,
                   min_one_batch: bool) -> bytes | memoryview:
        """Whole checked batches from segment `i` on; `_CorruptRead` names the segment whose
        batch or header failed."""
        for i, segment in enumerate(self._segments[i:], i):
            try:
                found = segment.find_batch(fetch_offset)
            except CorruptRecordError as e:
                raise _CorruptRead(str(e), segment) from None
            if found is not None:
                break
        else:
            return b""
        position, first = found
        # Every batch served is checked (framing, CRC, offset order, with the header after it
        # read too): a corrupt one raises CorruptRecordError (CORRUPT_MESSAGE), never b"".
        following = self._segments[i + 1 : i + 2]
        upper = following[0].base_offset if following else self._log_end_offset
        data = segment.read(position, max(max_bytes, first.size_in_bytes))
        after = segment.read(position + len(data), HEADER_SIZE)  # the next header, for its order
        for region in segment.corrupt_regions:
            if position <= region.position <= position + len(data):
                data, after = data[: region.position - position], b""
        end = 0
        try:
            for pos, header in _checked_batches(data, after, upper):
                if header.last_offset >= limit or (
                    pos + header.size_in_bytes > max_bytes and (pos > 0 or not min_one_batch)
                ):
                    break
                end = pos + header.size_in_bytes
        except CorruptRecordError as e:
            raise _CorruptRead(
                f"{self.directory.name}: corrupt batch at offset {fetch_offset} (segment "
                f"{segment.base_offset}, position {position}): {e}", segment
            ) from None
        # the read's own buffer: a view of its whole batches, not a copy of them
        return data if end == len(data) else memoryview(data)[:end]

    def offset_for_timestamp(
        self, timestamp: int, max_offset: int | None = None
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with a timestamp >= `timestamp`, or None.
        Kafka's sentinels: EARLIEST_TIMESTAMP (-2) and LATEST_TIMESTAMP (-1) answer the log start
        and log end offsets with timestamp -1. Results at or past `max_offset` are None."""
        with self._lock:
            if timestamp == EARLIEST_TIMESTAMP:
                return self._log_start_offset, -1
            if timestamp == LATEST_TIMESTAMP:
                return self._log_end_offset, -1
            for segment in self._segments:
                if segment.next_offset <= self._log_start_offset or segment.max_timestamp < timestamp:
                    continue
                found = segment.find_offset_by_timestamp(timestamp, self._log_start_offset)
                if found is not None:
                    if max_offset is not None and found[0] >= max_offset:
                        return None
                    return found
            return None

    # -- producer state -------------------------------------------------------------------------

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._producer_state

    def _load_producer_state(self, rebuild: Sequence[LogSegment] = (),
                             trust_snapshot: bool = True) -> ProducerStateManager:
        """The snapshot (when it does not reach past the log end) plus the batches after it;
        without a usable snapshot (or not `trust_snapshot`: a re-validated segment's
        `.txnindex` had to be reset, so every entry is rebuilt), every batch of the log. The
        replay repairs the `.txnindex` of the `rebuild` segments (re-validated by recovery at
        open: `log/producer_replay.py`)."""
        expiration_ms = self._config.producer_id_expiration_ms
        snapshot = ProducerStateSnapshot.read(self.directory) if trust_snapshot else None
        state, start = ProducerStateManager(expiration_ms), self._log_start_offset
        if snapshot is not None and snapshot.offset <= self._log_end_offset:
            try:
                state = ProducerStateManager.from_snapshot(snapshot.producers, expiration_ms,
                                                           unreplicated=snapshot.unreplicated)
                start = max(start, snapshot.offset)
            except (ValueError, TypeError) as e:
                logger.warning("%s: ignoring a bad producer state snapshot: %s", self.directory, e)
        producer_replay.replay(self._segments, start, state, rebuild)
        state.on_high_watermark_updated(self._high_watermark)
        return state

    # -- truncation -----------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Removes everything at or after `offset` (a follower's divergent suffix, KIP-101)."""
        with self._lock:
            if offset >= self._log_end_offset:
                # As Kafka's truncateTo: this broker may have led an epoch without appending to
                # it, leaving an entry that starts at the log end and conflicts with the leader's.
                self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
                return
            if offset < self._log_start_offset:
                self.truncate_fully_and_start_at(offset)
                return
            while len(self._segments) > 1 and self._active.base_offset >= offset:
                self._segments.pop().delete()
                self._dir_dirty = True
            removed = self._active.truncate_to(offset)
            logger.info(
                "%s: truncated to offset %d (%d bytes from the active segment)",
                self.directory, offset, removed,
            )
            self._log_end_offset = offset
            self.leader_epoch_cache.truncate_from_end(offset)
            self._recovery_point = min(self._recovery_point, offset)
            self._high_watermark = min(self._high_watermark, offset)
            snapshot = ProducerStateSnapshot.read(self.directory)
            if snapshot is not None and snapshot.offset > offset:
                ProducerStateSnapshot.delete(self.directory)
            self._producer_state = self._load_producer_state()
            self._check_invariants()

    def truncate_fully_and_start_at(self, offset: int, now_ms: int | None = None) -> None:
        """Deletes every segment and restarts the log empty at `offset` (a new segment: its files
        come with the next append). The new log start is checkpointed, creating the directory
        if needed, unless the log never had one and starts at 0 again (what it would recover)."""
        now_ms = _now_ms() if now_ms is None else now_ms
        with self._lock:
            for segment in self._segments:
                segment.delete()
            self._segments = [LogSegment(self.directory, offset, self._config, now_ms, new=True)]
            self._dir_dirty = True
            self.leader_epoch_cache.clear()
            self._producer_state.clear()
            self._log_start_offset = self._log_end_offset = offset
            self._recovery_point = self._high_watermark = offset
            if self._directory_exists or offset != 0:
                self._create_directory()
                self.leader_epoch_cache.write_deferred()  # the cleared cache replaces any old file
                self.checkpoint()

    def assign_epoch_start(self, epoch: int, start_offset: int) -> bool:
        """Records in the epoch cache that `epoch` starts at `start_offset` (a new leader's
        epoch, at its log end), under the log's lock: appends and truncations in other threads
        change the cache too. Returns whether the cache changed."""
        with self._lock:
            return self.leader_epoch_cache.assign(epoch, start_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for a follower's last epoch (KIP-101/279)."""
        with self._lock:
            return self.leader_epoch_cache.end_offset_for(epoch, self._log_end_offset)

    # -- retention and compaction ---------------------------------------------------------------

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Advances the log start (follower catching up with its leader's, or DeleteRecords);
        segments wholly below it go at the next `delete_old_segments`."""
        with self._lock:
            if offset <= self._log_start_offset:
                return False
            if offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot move the log start to {offset}, above the high watermark "
                    f"{self._high_watermark}"
                )
            self._log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)
            self.checkpoint()
            return True

    def delete_old_segments(self, now_ms: int) -> int:
        """Time/size retention and log-start breaches (Kafka's deleteOldSegments); returns how
        many segments were deleted. The active segment goes only after rolling a fresh one.
        Also forgets producers idle for producer.id.expiration.ms (this is the periodic task)."""
        with self._lock:
            self._producer_state.remove_expired(now_ms)
            count = segments_to_delete(
                self._segments, self._config,
                log_start_offset=self._log_start_offset,
                high_watermark=self._high_watermark,
                log_end_offset=self._log_end_offset,
                now_ms=now_ms,
            )
            if count == 0:
                return 0
            if count == len(self._segments):
                self.roll(now_ms)  # a new segment: the log keeps no files but its checkpoints
            doomed, self._segments = self._segments[:count], self._segments[count:]
            for segment in doomed:
                logger.info("%s: retention deletes segment %r", self.directory, segment)
                segment.delete()
            self._dir_dirty = True
            self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
            self._high_watermark = max(self._high_watermark, self._log_start_offset)
            self._recovery_point = max(self._recovery_point, self._log_start_offset)
            self.leader_epoch_cache.truncate_from_start(self._log_start_offset)
            self.checkpoint()
            return count

    def compact(self, now_ms: int) -> CleanerStats:
        """Compacts the segments below the active one and the last stable offset
        (cleanup.policy=compact: no open transaction is touched, aborted ones are removed); a
        no-op for delete-only topics."""
        with self._lock:
            if not self._config.compact or not self._directory_exists:
                return CleanerStats()
            cleaner = LogCleaner(self.directory, self._config)
            stable = self.last_stable_offset
            count = cleaner.cleanable_count(self._segments, stable, now_ms)
            if count == 0:
                return CleanerStats()
            first_dirty = self._segments[count].base_offset
            if first_dirty > self._first_dirty_offset:
                # durable before compaction may open gaps below it: recovery would take a gap
                # beyond the checkpointed offset for a missing range
                self._first_dirty_offset = first_dirty
                self.checkpoint()
            aborted = producer_replay.collect_aborted_transactions(
                self._segments, self._segments[0].base_offset, first_dirty)
            self._segments, stats = cleaner.clean(self._segments, stable, now_ms, aborted)
            if stats.segments_removed:
                self._dir_dirty = True
            return stats

    # -- durability and lifecycle ---------------------------------------------------------------

    def flush(self, now_ms: int | None = None) -> None:
        """fsyncs every segment holding unflushed data, then moves the recovery point to the log
        end offset and checkpoints it."""
        with self._lock:
            for segment in self._segments:
                if segment.next_offset > self._recovery_point or segment is self._active:
                    segment.flush()
            self._sync_directories()
            self._recovery_point = self._log_end_offset
            self._last_flush_ms = _now_ms() if now_ms is None else now_ms
            self.checkpoint()

    def flush_closed_segments(self) -> None:
        """The broker's periodic recovery-point checkpoint (`log.flush.offset.checkpoint.
        interval.ms`): fsyncs the closed segments not yet flushed, moves the recovery point to the active
        segment's base offset (Kafka flushes a segment once rolled) and checkpoints, so a
        restart after kill -9 re-validates only the active segment and what was rolled since."""
        with self._lock:
            target = self._active.base_offset
            if target > self._recovery_point:
                for segment in self._segments[:-1]:
                    if segment.next_offset > self._recovery_point:
                        segment.flush()
                self._sync_directories()
                self._recovery_point = target
            if self._checkpoint_state() != self._checkpointed:  # idle partitions write nothing
                self.checkpoint()

    def _sync_directories(self) -> None:
        """fsyncs the partition directory after files were created or removed in it, and its
        parent after this log created it."""
        if self._topic_id_dirty:
            sync_topic_id(self.directory)
            self._topic_id_dirty = False
        if self._dir_dirty and self._directory_exists:
            fsync_dir(self.directory)
        self._dir_dirty = False
        if self._parent_dirty:
            fsync_dir(self.directory.parent)
            self._parent_dirty = False

    def _checkpoint_state(self) -> tuple[object, ...]:
        return (self._log_start_offset, self._recovery_point, self._high_watermark,
                self._log_end_offset, self.quarantined)

    def checkpoint(self) -> None:
        """Writes log start offset, recovery point and high watermark, and the producer state
        as of the log end offset (atomic file replaces); nothing for a log not on disk, whose
        state is that of an empty log."""
        with self._lock:
            if not self._directory_exists:
                return
            PartitionCheckpoint(
                log_start_offset=self._log_start_offset,
                recovery_point=self._recovery_point,
                high_watermark=self._high_watermark,
                quarantined=tuple((r.start_offset, r.end_offset) for r in self.quarantined),
                first_dirty_offset=self._first_dirty_offset,
            ).write(self.directory)
            state = self._producer_state
            state.on_high_watermark_updated(self._high_watermark)
            ProducerStateSnapshot(self._log_end_offset, state.snapshot(), state.unreplicated()).write(
                self.directory
            )
            self._checkpointed = self._checkpoint_state()

    def close(self) -> None:
        """Flushes everything and checkpoints, so the next open recovers nothing."""
        with self._lock:
            if self._closed:
                return
            self._active.on_become_inactive()
            self.flush()
            for segment in self._segments:
                segment.close()
            self._closed = True

    def delete(self) -> None:
        """Removes the partition directory and everything in it."""
        with self._lock:
            for segment in self._segments:
                segment.close()
            self._closed = True
            shutil.rmtree(self.directory, ignore_errors=True)

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.directory.name}, log_start_offset={self._log_start_offset}, "
            f"high_watermark={self._high_watermark}, log_end_offset={self._log_end_offset})"
        )


class _CorruptRead(CorruptRecordError):
    """A read met corruption in `segment` (internal: `read` raises CorruptRecordError)."""

    def __init__(self, message: str, segment: LogSegment) -> None:
        super().__init__(message)
        self.segment = segment


def _checked_batches(
    data: bytes, after: bytes, upper_offset: int
) -> Iterator[tuple[int, BatchHeader]]:
    """The whole batches of `data` (raw segment bytes from a batch boundary; `after`: the bytes
    that follow it) while each one's framing, CRC and offset order hold, offsets staying below
    `upper_offset`. A batch is yielded once the header after it (when there is one) is in order
    too: base offsets sit outside the CRC, so a base offset below its predecessor's means either
    may be wrong and neither is served. Raises CorruptRecordError when not even the first batch
    can be served."""
    previous: tuple[int, BatchHeader] | None = None
    served = False
    pos = 0
    while pos < len(data):
        if len(data) - pos >= HEADER_SIZE:
            header = BatchHeader.parse(data, pos)
        elif len(data) - pos + len(after) >= HEADER_SIZE:
            header = BatchHeader.parse(data[pos:] + after)
        else:
            break
        try:
            if previous is not None and header.base_offset < previous[1].next_offset:
                if header.base_offset < previous[1].base_offset:
                    previous = None
                raise CorruptRecordError(
                    f"batch at position {pos} has base offset {header.base_offset}, below the "
                    f"previous batch's next offset"
                )
            if header.last_offset >= upper_offset or header.last_offset_delta < 0:
                raise CorruptRecordError(
                    f"batch at position {pos} claims offsets {header.base_offset}-"
                    f"{header.last_offset}, beyond {upper_offset}"
                )
            if pos + header.size_in_bytes > len(data):
                break  # the header after the read: only its order is checked
            validate_stored(data, pos)
        except CorruptRecordError:
            if previous is not None:
                yield previous
            elif not served:
                raise
            return
        if previous is not None:
            yield previous
            served = True
        previous = (pos, header)
        pos += header.size_in_bytes
    if previous is not None:
        yield previous


def _span(header: BatchHeader) -> tuple[int, int]:
    return header.base_offset, header.last_offset


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
