"""DescribeConfigs (key 32, v1-4), AlterConfigs (key 33, v0-2) and IncrementalAlterConfigs (key 44,
v0-1). Topics over TopicApis: a topic's overrides (DYNAMIC_TOPIC_CONFIG) and the broker's
defaults for the rest (DEFAULT_CONFIG). AlterConfigs replaces the topic's overrides with the
given set, as Kafka's does; the incremental API sets and deletes keys (APPEND and SUBTRACT, for
list-valued keys, are refused INVALID_REQUEST). Brokers and broker loggers over BrokerConfigs
(kraft/server/broker_configs.py): the node's static keys, read-only, and its loggers' levels."""

from __future__ import annotations

from typing import Any, Iterable

from kraft.errors import KraftError
from kraft.kafka.apis.common import Api, code, entity, error_of, ms, nested, response_of
from kraft.metadata.acl import TOPIC
from kraft.server.access import INCREMENTAL_ALTER_CONFIGS, NAMED, rule_of
from kraft.server.broker_configs import BrokerConfigs, ConfigEntry
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS_KEY = 32, 33, 44
TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE = 2, 4, 8
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5
SET, DELETE = 0, 1
_ALTER = rule_of(INCREMENTAL_ALTER_CONFIGS, TOPIC, NAMED)


def _check_type(resource_type: int) -> int:
    if int(resource_type) not in (TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE):
        raise KraftError("INVALID_REQUEST", f"unsupported config resource type {int(resource_type)} "
                                            "(topics, brokers and broker loggers are served)")
    return int(resource_type)


def _broker_configs(services: BrokerServices) -> BrokerConfigs:
    if services.broker_configs is None:
        raise KraftError("INVALID_REQUEST", "this node serves no broker configs")
    return services.broker_configs


def _topic_entries(services: BrokerServices, ctx: RequestContext, name: str,
                   keys: Iterable[str] | None) -> list[ConfigEntry]:
    found = services.topics.describe_configs(ctx, name)
    values = {**{k: (v, DEFAULT_CONFIG) for k, v in found.defaults.items()},
              **{k: (v, DYNAMIC_TOPIC_CONFIG) for k, v in found.configs.items()}}
    return [ConfigEntry(k, values[k][0], values[k][1], False)
            for k in (sorted(values) if keys is None else [k for k in keys if k in values])]


def describe_configs(services: BrokerServices) -> Any:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        response = response_of(request)
        result_cls, config_cls = nested(response, "DescribeConfigsResult"), nested(
            response, "DescribeConfigsResourceResult")
        results = []
        for r in request.resources:
            try:
                kind, keys = _check_type(r.resource_type), r.configuration_keys
                if kind == TOPIC_RESOURCE:
                    entries = _topic_entries(services, ctx, r.resource_name, keys)
                elif kind == BROKER_RESOURCE:
                    entries = _broker_configs(services).describe_broker(ctx, r.resource_name, keys)
                else:
                    entries = _broker_configs(services).describe_loggers(ctx, r.resource_name, keys)
                configs = tuple(entity(config_cls, name=e.name, value=e.value, read_only=e.read_only,
                                       is_default=e.is_default, config_source=e.source, is_sensitive=e.sensitive,
                                       synonyms=(), config_type=0, documentation=None)
                                for e in entries)
                error = None
            except Exception as e:  # noqa: BLE001 - the resource's answer
                configs, error = (), error_of(e)
            results.append(entity(result_cls, error_code=code(error),
                                  error_message=error and error.message, resource_type=r.resource_type,
                                  resource_name=r.resource_name, configs=configs))
        return entity(response, throttle_time=ms(0), results=tuple(results))
    return handle


def _alter(services: BrokerServices, incremental: bool) -> Any:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        response = response_of(request)
        result_cls = nested(response, "AlterConfigsResourceResponse")
        results = []
        for r in request.resources:
            error = None
            try:
                kind = _check_type(r.resource_type)
                if incremental:
                    changes: dict[str, str | None] = {}
                    for c in r.configs:
                        if int(c.config_operation) not in (SET, DELETE):
                            raise KraftError("INVALID_REQUEST", f"{c.name}: only SET and DELETE are served")
                        changes[c.name] = c.value if int(c.config_operation) == SET else None
                elif kind == BROKER_LOGGER_RESOURCE:
                    raise KraftError("INVALID_REQUEST", "AlterConfigs does not support the resource type "
                                                        "BROKER_LOGGER: use IncrementalAlterConfigs")
                elif kind == BROKER_RESOURCE:
                    changes = {c.name: c.value for c in r.configs}
                else:  # the given set replaces the topic's overrides
                    current = services.topics.describe_configs(ctx, r.resource_name).configs
                    changes = {**{k: None for k in current}, **{c.name: c.value for c in r.configs}}
                if kind == BROKER_RESOURCE:
                    _broker_configs(services).alter_broker(ctx, r.resource_name, changes)
                elif kind == BROKER_LOGGER_RESOURCE:
                    _broker_configs(services).alter_loggers(ctx, r.resource_name, changes, bool(request.validate_only))
                elif request.validate_only:
                    services.authorization.require(ctx, _ALTER, (r.resource_name,))
                    services.topics.require_topic(r.resource_name)
                else:
                    await services.topics.alter_configs(ctx, r.resource_name, changes)
            except Exception as e:  # noqa: BLE001 - the resource's answer
                error = error_of(e)
            results.append(entity(result_cls, error_code=code(error),
                                  error_message=error and error.message, resource_type=r.resource_type,
                                  resource_name=r.resource_name))
        return entity(response, throttle_time=ms(0), responses=tuple(results))
    return handle


def alter_configs(services: BrokerServices) -> Any:
    return _alter(services, incremental=False)


def incremental_alter_configs(services: BrokerServices) -> Any:
    return _alter(services, incremental=True)


APIS = (
    Api(DESCRIBE_CONFIGS, 1, 4, describe_configs, "DescribeConfigs"),
    Api(ALTER_CONFIGS, 0, 2, alter_configs, "AlterConfigs"),
    Api(INCREMENTAL_ALTER_CONFIGS_KEY, 0, 1, incremental_alter_configs, "IncrementalAlterConfigs"),
)
