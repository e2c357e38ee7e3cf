"""A client port: the socket a listener accepts on, serving HTTP, the Kafka protocol, or both told
apart by each connection's first bytes (kraft/kafka/sniff.py; after the TLS handshake, which the
asyncio server completes before any data reaches the protocol).

`ClientPortProtocol` is the first protocol of every accepted connection: it counts the connection
against `max.connections` / `max.connections.per.ip` (refusing it at once over a limit), waits for
the first bytes (at most `connections.max.idle.ms`), then creates the protocol of what it heard,
aiohttp's request handler (the HTTP app's `web.Server`, so keep-alive, its limits and its shutdown
work as on a port of its own) or a KafkaChannel, and passes it the connection and those bytes. It
stays in between, forwarding each callback, to learn when the connection ends. A port serving one
protocol (a Kafka-only listener; the client port with kafka.enable=false) does not sniff: that
protocol's own parser judges the first bytes.

`ClientSite` is an aiohttp site (like `web.SockSite`) on an already bound socket: the AppRunner
starts and stops it with the app, and on stop its Kafka connections drain before the node's
services stop.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from typing import Callable, cast

from aiohttp import web

from kraft.kafka.errors import KafkaProtocolError
from kraft.kafka.limits import ConnectionLimits
from kraft.kafka.listener import KafkaListener
from kraft.kafka.sniff import sniff

log = logging.getLogger("kraft.kafka")


class ClientPort:
    """What one port serves: `http` (the app's protocol factory) and/or `kafka`."""

    def __init__(self, http: Callable[[], asyncio.Protocol] | None, kafka: KafkaListener | None,
                 limits: ConnectionLimits, first_bytes_timeout_s: float) -> None:
        assert http is not None or kafka is not None
        self.http = http
        self.kafka = kafka
        self.limits = limits
        self.first_bytes_timeout_s = first_bytes_timeout_s
        self.connections = 0

    def __call__(self) -> ClientPortProtocol:
        return ClientPortProtocol(self)


class ClientPortProtocol(asyncio.Protocol):
    def __init__(self, port: ClientPort) -> None:
        self.port = port
        self.transport: asyncio.Transport | None = None
        self.host = "unknown"
        self.target: asyncio.Protocol | None = None
        self._admitted = False
        self._timeout: asyncio.TimerHandle | None = None
        self._first = bytearray()  # the first bytes, until they tell the protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        self.host = str(peer[0]) if isinstance(peer, tuple) else "unknown"
        refused = self.port.limits.admit(self.host)
        if refused is not None:
            log.warning("refused a connection from %s: %s", self.host, refused, extra={"client": self.host})
            transport.abort()
            return
        self._admitted = True
        self.port.connections += 1
        _no_delay(transport)
        self._timeout = asyncio.get_running_loop().call_later(self.port.first_bytes_timeout_s, transport.close)

    def data_received(self, data: bytes) -> None:
        if self.target is None:
            self._first += data
            if not self._choose(bytes(self._first)):
                return
            data, self._first = bytes(self._first), bytearray()
            assert self.target is not None
        self.target.data_received(data)

    def _choose(self, data: bytes) -> bool:
        """Creates the protocol the first bytes ask for; False while they do not tell yet (the
        first-bytes timeout still runs), or when they tell neither (closed)."""
        assert self.transport is not None
        if self.port.http is None or self.port.kafka is None:  # one protocol: its own parser judges
            protocol = "http" if self.port.kafka is None else "kafka"
        else:
            try:
                sniffed = sniff(data)
            except KafkaProtocolError as e:
                self._refuse(str(e))
                return False
            if sniffed is None:
                return False
            protocol = sniffed
        if self._timeout is not None:
            self._timeout.cancel()
        if protocol == "http":
            assert self.port.http is not None
            self.target = self.port.http()
        else:
            assert self.port.kafka is not None
            self.target = self.port.kafka.channel(self.host)
        self.target.connection_made(self.transport)
        return True

    def _refuse(self, reason: str) -> None:
        log.warning("closing a connection from %s: %s", self.host, reason, extra={"client": self.host})
        assert self.transport is not None
        self.transport.close()

    def eof_received(self) -> bool | None:
        return self.target.eof_received() if self.target is not None else None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timeout is not None:
            self._timeout.cancel()
        if self._admitted:
            self._admitted = False
            self.port.connections -= 1
            self.port.limits.release(self.host)
        if self.target is not None:
            self.target.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.target is not None:
            self.target.pause_writing()

    def resume_writing(self) -> None:
        if self.target is not None:
            self.target.resume_writing()


def _no_delay(transport: asyncio.BaseTransport) -> None:
    """TCP_NODELAY: an answer goes out when written, not after the client's delayed ACK of the
    one before (Nagle's algorithm: up to 40 ms on Linux). asyncio sets it only on sockets whose
    protocol number is TCP, which those accepted from `socket.create_server` lack."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class ClientSite(web.BaseSite):
    """An AppRunner site serving a ClientPort on a bound socket, TLS first when `ssl_context`."""

    __slots__ = ("_sock", "_port", "_name")

    def __init__(self, runner: web.BaseRunner, sock: socket.socket, port: ClientPort,
                 ssl_context: ssl.SSLContext | None = None, backlog: int = 1024) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=backlog)
        self._sock = sock
        self._port = port
        host, bound = sock.getsockname()[:2]
        self._name = f"{'https' if ssl_context else 'http'}://{host}:{bound}"

    @property
    def name(self) -> str:
        return self._name

    async def start(self) -> None:
        await super().start()
        self._server = await asyncio.get_running_loop().create_server(
            self._port, sock=self._sock, ssl=self._ssl_context, backlog=self._backlog)

    async def stop(self) -> None:
        await super().stop()  # accepts no more connections
        if self._port.kafka is not None:
            await self._port.kafka.shutdown()
