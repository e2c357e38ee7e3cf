"""Producer state from the log: the replay that rebuilds it, and the aborted-transaction lookups
over a partition's segments (after Kafka's UnifiedLog.rebuildProducerState and
collectAbortedTransactions).

The replay reads batch headers from an offset on, and the marker of each control batch (one small
record, `log/control.py`), into a `ProducerStateManager`. A segment recovery re-validated at open
(`LogSegment.recovered`) gets its `.txnindex` repaired here: the replay appends the aborted
transactions whose markers it meets in such a segment, so an index whose last entries never
reached the disk (a kill between the marker's write and its entry's), or that recovery reset, ends
up as the log says. Entries of markers below the replay's start are kept: the producer-state
snapshot the replay starts from is written only after them.
"""

from __future__ import annotations

import logging
from typing import Collection, Iterable, Iterator, Sequence

from kraft.log.batch import BatchHeader
from kraft.log.control import EndTransactionMarker, read_marker
from kraft.log.errors import CorruptRecordError
from kraft.log.producer_state import CompletedTxn, ProducerStateManager
from kraft.log.segment import LogSegment
from kraft.log.txn_index import AbortedTxn

logger = logging.getLogger(__name__)


def batches_from(segments: Iterable[LogSegment], offset: int) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
    """(segment, position, header) of the batches holding offsets >= `offset`, in log order,
    skipping quarantined regions (no producer state comes from corrupt data)."""
    for segment in segments:
        if segment.next_offset <= offset:
            continue
        region = segment.corrupt_region_of(offset)
        found = segment.find_batch(offset if region is None else region.end_offset)
        if found is None:
            continue
        for position, header in segment.batches(found[0]):
            yield segment, position, header


def marker_of(segment: LogSegment, position: int, header: BatchHeader) -> EndTransactionMarker | None:
    """The marker of the control batch at `position`; None (logged) when it cannot be read: its
    transaction then stays open here, holding the last stable offset back, rather than a read of
    the log failing."""
    try:
        return read_marker(segment.read(position, header.size_in_bytes))
    except CorruptRecordError as e:
        logger.warning("%s: cannot read the transaction marker at offset %d: %s", segment.log_path,
                       header.base_offset, e)
        return None


def apply(state: ProducerStateManager, header: BatchHeader,
          marker: EndTransactionMarker | None) -> CompletedTxn | None:
    """One batch into `state`; the aborted transaction it completed, if any."""
    completed = state.update(header, marker)
    return completed if completed is not None and completed.is_aborted else None


def aborted_entry(completed: CompletedTxn) -> AbortedTxn:
    return AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset,
                      completed.last_stable_offset)


def replay(segments: Sequence[LogSegment], start: int, state: ProducerStateManager,
           rebuild: Collection[LogSegment] = ()) -> None:
    """Feeds every batch from offset `start` on into `state`, rebuilding the `.txnindex` entries
    of markers from `start` on in the `rebuild` segments (those recovery re-validated)."""
    for segment in rebuild:
        segment.txn_index.truncate_to(start)
    for segment, position, header in batches_from(segments, start):
        marker = marker_of(segment, position, header) if header.is_control else None
        aborted = apply(state, header, marker)
        if aborted is not None and segment in rebuild:
            segment.txn_index.append(aborted_entry(aborted))


def collect_aborted_transactions(segments: Sequence[LogSegment], fetch_offset: int,
                                 upper_bound_offset: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping [fetch_offset, upper_bound_offset): from the segment
    holding `fetch_offset` on, until a segment's search is complete (an entry's last stable
    offset reached the upper bound)."""
    found: list[AbortedTxn] = []
    for segment in segments:
        if segment.next_offset <= fetch_offset:
            continue  # its markers, and so its entries' transactions, end below the fetch
        entries, complete = segment.txn_index.collect(fetch_offset, upper_bound_offset)
        found += entries
        if complete:
            break
    return found
