"""Client quotas in the routes: record what a request cost against its quota entity and, when
the entity is over its quota, delay the answer by the throttle time and report it as
`throttle_time_ms` (Kafka's produce and fetch answers carry it; brokers since Kafka 2.0 hold the
throttled client back for that long).

The node sets `QUOTAS` (kraft/broker/quotas.py). The client id is Kafka's request header
`client_id`, sent as `X-Kraft-Client-Id`; the user is the authenticated principal. The cluster's
own nodes are never throttled.

`request_percentage` charges the time the request's handler ran on the event loop (the node's one
request thread), not the time it waited (long polls, replication): `request_quota_middleware`
times each resumption of the handler. Over the quota, the answer is held back by the throttle
time, reported in the `X-Kraft-Throttle-Time-Ms` header.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, Generator, Protocol

from aiohttp import web

from kraft.api.security import CLIENT_ID_HEADER, NODE_ID, principal_of

THROTTLE_HEADER = "X-Kraft-Throttle-Time-Ms"
MAX_CLIENT_ID_CHARS = 255


class QuotaService(Protocol):
    def record(self, kind: str, principal: str, client_id: str, value: float, now_ms: int) -> int:
        """Record the cost; the throttle time in ms (0: within quota)."""


QUOTAS = web.AppKey("client_quotas", QuotaService)


def client_id(request: web.Request) -> str:
    return request.headers.get(CLIENT_ID_HEADER, "")[:MAX_CLIENT_ID_CHARS]


async def throttle(request: web.Request, kind: str, value: float) -> int:
    """Record `value` (bytes produced or fetched, or ms of loop time for "request") for `kind`;
    sleeps for the throttle time and returns it."""
    quotas = request.app.get(QUOTAS)
    if quotas is None or NODE_ID in request:
        return 0
    throttle_ms = quotas.record(kind, principal_of(request), client_id(request), value,
                                int(time.monotonic() * 1000))
    if throttle_ms > 0:
        await asyncio.sleep(throttle_ms / 1000)
    return throttle_ms


class _TimedAwait:
    """Awaits a coroutine while adding up the time each of its steps runs (not the time it is
    suspended): what the request cost the event loop."""

    def __init__(self, coro: Any) -> None:
        self._coro = coro
        self.busy_s = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        return self  # type: ignore[return-value]

    def __iter__(self) -> "_TimedAwait":
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def send(self, value: Any) -> Any:
        started = time.perf_counter()
        try:
            return self._coro.send(value)
        finally:
            self.busy_s += time.perf_counter() - started

    def throw(self, *exc: Any) -> Any:
        started = time.perf_counter()
        try:
            return self._coro.throw(*exc)
        finally:
            self.busy_s += time.perf_counter() - started

    def close(self) -> None:
        self._coro.close()


@web.middleware
async def request_quota_middleware(request: web.Request,
                                   handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                                   ) -> web.StreamResponse:
    if QUOTAS not in request.app or NODE_ID in request:
        return await handler(request)
    timed = _TimedAwait(handler(request))
    response = await timed
    throttle_ms = await throttle(request, "request", timed.busy_s * 1000)
    if throttle_ms > 0 and not response.prepared:
        response.headers[THROTTLE_HEADER] = str(throttle_ms)
    return response
