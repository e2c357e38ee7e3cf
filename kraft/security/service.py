"""The node's `SecurityService` (api/security.py): verifies other nodes' credentials,
authenticates clients as the listener's security.protocol says, counts refusals, and signs
this node's own forwarded requests.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Mapping
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter

from kraft.security.node_auth import NodeCredential
from kraft.security.peers import PeerSecurity
from kraft.server.request_context import ANONYMOUS

log = logging.getLogger("kraft.security")


class NodeSecurity:
    def __init__(self, credential: NodeCredential, peers: PeerSecurity,
                 registry: CollectorRegistry | None = None) -> None:
        self.credential = credential
        self.peers = peers
        self.authenticator: Any = None  # client authentication (kraft/security/authn.py); None: ANONYMOUS
        self._refusals = Counter(
            "kraft_security_refused_requests", "Requests refused: kind=cluster_authorization (403, not one of "
            "the cluster's nodes) or authentication (401, bad client credentials).", ("kind",),
            registry=registry)
        for kind in ("cluster_authorization", "authentication"):
            self._refusals.labels(kind)

    # -- api.security.SecurityService -----------------------------------------------------------

    def verify_node(self, header: str, method: str, path_qs: str, headers: Mapping[str, str | None]) -> tuple[int, str]:
        verified = self.credential.verify(header, method, path_qs, headers, int(time.time() * 1000))
        return verified.node_id, verified.body_digest

    async def authenticate(self, request: web.Request) -> str:
        if self.authenticator is None:
            return ANONYMOUS
        return await self.authenticator.authenticate(request)

    def refused(self, kind: str) -> None:
        self._refusals.labels(kind).inc()

    @property
    def peer_ssl(self) -> ssl.SSLContext | None:
        return self.peers.ssl_context

    def peer_url(self, host: str, port: int, path_qs: str) -> str:
        return self.peers.url(host, port, path_qs)

    def peer_headers(self, method: str, path_qs: str, body: bytes | None, target: int,
                     trusted: Mapping[str, str]) -> dict[str, str]:
        return self.peers.headers(method, path_qs, body, target=target, trusted=trusted)
