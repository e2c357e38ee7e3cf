"""Client quotas in the routes: record what a request cost against its quota entity and, when
the entity is over its quota, delay the answer by the throttle time and report it as
`throttle_time_ms` (Kafka's produce and fetch answers carry it; brokers since Kafka 2.0 hold the
throttled client back for that long).

The node sets `QUOTAS` (kraft/broker/quotas.py). The client id is Kafka's request header
`client_id`, sent as `X-Kraft-Client-Id`; the user is the authenticated principal. The cluster's
own nodes are never throttled.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from aiohttp import web

from api.security import NODE_ID, principal_of

CLIENT_ID_HEADER = "X-Kraft-Client-Id"
MAX_CLIENT_ID_CHARS = 255


class QuotaService(Protocol):
    def record(self, kind: str, principal: str, client_id: str, value: float, now_ms: int) -> int:
        """Record the cost; the throttle time in ms (0: within quota)."""


QUOTAS = web.AppKey("client_quotas", QuotaService)


def client_id(request: web.Request) -> str:
    return request.headers.get(CLIENT_ID_HEADER, "")[:MAX_CLIENT_ID_CHARS]


async def throttle(request: web.Request, kind: str, value: float) -> int:
    """Record `value` (bytes produced or fetched) for `kind` ("produce" / "fetch"); sleeps for the
    throttle time and returns it."""
    quotas = request.app.get(QUOTAS)
    if quotas is None or NODE_ID in request:
        return 0
    throttle_ms = quotas.record(kind, principal_of(request), client_id(request), value,
                                int(time.monotonic() * 1000))
    if throttle_ms > 0:
        await asyncio.sleep(throttle_ms / 1000)
    return throttle_ms
