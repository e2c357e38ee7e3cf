"""`GET /v1/log-dirs`: this broker's log directories and the partitions each holds (Kafka's
DescribeLogDirs, what `kraft log-dirs --describe` asks every broker). DESCRIBE on the cluster, as
in Kafka (api/access.py)."""

from __future__ import annotations

from aiohttp import web

from kraft.api.messages.node import LogDirsQuery, LogDirsResponse
from kraft.api.routes.services import NODE_INFO, REPLICAS
from kraft.api.wire import read_query, render

routes = web.RouteTableDef()


@routes.get("/v1/log-dirs")
async def describe_log_dirs(request: web.Request) -> web.Response:
    query = read_query(request, LogDirsQuery)
    topics = None if query.topics is None else {t for t in query.topics.split(",") if t}
    dirs = request.app[REPLICAS].describe_log_dirs(topics)
    return render(request, LogDirsResponse(broker=request.app[NODE_INFO].node_id, log_dirs=dirs))
