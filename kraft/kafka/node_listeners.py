"""The node's Kafka listeners from its configuration (`KraftConfig.kafka_listeners`): one
`HandlerRegistry` and one set of limits for all of them, the client port's `ClientPort` (HTTP and,
unless turned off, the Kafka protocol), a bound socket and an aiohttp site per Kafka-only listener,
and the endpoints the broker registers (Kafka's BrokerRegistration listeners: name, host, port,
security protocol) so that Metadata answers can advertise them.
"""

from __future__ import annotations

import socket
from typing import Any, Callable

from aiohttp import web

from kraft.config import KafkaListenerSpec, KraftConfig
from kraft.kafka.client_port import ClientPort, ClientSite
from kraft.kafka.dispatch import HandlerRegistry
from kraft.kafka.listener import KafkaLimits, KafkaListener
from kraft.security.tls import server_context


AIOHTTP_KEEPALIVE_TIMEOUT_S = 75.0  # web.Server's default keepalive_timeout


def advertised_host(host: str) -> str:
    """A wildcard address advertises the host's name."""
    return socket.gethostname() if host in ("0.0.0.0", "::", "") else host


class KafkaListeners:
    def __init__(self, config: KraftConfig, authenticator: Any = None,
                 on_authentication_failed: Callable[[], None] = lambda: None) -> None:
        self.config = config
        self.registry = HandlerRegistry()
        self.limits = KafkaLimits.from_config(config)
        self.specs = config.kafka_listeners
        self.listeners = {
            spec.name: KafkaListener(spec.name, spec.security_protocol, self.registry, self.limits, authenticator,
                                     config["sasl.enabled.mechanisms"], on_authentication_failed)
            for spec in self.specs}
        self._sockets: dict[str, socket.socket] = {}
        self.client_port: ClientPort | None = None

    @property
    def _shared(self) -> KafkaListenerSpec | None:
        return next((s for s in self.specs if s.shared), None)

    def bind(self) -> None:
        """Binds the Kafka-only listeners (port 0 resolves here, before the broker registers)."""
        for spec in self.specs:
            if not spec.shared:
                self._sockets[spec.name] = socket.create_server((spec.host, spec.port), backlog=1024)

    def close_sockets(self) -> None:
        for sock in self._sockets.values():
            sock.close()

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

    async def start(self, runner: web.AppRunner, client_sock: socket.socket, client_tls: Any) -> None:
        """Starts the client port (HTTP from `runner`) and the Kafka-only listeners' sites."""
        assert runner.server is not None
        shared = self._shared
        # a silent new connection: closed by the idle rule, and no later than aiohttp's keep-alive
        # timeout closed it before the port was shared
        first_bytes_timeout_s = min(self.limits.idle_ms / 1000, AIOHTTP_KEEPALIVE_TIMEOUT_S)
        self.client_port = ClientPort(runner.server, None if shared is None else self.listeners[shared.name],
                                      self.limits.connections, first_bytes_timeout_s)
        await ClientSite(runner, client_sock, self.client_port, ssl_context=client_tls).start()
        for spec in self.specs:
            if not spec.shared:
                port = ClientPort(None, self.listeners[spec.name], self.limits.connections, first_bytes_timeout_s)
                await ClientSite(runner, self._sockets[spec.name], port,
                                 ssl_context=server_context(self.config, spec.uses_tls)).start()

    def open_connections(self) -> int:
        """Connections of the client port (HTTP and Kafka)."""
        return 0 if self.client_port is None else self.client_port.connections
