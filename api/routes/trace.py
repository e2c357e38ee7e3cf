"""`GET /v1/trace`: the stage events along records' way through this node (the leader's append,
follower fetches, the high watermark, produce answers), which `kraft-bench --trace` joins into a
per-stage latency breakdown. The node records them only when `stage.trace.events` is set.
DESCRIBE on the cluster, as `/metrics` (api/access.py)."""

from __future__ import annotations

from typing import Protocol

from aiohttp import web

from kraft.api.messages.node import TraceQuery, TraceResponse
from kraft.api.routes.services import NODE_INFO
from kraft.api.wire import read_query, render

routes = web.RouteTableDef()


class TraceSource(Protocol):
    enabled: bool

    def events(self, after: int = 0) -> list[tuple[int, int, str, str, int, int, int]]: ...


TRACE = web.AppKey("stage_trace", TraceSource)


@routes.get("/v1/trace")
async def trace(request: web.Request) -> web.Response:
    after = read_query(request, TraceQuery).after
    source = request.app.get(TRACE)
    events = [] if source is None else source.events(after)
    return render(request, TraceResponse(node_id=request.app[NODE_INFO].node_id,
                                         enabled=source is not None and source.enabled,
                                         next=events[-1][0] if events else after, events=events))
