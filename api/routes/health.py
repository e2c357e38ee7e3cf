"""`GET /v1/health`: liveness of this node, the roles it plays, the optional features it supports
(`FEATURES`, which clients check before relying on one), and (when the node provides it through
`NODE_STATUS`) its controller and broker state."""

from __future__ import annotations

from typing import Any, Callable

from aiohttp import web

from api.routes.services import NODE_INFO
from api.wire import render

routes = web.RouteTableDef()

NODE_STATUS = web.AppKey("node_status", Callable[[], dict[str, Any]])
FEATURES = ("idempotence",)  # idempotent produce: producer ids, sequences, duplicate detection


@routes.get("/v1/health")
async def health(request: web.Request) -> web.Response:
    info = request.app[NODE_INFO]
    status = request.app.get(NODE_STATUS)
    extra = status() if status is not None else {}
    return render(request, {"status": "ok", "node_id": info.node_id, "roles": list(info.roles),
                            "features": list(FEATURES), **extra})
