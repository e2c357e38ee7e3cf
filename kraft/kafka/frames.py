"""Kafka's framing, sans I/O: a 4-byte big-endian size, then that many bytes.

`FrameDecoder.feed(data)` returns the frames completed by `data`; a size above the maximum
(Kafka's socket.request.max.bytes, 104857600 by default) or below zero is refused as soon as the
four size bytes are in, before anything of the body is buffered. After an error the decoder stays
closed, as h11's connection does: the caller drops the connection.
"""

from __future__ import annotations

import enum
import struct

from kraft.kafka.errors import FrameTooLargeError, KafkaProtocolError

SOCKET_REQUEST_MAX_BYTES = 104_857_600  # Kafka's default socket.request.max.bytes
_SIZE = struct.Struct(">i")


class State(enum.Enum):
    SIZE = "reading the 4-byte size"
    BODY = "reading a frame's body"
    CLOSED = "closed after a protocol error"


class FrameDecoder:
    def __init__(self, max_frame_bytes: int = SOCKET_REQUEST_MAX_BYTES) -> None:
        if max_frame_bytes <= 0:
            raise ValueError(f"max_frame_bytes must be positive, got {max_frame_bytes}")
        self.max_frame_bytes = max_frame_bytes
        self.state = State.SIZE
        self._buffer = bytearray()
        self._size = 0

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned in a frame."""
        return len(self._buffer)

    @property
    def expected(self) -> int | None:
        """The size of the frame being read once its size is in; None between frames."""
        return self._size if self.state is State.BODY else None

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """The frames `data` completes, in order. Raises FrameTooLargeError for a size out of
        bounds, KafkaProtocolError when fed after an error."""
        if self.state is State.CLOSED:
            raise KafkaProtocolError("the connection is closed after a protocol error")
        self._buffer += data
        frames = []
        while True:
            if self.state is State.SIZE:
                if len(self._buffer) < _SIZE.size:
                    return frames
                (size,) = _SIZE.unpack_from(self._buffer)
                if not 0 <= size <= self.max_frame_bytes:
                    self.state = State.CLOSED
                    self._buffer.clear()
                    raise FrameTooLargeError(
                        f"frame size {size} is outside [0, {self.max_frame_bytes}] "
                        f"(socket.request.max.bytes)"
                    )
                del self._buffer[:_SIZE.size]
                self._size = size
                self.state = State.BODY
            if len(self._buffer) < self._size:
                return frames
            frames.append(bytes(self._buffer[:self._size]))
            del self._buffer[:self._size]
            self.state = State.SIZE


def size_prefix(size: int) -> bytes:
    """The 4 bytes in front of a frame of `size` bytes."""
    return _SIZE.pack(size)


def frame(payload: bytes | bytearray) -> bytes:
    """`payload` with its 4-byte size in front."""
    return size_prefix(len(payload)) + payload
