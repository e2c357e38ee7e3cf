"""Request metrics take the request context: each answered request is counted under the Kafka API
it served (`kafka.network:type=RequestMetrics,request=...`), a fetch as Kafka's RequestMetrics
names it, FetchFollower when a replica (one of the cluster's nodes) sent it, else FetchConsumer.
The node's metrics (kraft/metrics.py) implement `MetricsService`; every listener reports to it."""

from __future__ import annotations

from typing import Any, Protocol

from kraft.server.access import FETCH
from kraft.server.request_context import RequestContext

FETCH_CONSUMER = "FetchConsumer"
FETCH_FOLLOWER = "FetchFollower"


def request_name(ctx: RequestContext) -> str:
    if ctx.api == FETCH:
        return FETCH_FOLLOWER if ctx.is_node else FETCH_CONSUMER
    return ctx.api


class MetricsService(Protocol):
    registry: Any  # a prometheus_client CollectorRegistry

    async def refresh(self) -> None:
        """Bring the snapshots that need awaits up to date before a scrape."""

    def observe_request(self, ctx: RequestContext, error: str, seconds: float) -> None:
        """One request answered with `error` (a Kafka error name, NONE on success) after `seconds`."""
