"""The authorization middleware: every request meets its route's entry of the access table
(`api/access.py`) before the handler runs.

- A request only the active controller answers (`Access.controller`) that reaches another node is
  forwarded there whole, with the client's principal and address (KIP-590): the controller
  authorizes the client, not this node.
- Otherwise the rules whose resource is known from the route alone (the cluster, a path
  parameter, the cluster's own nodes) are applied; a refusal is 403 `*_AUTHORIZATION_FAILED`.
- A request that matched no route goes on to be answered 404/405; a served route missing from
  the table is refused (`authz.entry_of`).
"""

from __future__ import annotations

from typing import Awaitable, Callable

from aiohttp import web

from kraft.api import authz
from kraft.api.routes.forward import proxy, remote_controller

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def authorization_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    entry = authz.entry_of(request)
    if entry is not None:
        if entry.controller and (controller := remote_controller(request)) is not None:
            return await proxy(request, controller)
        authz.authorize_route(request, entry)
    return await handler(request)
