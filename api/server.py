"""The node's HTTP listener: the application (routes, the error, security and request
middlewares) over the node's services, and `HttpListener`, the `Listener`
(kraft/server/listener.py) that serves it on the client port.

`build_app` takes the services (kraft/server) and returns an aiohttp Application. The error
middleware turns every failure into the error body of `api/errors.py`: KraftErrors and exceptions
carrying a Kafka `error_code` keep their name, aiohttp's own HTTP errors map to NOT_FOUND /
METHOD_NOT_ALLOWED / MESSAGE_TOO_LARGE / INVALID_REQUEST, a body that cannot be read as sent (not
the gzip its Content-Encoding says) is INVALID_REQUEST logged in one line, and anything else is a
logged 500 UNKNOWN_SERVER_ERROR: a bad request never takes the node down. A body left unread (a
refused request's) is never drained: the answer closes the connection (`SERVER_OPTIONS`).
After authentication (api/security.py), one request middleware does, in this order: the
request's context (api/access_middleware.py), its request quota (api/throttle.py), its request
metrics (inside the error middleware, so they see the error: every answer is counted under its
RequestContext) and, last, each route's rules of api/access.py before its handler runs. It was
four middlewares; each layer cost every request a coroutine and a call, and every resumption
of the handler a pass through it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import Any, Awaitable, Callable, Iterable

from aiohttp import web
from aiohttp.web_protocol import RequestHandler, RequestPayloadError

from kraft.api.access_middleware import LISTENER, authorized, request_context
from kraft.api.errors import KraftError, from_exception, invalid_request
from kraft.api.routes import (
    acls, batch, controller, delete_records, forward, groups, health, log_dirs, metadata, metrics, openapi, producers,
    records, replication_channel, topics, trace, txn_markers, users,
)
from kraft.api.routes import transactions as transactions_routes
from kraft.api.routes.metrics import UNCOUNTED
from kraft.api.routes.services import CONTEXT, SERVICES, context_of, services_of
from kraft.api.security import SECURITY, peer, security_middleware
from kraft.api.throttle import throttled
from kraft.api.wire import render_error
from kraft.kafka.client_port import ClientPort, ClientSite
from kraft.kafka.node_listeners import KafkaListeners
from kraft.logging import parser_error_text
from kraft.server.services import BrokerServices

log = logging.getLogger("kraft.api")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_HTTP_ERRORS = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "MESSAGE_TOO_LARGE",
                415: "UNSUPPORTED_MEDIA_TYPE"}

# aiohttp's server options for the node's runner: after answering a request whose body was not
# read to its end (refused before it was read, or unreadable), close the connection rather than
# read and discard the rest, which aiohttp does for up to 10 s by default, inflating a compressed
# body as it goes: a refused sender costs the node nothing more than its headers
SERVER_OPTIONS: dict[str, Any] = {"lingering_time": 0, "access_log": None}


class HttpProtocol(RequestHandler):
    """aiohttp's request handler, answering what its parser refuses before any route sees it (a
    request line or header over 8190 bytes, a malformed request line) as every other refusal is
    answered: Kafka's INVALID_REQUEST as JSON, not aiohttp's text/plain. aiohttp still logs it
    (kraft/logging.py shortens that line to what was refused, without the quoted bytes)."""

    def handle_error(self, request: Any, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        super().handle_error(request, status, exc, message)  # logs; raises once a response began
        if status >= 500:
            error = KraftError("UNKNOWN_SERVER_ERROR", "the node failed to serve the request; see its log")
        else:
            why = parser_error_text(exc) if exc is not None else (message or "malformed HTTP request")
            error = invalid_request(f"the HTTP request cannot be parsed: {why}")
        response = render_error(None, error)
        response.set_status(status)
        response.force_close()
        return response


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
async def request_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Context, request quota, request metrics and authorization, in that order."""
    request[CONTEXT] = ctx = request_context(request)
    quotas = services_of(request).quotas
    if quotas.applies(ctx):
        return await throttled(ctx, quotas, _counted(request, handler))
    return await _counted(request, handler)


async def _counted(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The authorized answer, counted in the request metrics (its refusals too)."""
    resource = request.match_info.route.resource
    if resource is not None and resource.canonical in UNCOUNTED:
        return await authorized(request, handler)
    started = time.monotonic()
    error = "NONE"
    try:
        return await authorized(request, handler)
    except web.HTTPException as exc:
        if exc.status >= 400:
            error = _from_http_exception(exc).error_code
        raise
    except Exception as exc:
        error = _error_of(exc).error_code
        raise
    finally:
        metrics = services_of(request).metrics
        if metrics is not None:
            metrics.observe_request(context_of(request), error, time.monotonic() - started)


def build_app(services: BrokerServices, listener_name: str = "CLIENT", security_protocol: str = "PLAINTEXT",
              extra_routes: Iterable[web.RouteTableDef] = ()) -> web.Application:
    """The application over `services`, served by the listener `listener_name`;
    `extra_routes` are other components' routes (each must be in api/openapi.py's ROUTES and in
    api/access.py's ACCESS). With the services' node security (a node always has it), every
    request is authenticated and the control plane serves the cluster's nodes only
    (api/security.py); without it, routes are open (route tests)."""
    middlewares = [error_middleware]
    if services.node_security is not None:
        middlewares.append(security_middleware)
    middlewares.append(request_middleware)  # after authentication: the context names the principal
    app = web.Application(middlewares=middlewares, client_max_size=services.node.max_request_bytes)
    app[SERVICES] = services
    app[LISTENER] = (listener_name, security_protocol)
    if services.node_security is not None:
        app[SECURITY] = services.node_security
    for module in (health, metrics, metadata, topics, records, delete_records, batch, groups, producers, txn_markers,
                   transactions_routes, controller, acls, users, openapi, trace, log_dirs):
        app.router.add_routes(module.routes)
    replication_channel.install(app)
    if services.zookeeper is not None:
        app.router.add_routes(services.zookeeper.routes())
    for table in extra_routes:
        app.router.add_routes(table)
    app.cleanup_ctx.append(forward.session_ctx)
    return app


class HttpListener:
    """The HTTP API on `host:port` (port 0: any free port), with TLS when the node's services
    carry a server context. The port is a client port (kraft/kafka/client_port.py): `kafka` (the
    node's Kafka listeners) serves the Kafka protocol beside HTTP on it, each connection told
    apart by its first bytes, and counts its connections against the node's connection limits."""

    def __init__(self, host: str, port: int, kafka: KafkaListeners, name: str = "CLIENT",
                 security_protocol: str = "PLAINTEXT") -> None:
        self.host = host
        self.port = port
        self.kafka = kafka
        self.name = name
        self.security_protocol = security_protocol
        self._socket: socket.socket | None = None
        self._runner: web.AppRunner | None = None
        self._client_port: ClientPort | None = None

    def bind(self) -> tuple[str, int]:
        self._socket = socket.create_server((self.host, self.port), backlog=1024)
        self.port = self._socket.getsockname()[1]
        return self.host, self.port

    def endpoints(self, advertised: tuple[str, int]) -> list[dict[str, Any]]:
        return []  # the client port's Kafka endpoint is the Kafka listeners' to register

    async def start(self, services: BrokerServices) -> None:
        assert self._socket is not None, "bind() first"
        app = build_app(services, self.name, self.security_protocol)
        self._runner = web.AppRunner(app, handle_signals=False, **SERVER_OPTIONS)
        await self._runner.setup()
        server, loop = self._runner.server, asyncio.get_running_loop()
        assert server is not None
        self._client_port = self.kafka.client_port(lambda: HttpProtocol(server, loop=loop, **SERVER_OPTIONS), services)
        await ClientSite(self._runner, self._socket, self._client_port, ssl_context=services.tls).start()

    async def stop(self) -> None:
        """Stops accepting, lets in-flight requests finish (up to aiohttp's shutdown timeout; the
        client port's Kafka connections drain too)."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        elif self._socket is not None:  # bound, never started
            self._socket.close()
        self._socket = None

    def open_connections(self) -> int:
        """Connections of the client port, HTTP and Kafka."""
        return 0 if self._client_port is None else self._client_port.connections
