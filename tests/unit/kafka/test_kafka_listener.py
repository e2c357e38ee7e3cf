"""The Kafka listener's asyncio shell on real sockets, in process: the client port shared with a
real aiohttp server, ordered answers to pipelined requests, the bounds (frame size, queued
requests, the node's request bytes, connections), idle connections, throttled answers and the
SASL exchange (PLAIN, SCRAM-SHA-256/512 against the HTTP API's stored credentials)."""

from __future__ import annotations

import asyncio
import datetime
import logging
import socket
import ssl
import struct
from pathlib import Path
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import pytest
import scramp
from aiohttp import ClientSession, web
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from harness import wait_until
from kafka_wire import (
    API_VERSIONS, METADATA, SASL_AUTHENTICATE, SASL_HANDSHAKE, metadata_request, read_frame, read_response,
    request_bytes,
)
from kraft.api.client.admin import scram_upsertion
from kraft.controller.handlers import alter_user_scram_credentials
from kraft.kafka.client_port import ClientPort
from kraft.kafka.dispatch import HandlerRegistry
from kraft.kafka.frames import frame
from kraft.kafka.limits import ConnectionLimits, RequestMemoryPool
from kraft.kafka.listener import KafkaLimits, KafkaListener
from kraft.metadata.delta import apply_records
from kraft.metadata.image import MetadataImage
from kraft.security import certs
from kraft.security.authn import ClientAuthenticator
from kraft.security.principal import parse_rules
from kraft.server.request_context import RequestContext


def _metadata_response(version: int = 12, throttle_ms: int = 0, cluster_id: str | None = None) -> Any:
    return load_response_schema(METADATA, version)(throttle_time=datetime.timedelta(milliseconds=throttle_ms),
                                                    brokers=(), topics=(), cluster_id=cluster_id)


class Server:
    def __init__(self, listener: KafkaListener, port: int, contexts: list[RequestContext]) -> None:
        self.listener, self.port, self.contexts = listener, port, contexts

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.port)


@asynccontextmanager
async def serving(handler: Any = None, protocol: str = "PLAINTEXT", limits: KafkaLimits | None = None,
                  authenticator: Any = None, mechanisms: tuple[str, ...] = (),
                  tls: ssl.SSLContext | None = None) -> AsyncIterator[Server]:
    """A client port serving HTTP (a real aiohttp server answering "http ok") and the Kafka
    protocol, with `handler` registered for Metadata (v0-12)."""
    contexts: list[RequestContext] = []

    async def record(context: RequestContext, request: Any) -> Any:
        contexts.append(context)
        return await handler(context, request) if handler else _metadata_response(context.api_version)

    registry = HandlerRegistry()
    registry.register(METADATA, 0, 12, record)
    limits = limits or KafkaLimits()
    listener = KafkaListener("CLIENT", protocol, registry, limits, authenticator, list(mechanisms))

    async def http(request: web.BaseRequest) -> web.Response:
        return web.Response(text="http ok")

    http_server = web.Server(http)
    port = ClientPort(http_server, listener, limits.connections, limits.idle_ms / 1000)
    # bound as the node binds its listeners (kraft/kafka/node_listeners.py), then served
    server = await asyncio.get_running_loop().create_server(port, sock=socket.create_server(("127.0.0.1", 0)),
                                                            ssl=tls)
    try:
        yield Server(listener, server.sockets[0].getsockname()[1], contexts)
    finally:
        server.close()
        await listener.shutdown(timeout_s=5)
        await http_server.shutdown(1)


async def _exchange(server: Server, data: bytes, api_key: int, version: int) -> tuple[int, Any]:
    reader, writer = await server.connect()
    writer.write(data)
    answer = read_response(await read_frame(reader), api_key, version)
    writer.close()
    return answer


def _held_until(release: asyncio.Event) -> Any:
    """A Metadata handler that answers once `release` is set."""
    async def held(context: RequestContext, request: Any) -> Any:
        await release.wait()
        return _metadata_response()
    return held


async def _closed(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), 10) == b""
    except ConnectionResetError:
        return True


# -- one port, two protocols ----------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
async def test_api_versions_round_trip_beside_http_on_one_port(version: int) -> None:
    fields = {"client_software_name": "kraft-test", "client_software_version": "1.0"} if version >= 3 else {}
    async with serving() as server:
        correlation_id, response = await _exchange(server, request_bytes(API_VERSIONS, version, 42, **fields),
                                                   API_VERSIONS, version)
        assert correlation_id == 42 and response.error_code == ErrorCode.none
        keys = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert keys == {METADATA: (0, 12), SASL_HANDSHAKE: (0, 1), API_VERSIONS: (0, 4), SASL_AUTHENTICATE: (0, 2)}
        async with ClientSession() as http:  # keep-alive: two requests on one connection
            for _ in range(2):
                async with http.get(f"http://127.0.0.1:{server.port}/anything") as answer:
                    assert answer.status == 200 and await answer.text() == "http ok"


async def test_api_versions_v3_with_a_bad_software_name_is_invalid_request() -> None:
    async with serving() as server:
        _, response = await _exchange(server, request_bytes(
            API_VERSIONS, 3, 1, client_software_name="bad name!", client_software_version="1"), API_VERSIONS, 3)
        assert response.error_code == ErrorCode.invalid_request


async def test_an_unknown_api_versions_version_is_answered_with_v0_and_the_table() -> None:
    async with serving() as server:
        data = bytearray(request_bytes(API_VERSIONS, 3, 5, client_software_name="a", client_software_version="1"))
        struct.pack_into(">h", data, 6, 77)  # a version from the future
        correlation_id, response = await _exchange(server, bytes(data), API_VERSIONS, 0)
        assert correlation_id == 5 and response.error_code == ErrorCode.unsupported_version
        assert METADATA in {k.api_key for k in response.api_keys}


async def test_an_unknown_api_key_closes_only_its_connection(caplog: pytest.LogCaptureFixture) -> None:
    async with serving() as server:
        reader, writer = await server.connect()
        writer.write(frame(struct.pack(">hhi", 999, 0, 1) + b"\x00\x00"))
        assert await _closed(reader)
        assert sum("unsupported API key 999" in r.getMessage() for r in caplog.records) == 1
        _, response = await _exchange(server, metadata_request(2), METADATA, 12)  # others are served
        assert response.throttle_time == datetime.timedelta(0)


async def test_a_truncated_frame_then_a_good_connection_is_served() -> None:
    async with serving() as server:
        reader, writer = await server.connect()
        writer.write(metadata_request(1)[:-3])  # the size promises 3 bytes more than ever come
        writer.write_eof()
        assert await _closed(reader)
        _, response = await _exchange(server, metadata_request(2), METADATA, 12)
        assert response.brokers == ()
        assert server.listener.memory.used == 0  # the half-read frame's reservation was released


async def test_a_malformed_request_is_logged_once_and_closes_its_connection(
        caplog: pytest.LogCaptureFixture) -> None:
    async with serving() as server:
        reader, writer = await server.connect()
        good = metadata_request(1)
        writer.write(good[:-1] + b"\x07\x07" + b"")  # one byte too many inside a correct size
        writer.write(struct.pack(">i", len(good) - 3) + good[4:-3])
        assert await _closed(reader)
        lines = [r for r in caplog.records if "protocol error" in r.getMessage()]
        assert len(lines) == 1 and lines[0].client == "127.0.0.1" and lines[0].levelno == logging.WARNING


async def test_a_huge_size_prefix_is_refused_before_anything_is_read() -> None:
    async with serving(limits=KafkaLimits(max_frame_bytes=1 << 20)) as server:
        for prefix in (struct.pack(">i", 2**31 - 1), struct.pack(">i", (1 << 20) + 1)):
            reader, writer = await server.connect()
            writer.write(prefix)  # not followed by anything: refused from the 4 bytes alone
            assert await _closed(reader)
            assert server.listener.memory.used == 0


async def test_a_tls_hello_on_the_plain_port_gets_http_s_plain_answer_even_cut_after_one_byte() -> None:
    async with serving() as server:
        reader, writer = await server.connect()
        writer.write(b"\x16")  # not enough to tell
        await writer.drain()
        await asyncio.sleep(0.05)  # the subject: the rest comes in a later read, after a pause
        writer.write(b"\x03\x01\x00\x05hello")
        answer = await asyncio.wait_for(reader.read(100), 10)
        assert answer.startswith(b"HTTP/1.") and b" 400 " in answer, answer


async def test_neither_protocol_is_closed_at_once() -> None:
    async with serving() as server:
        reader, writer = await server.connect()
        writer.write(b"\xff\xfe")
        assert await _closed(reader)


async def test_an_idle_connection_is_closed_and_a_busy_one_is_not() -> None:
    release = asyncio.Event()
    async with serving(_held_until(release), limits=KafkaLimits(idle_ms=200)) as server:
        idle_reader, _ = await server.connect()
        busy_reader, busy_writer = await server.connect()
        busy_writer.write(metadata_request(1))
        assert await _closed(idle_reader)  # silent: not even its first bytes
        await asyncio.sleep(0.5)  # past the idle time with the request in flight
        release.set()
        correlation_id, _ = read_response(await read_frame(busy_reader), METADATA, 12)
        assert correlation_id == 1
        assert await _closed(busy_reader)  # and idle again afterwards


# -- pipelining and bounds --------------------------------------------------------------------------


async def _five_pipelined_finishing_last_to_first() -> list[tuple[int, Any]]:
    """Five pipelined Metadata requests whose handlers finish last to first (so the head's answer
    is ready last, with the four others); the five answers as read."""
    gates = {i: asyncio.Event() for i in range(5)}

    async def by_correlation(context: RequestContext, request: Any) -> Any:
        await gates[context.correlation_id].wait()
        return _metadata_response(cluster_id=str(context.correlation_id))

    async with serving(by_correlation) as server:
        reader, writer = await server.connect()
        writer.write(b"".join(metadata_request(i) for i in range(5)))
        await wait_until(lambda: len(server.contexts) == 5, what="all five handled at once")
        for i in reversed(range(5)):
            gates[i].set()
            await asyncio.sleep(0)
        answers = [read_response(await read_frame(reader), METADATA, 12) for _ in range(5)]
        writer.close()
    return answers


async def test_pipelined_requests_are_answered_in_request_order() -> None:
    answers = await _five_pipelined_finishing_last_to_first()
    assert [(c, r.cluster_id) for c, r in answers] == [(i, str(i)) for i in range(5)]


async def test_answers_ready_together_go_out_in_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pipelining client (librdkafka keeps 5 produce requests in flight) is woken once for the
    answers that are ready together, not once an answer."""
    from asyncio import selector_events

    server_writes: list[str] = []
    transport = selector_events._SelectorSocketTransport
    inside: list[bool] = []  # writelines may call write (Python 3.11): one write, counted once

    def counting(name: str) -> Any:
        original = getattr(transport, name)

        def counted(self: Any, data: Any) -> None:
            if not inside and not isinstance(self.get_protocol(), asyncio.StreamReaderProtocol):  # the node's
                server_writes.append(name)
            inside.append(True)
            try:
                original(self, data)
            finally:
                inside.pop()
        return counted

    for name in ("write", "writelines"):
        monkeypatch.setattr(transport, name, counting(name))
    answers = await _five_pipelined_finishing_last_to_first()
    assert [c for c, _ in answers] == list(range(5))
    assert len(server_writes) == 1


async def test_accepted_connections_send_small_answers_at_once() -> None:
    """TCP_NODELAY on every accepted connection: with Nagle's algorithm an answer written while
    an earlier one is unacknowledged waits for the client's delayed ACK (up to 40 ms on Linux).
    asyncio sets it only on sockets whose protocol number is TCP, and `socket.create_server`'s
    (the node's listeners') accepted sockets have none (uvloop sets it either way)."""
    async with serving() as server:
        reader, writer = await server.connect()
        writer.write(metadata_request(1))
        await read_frame(reader)
        [channel] = server.listener.channels
        assert channel.transport is not None
        accepted = channel.transport.get_extra_info("socket")
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        writer.close()


async def test_queued_max_requests_bounds_what_one_connection_has_in_flight() -> None:
    release = asyncio.Event()
    async with serving(_held_until(release), limits=KafkaLimits(max_queued_requests=3)) as server:
        reader, writer = await server.connect()
        writer.write(b"".join(metadata_request(i) for i in range(50)))
        await wait_until(lambda: len(server.contexts) >= 3, what="three requests in flight")
        await asyncio.sleep(0.2)  # a window in which no fourth may start
        assert len(server.contexts) == 3  # the others wait unread (or unstarted)
        release.set()
        answers = [read_response(await read_frame(reader), METADATA, 12)[0] for _ in range(50)]
        assert answers == list(range(50))


async def test_the_node_wide_request_bytes_pool_holds_a_frame_back_until_answers_free_it() -> None:
    release = asyncio.Event()
    one = len(metadata_request(0)) - 4
    limits = KafkaLimits(memory=RequestMemoryPool(one + 10))
    async with serving(_held_until(release), limits=limits) as server:
        first_reader, first = await server.connect()
        first.write(metadata_request(1))
        await wait_until(lambda: server.contexts, what="the first request in flight")
        second_reader, second = await server.connect()
        second.write(metadata_request(2)[:4])  # its size is in: it does not fit beside the first
        await asyncio.sleep(0.1)  # the size read on its own, before the rest arrives
        second.write(metadata_request(2)[4:])
        await asyncio.sleep(0.2)  # a window in which the second may not be read into the pool
        assert len(server.contexts) == 1 and limits.memory.used == one
        release.set()
        assert read_response(await read_frame(first_reader), METADATA, 12)[0] == 1
        assert read_response(await read_frame(second_reader), METADATA, 12)[0] == 2
        await wait_until(lambda: not limits.memory.used, what="the pool freed")


async def test_max_connections_per_ip_refuses_the_connection_over_it() -> None:
    limits = KafkaLimits(connections=ConnectionLimits(max_connections=10, max_connections_per_ip=2))
    async with serving(limits=limits) as server:
        kept = [await server.connect() for _ in range(2)]
        for reader, writer in kept:
            writer.write(metadata_request(1))
            await read_frame(reader)
        reader, _ = await server.connect()
        assert await _closed(reader)
        kept[0][1].close()
        await wait_until(lambda: limits.connections.total <= 1, what="the closed connection released")
        assert (await _exchange(server, metadata_request(3), METADATA, 12))[0] == 3


async def test_a_throttled_answer_is_sent_at_once_and_then_the_connection_is_muted() -> None:
    async def throttled(context: RequestContext, request: Any) -> Any:
        return _metadata_response(throttle_ms=400 if context.correlation_id == 1 else 0)

    loop = asyncio.get_running_loop()
    async with serving(throttled) as server:
        reader, writer = await server.connect()
        writer.write(metadata_request(1) + metadata_request(2))
        assert read_response(await read_frame(reader), METADATA, 12)[1].throttle_time.total_seconds() == 0.4
        answered = loop.time()
        assert read_response(await read_frame(reader), METADATA, 12)[0] == 2
        assert loop.time() - answered >= 0.35  # the second waited out the mute (KIP-219)


async def test_the_request_context_names_client_listener_and_api() -> None:
    async with serving() as server:
        await _exchange(server, metadata_request(9), METADATA, 12)
        [context] = server.contexts
        assert (context.principal, context.client_address, context.listener_name, context.security_protocol,
                context.client_id, context.api, context.api_version, context.correlation_id) == (
            "User:ANONYMOUS", "127.0.0.1", "CLIENT", "PLAINTEXT", "kraft-test", "Metadata", 12, 9)


# -- SASL ---------------------------------------------------------------------------------------------


def _users(*entries: tuple[str, str, str]) -> ClientAuthenticator:
    image = MetadataImage.EMPTY
    result = alter_user_scram_credentials(image, [scram_upsertion(u, m, pw, 4096) for u, m, pw in entries], [])
    image = apply_records(image, [(1 + i, r) for i, r in enumerate(result.records)])[1]
    return ClientAuthenticator("SASL_PLAINTEXT", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"], [], lambda: image)


USERS = (("alice", "SCRAM-SHA-256", "alice-pw"), ("alice", "SCRAM-SHA-512", "alice-pw"))


class SaslClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.correlation_id = reader, writer, 0

    async def call(self, api_key: int, version: int, **fields: Any) -> Any:
        self.correlation_id += 1
        self.writer.write(request_bytes(api_key, version, self.correlation_id, **fields))
        correlation_id, response = read_response(await read_frame(self.reader), api_key, version)
        assert correlation_id == self.correlation_id
        return response

    async def authenticate(self, token: bytes) -> Any:
        return await self.call(SASL_AUTHENTICATE, 2, auth_bytes=token)


async def _sasl_client(server: Server, mechanism: str) -> SaslClient:
    client = SaslClient(*await server.connect())
    handshake = await client.call(SASL_HANDSHAKE, 1, mechanism=mechanism)
    assert handshake.error_code == ErrorCode.none and mechanism in handshake.mechanisms
    return client


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_scram_authenticates_and_the_principal_reaches_the_handlers(mechanism: str) -> None:
    async with serving(protocol="SASL_PLAINTEXT", authenticator=_users(*USERS),
                       mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")) as server:
        client = await _sasl_client(server, mechanism)
        scram = scramp.ScramClient([mechanism], "alice", "alice-pw")
        first = await client.authenticate(scram.get_client_first().encode())
        assert first.error_code == ErrorCode.none
        scram.set_server_first(first.auth_bytes.decode())
        final = await client.authenticate(scram.get_client_final().encode())
        assert final.error_code == ErrorCode.none
        scram.set_server_final(final.auth_bytes.decode())  # the server proved it knows the key too
        await client.call(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                          include_topic_authorized_operations=False)
        assert server.contexts[-1].principal == "User:alice"
        assert server.contexts[-1].security_protocol == "SASL_PLAINTEXT"
        again = await client.call(SASL_HANDSHAKE, 1, mechanism=mechanism)  # no re-authentication
        assert again.error_code == ErrorCode.illegal_sasl_state


@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("nobody", "alice-pw")])
async def test_scram_failures_answer_sasl_authentication_failed_and_close(user: str, password: str) -> None:
    async with serving(protocol="SASL_PLAINTEXT", authenticator=_users(*USERS),
                       mechanisms=("SCRAM-SHA-256",)) as server:
        client = await _sasl_client(server, "SCRAM-SHA-256")
        scram = scramp.ScramClient(["SCRAM-SHA-256"], user, password)
        first = await client.authenticate(scram.get_client_first().encode())
        assert first.error_code == ErrorCode.none  # an unknown user is not told apart here
        scram.set_server_first(first.auth_bytes.decode())
        final = await client.authenticate(scram.get_client_final().encode())
        assert final.error_code == ErrorCode.sasl_authentication_failed
        assert final.error_message == "Authentication failed: invalid credentials"
        assert await _closed(client.reader)
        assert server.contexts == []


async def test_an_unknown_users_salt_is_the_same_at_every_attempt() -> None:
    """A real user's salt repeats; a stand-in's must too, or its change would tell them apart."""
    async with serving(protocol="SASL_PLAINTEXT", authenticator=_users(*USERS),
                       mechanisms=("SCRAM-SHA-256",)) as server:
        salts = []
        for _ in range(2):
            client = await _sasl_client(server, "SCRAM-SHA-256")
            scram = scramp.ScramClient(["SCRAM-SHA-256"], "nobody", "x")
            first = await client.authenticate(scram.get_client_first().encode())
            salts.append(dict(p.split("=", 1) for p in first.auth_bytes.decode().split(","))["s"])
            client.writer.close()
        assert salts[0] == salts[1]


@pytest.mark.parametrize("password,ok", [("alice-pw", True), ("wrong", False)])
async def test_plain_checks_the_password_against_the_scram_credentials(password: str, ok: bool) -> None:
    async with serving(protocol="SASL_PLAINTEXT", authenticator=_users(*USERS),
                       mechanisms=("PLAIN",)) as server:
        client = await _sasl_client(server, "PLAIN")
        answer = await client.authenticate(b"\0alice\0" + password.encode())
        if ok:
            assert answer.error_code == ErrorCode.none
            await client.call(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
            assert server.contexts[-1].principal == "User:alice"
        else:
            assert answer.error_code == ErrorCode.sasl_authentication_failed
            assert await _closed(client.reader)


async def test_handshake_v0_exchanges_bare_tokens() -> None:
    async with serving(protocol="SASL_PLAINTEXT", authenticator=_users(*USERS), mechanisms=("PLAIN",)) as server:
        client = SaslClient(*await server.connect())
        assert (await client.call(SASL_HANDSHAKE, 0, mechanism="PLAIN")).error_code == ErrorCode.none
        client.writer.write(frame(b"\0alice\0alice-pw"))
        assert await read_frame(client.reader) == b""  # PLAIN's empty answer, bare
        await client.call(METADATA, 12, topics=None, allow_auto_topic_creation=False,
                          include_topic_authorized_operations=False)
        assert server.contexts[-1].principal == "User:alice"


async def test_before_authentication_only_the_sasl_requests_are_served() -> None:
    async with serving(protocol="SASL_PLAINTEXT", authenticator=_users(*USERS), mechanisms=("PLAIN",)) as server:
        client = SaslClient(*await server.connect())
        versions = await client.call(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
        assert versions.error_code == ErrorCode.none
        client.writer.write(metadata_request(7))  # not authenticated: Kafka closes
        assert await _closed(client.reader)
        client = SaslClient(*await server.connect())
        answer = await client.call(SASL_HANDSHAKE, 1, mechanism="GSSAPI")
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism and list(answer.mechanisms) == ["PLAIN"]
        assert await _closed(client.reader)
        assert server.contexts == []


async def test_before_authentication_a_frame_over_sasl_server_max_receive_size_is_refused_from_its_size() -> None:
    """Kafka's sasl.server.max.receive.size: a client that never authenticates cannot make the node
    reserve and buffer a frame of up to socket.request.max.bytes; once authenticated it can."""
    limits = KafkaLimits(max_frame_bytes=1 << 20, sasl_max_frame_bytes=4096)
    async with serving(protocol="SASL_PLAINTEXT", authenticator=_users(*USERS), mechanisms=("PLAIN",),
                       limits=limits) as server:
        reader, writer = await server.connect()
        writer.write(struct.pack(">i", 4097))  # not followed by anything: refused from the 4 bytes alone
        assert await _closed(reader)
        assert server.listener.memory.used == 0
        client = await _sasl_client(server, "PLAIN")
        assert (await client.authenticate(b"\0alice\0alice-pw")).error_code == ErrorCode.none
        big = metadata_request(9)
        client.writer.write(frame(big[4:] + bytes(8192)))  # bytes after the body are ignored, as Kafka does
        assert read_response(await read_frame(client.reader), METADATA, 12)[0] == 9


async def test_sasl_requests_on_a_listener_without_sasl_are_illegal_sasl_state() -> None:
    async with serving() as server:
        client = SaslClient(*await server.connect())
        assert (await client.call(SASL_HANDSHAKE, 1, mechanism="PLAIN")).error_code == ErrorCode.illegal_sasl_state
        assert (await client.authenticate(b"x")).error_code == ErrorCode.illegal_sasl_state


# -- SSL -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("client,principal", [("alice", "User:alice"), ("mallory", None), (None, "User:ANONYMOUS")])
async def test_an_ssl_listener_takes_the_principal_from_the_client_certificate(
        tmp_path: Path, client: str | None, principal: str | None) -> None:
    """ssl.principal.mapping.rules map the certificate's subject; one no rule maps is refused."""
    ca = certs.make_ca()
    ca_file = certs.write_ca(ca, tmp_path)
    certs.write_keystore(ca, tmp_path / "node.pem", "node", ["127.0.0.1"])
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(tmp_path / "node.pem")
    server_tls.load_verify_locations(ca_file)
    server_tls.verify_mode = ssl.CERT_OPTIONAL
    client_tls = ssl.create_default_context(cafile=str(ca_file))
    if client is not None:
        certs.write_keystore(ca, tmp_path / "client.pem", client, organization="kraft" if client == "alice" else "x")
        client_tls.load_cert_chain(tmp_path / "client.pem")
    authenticator = ClientAuthenticator("SSL", [], parse_rules("RULE:^O=kraft,CN=([a-z]+)$/$1/"),
                                        lambda: MetadataImage.EMPTY)
    if client is None:
        authenticator.rules = parse_rules("DEFAULT")
    async with serving(protocol="SSL", authenticator=authenticator, tls=server_tls) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=client_tls)
        writer.write(metadata_request(1))
        if principal is None:
            assert await _closed(reader)
            assert server.contexts == []
        else:
            await read_frame(reader)
            assert server.contexts[0].principal == principal and server.contexts[0].security_protocol == "SSL"
        writer.close()
