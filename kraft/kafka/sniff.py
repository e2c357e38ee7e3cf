"""Which protocol a client port's connection speaks, from its first byte (after TLS, if any).

A Kafka frame starts with its 4-byte big-endian size, so its first byte is 0 for any request under
16 MiB and at most 0x1F for one under 512 MiB (socket.request.max.bytes is 100 MiB by default); an
HTTP/1.1 request starts with its method, an upper-case ASCII word. The two ranges do not meet.

A TLS handshake (0x16 0x03: a client that speaks TLS to a port that does not) goes to HTTP, whose
parser answers it 400 in plain text: the HTTP API's clients tell "this listener does not speak
TLS" from that answer. As a Kafka frame its size would be over 369 MB, which no listener accepts.
"""

from __future__ import annotations

from typing import Literal

from kraft.kafka.errors import KafkaProtocolError

Protocol = Literal["kafka", "http"]
_TLS_HANDSHAKE, _TLS_MAJOR_VERSION = 0x16, 0x03


def sniff(first_bytes: bytes | bytearray | memoryview) -> Protocol | None:
    """"kafka" or "http" for a connection whose data starts with `first_bytes`; None until a byte
    has arrived. Raises KafkaProtocolError for a first byte neither protocol starts with."""
    if not first_bytes:
        return None
    first = first_bytes[0]
    if first == _TLS_HANDSHAKE:
        if len(first_bytes) < 2:
            return None
        if first_bytes[1] == _TLS_MAJOR_VERSION:
            return "http"
    if first <= 0x1F:
        return "kafka"
    if 0x41 <= first <= 0x5A:  # A-Z: GET, POST, PUT, DELETE, HEAD, OPTIONS, PATCH, ...
        return "http"
    raise KafkaProtocolError(f"first byte {first:#04x} starts neither a Kafka frame nor an HTTP request")
