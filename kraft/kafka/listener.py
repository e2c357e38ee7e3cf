"""One listener's Kafka side (a `listeners` entry, Kafka's EndPoint + its SocketServer
acceptor): its name and security protocol, the handlers, the node-wide limits every listener
shares (`KafkaLimits`), and its open connections, which `shutdown` lets finish.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from kraft.kafka.channel import KafkaChannel
from kraft.kafka.dispatch import HandlerRegistry
from kraft.kafka.frames import SOCKET_REQUEST_MAX_BYTES
from kraft.kafka.limits import ConnectionLimits, RequestMemoryPool
from kraft.kafka.sasl import SASL_SERVER_MAX_RECEIVE_SIZE, CredentialSource
from kraft.server.request_context import ANONYMOUS

log = logging.getLogger("kraft.kafka")

SHUTDOWN_TIMEOUT_S = 30.0


@dataclass
class KafkaLimits:
    """The node's bounds (Kafka's names), shared by its listeners and counted across them."""

    max_frame_bytes: int = SOCKET_REQUEST_MAX_BYTES  # socket.request.max.bytes
    sasl_max_frame_bytes: int = SASL_SERVER_MAX_RECEIVE_SIZE  # sasl.server.max.receive.size
    idle_ms: int = 600_000  # connections.max.idle.ms
    max_queued_requests: int = 500  # queued.max.requests, per connection here
    connections: ConnectionLimits = field(default_factory=lambda: ConnectionLimits(2**31 - 1, 2**31 - 1))
    memory: RequestMemoryPool = field(default_factory=lambda: RequestMemoryPool(None))

    @classmethod
    def from_config(cls, config: Any) -> KafkaLimits:
        pool = config["queued.max.request.bytes"]
        return cls(max_frame_bytes=config["socket.request.max.bytes"],
                   sasl_max_frame_bytes=config["sasl.server.max.receive.size"],
                   idle_ms=config["connections.max.idle.ms"], max_queued_requests=config["queued.max.requests"],
                   connections=ConnectionLimits(config["max.connections"], config["max.connections.per.ip"]),
                   memory=RequestMemoryPool(None if pool < 0 else pool))


class KafkaListener:
    def __init__(self, name: str, security_protocol: str, registry: HandlerRegistry, limits: KafkaLimits,
                 authenticator: Any = None, sasl_mechanisms: list[str] | None = None,
                 on_authentication_failed: Callable[[], None] = lambda: None) -> None:
        """`authenticator`: the node's client authenticator (kraft/security/authn.py): the
        credentials of SASL listeners and the certificate rules of SSL ones."""
        self.name = name
        self.security_protocol = security_protocol
        self.registry = registry
        self.limits = limits
        self.authenticator = authenticator
        self.sasl_mechanisms = list(sasl_mechanisms or ())
        self.authentication_failed = on_authentication_failed
        self.channels: set[KafkaChannel] = set()

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def credentials(self) -> CredentialSource:
        assert self.authenticator is not None, f"listener {self.name}: SASL needs the node's credentials"
        return self.authenticator

    # what each connection reads of the limits
    @property
    def memory(self) -> RequestMemoryPool:
        return self.limits.memory

    @property
    def max_frame_bytes(self) -> int:
        return self.limits.max_frame_bytes

    @property
    def max_frame_bytes_before_auth(self) -> int:
        """An unauthenticated client's frame bound: Kafka's sasl.server.max.receive.size on a SASL
        listener, so that a client that never authenticates holds 512 KiB, not 100 MiB."""
        return min(self.limits.sasl_max_frame_bytes, self.max_frame_bytes) if self.uses_sasl else self.max_frame_bytes

    @property
    def max_queued_requests(self) -> int:
        return self.limits.max_queued_requests

    @property
    def idle_s(self) -> float:
        return self.limits.idle_ms / 1000

    def transport_principal(self, transport: asyncio.Transport) -> str:
        """The principal of a connection that does not authenticate with SASL: from its client
        certificate on an SSL listener, else ANONYMOUS. Raises when the certificate maps to none."""
        if self.security_protocol == "SSL" and self.authenticator is not None:
            return self.authenticator.certificate_principal(transport.get_extra_info("ssl_object"))
        return ANONYMOUS

    def channel(self, client_host: str) -> KafkaChannel:
        return KafkaChannel(self, client_host)

    def opened(self, channel: KafkaChannel) -> None:
        self.channels.add(channel)

    def closed(self, channel: KafkaChannel) -> None:
        self.channels.discard(channel)

    async def shutdown(self, timeout_s: float = SHUTDOWN_TIMEOUT_S) -> None:
        """Reads no more requests; answers those in flight (for at most `timeout_s`), then closes."""
        if not self.channels:
            return
        drains = {asyncio.ensure_future(c.drain()): c for c in list(self.channels)}
        _, pending = await asyncio.wait(drains, timeout=timeout_s)
        for task in pending:
            task.cancel()
            transport = drains[task].transport
            if transport is not None:
                transport.abort()
        if pending:
            log.warning("listener %s: %d Kafka connections still busy after %.0f s were closed",
                        self.name, len(pending), timeout_s)
