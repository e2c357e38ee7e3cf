"""Who is calling: the security middleware, the principal it sets on every request, and the rule
that the control plane belongs to the cluster's own nodes.

Every request gets `request[PRINCIPAL]`, Kafka's principal string, before any route runs:
- a request signed with the node credential (`X-Kraft-Node-Auth`, kraft/security/node_auth.py)
  is `Node:<id>` and `request[NODE_ID]` is set: a principal type no user credential can take;
  a node forwarding a client's request names that client in `X-Kraft-Principal`, which is
  believed only under a valid node signature (the request is then the client's, not the node's);
- otherwise the listener authenticates the client (`SecurityService.authenticate`): `User:<name>`
  from SASL PLAIN/SCRAM credentials in `Authorization: Basic` or from the TLS client certificate
  (ssl.principal.mapping.rules), `User:ANONYMOUS` on a listener without authentication; wrong or
  missing credentials are 401 SASL_AUTHENTICATION_FAILED with one uniform message.
Node-only routes (`is_node_route`, from the access table of api/access.py: the controller's
inter-node API, ZooKeeper-mode pushes) and replica fetches (`require_node`) answer every other
caller 403 CLUSTER_AUTHORIZATION_FAILED,
logged without secrets and counted, before anything is read or changed.
"""

from __future__ import annotations

import logging
import ssl
from typing import Awaitable, Callable, Protocol

from aiohttp import web

from kraft.api.access import is_node_route
from kraft.api.errors import KraftError
from kraft.api.wire import render_error

log = logging.getLogger("kraft.security")

NODE_AUTH_HEADER = "X-Kraft-Node-Auth"
FORWARDED_PRINCIPAL_HEADER = "X-Kraft-Principal"
ANONYMOUS = "User:ANONYMOUS"
NODE_PRINCIPAL_TYPE = "Node"
AUTHENTICATION_FAILED_MESSAGE = "Authentication failed: invalid credentials"

# liveness and readiness probes answer without credentials (they reveal no data)
_UNAUTHENTICATED_PATHS = frozenset({"/v1/health"})


class AuthenticationFailed(Exception):
    """Wrong, missing or unusable client credentials (the reason is for the log only)."""


class SecurityService(Protocol):
    """Implemented by the node (kraft/security/service.py)."""

    def verify_node(self, header: str, method: str, path_qs: str, body: bytes) -> int:
        """The id of the node that signed the request; raises on anything else (reason in the message)."""

    async def authenticate(self, request: web.Request) -> str:
        """The client's principal (`User:...`); raises AuthenticationFailed."""

    def refused(self, kind: str) -> None:
        """Count a refusal: `cluster_authorization` or `authentication`."""

    # this node calling another (forwarding): TLS when the cluster's listeners use it, signed
    peer_ssl: ssl.SSLContext | None

    def peer_url(self, host: str, port: int, path_qs: str) -> str: ...

    def peer_headers(self, method: str, path_qs: str, body: bytes | None) -> dict[str, str]: ...


SECURITY = web.AppKey("security", SecurityService)
PRINCIPAL = web.RequestKey("principal", str)  # e.g. "User:alice", "User:ANONYMOUS", "Node:2"
NODE_ID = web.RequestKey("node_id", int)  # set only when one of the cluster's nodes calls as itself
FORWARDED_BY = web.RequestKey("forwarded_by", int)  # the node that forwarded a client's request

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def principal_of(request: web.Request) -> str:
    """The authenticated principal; ANONYMOUS for an app served without a security service."""
    return request.get(PRINCIPAL, ANONYMOUS)


def _peer(request: web.Request) -> str:
    return request.remote or "unknown"


def cluster_authorization_failed(request: web.Request, reason: str) -> KraftError:
    """Logs and counts the refusal; the caller raises (or renders) the error."""
    log.warning("refused %s %s from %s (principal %s): %s", request.method, request.path, _peer(request),
                request.get(PRINCIPAL, "unauthenticated"), reason)
    if SECURITY in request.app:
        request.app[SECURITY].refused("cluster_authorization")
    return KraftError("CLUSTER_AUTHORIZATION_FAILED",
                      "Cluster authorization failed: this request is served to the cluster's own nodes only")


def require_node(request: web.Request, as_node_id: int | None = None) -> None:
    """403 unless one of the cluster's nodes calls as itself (and, with `as_node_id`, is that node).
    A no-op in an app served without a security service (route unit tests)."""
    if SECURITY not in request.app:
        return
    node_id = request.get(NODE_ID)
    if node_id is None:
        raise cluster_authorization_failed(request, "no node credential")
    if as_node_id is not None and node_id != as_node_id:
        raise cluster_authorization_failed(request, f"node {node_id} acting as node {as_node_id}")


@web.middleware
async def security_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    service = request.app[SECURITY]
    header = request.headers.get(NODE_AUTH_HEADER)
    if header is not None:
        body = await request.read()  # aiohttp keeps it for the handler
        try:
            node_id = service.verify_node(header, request.method, request.raw_path, body)
        except Exception as e:  # noqa: BLE001 - any bad credential is a refusal, never a 500
            return render_error(request, cluster_authorization_failed(request, str(e)))
        forwarded = request.headers.get(FORWARDED_PRINCIPAL_HEADER)
        if forwarded:
            request[PRINCIPAL] = forwarded
            request[FORWARDED_BY] = node_id
        else:
            request[PRINCIPAL] = f"{NODE_PRINCIPAL_TYPE}:{node_id}"
            request[NODE_ID] = node_id
        return await handler(request)
    if is_node_route(request.method, request.path):
        return render_error(request, cluster_authorization_failed(request, "no node credential"))
    if request.path in _UNAUTHENTICATED_PATHS:
        request[PRINCIPAL] = ANONYMOUS
        return await handler(request)
    try:
        request[PRINCIPAL] = await service.authenticate(request)
    except AuthenticationFailed as e:
        log.warning("authentication failed for %s %s from %s: %s", request.method, request.path,
                    _peer(request), e)
        service.refused("authentication")
        response = render_error(request, KraftError("SASL_AUTHENTICATION_FAILED", AUTHENTICATION_FAILED_MESSAGE))
        response.headers["WWW-Authenticate"] = 'Basic realm="kraft", charset="UTF-8"'
        return response
    return await handler(request)
