"""Which handler answers which Kafka API (Kafka's `KafkaApis` dispatch): a registry keyed by API
key with version ranges, which fills the ApiVersions table as handlers register.

`register(api_key, min_version, max_version, handler)`; a handler is
`async handler(context: RequestContext, request) -> response`, with kio's request and response
types of the request's version. ApiVersions is registered from the start (the table's own answer,
with Kafka's check of the v3+ client software name and version), and SaslHandshake /
SaslAuthenticate as Kafka's `KafkaApis` answers them: once a connection is past authentication
(or on a listener without SASL) they are ILLEGAL_SASL_STATE; the SASL exchange itself is the
connection's (kraft/kafka/sasl.py).

`count_requests(wrap)` makes `wrap` (the request metrics' `counted`) part of every handler, the
built-in ones included, and `count` available to the connection for the SASL exchange it answers
itself: every request is counted through that one wrapper, as Kafka counts ApiVersions and SASL.
"""

from __future__ import annotations

import re
from typing import Any, Awaitable, Callable

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode

from kraft.kafka.api_versions import API_VERSIONS, ApiVersionsTable
from kraft.kafka.sasl import (
    SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSIONS, SASL_HANDSHAKE, SASL_HANDSHAKE_VERSIONS, illegal_sasl_state,
)
from kraft.server.request_context import RequestContext

Handler = Callable[[RequestContext, Any], Awaitable[Any]]

# Kafka's ApiVersionsRequest.isValid: the v3+ client_software_name and _version
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def api_name(api_key: int, api_version: int) -> str:
    """Kafka's name of the API ("Produce", "ApiVersions"), from kio's response type."""
    return load_response_schema(api_key, api_version).__name__.removesuffix("Response")


def _uncounted(handler: Handler) -> Handler:
    return handler


class HandlerRegistry:
    def __init__(self) -> None:
        self.api_versions = ApiVersionsTable()
        self.count: Callable[[Handler], Handler] = _uncounted
        self._handlers: dict[int, Handler] = {API_VERSIONS: self._answer_api_versions}
        self.register(SASL_HANDSHAKE, *SASL_HANDSHAKE_VERSIONS, _outside_sasl_exchange)
        self.register(SASL_AUTHENTICATE, *SASL_AUTHENTICATE_VERSIONS, _outside_sasl_exchange)

    def register(self, api_key: int, min_version: int, max_version: int, handler: Handler) -> None:
        """Serves `api_key` at those versions with `handler`; ValueError as ApiVersionsTable.register."""
        self.api_versions.register(api_key, min_version, max_version)
        self._handlers[api_key] = self.count(handler)

    def count_requests(self, wrap: Callable[[Handler], Handler]) -> None:
        """Every handler, those registered already and those to come, wrapped by `wrap` (once)."""
        if self.count is not _uncounted:
            raise ValueError("the registry's requests are counted already")
        self.count = wrap
        self._handlers = {key: wrap(handler) for key, handler in self._handlers.items()}

    def handler(self, api_key: int) -> Handler:
        """The handler of a key the table supports (the connection refuses the others first)."""
        return self._handlers[api_key]

    async def _answer_api_versions(self, context: RequestContext, request: Any) -> Any:
        names = [getattr(request, f, None) for f in ("client_software_name", "client_software_version")]
        if any(name is not None and not _SOFTWARE.fullmatch(name) for name in names):
            return self.api_versions.response(context.api_version, ErrorCode.invalid_request)
        return self.api_versions.response(context.api_version)


async def _outside_sasl_exchange(context: RequestContext, request: Any) -> Any:
    """SaslHandshake / SaslAuthenticate past authentication or on a listener without SASL."""
    return illegal_sasl_state(request)
