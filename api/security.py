"""Who is calling: the security middleware, the principal it sets on every request, and the rule
that the control plane belongs to the cluster's own nodes.

Every request gets `request[PRINCIPAL]`, Kafka's principal string, before any route runs:
- a request signed with the node credential (`X-Kraft-Node-Auth`, kraft/security/node_auth.py)
  is `Node:<id>` and `request[NODE_ID]` is set: a principal type no user credential can take;
  a node forwarding a client's request names that client in `X-Kraft-Principal`, which is
  believed only under a valid node signature (the request is then the client's, not the node's).
  The signature is checked from the headers alone (it is addressed to this node and covers
  `SIGNED_HEADERS` and the body's digest) before any of the body is read; the body, read then,
  must match the digest;
- otherwise the listener authenticates the client (`SecurityService.authenticate`): `User:<name>`
  from SASL PLAIN/SCRAM credentials in `Authorization: Basic` or from the TLS client certificate
  (ssl.principal.mapping.rules), `User:ANONYMOUS` on a listener without authentication; wrong or
  missing credentials are 401 SASL_AUTHENTICATION_FAILED with one uniform message.
Node-only routes (`is_node_route`, from the access table of api/access.py: the controller's
inter-node API, ZooKeeper-mode pushes) answer every other caller 403 CLUSTER_AUTHORIZATION_FAILED,
logged without secrets and counted, before anything is read or changed (as the services refuse a
replica fetch from anyone but the replica's node). No request's body is read before its sender is authenticated. Refusals are logged
with the client's address as `client`, which the node's log filter (kraft/logging.py) rate-limits
per client.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import ssl
from collections.abc import Mapping
from typing import Awaitable, Callable, Protocol

from aiohttp import web

from kraft.api.access import is_node_route
from kraft.api.errors import KraftError
from kraft.api.wire import render_error
from kraft.security.authn import AuthenticationFailed
from kraft.security.node_auth import (
    CLIENT_HOST_HEADER, CLIENT_ID_HEADER, FORWARDED_HEADER, FORWARDED_PRINCIPAL_HEADER, HEADER as NODE_AUTH_HEADER,
    SIGNED_HEADERS,
)
from kraft.server.authorization import NODES_ONLY_MESSAGE
from kraft.server.request_context import ANONYMOUS, NODE_PRINCIPAL_TYPE

log = logging.getLogger("kraft.security")

AUTHENTICATION_FAILED_MESSAGE = "Authentication failed: invalid credentials"

# liveness and readiness probes answer without credentials (they reveal no data)
_UNAUTHENTICATED_PATHS = frozenset({"/v1/health"})


class SecurityService(Protocol):
    """Implemented by the node (kraft/security/service.py)."""

    def verify_node(self, header: str, method: str, path_qs: str, headers: Mapping[str, str | None]) -> tuple[int, str]:
        """(the id of the node that signed the request, the SHA-256 in hex its body must have),
        from the header, the request line and `headers` (the SIGNED_HEADERS as received) alone;
        raises on anything else (reason in the message)."""

    async def authenticate(self, request: web.Request) -> str:
        """The client's principal (`User:...`); raises AuthenticationFailed."""

    def refused(self, kind: str) -> None:
        """Count a refusal: `cluster_authorization` or `authentication`."""

    # this node calling another (forwarding): TLS when the cluster's listeners use it, signed
    peer_ssl: ssl.SSLContext | None

    def peer_url(self, host: str, port: int, path_qs: str) -> str: ...

    def peer_headers(self, method: str, path_qs: str, body: bytes | None, target: int,
                     trusted: Mapping[str, str]) -> dict[str, str]:
        """`trusted` (SIGNED_HEADERS names) and the node credential of a request to node `target`."""


SECURITY = web.AppKey("security", SecurityService)
PRINCIPAL = web.RequestKey("principal", str)  # e.g. "User:alice", "User:ANONYMOUS", "Node:2"
NODE_ID = web.RequestKey("node_id", int)  # set only when one of the cluster's nodes calls as itself
FORWARDED_BY = web.RequestKey("forwarded_by", int)  # the node that forwarded a client's request

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def principal_of(request: web.Request) -> str:
    """The authenticated principal; ANONYMOUS for an app served without a security service."""
    return request.get(PRINCIPAL, ANONYMOUS)


def peer(request: web.Request) -> str:
    return request.remote or "unknown"


def cluster_authorization_failed(request: web.Request, reason: str) -> KraftError:
    """Logs and counts the refusal; the caller raises (or renders) the error."""
    log.warning("refused %s %s from %s (principal %s): %s", request.method, request.path, peer(request),
                request.get(PRINCIPAL, "unauthenticated"), reason, extra={"client": peer(request)})
    if SECURITY in request.app:
        request.app[SECURITY].refused("cluster_authorization")
    return KraftError("CLUSTER_AUTHORIZATION_FAILED", NODES_ONLY_MESSAGE)


@web.middleware
async def security_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    service = request.app[SECURITY]
    header = request.headers.get(NODE_AUTH_HEADER)
    if header is not None:
        return await _as_node(request, handler, service, header)
    if is_node_route(request.method, request.path):
        return render_error(request, cluster_authorization_failed(request, "no node credential"))
    if request.path in _UNAUTHENTICATED_PATHS:
        request[PRINCIPAL] = ANONYMOUS
        return await handler(request)
    try:
        request[PRINCIPAL] = await service.authenticate(request)
    except AuthenticationFailed as e:
        log.warning("authentication failed for %s %s from %s: %s", request.method, request.path,
                    peer(request), e, extra={"client": peer(request)})
        service.refused("authentication")
        response = render_error(request, KraftError("SASL_AUTHENTICATION_FAILED", AUTHENTICATION_FAILED_MESSAGE))
        response.headers["WWW-Authenticate"] = 'Basic realm="kraft", charset="UTF-8"'
        return response
    return await handler(request)


async def _as_node(request: web.Request, handler: Handler, service: SecurityService,
                   header: str) -> web.StreamResponse:
    """A request carrying the node credential: verified before its body is read, then its body
    (aiohttp keeps it for the handler) checked against the signed digest."""
    trusted = {name: request.headers.get(name) for name in SIGNED_HEADERS}
    try:
        node_id, digest = service.verify_node(header, request.method, request.raw_path, trusted)
    except Exception as e:  # noqa: BLE001 - any bad credential is a refusal, never a 500
        return render_error(request, cluster_authorization_failed(request, str(e)))
    body = await request.read()  # bounded by client_max_size; a bad encoding is the client's 400
    if not hmac.compare_digest(hashlib.sha256(body).hexdigest(), digest):
        return render_error(request, cluster_authorization_failed(
            request, "the body is not the one the node credential signed (altered in flight)"))
    forwarded = trusted[FORWARDED_PRINCIPAL_HEADER]
    if forwarded:
        request[PRINCIPAL] = forwarded
        request[FORWARDED_BY] = node_id
    else:
        request[PRINCIPAL] = f"{NODE_PRINCIPAL_TYPE}:{node_id}"
        request[NODE_ID] = node_id
    return await handler(request)
