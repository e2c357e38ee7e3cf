"""The HTTP listener's request context and authorization, two steps of the request layer
(`request_middleware`, api/server.py).

`request_context` (after authentication) builds the request's RequestContext: the principal
and node the security middleware found, the client's address (through a forwarding node, the
client's, believed only under the node signature), the listener, Kafka's client id (the
`X-Kraft-Client-Id` header) and the Kafka API the route plays (api/access.py; a route playing
none is named by its path, a request that matched no route `Unknown`).

`authorized` (last, before the handler) meets every request with its route's entry of the access
table before the handler runs:
- a request only the active controller answers that reaches another node is forwarded there
  whole, with the client's principal and address (KIP-590): the controller authorizes the
  client, not this node;
- otherwise the rules whose resource is known from the route alone (the cluster, a path
  parameter, the cluster's own nodes) are applied by the services' authorization, so a refused
  request's body is never read; a refusal is 403 `*_AUTHORIZATION_FAILED`;
- a request that matched no route goes on to be answered 404/405; a served route missing from
  the table is refused.
"""

from __future__ import annotations

import logging
from typing import Awaitable, Callable

from aiohttp import web

from kraft.api.access import RouteAccess, access_of, up_front
from kraft.api.routes.forward import proxy, remote_controller
from kraft.api.routes.services import CONTEXT, services_of
from kraft.api.security import CLIENT_HOST_HEADER, CLIENT_ID_HEADER, FORWARDED_BY, NODE_ID, principal_of
from kraft.errors import KraftError
from kraft.server.access import NODES
from kraft.server.request_context import MAX_CLIENT_ID_CHARS, RequestContext

log = logging.getLogger("kraft.authorizer")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
HTTP_API_VERSION = 1  # the HTTP API's version (/v1), the RequestContext's api_version
UNKNOWN_REQUEST = "Unknown"  # no route matched (404, 405): one bounded name
LISTENER = web.AppKey("listener", tuple)  # (listener name, security protocol) of the app's listener


def entry_of(request: web.Request) -> RouteAccess | None:
    """The access table's entry of the route `request` matched; None when it matched none (404,
    405: answered as such). A served route without an entry is refused (fail closed)."""
    if request.match_info.http_exception is not None:
        return None
    resource = request.match_info.route.resource
    entry = None if resource is None else access_of(request.method, resource.canonical)
    if entry is None:
        log.error("no authorization rule for %s %s: refused (add it to api/access.py)", request.method,
                  request.path)
        raise KraftError("CLUSTER_AUTHORIZATION_FAILED", "this route has no authorization rule")
    return entry


def _api_name(request: web.Request) -> str:
    if request.match_info.http_exception is not None or request.match_info.route.resource is None:
        return UNKNOWN_REQUEST
    route = request.match_info.route.resource.canonical
    entry = access_of(request.method, route)
    return entry.api if entry is not None and entry.api else route


def client_host(request: web.Request) -> str:
    """The address of the client the request is from (through a forwarding node, the client's)."""
    if FORWARDED_BY in request:
        forwarded = request.headers.get(CLIENT_HOST_HEADER)
        if forwarded:
            return forwarded
    return request.remote or ""


def request_context(request: web.Request) -> RequestContext:
    """The context of an authenticated request."""
    listener_name, protocol = request.app[LISTENER]
    return RequestContext(
        principal=principal_of(request), client_address=client_host(request), listener_name=listener_name,
        security_protocol=protocol, client_id=request.headers.get(CLIENT_ID_HEADER, "")[:MAX_CLIENT_ID_CHARS],
        api=_api_name(request), api_version=HTTP_API_VERSION, node_id=request.get(NODE_ID),
        forwarded_by=request.get(FORWARDED_BY))


def authorized(request: web.Request, handler: Handler) -> Awaitable[web.StreamResponse]:
    """The answer to `request` (with its context set): its handler's once the route's up-front
    rules pass (a refusal raises), or the active controller's through a forward. Not a
    coroutine itself: the caller awaits the handler's directly."""
    entry = entry_of(request)
    if entry is not None:
        if entry.controller and (controller := remote_controller(request)) is not None:
            return proxy(request, controller)
        ctx, authorization = request[CONTEXT], services_of(request).authorization
        for rule, parameter in up_front(request.match_info.route.resource.canonical, entry):
            if rule.source == NODES:
                authorization.require_node(ctx)
            elif parameter is None:
                authorization.require(ctx, rule)
            else:
                authorization.require(ctx, rule, (request.match_info[parameter],))
    return handler(request)
