"""An in-memory partition log with `kraft.log.partition_log.PartitionLog`'s replication interface, for
the deterministic simulation: the real PartitionLog fsyncs its epoch cache and checkpoints on
every change, too slow for thousands of seeds. Batches are real batch bytes, validated and
stamped by the real `LogValidator`; the epoch cache is the real `LeaderEpochFileCache` (no file).
`test_replication_memory_log.py` checks that both logs agree on random operation sequences.
Segments are modelled by their base offsets alone, because a read, as Kafka's, stops at the end of
the segment holding the fetch offset, and segments roll by the real size rule.

Transactions too: the real `ProducerStateManager` (rebuilt by replaying the batches after a
truncation, as the real log replays from its snapshot), markers (`append_control`), the last
stable offset and read_committed reads answering the aborted transactions they overlap (kept in
one list: the real log keeps them per segment in `.txnindex` files).

Durability is modelled for crash tests: `flush()` makes the log so far durable (the recovery
point, the high-watermark checkpoint), and `after_power_loss(cut)` is the log a restart finds
when the unflushed suffix is lost from `cut` on (recovery's rules: the epoch cache cut at the log
end, the high watermark from the checkpoint but not past the log end).
"""

from __future__ import annotations

import bisect
import copy
from dataclasses import dataclass
from typing import Callable

from kraft.log import producer_replay, txn_index
from kraft.log.batch import decode_records, iter_batches
from kraft.log.config import LogConfig
from kraft.log.control import build_marker_batch, read_marker
from kraft.log.epoch_cache import LeaderEpochFileCache
from kraft.log.errors import OffsetOutOfRangeError
from kraft.log.partition_log import FetchDataInfo, LogAppendInfo
from kraft.log.producer_state import Duplicate, ProducerStateManager
from kraft.log.validator import LogValidator


@dataclass(frozen=True)
class StoredBatch:
    base_offset: int
    last_offset: int
    data: bytes


class MemoryLog:
    on_disk = False  # the replica manager's retention and checkpoint passes skip it

    def __init__(self, config: LogConfig) -> None:
        self.config = config
        self.leader_epoch_cache = LeaderEpochFileCache(None)
        self.quarantined: tuple[object, ...] = ()
        # every batch from the first segment's base on (log start moves keep them, as segments do)
        self._batches: list[StoredBatch] = []
        self._segment_bases = [0]
        self._log_start_offset = 0
        self._log_end_offset = 0
        self._high_watermark = 0
        self.recovery_point = 0
        self.checkpointed_high_watermark = 0
        self.truncations = 0  # how often records were removed (the simulation's checks re-run)
        self._records: dict[int, tuple[int, bytes | None]] = {}  # decoded once, for the checks
        self._producer_state = ProducerStateManager()
        self._aborted: list[txn_index.AbortedTxn] = []  # every segment's .txnindex, in one list

    def take_read_quarantine(self) -> bool:
        return False  # the simulation's log is never corrupt

    def close(self) -> None:
        pass

    # -- offsets ----------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._high_watermark = min(max(offset, self._log_start_offset), self._log_end_offset)

    @property
    def last_stable_offset(self) -> int:
        self._producer_state.on_high_watermark_updated(self._high_watermark)
        first = self._producer_state.first_unstable_offset()
        if first is None or first >= self._high_watermark:
            return self._high_watermark
        return max(first, self._log_start_offset)

    def verify_transaction(self, producer_id: int, producer_epoch: int) -> None:
        self._producer_state.verify_transaction(producer_id, producer_epoch)

    # -- append -----------------------------------------------------------------------------------

    def append_as_leader(self, batches: bytes, leader_epoch: int, now_ms: int, *,
                         coordinator: bool = False) -> LogAppendInfo:
        validator = LogValidator(self.config)
        validated = validator.validate_for_leader(batches, now_ms)
        latest = self.leader_epoch_cache.latest_epoch
        if latest is not None and leader_epoch < latest:
            raise ValueError(f"leader epoch {leader_epoch} is below the latest epoch {latest}")
        verdicts = self._producer_state.check_batches([h for _, h in validated.batches], coordinator=coordinator)
        assert not any(isinstance(v, Duplicate) for v in verdicts), "the simulation never retries a batch"
        validated = validator.assign_offsets(validated, self._log_end_offset, leader_epoch, now_ms)
        if latest != leader_epoch:
            self.leader_epoch_cache.assign(leader_epoch, validated.first_offset)
        self._store(validated.buffer, validated.batches)
        return LogAppendInfo(validated.first_offset, validated.last_offset,
                             validated.max_timestamp, validated.record_count,
                             validated.size_in_bytes)

    def append_control(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                       commit: bool, leader_epoch: int, now_ms: int) -> LogAppendInfo:
        self._producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        latest = self.leader_epoch_cache.latest_epoch
        if latest is not None and leader_epoch < latest:
            raise ValueError(f"leader epoch {leader_epoch} is below the latest epoch {latest}")
        validator = LogValidator(self.config)
        batch = build_marker_batch(producer_id=producer_id, producer_epoch=producer_epoch,
                                   coordinator_epoch=coordinator_epoch, commit=commit, timestamp=now_ms)
        validated = validator.assign_offsets(validator.validate_for_follower(bytearray(batch), 0),
                                             self._log_end_offset, leader_epoch, now_ms)
        if latest != leader_epoch:
            self.leader_epoch_cache.assign(leader_epoch, validated.first_offset)
        self._store(validated.buffer, validated.batches)
        return LogAppendInfo(validated.first_offset, validated.last_offset, validated.max_timestamp,
                             validated.record_count, validated.size_in_bytes)

    def append_as_follower(self, batches: bytes, now_ms: int | None = None) -> LogAppendInfo:
        validated = LogValidator(self.config).validate_for_follower(batches, self._log_end_offset)
        for _, header in validated.batches:
            if header.partition_leader_epoch >= 0:
                self.leader_epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        self._store(validated.buffer, validated.batches)
        return LogAppendInfo(validated.first_offset, validated.last_offset,
                             validated.max_timestamp, validated.record_count,
                             validated.size_in_bytes)

    def _store(self, buffer: bytearray, batches: tuple) -> None:
        size = sum(header.size_in_bytes for _, header in batches)
        active = self._active_segment_size()
        if active > 0 and active > self.config.segment_bytes - size:  # LogSegment.should_roll's size rule
            self._segment_bases.append(self._log_end_offset)
        for pos, header in batches:
            data = bytes(buffer[pos:pos + header.size_in_bytes])
            self._batches.append(StoredBatch(header.base_offset, header.last_offset, data))
            for i, record in enumerate(decode_records(data)):
                self._records[header.base_offset + i] = (header.partition_leader_epoch, record.value)
            self._update_producer_state(data)
        self._log_end_offset = batches[-1][1].last_offset + 1

    def _update_producer_state(self, data: bytes) -> None:
        [(_, header)] = iter_batches(data)
        aborted = producer_replay.apply(self._producer_state, header,
                                        read_marker(data) if header.is_control else None)
        if aborted is not None:
            self._aborted.append(producer_replay.aborted_entry(aborted))

    def _rebuild_producer_state(self) -> None:
        """After a truncation: the state a replay of the batches left gives (the real log replays
        from its snapshot; the outcome is the same)."""
        self._producer_state, self._aborted = ProducerStateManager(), []
        for batch in self._batches:
            if batch.last_offset >= self._log_start_offset:
                self._update_producer_state(batch.data)

    # -- read -------------------------------------------------------------------------------------

    def read(self, fetch_offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_batch: bool = True, read_committed: bool = False) -> FetchDataInfo:
        if not self._log_start_offset <= fetch_offset <= self._log_end_offset:
            raise OffsetOutOfRangeError(f"offset {fetch_offset} is outside "
                                        f"[{self._log_start_offset}, {self._log_end_offset}]")
        last_stable_offset = self.last_stable_offset
        limit = self._log_end_offset if max_offset is None else min(max_offset, self._log_end_offset)
        if read_committed:
            limit = min(limit, last_stable_offset)
        out = b""
        next_offset = fetch_offset
        i = bisect.bisect_left([b.last_offset for b in self._batches], fetch_offset)
        if fetch_offset < limit and i < len(self._batches):
            following = bisect.bisect_right(self._segment_bases, self._batches[i].base_offset)
            upper = (self._segment_bases[following] if following < len(self._segment_bases)
                     else self._log_end_offset)
            for batch in self._batches[i:]:
                if batch.base_offset >= upper or batch.last_offset >= limit or (
                    len(out) + len(batch.data) > max_bytes and (out or not min_one_batch)
                ):
                    break
                out += batch.data
                next_offset = batch.last_offset + 1
        aborted = None
        if read_committed:
            aborted = tuple(t for t in self._aborted if t.last_offset >= fetch_offset
                            and t.first_offset < next_offset) if out else ()
        return FetchDataInfo(out, fetch_offset, next_offset, self._high_watermark,
                             self._log_start_offset, self._log_end_offset, last_stable_offset, aborted)

    # -- truncation -------------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        if offset >= self._log_end_offset:
            self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
            return
        if offset < self._log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        # as LogSegment.truncate_to: the batch holding `offset` goes whole
        self._batches = [b for b in self._batches if b.last_offset < offset]
        self._drop_segments_from(offset)
        self._forget(lambda o: o >= offset)
        self._log_end_offset = offset
        self.leader_epoch_cache.truncate_from_end(offset)
        self.recovery_point = min(self.recovery_point, offset)
        self._high_watermark = min(self._high_watermark, offset)
        self._rebuild_producer_state()

    def truncate_fully_and_start_at(self, offset: int, now_ms: int | None = None) -> None:
        self._batches = []
        self._segment_bases = [offset]
        self._forget(lambda o: True)
        self.leader_epoch_cache.clear()
        self._log_start_offset = self._log_end_offset = offset
        self.recovery_point = self._high_watermark = offset
        self.checkpointed_high_watermark = offset
        self._rebuild_producer_state()

    def assign_epoch_start(self, epoch: int, start_offset: int) -> bool:
        return self.leader_epoch_cache.assign(epoch, start_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.leader_epoch_cache.end_offset_for(epoch, self._log_end_offset)

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        if offset <= self._log_start_offset:
            return False
        if offset > self._high_watermark:
            raise OffsetOutOfRangeError(f"cannot move the log start to {offset}, above the high "
                                        f"watermark {self._high_watermark}")
        self._log_start_offset = offset
        self._forget(lambda o: o < offset)
        self.leader_epoch_cache.truncate_from_start(offset)
        return True

    def _active_segment_size(self) -> int:
        return sum(len(b.data) for b in self._batches if b.base_offset >= self._segment_bases[-1])

    def _drop_segments_from(self, offset: int) -> None:
        """PartitionLog.truncate_to: segments starting at or after `offset` go, but the first."""
        while len(self._segment_bases) > 1 and self._segment_bases[-1] >= offset:
            self._segment_bases.pop()

    def _forget(self, gone: Callable[[int], bool]) -> None:
        self._records = {o: r for o, r in self._records.items() if not gone(o)}
        self.truncations += 1

    def __repr__(self) -> str:
        return (f"MemoryLog(log_start_offset={self._log_start_offset}, high_watermark="
                f"{self._high_watermark}, log_end_offset={self._log_end_offset}, epochs="
                f"{[(e.epoch, e.start_offset) for e in self.leader_epoch_cache.entries]})")

    # -- durability (the simulation's crashes) ----------------------------------------------------

    def flush(self) -> None:
        self.recovery_point = self._log_end_offset
        self.checkpointed_high_watermark = self._high_watermark

    def after_power_loss(self, cut: int) -> MemoryLog:
        """The log a restart recovers when everything from `cut` (>= the recovery point) on
        never reached the disk."""
        assert self.recovery_point <= cut <= self._log_end_offset, (self.recovery_point, cut)
        restarted = copy.deepcopy(self)
        restarted._batches = [b for b in restarted._batches if b.last_offset < cut]
        restarted._log_end_offset = max(restarted._log_start_offset, restarted._batches[-1].last_offset + 1
                                        if restarted._batches else restarted._log_start_offset)
        restarted._drop_segments_from(restarted._log_end_offset)
        restarted._forget(lambda o: o >= restarted._log_end_offset)
        restarted.leader_epoch_cache.truncate_from_end(restarted._log_end_offset)
        restarted._high_watermark = max(restarted._log_start_offset, min(
            self.checkpointed_high_watermark, restarted._log_end_offset))
        restarted.recovery_point = restarted._log_end_offset
        restarted._rebuild_producer_state()
        return restarted

    def records(self) -> dict[int, tuple[int, bytes | None]]:
        """Offset -> (leader epoch, value) of every record, for the simulation's checks."""
        return self._records
