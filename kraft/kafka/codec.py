"""Request parsing and response encoding with kio's types, sans I/O.

A request frame is a request header (v1, or v2 with tagged fields when the API version is
flexible) and a body; `parse_request` reads the api key and version first, so the header and
body schemas are the ones Kafka's generated code would pick, both from kio. A response carries
the header version of its schema (v0, or v1 when flexible; ApiVersions always v0, which kio's
types say through `__header_schema__`). Keys and versions outside the broker's ApiVersions table
raise UnsupportedVersionError; see `api_versions.parse_or_downgrade` for Kafka's answer to those.

`response_buffers` encodes an answer as a list of buffers for the transport's `writelines`: the
small fields joined, and every large value (a Fetch answer's records: the stored batches, up to
fetch.max.bytes) kept as the buffer it is, never copied into the answer.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from kio.index import KioIndexError, load_request_schema
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from kraft.kafka.errors import InvalidRequestError, UnsupportedVersionError
from kraft.kafka.frames import size_prefix

_PREFIX = struct.Struct(">hhi")  # api key, api version, correlation id: the same in every header
BY_REFERENCE = 64 << 10  # below it a copy costs less than one more buffer in the transport's writev


@dataclass(frozen=True, slots=True)
class Request:
    """A parsed request: kio's header and body entities."""

    header: Any
    body: Any

    @property
    def api_key(self) -> int:
        return int(self.header.request_api_key)

    @property
    def api_version(self) -> int:
        return int(self.header.request_api_version)

    @property
    def correlation_id(self) -> int:
        return int(self.header.correlation_id)

    @property
    def client_id(self) -> str | None:
        return self.header.client_id


def peek_header(frame_bytes: bytes) -> tuple[int, int, int]:
    """(api key, api version, correlation id): the fields every request header version starts
    with. InvalidRequestError for a frame shorter than that."""
    if len(frame_bytes) < _PREFIX.size:
        raise InvalidRequestError(f"request of {len(frame_bytes)} bytes is shorter than a request header")
    return _PREFIX.unpack_from(frame_bytes)


def request_schema(api_key: int, api_version: int, correlation_id: int) -> type[Any]:
    """kio's request type for the key and version; UnsupportedVersionError if kio has none."""
    try:
        return load_request_schema(api_key, api_version)
    except KioIndexError:
        raise UnsupportedVersionError(api_key, api_version, correlation_id) from None


def parse_request(frame_bytes: bytes, schema: type[Any]) -> Request:
    """Reads the header and the body of `schema` (a kio request type) from one frame.
    InvalidRequestError for anything malformed. Bytes after a whole body are ignored, as Kafka's
    RequestContext.parseRequest ignores them: librdkafka sends AlterUserScramCredentials v0 with
    its tagged fields twice."""
    header_type = schema.__header_schema__
    try:
        header, header_size = entity_reader(header_type)(frame_bytes, 0)
        body, body_size = entity_reader(schema)(frame_bytes, header_size)
    except Exception as e:  # kio's readers raise several unrelated types for malformed input
        raise InvalidRequestError(
            f"malformed {schema.__name__} v{schema.__version__}: {type(e).__name__}: {e}"
        ) from e
    return Request(header, body)


class _Buffers:
    """A write target for kio's writers: small writes are joined, a write of BY_REFERENCE bytes
    or more is kept as the caller's buffer (bytes or a read-only memoryview of them), so it is
    neither copied nor mutated afterwards."""

    def __init__(self) -> None:
        self.parts: list[bytes | memoryview] = []
        self.size = 0
        self._small = bytearray()

    def write(self, data: bytes | memoryview) -> int:
        size = len(data)
        if size >= BY_REFERENCE:
            self._flush()
            self.parts.append(data)
        else:
            self._small += data
        self.size += size
        return size

    def _flush(self) -> None:
        if self._small:
            self.parts.append(bytes(self._small))
            self._small.clear()

    def buffers(self) -> list[bytes | memoryview]:
        self._flush()
        return self.parts


def response_buffers(correlation_id: int, response: Any) -> list[bytes | memoryview]:
    """The framed response as buffers to write in order: the 4-byte size, the response header of
    the response's schema and the body, large values by reference."""
    buffer = _Buffers()
    header_type = response.__header_schema__
    entity_writer(header_type)(buffer, header_type(correlation_id=i32(correlation_id)))
    entity_writer(type(response))(buffer, response)
    return [size_prefix(buffer.size), *buffer.buffers()]


def encode_response(correlation_id: int, response: Any) -> bytes:
    """The framed response as one bytes object: size, response header, body."""
    return b"".join(response_buffers(correlation_id, response))
