"""How this node calls the other nodes: the scheme (https when the cluster's listeners speak TLS,
checked against the truststore) and the node credential on every request, addressed to the node
called and covering the headers that node believes on the credential's word.

One `PeerSecurity` is shared by the node's inter-node HTTP clients (controller client, replica
fetchers, forwarding, leader offsets, ZooKeeper-mode pushes). `PLAIN_PEERS` (http, unsigned) is
what a component built without a node uses (unit tests); a node always installs its own.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass

import aiohttp

from kraft.security.node_auth import SIGNED_HEADERS, NodeCredential


@dataclass(frozen=True)
class PeerSecurity:
    credential: NodeCredential | None = None
    ssl_context: ssl.SSLContext | None = None  # a client context trusting the cluster's CA

    @property
    def scheme(self) -> str:
        return "https" if self.ssl_context is not None else "http"

    def url(self, host: str, port: int, path_qs: str) -> str:
        return f"{self.scheme}://{host}:{port}{path_qs}"

    def headers(self, method: str, path_qs: str, body: bytes | None = None, *, target: int,
                trusted: Mapping[str, str] | None = None) -> dict[str, str]:
        """The headers of one request to node `target` (`path_qs`: the raw path and query as
        sent): `trusted` (names of `SIGNED_HEADERS` only, e.g. the principal of a forwarded
        request) and the node credential covering them."""
        trusted = dict(trusted or {})
        assert trusted.keys() <= set(SIGNED_HEADERS), f"not signed: {sorted(trusted.keys() - set(SIGNED_HEADERS))}"
        if self.credential is None:
            return trusted
        covered = {name: trusted.get(name) for name in SIGNED_HEADERS}
        return {**trusted, **self.credential.sign(method, path_qs, body, int(time.time() * 1000), target, covered)}

    def connector(self, **kwargs: object) -> aiohttp.TCPConnector:
        """A connector for a session that talks to other nodes."""
        if self.ssl_context is not None:
            kwargs["ssl"] = self.ssl_context
        return aiohttp.TCPConnector(**kwargs)  # type: ignore[arg-type]


PLAIN_PEERS = PeerSecurity()
