"""The record batches the sink builds for one topic-partition.

Rows given as Arrow columns without headers are packed by Arrow kernels (`arrow_rows.pack_rows`);
others are packed into a msgpack buffer (`kraft.log.batch.new_row_packer`), at C speed through
`map`. The packed rows are framed (`kraft.log.batch.frame_rows`) each time they reach
`kraft.batch.size`, so nothing per record outlives the packing.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any, Sequence

import msgpack
import pyarrow as pa

from kraft.log.batch import ROW_OVERHEAD as RECORD_OVERHEAD, frame_rows, new_row_packer, pack_rows, row_ends
from kraft.spark_connector.arrow_rows import pack_rows as pack_arrow_rows

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
        self._rows: list[bytes | memoryview] = []  # the packed rows of the batch being built
        self._count = 0  # rows in self._rows
        self._size = 0  # their bytes, as counted for batch sizing
        self._base_timestamp = 0
        self._max_timestamp = 0

    def add(self, values: Sequence[bytes | None] | pa.Array, ends: Sequence[int], timestamp: int,
            keys: Sequence[bytes | None] | pa.Array | None = None, headers: Sequence[Any] | None = None) -> None:
        """Appends rows all stamped `timestamp`; `ends[i]` is the size of rows [0, i] together
        (value, key and RECORD_OVERHEAD each); keys None / headers None mean none on any row.
        `values` and `keys` are both Python sequences or both Arrow arrays (packed by Arrow
        kernels when `headers` is None).
        A batch is closed once it holds `batch_size` bytes (the row that crosses it included)."""
        n = len(values)
        start = 0
        before = 0  # ends[start - 1]
        while start < n:
            if self._count == 0:
                self._base_timestamp = self._max_timestamp = timestamp
            self._max_timestamp = max(self._max_timestamp, timestamp)
            stop = min(n, bisect_left(ends, before + self.batch_size - self._size, start) + 1)
            self._pack(values, keys, headers, start, stop, timestamp - self._base_timestamp)
            end = int(ends[stop - 1])
            self._count += stop - start
            self._size += end - before
            if self._size >= self.batch_size:
                self._frame()
            start, before = stop, end

    def _pack(self, values: Sequence[bytes | None] | pa.Array, keys: Sequence[bytes | None] | pa.Array | None,
              headers: Sequence[Any] | None, start: int, stop: int, timestamp_delta: int) -> None:
        if isinstance(values, pa.Array):
            values = values.slice(start, stop - start)
            keys = None if keys is None else keys.slice(start, stop - start)  # type: ignore[union-attr]
            packed = None if headers is not None else pack_arrow_rows(self._count, timestamp_delta, keys, values)
            if packed is not None:
                self._rows.append(packed)
                return
            values, keys = values.to_pylist(), None if keys is None else keys.to_pylist()
            headers = None if headers is None else headers[start:stop]
            start, stop = 0, len(values)
        pack_rows(self._packer.pack, self._count, timestamp_delta, values, start, stop, keys, headers)
        self._rows.append(self._packer.bytes())
        self._packer.reset()

    def _frame(self) -> None:
        self.framed.append(frame_rows(
            self._rows[0] if len(self._rows) == 1 else b"".join(self._rows), self._count,
            base_timestamp=self._base_timestamp, max_timestamp=self._max_timestamp,
            compression=self.compression, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            base_sequence=self.sequence if self.producer_id >= 0 else -1,
        ))
        self._rows = []
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

