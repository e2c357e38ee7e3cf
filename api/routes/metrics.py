"""`GET /metrics`: the node's Prometheus metrics (text format 0.0.4; OpenMetrics when Accept asks),
and the names of the Kafka APIs the request metrics count HTTP routes as.

The metrics themselves are defined by the node (`kraft/metrics.py`) and injected as a
`MetricsService`; the request-metrics middleware (`api/server.py`) reports each answered request
to it under `request_name(request)`.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from aiohttp import web
from prometheus_client.exposition import choose_encoder


class MetricsService(Protocol):
    registry: Any  # a prometheus_client CollectorRegistry

    async def refresh(self) -> None:
        """Bring the snapshots that need awaits up to date before a scrape."""

    def observe_request(self, request: str, error: str, seconds: float) -> None: ...


METRICS = web.AppKey("metrics", MetricsService)
FETCH_CONSUMER = "FetchConsumer"
FETCH_FOLLOWER = "FetchFollower"

# (method, route) -> the Kafka API it plays, so request metrics read like Kafka's
# kafka.network:type=RequestMetrics,request=... Routes not listed count under their path.
KAFKA_REQUESTS: dict[tuple[str, str], str] = {
    ("POST", "/v1/produce"): "Produce",
    ("POST", "/v1/topics/{topic}/records"): "Produce",
    ("POST", "/v1/fetch"): FETCH_CONSUMER,
    ("GET", "/v1/topics/{topic}/partitions/{partition}/records"): FETCH_CONSUMER,
    ("GET", "/v1/topics/{topic}/partitions/{partition}/offsets"): "ListOffsets",
    ("POST", "/v1/delete-records"): "DeleteRecords",
    ("GET", "/v1/metadata"): "Metadata",
    ("GET", "/v1/topics"): "Metadata",
    ("GET", "/v1/topics/{topic}"): "Metadata",
    ("POST", "/v1/topics"): "CreateTopics",
    ("DELETE", "/v1/topics/{topic}"): "DeleteTopics",
    ("POST", "/v1/topics/{topic}/partitions"): "CreatePartitions",
    ("GET", "/v1/topics/{topic}/configs"): "DescribeConfigs",
    ("PATCH", "/v1/topics/{topic}/configs"): "IncrementalAlterConfigs",
    ("GET", "/v1/groups"): "ListGroups",
    ("GET", "/v1/groups/{group}"): "ConsumerGroupDescribe",
    ("DELETE", "/v1/groups/{group}"): "DeleteGroups",
    ("GET", "/v1/groups/{group}/coordinator"): "FindCoordinator",
    ("POST", "/v1/groups/{group}/heartbeat"): "ConsumerGroupHeartbeat",
    ("POST", "/v1/groups/{group}/offsets"): "OffsetCommit",
    ("GET", "/v1/groups/{group}/offsets"): "OffsetFetch",
    ("POST", "/v1/groups/{group}/offsets/reset"): "OffsetCommit",
    ("POST", "/v1/groups/{group}/offsets/delete"): "OffsetDelete",
    ("POST", "/v1/groups/{group}/txn-offsets"): "TxnOffsetCommit",
    ("GET", "/v1/transactions/{transactional_id}/coordinator"): "FindCoordinator",
    ("POST", "/v1/transactions/{transactional_id}/init"): "InitProducerId",
    ("POST", "/v1/transactions/{transactional_id}/partitions"): "AddPartitionsToTxn",
    ("POST", "/v1/transactions/{transactional_id}/offsets"): "AddOffsetsToTxn",
    ("POST", "/v1/transactions/{transactional_id}/end"): "EndTxn",
    ("GET", "/v1/transactions/{transactional_id}"): "DescribeTransactions",
    ("GET", "/v1/transactions"): "ListTransactions",
    ("GET", "/v1/topics/{topic}/partitions/{partition}/producers"): "DescribeProducers",
    ("POST", "/v1/partitions/txn-markers"): "WriteTxnMarkers",
}
# Not Kafka APIs: scrapes and probes must not inflate the request rates.
UNCOUNTED = frozenset({"/metrics", "/v1/health", "/v1/openapi.json", "/docs", "/docs/{asset}"})
UNKNOWN_REQUEST = "Unknown"  # no route matched (404, 405): one bounded label value
_COUNT_AS = web.RequestKey("kafka_request", str)


def count_as(request: web.Request, name: str) -> None:
    """For a handler that learns from the body which API a request plays (a `/v1/fetch` from a
    follower is FetchFollower, not FetchConsumer)."""
    request[_COUNT_AS] = name


def request_name(request: web.Request) -> str | None:
    """The Kafka API `request` plays, or None when it is not counted."""
    if _COUNT_AS in request:
        return request[_COUNT_AS]
    resource = request.match_info.route.resource
    if resource is None:
        return UNKNOWN_REQUEST
    path = resource.canonical
    if path in UNCOUNTED:
        return None
    return KAFKA_REQUESTS.get((request.method, path), path)


routes = web.RouteTableDef()


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    service = request.app[METRICS]
    await service.refresh()
    encode, content_type = choose_encoder(request.headers.get("Accept", ""))
    # Collecting and encoding is ∝ the series (per partition, with topic labels): a thread, so
    # a large scrape never stalls the loop. Collectors read snapshots taken by `refresh`,
    # immutable images, or prometheus_client's own thread-safe metrics.
    body = await asyncio.to_thread(encode, service.registry)
    response = web.Response(body=body, headers={"Content-Type": content_type})
    response.enable_compression()  # honours Accept-Encoding (Prometheus asks for gzip)
    return response
