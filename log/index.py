"""Sparse segment indexes, after Kafka's OffsetIndex and TimeIndex.

`.index` entries are (relative offset int32, file position int32): the base offset of a batch and
where it starts. `.timeindex` entries are (timestamp int64, relative offset int32): the segment's
max timestamp so far and the base offset of the batch that first reached it. Both are append-only
files mirrored in memory; lookups are binary searches for the last entry at or below the target,
and need no descriptor: the file's is lent by `log/file_cache.py` for writes only.
Entries are a hint: a missing tail only makes lookups scan further, so the files need no fsync,
and a file that fails `sanity_check` is rebuilt from the `.log` by the segment. A new index
(`new=True`, a segment that was never written) has no file until the segment creates its files.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_right
from pathlib import Path

from kraft.log import fault_injection
from kraft.log.errors import CorruptRecordError
from kraft.log.file_cache import OPEN_FILES


class _SparseIndex:
    """Append-only file of fixed-size (key, value) entries with strictly increasing keys."""

    _entry: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int, *, new: bool = False) -> None:
        """Loads the file at `path` (created empty if missing), or with `new` starts empty
        without touching the disk."""
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self._entry.size)
        self._keys: list[int] = []
        self._values: list[int] = []
        self._corrupt = False
        if new:
            self._file = OPEN_FILES.file(path)
            return
        self._file = OPEN_FILES.open(path)  # lent per call: a closed segment's may be evicted
        try:
            self._load()
        except BaseException:
            self._file.close()
            raise

    def _decode(self, a: int, b: int) -> tuple[int, int]:
        raise NotImplementedError

    def _encode(self, key: int, value: int) -> bytes:
        raise NotImplementedError

    def _load(self) -> None:
        with self._file as fd:
            data = _read_all(fd)
        size = self._entry.size
        usable = len(data) - len(data) % size
        for a, b in self._entry.iter_unpack(data[:usable]):
            key, value = self._decode(a, b)
            self._keys.append(key)
            self._values.append(value)
        self._corrupt = usable != len(data)

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        return len(self._keys) >= self.max_entries

    @property
    def last_entry(self) -> tuple[int, int] | None:
        return (self._keys[-1], self._values[-1]) if self._keys else None

    def sanity_check(self) -> None:
        """Raises CorruptRecordError when the file is torn or out of order (Kafka's sanityCheck)."""
        if self._corrupt:
            raise CorruptRecordError(f"{self.path}: size is not a multiple of {self._entry.size}")
        if any(b <= a for a, b in zip(self._keys, self._keys[1:])):
            raise CorruptRecordError(f"{self.path}: keys are not strictly increasing")
        self._check_values()

    def _check_values(self) -> None:
        if any(b < a for a, b in zip(self._values, self._values[1:])):
            raise CorruptRecordError(f"{self.path}: values go backwards")

    def _append(self, key: int, value: int) -> None:
        if self._keys and key <= self._keys[-1]:
            raise ValueError(f"{self.path}: key {key} not above last key {self._keys[-1]}")
        if self.is_full:
            raise ValueError(f"{self.path}: index is full ({self.max_entries} entries)")
        fault_injection.before_write(self.path)
        with self._file as fd:
            os.pwrite(fd, self._encode(key, value), len(self._keys) * self._entry.size)
        self._keys.append(key)
        self._values.append(value)

    def _floor(self, key: int) -> int:
        """Index of the last entry with key <= `key`, or -1."""
        return bisect_right(self._keys, key) - 1

    def _truncate_entries(self, count: int) -> None:
        del self._keys[count:]
        del self._values[count:]
        if self._file.created:
            with self._file as fd:
                os.ftruncate(fd, count * self._entry.size)
        self._corrupt = False

    def reset(self) -> None:
        self._truncate_entries(0)

    def create(self) -> None:
        """Creates the (empty) file of a new index."""
        with self._file:
            pass

    def flush(self) -> None:
        if self._file.created:
            with self._file as fd:
                os.fsync(fd)

    def close(self) -> None:
        self._file.close()

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class OffsetIndex(_SparseIndex):
    """Batch base offset -> file position."""

    _entry = struct.Struct(">ii")

    def _decode(self, a: int, b: int) -> tuple[int, int]:
        return self.base_offset + a, b

    def _encode(self, key: int, value: int) -> bytes:
        return self._entry.pack(key - self.base_offset, value)

    def append(self, offset: int, position: int) -> None:
        self._append(offset, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """The last indexed (offset, position) at or below `offset`; (base_offset, 0) if none."""
        i = self._floor(offset)
        return (self._keys[i], self._values[i]) if i >= 0 else (self.base_offset, 0)

    def truncate_to(self, offset: int) -> None:
        """Drops entries for offsets >= `offset`."""
        self._truncate_entries(bisect_right(self._keys, offset - 1))


class TimeIndex(_SparseIndex):
    """Max timestamp so far -> base offset of the batch that reached it."""

    _entry = struct.Struct(">qi")

    def _decode(self, a: int, b: int) -> tuple[int, int]:
        return a, self.base_offset + b

    def _encode(self, key: int, value: int) -> bytes:
        return self._entry.pack(key, value - self.base_offset)

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Appends when `timestamp` is above the last entry's (Kafka's maybeAppend)."""
        if not self._keys or timestamp > self._keys[-1]:
            self._append(timestamp, offset)

    def lookup(self, timestamp: int) -> tuple[int, int] | None:
        """The last (timestamp, offset) entry with timestamp <= `timestamp`, or None."""
        i = self._floor(timestamp)
        return (self._keys[i], self._values[i]) if i >= 0 else None

    def truncate_to(self, offset: int) -> None:
        """Drops entries pointing at offsets >= `offset`."""
        self._truncate_entries(bisect_right(self._values, offset - 1))


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    chunks = []
    pos = 0
    while pos < size:
        chunk = os.pread(fd, size - pos, pos)
        if not chunk:
            break
        chunks.append(chunk)
        pos += len(chunk)
    return b"".join(chunks)
