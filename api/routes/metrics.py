"""`GET /metrics`: the node's Prometheus metrics (text format 0.0.4; OpenMetrics when Accept asks).

The metrics themselves are the node's (`kraft/metrics.py`, the services' `MetricsService`); the
request-metrics middleware (`api/server.py`) reports each answered request to it with its
RequestContext, except the routes in `UNCOUNTED`. A replication channel counts each replica fetch
it carries as its own FetchFollower request (api/routes/replication_channel.py), not the channel.
"""

from __future__ import annotations

import asyncio

from aiohttp import web
from prometheus_client.exposition import choose_encoder

from kraft.api.routes.services import services_of

# Not Kafka APIs: scrapes and probes must not inflate the request rates; a replication channel's
# handshake is not a request either (its fetches are)
UNCOUNTED = frozenset({"/metrics", "/v1/health", "/v1/openapi.json", "/docs", "/docs/{asset}", "/v1/trace",
                       "/v1/replication"})

routes = web.RouteTableDef()


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    service = services_of(request).metrics
    if service is None:
        raise web.HTTPNotFound()
    await service.refresh()
    encode, content_type = choose_encoder(request.headers.get("Accept", ""))
    # Collecting and encoding is ∝ the series (per partition, with topic labels): a thread, so
    # a large scrape never stalls the loop. Collectors read snapshots taken by `refresh`,
    # immutable images, or prometheus_client's own thread-safe metrics.
    body = await asyncio.to_thread(encode, service.registry)
    response = web.Response(body=body, headers={"Content-Type": content_type})
    response.enable_compression()  # honours Accept-Encoding (Prometheus asks for gzip)
    return response
