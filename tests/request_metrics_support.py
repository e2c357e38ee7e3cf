"""Test support: a MetricsService (kraft/server/request_metrics.py) that records each request
reported to it as (Kafka API, error name)."""

from __future__ import annotations

from kraft.server.request_context import RequestContext


class RecordedRequests:
    registry = None

    def __init__(self) -> None:
        self.observed: list[tuple[str, str]] = []

    async def refresh(self) -> None:
        pass

    def observe_request(self, ctx: RequestContext, error: str, seconds: float) -> None:
        self.observed.append((ctx.api, error))
