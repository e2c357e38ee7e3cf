"""The Kafka APIs over the node's services (Kafka's KafkaApis, one module per concern): each
handler turns kio's request into the typed arguments of a kraft/server service, calls it with the
request's RequestContext (authorization, quotas and audit lines are the services') and turns the
typed answer back into kio's response of the request's version, with Kafka's error codes
(kraft/errors.py's names).

To add an API: write `async def handler(ctx, request) -> response` in a module of its concern and
list it in the module's `APIS` as `Api(api_key, min_version, max_version, handler_factory)`, where
`handler_factory(services)` returns the handler; add the module to `MODULES` below. ApiVersions
and docs/kafka-protocol.md's table (`python -m kraft.kafka.api_table`) follow from the registry
(kraft/kafka/handlers.py registers these with the other APIs, each request counted in the
request metrics under its API there).
"""

from __future__ import annotations

from kraft.kafka.apis import (
    configs_api, fetch_api, metadata_api, offsets_api, produce_api, producer_ids_api, topics_api,
)
from kraft.kafka.apis.common import Api
from kraft.kafka.handling import Registry
from kraft.server.services import BrokerServices

MODULES = (metadata_api, produce_api, fetch_api, offsets_api, producer_ids_api, topics_api, configs_api)


def apis() -> list[Api]:
    return [api for module in MODULES for api in module.APIS]


def register_all(registry: Registry, services: BrokerServices) -> None:
    for api in apis():
        registry.register(api.key, api.min_version, api.max_version, api.handler(services))
