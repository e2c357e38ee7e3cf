"""The scan rule of kraft's framed logs: a torn tail is cut, rot is reported (pure: reads through
the function it is given).

Shared by partition segments (`log/segment.py`), the lone node's metadata log
(`kraft/controller/log_store.py`) and the Raft journal (`kraft/controller/raft_journal.py`), each
describing its frames with a `Framing`. Reading forward, a frame that fails its checks (framing,
checksum, offset order) is:
- rot when a valid frame follows it later in the file: `scan` yields a `CorruptRange` from the bad
  frame up to that valid frame and goes on from there, so nothing after the damage is lost;
- a torn tail (the end of an interrupted write) when no valid frame follows: `scan` yields an
  `InvalidSuffix` and stops. The caller cuts it, unless later files of the log hold valid data
  (then it is rot too).
The next valid frame is looked for at every position that passes the framing's cheap test (a marker
byte, a length that fits, offsets not below the expected one) and confirmed by the full check (the
checksum): a false match needs a checksum collision. The search ends at the end of the file.

A framing whose offsets sit outside the checksum (kraft's record batches, as Kafka's) has each
frame held back until the next one is seen in order: when a checksum-valid frame's offsets overlap
the frame before it, either one may carry damaged offsets, so the range starts at the earlier one
and neither is yielded as valid.
See docs/internals.md, "Torn tail or rot: the scan rule".
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Protocol

import crc32c

from kraft.log.errors import CorruptRecordError

CHUNK = 4 * 1024 * 1024  # bytes read at a time, and the buffer a frame check reuses


class BadOffsetsError(CorruptRecordError):
    """A frame whose checksum holds but whose offsets do not fit where it sits: damage, never a
    torn write. `size` and `span` (how many offsets it covers, a checksummed field) are its own;
    `overlaps`: its offsets start below the expected one, so the frame before it may be the
    damaged one; `next_offset` is the end its offsets claim."""

    def __init__(self, message: str, *, size: int, span: int, next_offset: int,
                 overlaps: bool) -> None:
        super().__init__(message)
        self.size = size
        self.span = span
        self.next_offset = next_offset
        self.overlaps = overlaps


@dataclass(frozen=True, slots=True)
class Frame:
    """A valid frame at `position` of `size` bytes holding offsets [first_offset, next_offset)."""

    position: int
    size: int
    first_offset: int
    next_offset: int
    item: Any  # what the framing parsed (a batch header, a decoded payload)


@dataclass(frozen=True)
class CorruptRange:
    """Bytes [position, end_position) that hold no valid frame, followed by a valid frame at
    `end_position` whose offsets start at `end_offset`; `start_offset` is the first offset the
    range may hold. Rot: the caller reports or quarantines it."""

    position: int
    end_position: int
    start_offset: int
    end_offset: int
    reason: str


@dataclass(frozen=True)
class InvalidSuffix:
    """Bytes from `position` to the end of the file that hold no valid frame (offsets from
    `start_offset` on): a torn tail, unless later files hold valid frames."""

    position: int
    start_offset: int
    reason: str


class Framing(Protocol):
    header_size: int  # bytes `frame_size` and `plausible` read
    offsets_checksummed: bool  # False: offsets sit outside the checksum (see the module docstring)

    def frame_size(self, buf: bytes, off: int) -> int:
        """The frame's size as its header claims it (may be garbage)."""

    def check(self, buf: bytes, off: int, position: int, expected: int) -> Frame:
        """The frame at `buf[off:]` (file `position`), fully checked, its offsets starting at
        `expected` or later; raises CorruptRecordError (BadOffsetsError when only its offsets
        are wrong)."""

    def candidates(self, buf: bytes, stop: int) -> Iterator[int]:
        """Offsets below `stop` in `buf` where a frame may start (a cheap test: a marker byte)."""

    def plausible(self, buf: bytes, off: int, expected: int, room: int) -> bool:
        """Whether the header at `buf[off:]` is worth a full check: a size within `room` (the
        bytes left in the file), offsets from `expected` on."""


Read = Callable[[int, int], bytes]  # (position, size) -> up to size bytes of the file


class CrcFraming:
    """Frames `[u32 length][u32 crc32c(payload)][payload]` (the metadata log's and the Raft
    journal's; `frame` gives the byte order): the framing and checksum part of `Framing`, a
    subclass checks the payload. Offsets sit inside the checksum."""

    offsets_checksummed = True

    def __init__(self, frame: struct.Struct, min_length: int, max_length: int, header_size: int) -> None:
        self.frame = frame
        self.min_length = min_length
        self.max_length = max_length
        self.header_size = header_size

    def frame_size(self, buf: bytes, off: int) -> int:
        return self.frame.size + self.frame.unpack_from(buf, off)[0]

    def payload(self, buf: bytes, off: int) -> bytes:
        """The frame's payload, its length and checksum checked (CorruptRecordError)."""
        length, crc = self.frame.unpack_from(buf, off)
        if not self.min_length <= length <= self.max_length:
            raise CorruptRecordError(f"impossible frame length {length}")
        payload = buf[off + self.frame.size:off + self.frame.size + length]
        if crc32c.crc32c(payload) != crc:
            raise CorruptRecordError("CRC mismatch")
        return payload

    def length_fits(self, buf: bytes, off: int, room: int) -> bool:
        length = self.frame.unpack_from(buf, off)[0]
        return self.min_length <= length <= min(self.max_length, room - self.frame.size)


def scan(read: Read, size: int, framing: Framing, *, position: int = 0, expected: int = 0,
         known: Mapping[int, tuple[int, int]] | None = None,
         ) -> Iterator[Frame | CorruptRange | InvalidSuffix]:
    """The frames of a file of `size` bytes from `position` (where offsets start at `expected`),
    in order, with every corrupt range between them, and an `InvalidSuffix` last when the file
    ends in one. `known`: ranges already reported (position -> (end position, end offset)),
    stepped over silently."""
    window = _Window(read, size)
    known = known or {}
    held: tuple[Frame, int] | None = None  # a frame not yielded yet, with the offset expected at it
    pos = position
    while pos < size:
        if pos in known:
            if held is not None:
                yield held[0]
                held = None
            end_position, expected = known[pos]
            assert end_position > pos, (pos, known)
            pos = end_position
            continue
        try:
            frame = _check_at(window, framing, pos, expected)
        except CorruptRecordError as e:
            start, start_expected, spans = pos, expected, 0
            if held is None:
                following = _next_valid(window, framing, pos + 1, expected)
            else:
                # the held frame's offsets are checked by the next valid frame, wherever it is
                before, before_expected = held
                held = None
                following = _next_valid(window, framing, pos + 1, before_expected)
                # (the damaged bytes between them held a frame, so at least one offset)
                if (isinstance(e, BadOffsetsError) and e.overlaps) or (
                        following is not None and following.first_offset <= before.next_offset):
                    start, start_expected = before.position, before_expected  # either may be damaged
                    spans = before.next_offset - before.first_offset
                else:
                    yield before
            reason = str(e) if start == pos else f"{e} (at byte {pos})"
            if following is not None:
                yield CorruptRange(start, following.position, start_expected,
                                   following.first_offset, reason)
                pos, expected = following.position, start_expected
            elif isinstance(e, BadOffsetsError):
                # checksums that hold are no torn write: rot up to the end of the frame, whose
                # offsets the spans (checksummed) give when the log has no gaps
                end_offset = max(start_expected + spans + e.span, e.next_offset if e.overlaps else 0)
                yield CorruptRange(start, pos + e.size, start_expected, end_offset, reason)
                pos, expected = pos + e.size, end_offset
            else:
                yield InvalidSuffix(start, start_expected, reason)
                return
            continue
        if framing.offsets_checksummed:
            yield frame
        else:
            if held is not None:
                yield held[0]
            held = (frame, expected)
        expected = frame.next_offset
        pos += frame.size
    if held is not None:
        yield held[0]


class _Window:
    """A forward reader keeping the last chunk read, so consecutive frames cost one read."""

    def __init__(self, read: Read, size: int) -> None:
        self.read = read
        self.size = size
        self.buf = b""
        self.start = 0

    def view(self, position: int, need: int) -> tuple[bytes, int]:
        off = position - self.start
        if off < 0 or len(self.buf) - off < need:
            self.buf = self.read(position, min(max(need, CHUNK), self.size - position))
            self.start, off = position, 0
        return self.buf, off


def _check_at(window: _Window, framing: Framing, position: int, expected: int) -> Frame:
    left = window.size - position
    if left < framing.header_size:
        raise CorruptRecordError(f"{left} trailing bytes are too short for a frame header")
    buf, off = window.view(position, framing.header_size)
    claimed = framing.frame_size(buf, off)
    if claimed > left:
        raise CorruptRecordError(f"frame claims {claimed} bytes but only {left} remain")
    buf, off = window.view(position, max(claimed, framing.header_size))
    return framing.check(buf, off, position, expected)


def _next_valid(window: _Window, framing: Framing, start: int, expected: int) -> Frame | None:
    """The first valid frame at or after `start` whose offsets start at `expected` or later."""
    pos = start
    header = framing.header_size
    while window.size - pos >= header:
        buf = window.read(pos, min(CHUNK, window.size - pos))
        stop = len(buf) - header + 1  # candidates whose header lies in this chunk
        for off in framing.candidates(buf, stop):
            if framing.plausible(buf, off, expected, window.size - pos - off):
                try:
                    return _check_at(window, framing, pos + off, expected)
                except CorruptRecordError:
                    pass
        pos += stop
    return None
