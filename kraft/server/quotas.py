"""Client quotas in the services: what a request cost is recorded against its quota entity (the
request context's principal and client id) and the throttle time comes back (Kafka computes it in
KafkaApis; the listener holds the answer back for that long and reports it as
`throttle_time_ms`). The cluster's own nodes are never throttled.

Kinds: PRODUCE and FETCH charge bytes, REQUEST the time the request's handler ran on the event
loop in ms (Kafka's request_percentage of a request thread; the listener measures it with `TimedAwait`).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Generator, Protocol

from kraft.server.request_context import RequestContext

PRODUCE, FETCH, REQUEST = "produce", "fetch", "request"


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class QuotaService(Protocol):
    """Kafka's ClientQuotaManager (kraft/broker/quotas.py)."""

    def record(self, kind: str, principal: str, client_id: str, value: float, now_ms: int) -> int:
        """Record the cost; the throttle time in ms (0: within quota)."""


class Quotas:
    def __init__(self, service: QuotaService | None = None, clock_ms: Callable[[], int] = monotonic_ms,
                 configured: Callable[[], bool] = lambda: True) -> None:
        """Without a `service` (ZooKeeper mode keeps no quotas) nothing is ever throttled.
        `configured` says whether the cluster has any client quota at all: with none, as in
        Kafka's ClientQuotaManager without quotas, nothing is recorded or timed."""
        self.service = service
        self.clock_ms = clock_ms
        self.configured = configured

    def applies(self, ctx: RequestContext) -> bool:
        """Whether a request in `ctx` can be throttled: a client's, with some quota configured
        (the listeners time a request's handler only then)."""
        return self.service is not None and not ctx.is_node and self.configured()

    def throttle_time(self, ctx: RequestContext, kind: str, value: float) -> int:
        """Records `value` of `kind` against the context's quota entity; the throttle time in ms."""
        if not self.applies(ctx):
            return 0
        assert self.service is not None
        return self.service.record(kind, ctx.principal, ctx.client_id, value, self.clock_ms())


class TimedAwait:
    """Awaits a coroutine while adding up the time each of its steps runs (not the time it is
    suspended): what the request cost the event loop."""

    def __init__(self, coro: Any) -> None:
        self._coro = coro
        self.busy_s = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        return self  # type: ignore[return-value]

    def __iter__(self) -> "TimedAwait":
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
