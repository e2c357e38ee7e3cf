"""`GET /v1/trace`: the stage events along records' way through this node (the leader's append,
follower fetches, the high watermark, produce answers), which `kraft-bench --trace` joins into a
per-stage latency breakdown. The node records them only when `stage.trace.events` is set.
DESCRIBE on the cluster, as `/metrics` (api/access.py)."""

from __future__ import annotations

from aiohttp import web

from kraft.api.messages.node import TraceQuery, TraceResponse
from kraft.api.routes.services import services_of
from kraft.api.wire import read_query, render

routes = web.RouteTableDef()


@routes.get("/v1/trace")
async def trace(request: web.Request) -> web.Response:
    after = read_query(request, TraceQuery).after
    services = services_of(request)
    source = services.trace
    events = [] if source is None else source.events(after)
    return render(request, TraceResponse(node_id=services.node.node_id, enabled=source is not None and source.enabled,
                                         next=events[-1][0] if events else after, events=events))
