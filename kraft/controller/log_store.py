"""The on-disk metadata log of `LocalQuorum`: segments of CRC-framed msgpack records, and snapshots.

Directory `<data_dir>/__cluster_metadata-0/`:
- `<base offset, 20 digits>.log`: frames `[u32 length][u32 crc32c(payload)][payload]`, one per
  proposal so a batch is recovered whole or not at all; payload = msgpack
  `[first offset, [record dict, ...]]`, offsets contiguous across segments;
- `<offset, 20 digits>.snapshot`: one frame whose payload is `MetadataImage.to_snapshot()` at that
  offset, written to a temp file, fsynced and renamed (atomic), then older segments are deleted.

Blocking file I/O only: `LocalQuorum` calls every method here from a thread. On load the segments
are read by the scan rule (`kraft.log.scan`): a torn tail (a crash mid-append: an invalid suffix of
the last segment written) is truncated at the last whole frame and logged; damage with valid frames
after it (rot) stops the load with `MetadataLogCorruptError` naming the file and byte, unless the
operator chose `metadata.log.recovery=truncate`. Records after a corrupt frame are never replayed. A failed append (a full disk: ENOSPC) cuts the segment back to
its size before the write, so the store stays appendable and the append can be tried again.
"""

from __future__ import annotations

import io
import logging
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import crc32c
import msgpack

from kraft.controller.errors import MetadataLogCorruptError
from kraft.log import fault_injection
from kraft.log.errors import CorruptRecordError
from kraft.log.scan import BadOffsetsError, CrcFraming, Frame, InvalidSuffix, scan
from kraft.metadata.image import MetadataImage

log = logging.getLogger(__name__)

LOG_DIR_NAME = "__cluster_metadata-0"
_FRAME = struct.Struct(">II")
MAX_FRAME_BYTES = 1 << 30  # a bigger length can only be garbage


def encode_frame(payload: bytes) -> bytes:
    assert len(payload) <= MAX_FRAME_BYTES
    return _FRAME.pack(len(payload), crc32c.crc32c(payload)) + payload


def encode_batch(first_offset: int, records: list[dict[str, Any]]) -> bytes:
    """One frame for a proposal; TypeError when a record is not msgpack-able."""
    return encode_frame(msgpack.packb([first_offset, records], use_bin_type=True))


def decode_frames(buf: bytes) -> tuple[list[Any], int]:
    """The payloads (unpacked) of the whole valid frames at the start of `buf`, and their length."""
    items, pos = [], 0
    while pos + _FRAME.size <= len(buf):
        length, crc = _FRAME.unpack_from(buf, pos)
        end = pos + _FRAME.size + length
        if length > MAX_FRAME_BYTES or end > len(buf):
            break
        payload = buf[pos + _FRAME.size:end]
        if crc32c.crc32c(payload) != crc:
            break
        try:
            items.append(msgpack.unpackb(payload, raw=False, strict_map_key=False))
        except (ValueError, msgpack.UnpackException):
            break
        pos = end
    return items, pos


@dataclass(frozen=True)
class LoadedLog:
    snapshot: MetadataImage | None
    entries: list[tuple[int, dict[str, Any]]]  # after the snapshot, in offset order

    @property
    def last_offset(self) -> int:
        if self.entries:
            return self.entries[-1][0]
        return -1 if self.snapshot is None else self.snapshot.offset


def _name(offset: int, suffix: str) -> str:
    return f"{offset:020d}{suffix}"


def _offsets(directory: Path, suffix: str) -> list[int]:
    return sorted(int(p.name[: -len(suffix)]) for p in directory.glob("*" + suffix) if p.name[: -len(suffix)].isdigit())


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class MetadataLogStore:
    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.directory = Path(data_dir) / LOG_DIR_NAME
        self.directory.mkdir(parents=True, exist_ok=True)
        self._active: io.FileIO | None = None
        self._size = 0  # bytes of whole frames in the active segment

    # -- loading ----------------------------------------------------------------------------------

    def load(self, truncate_rot: bool = False) -> LoadedLog:
        """The newest readable snapshot and the records after it, read by the scan rule
        (`kraft.log.scan`): a torn tail (an invalid suffix of the last segment written) is cut.
        Damage with valid records after it (rot) raises MetadataLogCorruptError naming the file
        and byte, since this node is the log's only voter; with `truncate_rot` (the operator's
        `metadata.log.recovery=truncate`) the log is cut there instead, knowingly."""
        snapshot = self._load_snapshot()
        after = -1 if snapshot is None else snapshot.offset
        entries: list[tuple[int, dict[str, Any]]] = []
        expected = after + 1
        segments = _offsets(self.directory, ".log")
        for i, base in enumerate(segments):
            path = self.directory / _name(base, ".log")
            data = path.read_bytes()
            later = [self.directory / _name(b, ".log") for b in segments[i + 1:]]
            if base > expected:  # e.g. the snapshot that covered the deleted segments is unreadable
                damage: Any = f"the segment starts at offset {base}, records from {expected} are missing"
                self._rot(path, 0, len(data), expected, damage, later, truncate_rot)
                break
            cut = None
            for event in scan(lambda p, n: data[p:p + n], len(data), _FRAMING, expected=expected):
                if isinstance(event, Frame):
                    first, records = event.item
                    if first > expected:
                        self._rot(path, event.position, len(data), expected,
                                  f"a frame at offset {first}: offsets from {expected} are missing",
                                  later, truncate_rot)
                        cut = event.position
                        break
                    if first == expected:
                        entries.extend(zip(range(first, first + len(records)), records))
                        expected += len(records)
                    continue
                if isinstance(event, InvalidSuffix) and not any(p.stat().st_size for p in later):
                    log.warning("%s: truncating torn metadata log tail at byte %d of %d (no valid "
                                "record after it: %s)", path, event.position, len(data), event.reason)
                    _cut(path, event.position, later)
                else:
                    self._rot(path, event.position, len(data), expected, event.reason, later,
                              truncate_rot)
                cut = event.position
                break
            if cut is not None:
                break
        return LoadedLog(snapshot, entries)

    @staticmethod
    def _rot(path: Path, position: int, size: int, offset: int, reason: str, later: list[Path],
             truncate: bool) -> None:
        """Damage at `position` of `path` with valid records after it (in this file or later
        ones): fail, naming what to do, or with `truncate` cut the log there and say so."""
        if not truncate:
            raise MetadataLogCorruptError(
                f"the metadata log {path} is corrupt at byte {position} of {size} ({reason}) and "
                f"valid records follow: the records from offset {offset} on cannot be replayed. "
                f"This node is the metadata log's only voter, so no peer holds them. Restore "
                f"{path.parent} from a backup, or start once with --override "
                f"metadata.log.recovery=truncate to drop every record from offset {offset} on "
                f"(what they created, topics included, is forgotten). See docs/operations.md, "
                f"'A corrupt metadata log'")
        log.error("%s: corrupt at byte %d of %d (%s) with valid records after it; "
                  "metadata.log.recovery=truncate: dropping every record from offset %d on and %d "
                  "later segment(s)", path, position, size, reason, offset, len(later))
        _cut(path, position, later)

    def _load_snapshot(self) -> MetadataImage | None:
        for offset in reversed(_offsets(self.directory, ".snapshot")):
            path = self.directory / _name(offset, ".snapshot")
            items, valid = decode_frames(path.read_bytes())
            try:
                if len(items) != 1 or valid != path.stat().st_size:
                    raise ValueError("not one whole frame")
                image = MetadataImage.from_snapshot(items[0])
                if image.offset != offset:
                    raise ValueError(f"holds offset {image.offset}")
                return image
            except ValueError as e:
                log.error("metadata snapshot %s is unreadable (%s); trying an older one", path, e)
        return None

    # -- appending --------------------------------------------------------------------------------

    def open_for_append(self, next_offset: int) -> None:
        """Append to the newest segment, or start one at `next_offset`."""
        segments = _offsets(self.directory, ".log")
        base = segments[-1] if segments and segments[-1] <= next_offset else next_offset
        self._active = _open_segment(self.directory / _name(base, ".log"))
        self._size = os.fstat(self._active.fileno()).st_size

    def append(self, data: bytes) -> None:
        """Write and fsync: the records are durable when this returns. On an OSError (ENOSPC, EIO)
        nothing of `data` stays in the log: the segment is cut back to its size before the write
        (a partial frame would hide every later frame from `load`), now or before the next append."""
        assert self._active is not None, "open_for_append first"
        fd = self._active.fileno()
        if os.fstat(fd).st_size != self._size:  # an earlier failed append could not cut its tail
            os.ftruncate(fd, self._size)
        try:
            fault_injection.before_write()
            view = memoryview(data)
            while view:
                view = view[self._active.write(view) or 0:]
            os.fsync(fd)
        except OSError:
            try:
                os.ftruncate(fd, self._size)  # frees space: works on a full disk
            except OSError:
                pass  # cut before the next append (above), or by `load` after a restart
            raise
        self._size += len(data)

    def roll(self, next_offset: int) -> None:
        """Start a new segment at `next_offset` (everything before it is durable already). On an
        OSError the current segment stays the active one."""
        segment = _open_segment(self.directory / _name(next_offset, ".log"))
        if self._active is not None:
            self._active.close()
        self._active, self._size = segment, 0
        _fsync_dir(self.directory)

    def close(self) -> None:
        if self._active is not None:
            self._active.close()
            self._active = None

    # -- snapshots --------------------------------------------------------------------------------

    def write_snapshot(self, image: MetadataImage) -> Path:
        """Write a snapshot at `image.offset` atomically, then drop what it makes redundant: older
        snapshots and segments whose records all precede it (segments are rolled at
        snapshot offset + 1 by the caller, so whole segments go)."""
        final = self.directory / _name(image.offset, ".snapshot")
        tmp = final.with_suffix(".snapshot.tmp")
        payload = msgpack.packb(image.to_snapshot(), use_bin_type=True)
        try:
            fault_injection.before_write()
            with open(tmp, "wb") as f:
                f.write(encode_frame(payload))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, final)
        except OSError:
            tmp.unlink(missing_ok=True)  # a partial snapshot would only hold the space a full disk needs
            raise
        _fsync_dir(self.directory)
        for offset in _offsets(self.directory, ".snapshot"):
            if offset < image.offset:
                (self.directory / _name(offset, ".snapshot")).unlink()
        segments = _offsets(self.directory, ".log")
        for base, next_base in zip(segments, segments[1:]):
            if next_base <= image.offset + 1:
                (self.directory / _name(base, ".log")).unlink()
        return final


def _open_segment(path: Path) -> io.FileIO:
    # unbuffered: a write that failed must not leave bytes in a buffer for a later flush to write
    return io.FileIO(path, "ab")


def _cut(path: Path, position: int, later: list[Path]) -> None:
    """Truncates `path` at `position` (removes it when nothing is left: its name is an offset
    the log may no longer reach) and the segments after it, durably."""
    if position == 0:
        path.unlink()
    else:
        with open(path, "r+b") as f:
            f.truncate(position)
            os.fsync(f.fileno())
    for segment in later:
        log.warning("removing metadata log segment %s after the cut", segment)
        segment.unlink()
    _fsync_dir(path.parent)


class _MetadataFraming(CrcFraming):
    """The metadata log's frames for the scan rule: the payload is msgpack `[first offset,
    [record dict, ...]]`, whose first byte 0x92 (a 2-array) marks where a frame may start."""

    def __init__(self) -> None:
        super().__init__(_FRAME, 2, MAX_FRAME_BYTES, _FRAME.size + 1)

    def check(self, buf: bytes, off: int, position: int, expected: int) -> Frame:
        payload = self.payload(buf, off)
        size = _FRAME.size + len(payload)
        try:
            item = msgpack.unpackb(payload, raw=False, strict_map_key=False)
        except (ValueError, msgpack.UnpackException) as e:
            raise CorruptRecordError(f"undecodable frame: {e}") from None
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], int)
                and isinstance(item[1], list) and item[1] and all(isinstance(r, dict) for r in item[1])):
            raise CorruptRecordError("a frame that is not [offset, [record, ...]]")
        first, count = item[0], len(item[1])
        if first < expected < first + count:  # overlaps what the log holds: not of this log
            raise BadOffsetsError(f"frame at offset {first} overlaps offset {expected}", size=size,
                                  span=count, next_offset=first + count, overlaps=True)
        return Frame(position, size, first, max(expected, first + count), item)

    def candidates(self, buf: bytes, stop: int) -> Iterator[int]:
        i = buf.find(b"\x92", _FRAME.size)
        while 0 <= i and i - _FRAME.size < stop:
            yield i - _FRAME.size
            i = buf.find(b"\x92", i + 1)

    def plausible(self, buf: bytes, off: int, expected: int, room: int) -> bool:
        return self.length_fits(buf, off, room)


_FRAMING = _MetadataFraming()
