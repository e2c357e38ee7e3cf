"""LogCleaner: compaction for cleanup.policy=compact, after Kafka's LogCleaner.

The cleanable range is the prefix of inactive segments wholly below the high watermark and older
than min.compaction.lag.ms; the active segment is never touched. An offset map (key -> last offset
in that range) decides which records survive: the last record of each key, except tombstones
(value None) in segments whose largest timestamp is older than delete.retention.ms. Offsets are
preserved: a batch that loses records is re-encoded in its own format (kraft's or Kafka's v2,
log/records.py) with its base and last offsets and offset deltas that keep every kept record's
offset; an untouched batch is copied byte for byte. Each segment is rewritten to
`<base>.log.cleaned`, fsynced, then its indexes are removed and the cleaned file renamed over the
`.log` (a crash leaves the old or the new segment; the loader rebuilds missing indexes and removes
leftover `.cleaned` files). A segment left empty is deleted.

Transactions (Kafka's CleanedTransactionMetadata): the cleanable range ends at the last stable
offset (the caller's bound), so no open transaction is touched. The records of aborted
transactions (found through the `.txnindex` entries the caller collects) are removed and never
enter the offset map (an aborted write must not shadow the committed value of its key). A marker
stays while any batch of its transaction was seen in this pass, and goes once none remains and its
segment is older than delete.retention.ms (the tombstone rule): data and marker are removed at
least one pass apart. A cleaned segment's `.txnindex` keeps the entries of the ABORT markers it
keeps, and is replaced before the `.log` (a crash between leaves entries only of markers whose
transactions have no data left, or the old index with the old log).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from kraft.log.batch import BatchHeader, Record
from kraft.log.checkpoint import fsync_dir
from kraft.log.config import LogConfig
from kraft.log.control import ABORT, COMMIT, EndTransactionMarker, read_marker
from kraft.log.records import decode_records, encode_like
from kraft.log.segment import LogSegment
from kraft.log.txn_index import AbortedTxn

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

    def cleanable_count(self, segments: Sequence[LogSegment], upper_offset: int, now_ms: int) -> int:
        """How many leading segments may be cleaned (never the last, the active one), all below
        `upper_offset` (the last stable offset: below the high watermark, no open transaction)."""
        count = 0
        for i in range(len(segments) - 1):
            segment, following = segments[i], segments[i + 1]
            if following.base_offset > upper_offset:
                break
            if now_ms - segment.largest_timestamp < self.config.min_compaction_lag_ms:
                break
            if segment.corrupt_regions:  # rewriting it would turn quarantined data into a gap
                break
            count += 1
        return count

    def clean(
        self, segments: list[LogSegment], upper_offset: int, now_ms: int,
        aborted: Sequence[AbortedTxn] = (),
    ) -> tuple[list[LogSegment], CleanerStats]:
        """Compacts the cleanable prefix; returns the new segment list and what changed.
        `aborted`: the aborted transactions overlapping the cleanable range."""
        count = self.cleanable_count(segments, upper_offset, now_ms)
        if count == 0:
            return segments, CleanerStats()
        offset_map = self._build_offset_map(segments[:count], aborted)
        transactions = _CleanedTransactions(aborted)
        tombstone_horizon = now_ms - self.config.delete_retention_ms
        result: list[LogSegment] = []
        totals = dict(segments_cleaned=0, segments_removed=0, records_read=0, records_removed=0,
                      bytes_before=0, bytes_after=0)
        for segment in segments[:count]:
            drop_tombstones = segment.largest_timestamp < tombstone_horizon
            totals["bytes_before"] += segment.size
            cleaned, read, removed = self._clean_segment(segment, offset_map, drop_tombstones,
                                                         transactions, now_ms)
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

    def _build_offset_map(self, segments: Sequence[LogSegment],
                          aborted: Sequence[AbortedTxn]) -> dict[bytes, int]:
        offset_map: dict[bytes, int] = {}
        transactions = _CleanedTransactions(aborted)
        for segment in segments:
            for position, header in segment.batches():
                if header.is_control:
                    transactions.on_control_batch(header, read_marker(segment.read(position, header.size_in_bytes)))
                    continue
                if transactions.on_batch(header):
                    continue  # aborted: its keys never shadow a committed value
                for record in decode_records(segment.read(position, header.size_in_bytes)):
                    if record.key is not None:
                        offset_map[record.key] = record.offset
        return offset_map

    def _clean_segment(
        self, segment: LogSegment, offset_map: dict[bytes, int], drop_tombstones: bool,
        transactions: _CleanedTransactions, now_ms: int,
    ) -> tuple[LogSegment | None, int, int]:
        """Rewrites one segment; returns (segment or None if now empty, records read, removed).
        Markers go with tombstones (`drop_tombstones`), once no data of their transaction is left."""
        cleaned_path = segment.log_path.with_name(segment.log_path.name + ".cleaned")
        read = removed = 0
        entries: list[AbortedTxn] = []  # of the ABORT markers kept
        with open(cleaned_path, "wb") as out:
            for position, header in segment.batches():
                data = segment.read(position, header.size_in_bytes)
                read += header.record_count
                if header.is_control:
                    discardable, entry = transactions.on_control_batch(header, read_marker(data))
                    if discardable and drop_tombstones:
                        removed += header.record_count
                        continue
                    if entry is not None:
                        entries.append(entry)
                    out.write(data)
                    continue
                records = decode_records(data)
                kept = [] if transactions.on_batch(header) else [
                    r for r in records
                    if r.key is not None
                    and offset_map.get(r.key) == r.offset
                    and not (drop_tombstones and r.value is None)
                ]
                removed += len(records) - len(kept)
                if len(kept) == len(records):
                    out.write(data)
                elif kept:
                    out.write(_rebuild_batch(header, kept))
            out.flush()
            os.fsync(out.fileno())
        if removed == 0:
            cleaned_path.unlink()
            return segment, read, 0
        base_offset = segment.base_offset
        segment.txn_index.replace(entries)  # before the log: see the module docstring
        segment.offset_index.delete()
        segment.time_index.delete()
        segment.close()
        if os.path.getsize(cleaned_path) == 0:
            cleaned_path.unlink()
            segment.txn_index.delete()
            segment.log_path.unlink()
            fsync_dir(self.directory)
            return None, read, removed
        os.replace(cleaned_path, segment.log_path)
        fsync_dir(self.directory)
        replacement = LogSegment(self.directory, base_offset, self.config, now_ms)
        recovery = replacement.recover()
        assert recovery.truncated_bytes == 0, f"cleaned segment failed validation: {recovery}"
        return replacement, read, removed


class _CleanedTransactions:
    """Kafka's CleanedTransactionMetadata: the transactions of the batches the cleaner has read
    so far in one pass, in offset order, to tell aborted batches and discardable markers."""

    def __init__(self, aborted: Sequence[AbortedTxn]) -> None:
        self._aborted = sorted(aborted, key=lambda t: t.first_offset)  # consumed from the front
        self._next = 0
        self._ongoing_aborted: dict[int, tuple[AbortedTxn, bool]] = {}  # pid -> (txn, batch seen)
        self._ongoing_committed: set[int] = set()

    def _consume_up_to(self, offset: int) -> None:
        while self._next < len(self._aborted) and self._aborted[self._next].first_offset <= offset:
            txn = self._aborted[self._next]
            self._ongoing_aborted.setdefault(txn.producer_id, (txn, False))
            self._next += 1

    def on_batch(self, header: BatchHeader) -> bool:
        """Whether the data batch belongs to an aborted transaction (its records go)."""
        self._consume_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self._ongoing_aborted.get(header.producer_id)
        if ongoing is not None:
            self._ongoing_aborted[header.producer_id] = (ongoing[0], True)
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_control_batch(self, header: BatchHeader,
                         marker: EndTransactionMarker | None) -> tuple[bool, AbortedTxn | None]:
        """(whether the marker may go: no batch of its transaction was seen in this pass, the
        `.txnindex` entry to keep with it when it stays)."""
        self._consume_up_to(header.last_offset)
        control_type = None if marker is None else marker.control_type
        if control_type == ABORT:
            ongoing = self._ongoing_aborted.pop(header.producer_id, None)
            if ongoing is not None and ongoing[1]:
                return False, ongoing[0]
            return True, None
        if control_type == COMMIT:
            seen = header.producer_id in self._ongoing_committed
            self._ongoing_committed.discard(header.producer_id)
            return not seen, None
        return False, None  # another control type: kept


def _rebuild_batch(header: BatchHeader, kept: list[Record]) -> bytes:
    """Re-encodes the surviving records of a batch in its own format (kraft's or Kafka's v2),
    keeping every offset and the batch's base and last offsets (as Kafka's v2 cleaner: the
    producer state derives the last sequence from base_sequence + last_offset_delta, so both
    must survive)."""
    if header.is_log_append_time:
        return encode_like(header, kept, header.max_timestamp, header.max_timestamp)  # one batch time
    return encode_like(header, kept, kept[0].timestamp, max(r.timestamp for r in kept))
