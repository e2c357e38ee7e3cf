"""The node's Kafka listeners from its configuration (`KraftConfig.kafka_listeners`), one node
listener (kraft/server/listener.py) for all of them: one `HandlerRegistry` and one set of limits,
the Kafka side of the client port (which the HTTP listener serves on its socket, told apart by the
first bytes: `client_port`), a bound socket and a server per Kafka-only listener, and the
endpoints the broker registers (Kafka's BrokerRegistration listeners: name, host, port, security
protocol) so that Metadata answers can advertise them.

The services reach the Kafka listeners when the first of the two listeners sharing them starts
(`attach`): the node's client authenticator (SASL credentials, certificate rules) and the handlers
of the Kafka APIs over them.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any, Callable

from kraft.config import KafkaListenerSpec, KraftConfig
from kraft.kafka.client_port import ClientPort
from kraft.kafka.dispatch import HandlerRegistry
from kraft.kafka.handlers import register_handlers
from kraft.kafka.listener import KafkaLimits, KafkaListener
from kraft.security.tls import server_context
from kraft.server.services import BrokerServices

AIOHTTP_KEEPALIVE_TIMEOUT_S = 75.0  # web.Server's default keepalive_timeout


def advertised_host(host: str) -> str:
    """A wildcard address advertises the host's name."""
    return socket.gethostname() if host in ("0.0.0.0", "::", "") else host


class KafkaListeners:
    name = "KAFKA"

    def __init__(self, config: KraftConfig) -> None:
        self.config = config
        self.registry = HandlerRegistry()
        self.limits = KafkaLimits.from_config(config)
        self.specs = config.kafka_listeners
        self.listeners = {
            spec.name: KafkaListener(spec.name, spec.security_protocol, self.registry, self.limits,
                                     sasl_mechanisms=config["sasl.enabled.mechanisms"])
            for spec in self.specs}
        self._sockets: dict[str, socket.socket] = {}
        self._servers: list[tuple[asyncio.Server, ClientPort]] = []
        self._attached = False

    @property
    def _shared(self) -> KafkaListenerSpec | None:
        return next((s for s in self.specs if s.shared), None)

    @property
    def first_bytes_timeout_s(self) -> float:
        # a silent new connection: closed by the idle rule, and no later than aiohttp's keep-alive
        # timeout closed it before the port was shared
        return min(self.limits.idle_ms / 1000, AIOHTTP_KEEPALIVE_TIMEOUT_S)

    def bind(self) -> tuple[str, int]:
        """Binds the Kafka-only listeners (port 0 resolves here, before the broker registers); the
        first one's address (the client port is the HTTP listener's)."""
        try:
            for spec in self.specs:
                if not spec.shared:
                    self._sockets[spec.name] = socket.create_server((spec.host, spec.port), backlog=1024)
        except BaseException:
            self.close_sockets()
            raise
        for sock in self._sockets.values():
            host, port = sock.getsockname()[:2]
            return str(host), int(port)
        return "", 0

    def close_sockets(self) -> None:
        for sock in self._sockets.values():
            sock.close()
        self._sockets.clear()

    def endpoints(self, client_endpoint: tuple[str, int]) -> list[dict[str, Any]]:
        """The Kafka endpoints to register; the client port's advertises `client_endpoint`."""
        out = []
        for spec in self.specs:
            if spec.shared:
                host, port = client_endpoint
            else:
                bound = self._sockets[spec.name].getsockname()[1]
                host, port = spec.advertised or (advertised_host(spec.host), 0)
                port = port or bound
            out.append({"name": spec.name, "host": host, "port": port, "security_protocol": spec.security_protocol})
        return out

    def attach(self, services: BrokerServices) -> None:
        """Gives every Kafka listener the node's authentication and the handlers over its
        services (once; by whichever listener sharing them starts first)."""
        if self._attached:
            return
        self._attached = True
        register_handlers(self.registry, services)
        security = services.node_security
        for listener in self.listeners.values():
            if security is not None:
                listener.authenticator = security.authenticator
                listener.authentication_failed = lambda: security.refused("authentication")

    def client_port(self, http: Callable[[], asyncio.Protocol], services: BrokerServices) -> ClientPort:
        """What the client port serves: HTTP from `http` and, unless turned off, the Kafka protocol."""
        self.attach(services)
        shared = self._shared
        return ClientPort(http, None if shared is None else self.listeners[shared.name], self.limits.connections,
                          self.first_bytes_timeout_s)

    async def start(self, services: BrokerServices) -> None:
        """Serves the Kafka-only listeners on their bound sockets."""
        self.attach(services)
        loop = asyncio.get_running_loop()
        for spec in self.specs:
            if not spec.shared:
                port = ClientPort(None, self.listeners[spec.name], self.limits.connections, self.first_bytes_timeout_s)
                server = await loop.create_server(port, sock=self._sockets[spec.name],
                                                  ssl=server_context(self.config, spec.uses_tls), backlog=1024)
                self._servers.append((server, port))

    async def stop(self) -> None:
        """Accepts no more Kafka-only connections, lets their requests in flight finish, closes."""
        servers, self._servers = self._servers, []
        for server, _ in servers:
            server.close()
        for spec in self.specs:
            if not spec.shared:
                await self.listeners[spec.name].shutdown()
        for server, _ in servers:
            await server.wait_closed()
        if not servers:  # bound, never started
            self.close_sockets()
        self._sockets.clear()

    def open_connections(self) -> int:
        """Connections of the Kafka-only listeners."""
        return sum(port.connections for _, port in self._servers)
