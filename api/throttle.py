"""Client quotas on the HTTP listener: the services compute the throttle time of what a request
cost against its quota entity (kraft/server/quotas.py), and the listener holds the answer back by
it (`hold_back`) and reports it: `throttle_time_ms` in produce and fetch answers (Kafka's answers
carry it; brokers since Kafka 2.0 hold the throttled client back for that long).

`request_percentage` charges the time the request's handler ran on the event loop (the node's one
request thread), not the time it waited (long polls, replication): `throttled` (a step of the
request layer, api/server.py) times each resumption of the handler. Over the quota, the answer is
held back by the throttle time, reported in the `X-Kraft-Throttle-Time-Ms` header. The cluster's
own nodes are never throttled, and nothing is timed while no client quota is configured.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable

from aiohttp import web

from kraft.server.quotas import REQUEST, Quotas, TimedAwait
from kraft.server.request_context import RequestContext

THROTTLE_HEADER = "X-Kraft-Throttle-Time-Ms"


async def hold_back(throttle_ms: int) -> int:
    """Delays the answer by the throttle time the services computed; returns it."""
    if throttle_ms > 0:
        await asyncio.sleep(throttle_ms / 1000)
    return throttle_ms


async def throttled(ctx: RequestContext, quotas: Quotas, answer: Awaitable[web.StreamResponse]) -> web.StreamResponse:
    """`answer` timed step by step and charged to the context's request quota (the caller checked
    `quotas.applies(ctx)`), held back by the throttle time when over it."""
    timed = TimedAwait(answer)
    response = await timed
    throttle_ms = await hold_back(quotas.throttle_time(ctx, REQUEST, timed.busy_s * 1000))
    if throttle_ms > 0 and not response.prepared:
        response.headers[THROTTLE_HEADER] = str(throttle_ms)
    return response
