"""`GET /v1/health`: liveness of this node and the roles it plays."""

from __future__ import annotations

from aiohttp import web

from api.routes.services import NODE_INFO
from api.wire import render

routes = web.RouteTableDef()


@routes.get("/v1/health")
async def health(request: web.Request) -> web.Response:
    info = request.app[NODE_INFO]
    return render(request, {"status": "ok", "node_id": info.node_id, "roles": list(info.roles)})
