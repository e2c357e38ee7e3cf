"""What every Kafka admin handler does around its service call, once: the request's cost against
the client's request quota (`request_percentage`: the time the handler ran on the loop, as the
HTTP listener charges it) answered as `throttle_time_ms`, and an error the handler leaves to it
answered at the response's top level (Kafka's getErrorResponse; an unexpected exception is
UNKNOWN_SERVER_ERROR, logged) when the response has one.

`counted` is the one request-metrics path of the Kafka listener: kraft/kafka/handlers.py makes it
the registry's wrapper of every handler (ApiVersions and SASL included, and the SASL exchange the
connection answers itself), so each request is counted once under Kafka's RequestMetrics name of
its API (kraft/server/request_metrics.py) with its top-level error.

A handler module describes an API as `KafkaApi(api_key, min_version, max_version, answer)`,
where `answer(services, context, request)` returns the response as plain data
(`kraft/kafka/entities.py` builds the kio type of the request's version from it).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, Mapping, Protocol

from kio.index import load_response_schema

from kraft.errors import KraftError, from_exception
from kraft.kafka.entities import build, error_response
from kraft.server.quotas import REQUEST, TimedAwait
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

log = logging.getLogger("kraft.kafka")

Answer = Callable[[BrokerServices, RequestContext, Any], Awaitable[Mapping[str, Any]]]
Handler = Callable[[RequestContext, Any], Awaitable[Any]]


class Registry(Protocol):
    """kraft/kafka/dispatch.py's HandlerRegistry."""

    def register(self, api_key: int, min_version: int, max_version: int, handler: Handler) -> None: ...


@dataclass(frozen=True)
class KafkaApi:
    api_key: int
    min_version: int
    max_version: int
    answer: Answer

    def handler(self, services: BrokerServices) -> Handler:
        async def handle(ctx: RequestContext, request: Any) -> Any:
            return await respond(services, self.api_key, self.answer, ctx, request)
        return handle


def register(registry: Registry, services: BrokerServices, apis: Iterable[KafkaApi]) -> None:
    for api in apis:
        registry.register(api.api_key, api.min_version, api.max_version, api.handler(services))


async def respond(services: BrokerServices, api_key: int, answer: Answer, ctx: RequestContext, request: Any) -> Any:
    # timed only while a client quota can apply (as the HTTP listener; Kafka's ClientQuotaManager
    # records nothing without quotas)
    timed = TimedAwait(answer(services, ctx, request)) if services.quotas.applies(ctx) else None
    error: KraftError | None = None
    data: Mapping[str, Any] = {}
    try:
        data = await (timed if timed is not None else answer(services, ctx, request))
    except Exception as e:  # noqa: BLE001 - answered as Kafka does, UNKNOWN_SERVER_ERROR for a bug
        error = from_exception(e)
        if error.error_code == "UNKNOWN_SERVER_ERROR":
            log.error("%s request from %s failed", ctx.api, ctx.client_address, exc_info=e)
    throttle_ms = 0 if timed is None else services.quotas.throttle_time(ctx, REQUEST, timed.busy_s * 1000)
    if error is None:
        return build(load_response_schema(api_key, ctx.api_version), {**data, "throttle_time": throttle_ms})
    response = error_response(api_key, ctx.api_version, error, throttle_ms)
    if response is None:  # an answer without a top-level error: the handler must place it
        raise error
    return response


def counted(services: BrokerServices, handler: Handler) -> Handler:
    """The handler, each request reported to the request metrics: its API, its time, and its
    error (the response's top-level error_code, NONE without one; a raised error's name)."""
    async def serve(ctx: RequestContext, request: Any) -> Any:
        started = time.monotonic()
        error = "UNKNOWN_SERVER_ERROR"
        try:
            response = await handler(ctx, request)
            code = getattr(response, "error_code", None)
            error = "NONE" if code is None else code.name.upper()
            return response
        except Exception as e:
            error = from_exception(e).error_code
            raise
        finally:
            if services.metrics is not None:
                services.metrics.observe_request(ctx, error, time.monotonic() - started)
    return serve

