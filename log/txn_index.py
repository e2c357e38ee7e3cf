"""The aborted-transaction index of a segment (`<base offset>.txnindex`), after Kafka's TransactionIndex.

One 34-byte big-endian entry per transaction aborted by a marker in the segment, in marker order:
version int16 (0), producer id int64, first offset int64 (the transaction's first record in this
partition), last offset int64 (the ABORT marker's offset) and the last stable offset when it was
aborted (int64: the first offset of the next still-open transaction of another producer, else the
marker's offset + 1). A read_committed fetch collects the entries overlapping what it returns
(`collect`), segment after segment until one's last stable offset reaches the fetch's end (no
transaction aborted later can start before it), so the reader can drop the aborted records.

Like Kafka's, the file exists only once a segment holds an aborted transaction; the entries are
mirrored in memory. The partition log appends an entry after the marker is in the segment, and
recovery repairs the index of every segment it re-validates (`PartitionLog`: entries at or past
the offset the producer state is replayed from are rebuilt by that replay).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from kraft.log import fault_injection
from kraft.log.checkpoint import write_atomic
from kraft.log.errors import CorruptRecordError
from kraft.log.file_cache import OPEN_FILES

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY = struct.Struct(">hqqqq")  # version, producer id, first, last, last stable offset
ENTRY_SIZE = ENTRY.size  # 34
VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int

    def encode(self) -> bytes:
        return ENTRY.pack(VERSION, self.producer_id, self.first_offset, self.last_offset,
                          self.last_stable_offset)


def decode_entries(data: bytes) -> tuple[list[AbortedTxn], int]:
    """The whole entries of `data` and how many bytes follow the last one (a torn append).
    Raises CorruptRecordError for an entry of a version kraft does not know."""
    usable = len(data) - len(data) % ENTRY_SIZE
    entries = []
    for version, *fields in ENTRY.iter_unpack(data[:usable]):
        if version != VERSION:
            raise CorruptRecordError(f"aborted transaction entry of version {version}, expected {VERSION}")
        entries.append(AbortedTxn(*fields))
    return entries, len(data) - usable


def collect(entries: Iterable[AbortedTxn], fetch_offset: int,
            upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
    """The entries of aborted transactions overlapping [fetch_offset, upper_bound_offset), and
    whether the search is complete (an entry's last stable offset reached the upper bound, so no
    later segment can hold one that starts below it), as Kafka's collectAbortedTxns."""
    found = []
    for txn in entries:
        if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
            found.append(txn)
        if txn.last_stable_offset >= upper_bound_offset:
            return found, True
    return found, False


class TransactionIndex:
    def __init__(self, path: Path, base_offset: int, *, new: bool = False) -> None:
        """Reads the file when there is one (a missing file is an empty index); with `new` (a
        segment that was never written) touches nothing."""
        self.path = path
        self.base_offset = base_offset
        self._file = OPEN_FILES.file(path)  # opened (and created) at the first write
        try:
            data = b"" if new else path.read_bytes()
        except FileNotFoundError:
            data = b""
        self._on_disk = bool(data) or (not new and path.exists())
        self._torn = 0
        self._error: str | None = None
        try:
            self._entries, self._torn = decode_entries(data)
        except CorruptRecordError as e:
            self._entries, self._error = [], str(e)
        self._dirty = False

    @property
    def entries(self) -> tuple[AbortedTxn, ...]:
        return tuple(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def sanity_check(self, next_offset: int) -> None:
        """Raises CorruptRecordError when the file is torn, of an unknown version, out of order,
        or names a marker outside [base_offset, next_offset) (Kafka's sanityCheck, tightened)."""
        if self._error is not None:
            raise CorruptRecordError(f"{self.path}: {self._error}")
        if self._torn:
            raise CorruptRecordError(f"{self.path}: size is not a multiple of {ENTRY_SIZE}")
        last = self.base_offset - 1
        for txn in self._entries:
            if not last < txn.last_offset < next_offset or txn.first_offset > txn.last_offset:
                raise CorruptRecordError(f"{self.path}: entry {txn} is out of order or outside "
                                         f"[{self.base_offset}, {next_offset})")
            last = txn.last_offset

    def repair(self, next_offset: int) -> bool:
        """After recovery: drops a torn last entry and the entries of markers at or past
        `next_offset` (a cut tail); resets the index when anything else is wrong. Returns False
        when it was reset (its entries must all be rebuilt)."""
        try:
            if self._torn:
                self._torn = 0
                self._truncate_entries(len(self._entries))
            self.truncate_to(next_offset)
            self.sanity_check(next_offset)
            return True
        except CorruptRecordError:
            self._error = None
            self.reset()
            return False

    def append(self, txn: AbortedTxn) -> None:
        if self._entries and txn.last_offset <= self._entries[-1].last_offset:
            raise ValueError(f"{self.path}: marker offset {txn.last_offset} is not above the last "
                             f"entry's {self._entries[-1].last_offset}")
        fault_injection.before_write(self.path)
        with self._file as fd:
            os.pwrite(fd, txn.encode(), len(self._entries) * ENTRY_SIZE)
        self._entries.append(txn)
        self._on_disk = self._dirty = True

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        return collect(self._entries, fetch_offset, upper_bound_offset)

    def truncate_to(self, offset: int) -> None:
        """Drops the entries of markers at or after `offset`."""
        keep = len(self._entries)
        while keep and self._entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep != len(self._entries):
            self._truncate_entries(keep)

    def reset(self) -> None:
        self._truncate_entries(0)

    def replace(self, entries: list[AbortedTxn]) -> None:
        """The index holding exactly `entries` (compaction's cleaned segment), replaced whole
        (atomically, fsynced): a crash leaves the old index or the new one. No entries and no
        file: nothing is written."""
        if not entries and not self._on_disk:
            return
        self._file.close()
        write_atomic(self.path, b"".join(t.encode() for t in entries))
        self._file = OPEN_FILES.file(self.path)
        self._entries, self._on_disk, self._dirty = list(entries), True, False

    def _truncate_entries(self, count: int) -> None:
        del self._entries[count:]
        if self._on_disk:
            with self._file as fd:
                os.ftruncate(fd, count * ENTRY_SIZE)
            self._dirty = True

    def flush(self) -> None:
        if self._dirty:
            with self._file as fd:
                fault_injection.fsync(fd)
            self._dirty = False

    def close(self) -> None:
        self._file.close()

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
        self._on_disk = False
