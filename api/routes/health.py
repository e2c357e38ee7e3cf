"""`GET /v1/health`: liveness of this node, the roles it plays, the optional features it supports
(`FEATURES`, which clients check before relying on one), and (when the node provides it: the
services' `status`) its controller and broker state and whether it is ready to serve."""

from __future__ import annotations

from aiohttp import web

from kraft.api.messages.node import HealthQuery
from kraft.api.routes.services import services_of
from kraft.api.wire import read_query, render

routes = web.RouteTableDef()

FEATURES = ("idempotence",)  # idempotent produce: producer ids, sequences, duplicate detection


@routes.get("/v1/health")
async def health(request: web.Request) -> web.Response:
    """Always 200 while the node serves (liveness); with `?ready=true`, 503 and status
    "not_ready" until `ready` (a readiness probe: kraft/readiness.py says what ready means)."""
    probe = read_query(request, HealthQuery).ready
    services = services_of(request)
    info, status = services.node, services.status
    extra = {"ready": True, **(status() if status is not None else {})}
    unready = probe and not extra["ready"]
    return render(request, {"status": "not_ready" if unready else "ok", "node_id": info.node_id,
                            "roles": list(info.roles), "features": list(FEATURES), **extra},
                  503 if unready else 200)
