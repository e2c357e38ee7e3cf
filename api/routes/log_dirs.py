"""`GET /v1/log-dirs`: this broker's log directories and the partitions each holds (Kafka's
DescribeLogDirs, what `kraft log-dirs --describe` asks every broker), from the replica admin
service (`kraft/server/replica_admin.py`, Describe on the cluster)."""

from __future__ import annotations

from aiohttp import web

from kraft.api.messages.node import LogDirDescription, LogDirPartition, LogDirsQuery, LogDirsResponse
from kraft.api.routes.services import context_of, services_of
from kraft.api.wire import read_query, render

routes = web.RouteTableDef()


@routes.get("/v1/log-dirs")
async def describe_log_dirs(request: web.Request) -> web.Response:
    query = read_query(request, LogDirsQuery)
    wanted = None if query.topics is None else dict.fromkeys(t for t in query.topics.split(",") if t)
    services = services_of(request)
    dirs = await services.replicas.describe_log_dirs(context_of(request), wanted)
    return render(request, LogDirsResponse(broker=services.node.node_id, log_dirs=[
        LogDirDescription(log_dir=d.path, error=None if d.error is None else d.error.error_code,
                          partitions=[LogDirPartition(topic=p.topic, partition=p.partition, size=p.size,
                                                      offset_lag=p.offset_lag) for p in d.partitions])
        for d in dirs]))
