"""A listener: one way clients reach the node (the HTTP API, Kafka's binary protocol), an adapter
over the node's services. The node drives every listener through three steps:

1. `bind()` before anything starts, so the node knows its port (port 0 resolves here) before its
   broker registers the endpoint; connections wait in the socket's backlog;
2. `start(services)` once the services are ready: accept and serve;
3. `stop()` after the controlled shutdown (which runs while the node still serves, so followers
   keep fetching and leaderships can move): stop accepting and let in-flight requests finish,
   before the services stop.
"""

from __future__ import annotations

from typing import Any, Protocol

from kraft.server.services import BrokerServices


class Listener(Protocol):
    name: str  # Kafka's listener name: CLIENT, PLAINTEXT, SASL_SSL, ...

    def bind(self) -> tuple[str, int]:
        """Binds the listening socket(s); the host and port bound (the node's first listener's
        is its client endpoint)."""

    def endpoints(self, advertised: tuple[str, int]) -> list[dict[str, Any]]:
        """The Kafka endpoints it serves, for the broker's registration (name, host, port,
        security protocol); `advertised` is the node's client endpoint."""

    async def start(self, services: BrokerServices) -> None: ...

    async def stop(self) -> None: ...

    def open_connections(self) -> int: ...
