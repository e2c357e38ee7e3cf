"""The node's HTTP application: routes, the error middleware, and service injection via AppKeys.

`build_app` takes the services (implemented by `kraft/`) and returns an aiohttp Application. The
middleware turns every failure into the error body of `api/errors.py`: KraftErrors and exceptions
carrying a Kafka `error_code` keep their name, aiohttp's own HTTP errors map to NOT_FOUND /
METHOD_NOT_ALLOWED / MESSAGE_TOO_LARGE / INVALID_REQUEST, a body that cannot be read as sent (not
the gzip its Content-Encoding says) is INVALID_REQUEST logged in one line, and anything else is a
logged 500 UNKNOWN_SERVER_ERROR: a bad request never takes the node down. A body left unread (a
refused request's) is never drained: the answer closes the connection (`SERVER_OPTIONS`). With a
metrics service, the request-metrics middleware (inside the error one, so it sees the error) counts
every answer.
Innermost, the authorization middleware applies each route's rule of api/access.py.
"""

from __future__ import annotations

import logging
import time
from typing import AsyncIterator, Awaitable, Callable, Iterable

from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError

from kraft.api.access_middleware import authorization_middleware
from kraft.api.errors import KraftError, from_exception, invalid_request
from kraft.api.routes import (
    acls, batch, controller, delete_records, forward, groups, health, metadata, metrics, openapi, producers, records,
    replication_channel, topics, trace, txn_markers, users,
)
from kraft.api.routes import transactions as transactions_routes
from kraft.api.routes.services import (
    ADMIN, METADATA, NODE_INFO, REPLICAS, AdminService, MetadataView, NodeInfo, ReplicaService,
)
from kraft.api.security import SECURITY, SecurityService, peer, security_middleware
from kraft.api.throttle import request_quota_middleware
from kraft.api.wire import parser_error_text, render_error

log = logging.getLogger("kraft.api")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_HTTP_ERRORS = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "MESSAGE_TOO_LARGE",
                415: "UNSUPPORTED_MEDIA_TYPE"}

# aiohttp's server options for the node's runner: after answering a request whose body was not
# read to its end (refused before it was read, or unreadable), close the connection rather than
# read and discard the rest, which aiohttp does for up to 10 s by default, inflating a compressed
# body as it goes: a refused sender costs the node nothing more than its headers
SERVER_OPTIONS = {"lingering_time": 0}


def _from_http_exception(exc: web.HTTPException) -> KraftError:
    if exc.status == 404:
        return KraftError("NOT_FOUND", "no such route")
    if exc.status == 405:
        allowed = sorted(getattr(exc, "allowed_methods", ()) or ())
        return KraftError("METHOD_NOT_ALLOWED", f"method not allowed; use {', '.join(allowed)}")
    return KraftError(_HTTP_ERRORS.get(exc.status, "INVALID_REQUEST"), exc.text or exc.reason)


def _error_of(exc: Exception) -> KraftError:
    if isinstance(exc, RequestPayloadError):  # the client's body, not the node, is at fault
        return invalid_request(f"the request body cannot be read: {parser_error_text(exc)}")
    return from_exception(exc)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        response = render_error(request, _from_http_exception(exc))
        if "Allow" in exc.headers:  # RFC 9110: a 405 lists the methods the resource has
            response.headers["Allow"] = exc.headers["Allow"]
    except Exception as exc:  # the node answers every request, whatever went wrong
        error = _error_of(exc)
        if isinstance(exc, RequestPayloadError):
            log.warning("malformed request from %s: %s %s: %s", peer(request), request.method, request.path,
                        error.message, extra={"client": peer(request)})
        elif error.error_code == "UNKNOWN_SERVER_ERROR":
            log.exception("unexpected error serving %s %s", request.method, request.path)
        response = render_error(request, error)
    if not request.content.is_eof():
        response.force_close()  # tells the client, as SERVER_OPTIONS closes it: the body's rest is not read
    return response


@web.middleware
async def request_metrics_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    name = metrics.request_name(request)
    if name is None:
        return await handler(request)
    started = time.monotonic()
    error = "NONE"
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status >= 400:
            error = _from_http_exception(exc).error_code
        raise
    except Exception as exc:
        error = _error_of(exc).error_code
        raise
    finally:
        name = metrics.request_name(request) or name  # the handler may have named it precisely
        request.app[metrics.METRICS].observe_request(name, error, time.monotonic() - started)


def build_app(
    node_info: NodeInfo,
    metadata_view: MetadataView,
    admin: AdminService,
    replicas: ReplicaService,
    cleanup: Callable[[web.Application], AsyncIterator[None]] | None = None,
    extra_routes: Iterable[web.RouteTableDef] = (),
    group_service: groups.GroupService | None = None,
    metrics_service: metrics.MetricsService | None = None,
    producer_id_service: producers.ProducerIdService | None = None,
    security: SecurityService | None = None,
    transactions: transactions_routes.TransactionService | None = None,
) -> web.Application:
    """The application; `cleanup` (an aiohttp cleanup_ctx generator) ties the node's lifecycle;
    `extra_routes` are other components' routes (each must be in api/openapi.py's ROUTES and in
    api/access.py's ACCESS). The group
    routes are always served; without `group_service` they answer COORDINATOR_NOT_AVAILABLE.
    With `metrics_service`, `GET /metrics` is served and every request is counted. Without
    `producer_id_service`, `POST /v1/producers/init` serves transactional ids only. With
    `security` (a node always has one), every request is authenticated and the control plane
    serves the cluster's nodes only (api/security.py); without it, routes are open (route tests)."""
    middlewares = [error_middleware]
    if security is not None:
        middlewares.append(security_middleware)
    middlewares.append(request_quota_middleware)  # after authentication: it charges the principal
    if metrics_service is not None:
        middlewares.append(request_metrics_middleware)
    middlewares.append(authorization_middleware)  # innermost: request metrics count its refusals
    app = web.Application(middlewares=middlewares, client_max_size=node_info.max_request_bytes)
    app[NODE_INFO] = node_info
    app[METADATA] = metadata_view
    app[ADMIN] = admin
    app[REPLICAS] = replicas
    if security is not None:
        app[SECURITY] = security
    if group_service is not None:
        app[groups.GROUPS] = group_service
    if metrics_service is not None:
        app[metrics.METRICS] = metrics_service
        app.router.add_routes(metrics.routes)
    if producer_id_service is not None:
        app[producers.PRODUCER_IDS] = producer_id_service
    if transactions is not None:
        app[transactions_routes.TRANSACTIONS] = transactions
    for module in (health, metadata, topics, records, delete_records, batch, groups, producers, txn_markers,
                   transactions_routes, controller, acls, users, openapi, trace):
        app.router.add_routes(module.routes)
    replication_channel.install(app)
    for table in extra_routes:
        app.router.add_routes(table)
    app.cleanup_ctx.append(forward.session_ctx)
    if cleanup is not None:
        app.cleanup_ctx.append(cleanup)
    return app
