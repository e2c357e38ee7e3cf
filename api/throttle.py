"""Client quotas on the HTTP listener: the services compute the throttle time of what a request
cost against its quota entity (kraft/server/quotas.py), and the listener holds the answer back by
it (`hold_back`) and reports it: `throttle_time_ms` in produce and fetch answers (Kafka's answers
carry it; brokers since Kafka 2.0 hold the throttled client back for that long).

`request_percentage` charges the time the request's handler ran on the event loop (the node's one
request thread), not the time it waited (long polls, replication): `request_quota_middleware`
times each resumption of the handler. Over the quota, the answer is held back by the throttle
time, reported in the `X-Kraft-Throttle-Time-Ms` header. The cluster's own nodes are never
throttled.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from aiohttp import web

from kraft.api.routes.services import context_of, services_of
from kraft.server.quotas import REQUEST, TimedAwait

THROTTLE_HEADER = "X-Kraft-Throttle-Time-Ms"


async def hold_back(throttle_ms: int) -> int:
    """Delays the answer by the throttle time the services computed; returns it."""
    if throttle_ms > 0:
        await asyncio.sleep(throttle_ms / 1000)
    return throttle_ms


@web.middleware
async def request_quota_middleware(request: web.Request,
                                   handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                                   ) -> web.StreamResponse:
    ctx, quotas = context_of(request), services_of(request).quotas
    if not quotas.applies(ctx):  # the timing of every step costs each request: only when it can count
        return await handler(request)
    timed = TimedAwait(handler(request))
    response = await timed
    throttle_ms = await hold_back(quotas.throttle_time(ctx, REQUEST, timed.busy_s * 1000))
    if throttle_ms > 0 and not response.prepared:
        response.headers[THROTTLE_HEADER] = str(throttle_ms)
    return response
