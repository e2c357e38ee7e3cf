"""The record batches the sink builds for one topic-partition.

Rows are packed straight into one msgpack buffer (`kraft.log.batch.new_row_packer`), at C speed through
`map`, and framed (`kraft.log.batch.frame_rows`) each time the buffer reaches `kraft.batch.size`, so
nothing per record outlives the packing.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any, Sequence

import msgpack

from kraft.log.batch import ROW_OVERHEAD as RECORD_OVERHEAD, frame_rows, new_row_packer, pack_rows, row_ends

__all__ = ["RECORD_OVERHEAD", "PartitionBatches", "row_ends"]
_MAX_PACKER_HINT = 4 * 1024 * 1024


class PartitionBatches:
    """Batches of one topic-partition: framed ones, and the one being packed. With a producer id
    the batches carry consecutive sequences from 0 (one entry per task: see writer.py)."""

    def __init__(self, batch_size: int, compression: str, producer_id: int = -1, producer_epoch: int = -1) -> None:
        self.batch_size = batch_size
        self.compression = compression
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.framed: list[bytes] = []
        self.framed_records = 0  # in self.framed
        self.sequence = 0  # the next batch's base sequence: records framed so far
        self._packer: msgpack.Packer = new_row_packer(min(batch_size + batch_size // 4, _MAX_PACKER_HINT))
        self._count = 0  # rows in the packer
        self._size = 0  # their bytes, as counted for batch sizing
        self._base_timestamp = 0
        self._max_timestamp = 0

    def add(self, values: Sequence[bytes | None], ends: Sequence[int], timestamp: int,
            keys: Sequence[bytes | None] | None = None, headers: Sequence[Any] | None = None) -> None:
        """Appends rows all stamped `timestamp`; `ends[i]` is the size of rows [0, i] together
        (value, key and RECORD_OVERHEAD each); keys None / headers None mean none on any row.
        A batch is closed once it holds `batch_size` bytes (the row that crosses it included)."""
        n = len(values)
        start = 0
        before = 0  # ends[start - 1]
        while start < n:
            if self._count == 0:
                self._base_timestamp = self._max_timestamp = timestamp
            self._max_timestamp = max(self._max_timestamp, timestamp)
            stop = min(n, bisect_left(ends, before + self.batch_size - self._size, start) + 1)
            pack_rows(self._packer.pack, self._count, timestamp - self._base_timestamp, values, start, stop,
                      keys, headers)
            end = int(ends[stop - 1])
            self._count += stop - start
            self._size += end - before
            if self._size >= self.batch_size:
                self._frame()
            start, before = stop, end

    def _frame(self) -> None:
        with self._packer.getbuffer() as rows:
            self.framed.append(frame_rows(
                rows, self._count, base_timestamp=self._base_timestamp, max_timestamp=self._max_timestamp,
                compression=self.compression, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                base_sequence=self.sequence if self.producer_id >= 0 else -1,
            ))
        self._packer.reset()
        self.framed_records += self._count
        self.sequence += self._count
        self._count = self._size = 0

    def take(self) -> tuple[bytes, int]:
        """All the batches, concatenated, and their record count; the builder is left empty
        (its sequences go on from there)."""
        if self._count:
            self._frame()
        taken = b"".join(self.framed), self.framed_records
        self.framed = []
        self.framed_records = 0
        return taken

