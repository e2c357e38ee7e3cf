"""How the HTTP routes reach the node: its services (kraft/server, one `BrokerServices` per app)
and each request's RequestContext, built by `api.access_middleware.request_context`."""

from __future__ import annotations

from aiohttp import web

from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

SERVICES = web.AppKey("services", BrokerServices)
CONTEXT = web.RequestKey("request_context", RequestContext)


def services_of(request: web.Request) -> BrokerServices:
    return request.app[SERVICES]


def context_of(request: web.Request) -> RequestContext:
    return request[CONTEXT]
