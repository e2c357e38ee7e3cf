"""Test support: Kafka requests as bytes and answers read back, over a real socket (asyncio
streams or a blocking socket), with kio's types."""

from __future__ import annotations

import asyncio
import io
import itertools
import socket
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from kraft.kafka.entities import build
from kraft.kafka.frames import frame

API_VERSIONS, METADATA, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 3, 17, 36


def request_bytes(api_key: int, version: int, correlation_id: int, client_id: str | None = "kraft-test",
                  **fields: Any) -> bytes:
    """One framed request of kio's type for the key and version, built from plain data as the
    handlers build answers (kraft/kafka/entities.py: nested dicts, fields the version lacks
    dropped)."""
    schema = load_request_schema(api_key, version)
    header_type = schema.__header_schema__
    assert header_type in (RequestHeaderV1, RequestHeaderV2)
    buffer = io.BytesIO()
    entity_writer(header_type)(buffer, header_type(request_api_key=i16(api_key), request_api_version=i16(version),
                                                   correlation_id=i32(correlation_id), client_id=client_id))
    entity_writer(schema)(buffer, build(schema, fields))
    return frame(buffer.getvalue())


def metadata_request(correlation_id: int, version: int = 12) -> bytes:
    return request_bytes(METADATA, version, correlation_id, topics=None, allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False)


def read_response(body: bytes, api_key: int, version: int) -> tuple[int, Any]:
    """(correlation id, kio response) of a frame's body."""
    schema = load_response_schema(api_key, version)
    header, size = entity_reader(schema.__header_schema__)(body, 0)
    response, _ = entity_reader(schema)(body, size)
    return int(header.correlation_id), response


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


def read_frame_blocking(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError(f"closed after {len(data)} of {n} bytes")
            data += chunk
        return data
    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


class Connection:
    """One Kafka connection over asyncio streams: `call` sends a request of kio's type and reads
    its answer."""

    _ids = itertools.count(1)

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, bootstrap: str) -> "Connection":
        host, port = bootstrap.split(":")
        return cls(*await asyncio.open_connection(host, int(port)))

    async def call(self, api_key: int, version: int, **fields: Any) -> Any:
        correlation_id = next(self._ids)
        self.writer.write(request_bytes(api_key, version, correlation_id, **fields))
        await self.writer.drain()
        got, response = read_response(await asyncio.wait_for(read_frame(self.reader), 30), api_key, version)
        assert got == correlation_id
        return response

    def close(self) -> None:
        self.writer.close()


def kafka_python_connect(port: int, timeout_ms: int = 15000, host: str = "127.0.0.1", **security: str) -> tuple:
    """kafka-python's own connection set-up to host:port (ApiVersions, then SASL when the
    protocol says): the broker version it made of the ApiVersions answer."""
    from kafka.net.compat import KafkaNetClient

    client = KafkaNetClient(bootstrap_servers=f"{host}:{port}", **security)
    try:
        node_id = client.cluster.bootstrap_brokers()[0].node_id

        async def connect():
            connection = client._manager.get_connection(node_id, timeout_ms=timeout_ms, pop_on_close=False,
                                                        refresh_metadata_on_err=False)
            await connection
            return connection.broker_version

        return client._net.run(connect)
    finally:
        client.close()
