"""kraft/kafka, the sans-I/O protocol core: bytes in, requests and answers out, no sockets."""

from __future__ import annotations

import datetime
import io
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequestV3
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v1.request import MetadataRequest as MetadataRequestV1
from kio.schema.metadata.v1.request import MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse as MetadataResponseV12
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from kraft.kafka.api_versions import ApiVersionsTable
from kraft.kafka.codec import encode_response
from kraft.kafka.connection import AnswerReady, KafkaConnection, RequestReceived
from kraft.kafka.errors import (
    FrameTooLargeError,
    InvalidRequestError,
    KafkaProtocolError,
    UnsupportedVersionError,
)
from kraft.kafka.frames import FrameDecoder, State, frame
from kraft.kafka.sniff import sniff


def _request(header_type, api_key: int, version: int, correlation_id: int, body, client_id: str | None = "cli") -> bytes:
    buffer = io.BytesIO()
    entity_writer(header_type)(buffer, header_type(
        request_api_key=i16(api_key), request_api_version=i16(version), correlation_id=i32(correlation_id),
        client_id=client_id))
    entity_writer(type(body))(buffer, body)
    return buffer.getvalue()


API_VERSIONS_V3 = _request(RequestHeaderV2, 18, 3, 7,
                           ApiVersionsRequestV3(client_software_name="kraft-test", client_software_version="1.0"))
METADATA_V1 = _request(RequestHeaderV1, 3, 1, 8, MetadataRequestV1(topics=(MetadataRequestTopic(name="t"),)),
                       client_id=None)


def _table() -> ApiVersionsTable:
    table = ApiVersionsTable()
    table.register(3, 0, 12)
    return table


# -- frames -------------------------------------------------------------------------------------


def test_frames_arrive_whole_however_the_bytes_are_cut() -> None:
    stream = frame(b"first") + frame(b"") + frame(b"third" * 1000)
    decoder = FrameDecoder()
    frames = []
    for i in range(len(stream)):  # one byte at a time
        frames += decoder.feed(stream[i:i + 1])
    assert frames == [b"first", b"", b"third" * 1000] and decoder.buffered == 0
    assert FrameDecoder().feed(stream) == frames  # all at once
    assert decoder.state is State.SIZE


def test_a_size_over_the_maximum_is_refused_from_its_four_bytes() -> None:
    decoder = FrameDecoder(max_frame_bytes=100)
    assert decoder.feed(struct.pack(">i", 100)[:3]) == []
    with pytest.raises(FrameTooLargeError, match="socket.request.max.bytes"):
        decoder.feed(struct.pack(">i", 101)[3:])  # the 4th byte completes 101: no body awaited
    assert decoder.state is State.CLOSED and decoder.buffered == 0
    with pytest.raises(KafkaProtocolError, match="closed"):
        decoder.feed(b"\x00")
    with pytest.raises(FrameTooLargeError):
        FrameDecoder().feed(struct.pack(">i", -1))
    with pytest.raises(FrameTooLargeError):  # a TLS ClientHello on a plaintext port
        FrameDecoder().feed(b"\x16\x03\x01\x02\x00")
    assert FrameDecoder(100).feed(frame(b"x" * 100)) == [b"x" * 100]


def test_sniff_tells_kafka_from_http() -> None:
    assert sniff(b"") is None
    assert sniff(frame(API_VERSIONS_V3)) == "kafka"
    for method in (b"GET /v1/metadata", b"POST", b"PUT", b"DELETE", b"HEAD", b"OPTIONS", b"PATCH"):
        assert sniff(method) == "http"
    with pytest.raises(KafkaProtocolError, match="neither"):
        sniff(b"get /")
    # a TLS ClientHello on a plain port: HTTP's parser answers it 400 in plain text, which tells the
    # HTTP API's clients that the listener does not speak TLS (as a Kafka frame it was a reset)
    assert sniff(b"\x16") is None
    assert sniff(b"\x16\x03\x01\x02\x00") == "http"
    assert sniff(b"\x16\x00") == "kafka"


# -- requests and responses ---------------------------------------------------------------------


def test_flexible_request_header_v2_with_tagged_fields() -> None:
    [event] = KafkaConnection(_table()).receive_data(frame(API_VERSIONS_V3))
    assert isinstance(event, RequestReceived)
    request = event.request
    assert (request.api_key, request.api_version, request.correlation_id, request.client_id) == (18, 3, 7, "cli")
    assert request.body.client_software_name == "kraft-test"


def test_non_flexible_request_header_v1_with_a_null_client_id() -> None:
    [event] = KafkaConnection(_table()).receive_data(frame(METADATA_V1))
    assert isinstance(event, RequestReceived)
    assert (event.request.api_key, event.request.api_version, event.request.client_id) == (3, 1, None)
    assert [t.name for t in event.request.body.topics] == ["t"]


def test_response_header_versions() -> None:
    connection = KafkaConnection(_table())
    [event] = connection.receive_data(frame(API_VERSIONS_V3))
    data = b"".join(connection.send(event.request, connection.api_versions.response(3)))
    size, correlation_id = struct.unpack_from(">ii", data)
    assert size == len(data) - 4 and correlation_id == 7
    # ApiVersions answers with header v0 even when flexible: the body starts right after the id
    assert data[8:10] == b"\x00\x00"  # error_code none
    v12 = MetadataResponseV12(throttle_time=datetime.timedelta(0), brokers=(), topics=())
    flexible = encode_response(9, v12)
    assert struct.unpack_from(">i", flexible, 4)[0] == 9 and flexible[8] == 0  # header v1: no tags


@pytest.mark.parametrize("version", [4, 12])
def test_a_fetch_answer_keeps_large_records_by_reference_and_reads_back(version: int) -> None:
    """The stored batches of a Fetch answer go to the transport as the buffer they are (no copy
    into the answer); small ones are joined with the fields; either way the buffers in order
    are the answer kio reads back, framed."""
    from kio.index import load_response_schema

    from kraft.kafka.codec import BY_REFERENCE, response_buffers
    from kraft.kafka.entities import build

    stored = bytes(range(256)) * (BY_REFERENCE // 256 + 3)
    for records, by_reference in ((memoryview(stored)[7:], True), (stored[:100], False)):
        schema = load_response_schema(1, version)
        response = build(schema, dict(throttle_time=0, error_code=0, session_id=0, responses=[dict(
            topic="t", partitions=[dict(partition_index=0, error_code=0, high_watermark=9, last_stable_offset=9,
                                        log_start_offset=0, aborted_transactions=None, records=records)])]))
        buffers = response_buffers(5, response)
        assert any(b is records for b in buffers) is by_reference
        data = b"".join(buffers)
        assert struct.unpack_from(">i", data)[0] == len(data) - 4
        header, size = entity_reader(schema.__header_schema__)(data, 4)
        body, _ = entity_reader(schema)(data, 4 + size)
        assert header.correlation_id == 5 and body.responses[0].partitions[0].records == bytes(records)


def test_api_versions_answer_lists_the_table_in_every_version() -> None:
    table = _table()
    for version in range(5):
        response = table.response(version)
        assert response.error_code == ErrorCode.none
        assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(3, 0, 12), (18, 0, 4)]
        encode_response(1, response)  # every version encodes


def test_unsupported_api_versions_version_gets_v0_and_error_35() -> None:
    future = API_VERSIONS_V3[:2] + struct.pack(">h", 99) + API_VERSIONS_V3[4:]
    connection = KafkaConnection(_table())
    [event] = connection.receive_data(frame(future))
    assert isinstance(event, AnswerReady) and not connection.closed
    [body] = FrameDecoder().feed(event.data)
    assert struct.unpack_from(">i", body)[0] == 7  # the request's correlation id, header v0
    response, _ = entity_reader(ApiVersionsResponseV0)(body, 4)
    assert response.error_code == ErrorCode.unsupported_version == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(3, 0, 12), (18, 0, 4)]


@pytest.mark.parametrize(
    "api_key,version", [(3, 13), (1, 12), (999, 0), (-1, 0)], ids=["version", "unregistered", "unknown", "negative"],
)
def test_other_unsupported_requests_close_the_connection(api_key: int, version: int) -> None:
    request = struct.pack(">hhi", api_key, version, 5) + METADATA_V1[8:]
    connection = KafkaConnection(_table())
    with pytest.raises(UnsupportedVersionError) as error:
        connection.receive_data(frame(request))
    assert (error.value.api_key, error.value.api_version, error.value.correlation_id) == (api_key, version, 5)
    assert connection.closed
    with pytest.raises(KafkaProtocolError):
        connection.receive_data(frame(METADATA_V1))


def test_malformed_requests() -> None:
    for bad in (METADATA_V1[:-1], b"\x00\x03\x00", API_VERSIONS_V3[:12]):
        with pytest.raises(InvalidRequestError):
            KafkaConnection(_table()).receive_data(frame(bad))


# librdkafka 2.16's AlterUserScramCredentials v0 (confluent-kafka's alter_user_scram_credentials),
# as captured: its tagged fields come twice, the last byte after the body
LIBRDKAFKA_ALTER_USER_SCRAM_CREDENTIALS = bytes.fromhex(
    "0033000000000003000772646b61666b61000102056572696e01000020000d73616c742d6f662d6572696e21a8d494ee49605f"
    "4618b0639c799a5c15e2c0f1a8578b2f782d8eea54e7f1088c000000")


def test_bytes_after_a_whole_body_are_ignored_as_kafka_ignores_them() -> None:
    table = _table()
    table.register(51, 0, 0)
    [event] = KafkaConnection(table).receive_data(frame(LIBRDKAFKA_ALTER_USER_SCRAM_CREDENTIALS))
    assert isinstance(event, RequestReceived)
    [upsertion] = event.request.body.upsertions
    assert (upsertion.name, upsertion.mechanism, upsertion.iterations, upsertion.salt) == \
        ("erin", 1, 8192, b"salt-of-erin")
    [event] = KafkaConnection(_table()).receive_data(frame(METADATA_V1 + b"\x00"))
    assert isinstance(event, RequestReceived) and event.request.body.topics[0].name == "t"


def test_registering_needs_kio_types_for_every_version() -> None:
    table = ApiVersionsTable()
    with pytest.raises(ValueError, match="API key 3 version 14"):
        table.register(3, 0, 99)
    with pytest.raises(ValueError, match="API key 999"):
        table.register(999, 0, 0)
    with pytest.raises(ValueError, match="registered already"):
        table.register(18, 0, 1)
    with pytest.raises(ValueError, match="range"):
        table.register(3, 2, 1)
    assert table.ranges == {18: (0, 4)} and not table.supports(3, 0)


def test_every_served_version_has_kio_types_that_load() -> None:
    """Registration checks kio's index only (a node does not import every type at start), so the
    types of every version the node serves are loaded here."""
    from kio.index import load_request_schema, load_response_schema

    from kraft.kafka.api_table import served_registry

    for key, (low, high) in served_registry().api_versions.ranges.items():
        for version in range(low, high + 1):
            assert load_request_schema(key, version).__version__ == version
            assert load_response_schema(key, version).__api_key__ == key


# -- nothing but the protocol's own error escapes -----------------------------------------------


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=300), cut=st.integers(0, 400), chunk=st.integers(1, 64))
def test_arbitrary_or_truncated_bytes_raise_only_protocol_errors(data: bytes, cut: int, chunk: int) -> None:
    for stream in (data, frame(data), frame(API_VERSIONS_V3[:cut] + data), frame(METADATA_V1[:cut] + data),
                   frame(API_VERSIONS_V3)[:cut]):
        connection = KafkaConnection(_table(), max_frame_bytes=1 << 16)
        try:
            for start in range(0, len(stream), chunk):
                connection.receive_data(stream[start:start + chunk])
        except KafkaProtocolError:
            assert connection.closed
