"""One Kafka client connection as a state machine, sans I/O (h11's shape).

`receive_data(bytes)` returns events: `RequestReceived` (a parsed request for a handler),
`AnswerReady` (bytes the protocol layer answered itself: an ApiVersions request of an unknown
version) or `TokenReceived` (a bare SASL token: on a SASL listener, after a SaslHandshake v0 and
until `sasl_done()`, frames are tokens, not requests, KIP-43). Each event carries the size of its
frame, which the caller accounts for until it answered. `send(request, response)` returns the
framed response as buffers to write in order (a Fetch answer's records by reference). A KafkaProtocolError (frame
size, malformed request, unsupported key or version of an API other than ApiVersions) closes the
connection: the caller drops the socket, as Kafka's SocketServer does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kraft.kafka.api_versions import API_VERSIONS, ApiVersionsTable
from kraft.kafka.codec import Request, parse_request, peek_header, request_schema, response_buffers
from kraft.kafka.errors import KafkaProtocolError, UnsupportedVersionError
from kraft.kafka.frames import SOCKET_REQUEST_MAX_BYTES, FrameDecoder
from kraft.kafka.sasl import SASL_HANDSHAKE


@dataclass(frozen=True, slots=True)
class RequestReceived:
    request: Request
    size: int


@dataclass(frozen=True, slots=True)
class AnswerReady:
    data: bytes
    size: int


@dataclass(frozen=True, slots=True)
class TokenReceived:
    token: bytes

    @property
    def size(self) -> int:
        return len(self.token)


Event = RequestReceived | AnswerReady | TokenReceived


class KafkaConnection:
    def __init__(self, api_versions: ApiVersionsTable, max_frame_bytes: int = SOCKET_REQUEST_MAX_BYTES,
                 sasl: bool = False, max_frame_bytes_before_auth: int | None = None) -> None:
        """`sasl`: a SASL listener's connection, whose SaslHandshake v0 turns the frames after
        it into bare tokens until `sasl_done()`; until then frames are bounded by
        `max_frame_bytes_before_auth` (Kafka's sasl.server.max.receive.size: a client that never
        authenticates makes the node hold 512 KiB, not socket.request.max.bytes)."""
        self.api_versions = api_versions
        self.max_frame_bytes = max_frame_bytes
        self._frames = FrameDecoder(min(max_frame_bytes, max_frame_bytes_before_auth or max_frame_bytes)
                                    if sasl else max_frame_bytes)
        self.closed = False
        self._sasl_pending = sasl
        self.raw_tokens = False

    @property
    def frame_expected(self) -> int | None:
        """The size of the frame being read, once its 4 size bytes are in (None between frames)."""
        return self._frames.expected

    def sasl_done(self) -> None:
        """The SASL exchange is over: every frame from here on is a request."""
        self._sasl_pending = self.raw_tokens = False
        self._frames.max_frame_bytes = self.max_frame_bytes

    def receive_data(self, data: bytes | bytearray | memoryview) -> list[Event]:
        """The events `data` completes. Raises KafkaProtocolError (and stays closed) on a
        protocol violation."""
        if self.closed:
            raise KafkaProtocolError("the connection is closed after a protocol error")
        try:
            return [self._event(frame) for frame in self._frames.feed(data)]
        except KafkaProtocolError:
            self.closed = True
            raise

    def send(self, request: Request, response: Any) -> list[bytes | memoryview]:
        """The framed `response` (a kio response type) to `request`, as buffers for the transport's
        `writelines`: the stored batches of a Fetch answer are not copied into it."""
        return response_buffers(request.correlation_id, response)

    def _event(self, frame: bytes) -> Event:
        if self.raw_tokens:
            return TokenReceived(frame)
        api_key, api_version, correlation_id = peek_header(frame)
        try:
            if not self.api_versions.supports(api_key, api_version):
                raise UnsupportedVersionError(api_key, api_version, correlation_id)
            schema = request_schema(api_key, api_version, correlation_id)
        except UnsupportedVersionError:
            if api_key == API_VERSIONS:  # Kafka answers it, with v0, so the client can downgrade
                return AnswerReady(self.api_versions.unsupported_answer(correlation_id), len(frame))
            raise
        request = parse_request(frame, schema)
        if self._sasl_pending and api_key == SASL_HANDSHAKE and api_version == 0:
            self.raw_tokens = True
        return RequestReceived(request, len(frame))
