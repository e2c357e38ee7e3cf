"""DescribeConfigs (key 32, v1-4), AlterConfigs (key 33, v0-2) and IncrementalAlterConfigs (key 44,
v0-1) on topics, over TopicApis: a topic's overrides (DYNAMIC_TOPIC_CONFIG) and the broker's
defaults for the rest (DEFAULT_CONFIG). AlterConfigs replaces the topic's overrides with the
given set, as Kafka's does; the incremental API sets and deletes keys (APPEND and SUBTRACT, for
list-valued keys, are refused INVALID_REQUEST). Broker resources are not served yet
(INVALID_REQUEST: the broker's keys are its configuration file's)."""

from __future__ import annotations

from typing import Any

from kraft.errors import KraftError
from kraft.kafka.apis.common import Api, code, entity, error_of, ms, nested, response_of
from kraft.metadata.acl import TOPIC
from kraft.server.access import INCREMENTAL_ALTER_CONFIGS, NAMED, rule_of
from kraft.server.request_context import RequestContext
from kraft.server.services import BrokerServices

DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS_KEY = 32, 33, 44
TOPIC_RESOURCE = 2
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5
SET, DELETE = 0, 1
_ALTER = rule_of(INCREMENTAL_ALTER_CONFIGS, TOPIC, NAMED)


def _topic_only(resource_type: int) -> None:
    if int(resource_type) != TOPIC_RESOURCE:
        raise KraftError("INVALID_REQUEST", "only topic configs are served over the Kafka protocol")


def describe_configs(services: BrokerServices) -> Any:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        response = response_of(request)
        result_cls, config_cls = nested(response, "DescribeConfigsResult"), nested(
            response, "DescribeConfigsResourceResult")
        results = []
        for r in request.resources:
            try:
                _topic_only(r.resource_type)
                found = services.topics.describe_configs(ctx, r.resource_name)
                values = {**{k: (v, DEFAULT_CONFIG) for k, v in found.defaults.items()},
                          **{k: (v, DYNAMIC_TOPIC_CONFIG) for k, v in found.configs.items()}}
                keys = sorted(values) if r.configuration_keys is None else [
                    k for k in r.configuration_keys if k in values]
                configs = tuple(entity(config_cls, name=k, value=values[k][0], read_only=False,
                                       is_default=values[k][1] == DEFAULT_CONFIG, config_source=values[k][1],
                                       is_sensitive=False, synonyms=(), config_type=0, documentation=None)
                                for k in keys)
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
                _topic_only(r.resource_type)
                if incremental:
                    changes: dict[str, str | None] = {}
                    for c in r.configs:
                        if int(c.config_operation) not in (SET, DELETE):
                            raise KraftError("INVALID_REQUEST", f"{c.name}: only SET and DELETE are served")
                        changes[c.name] = c.value if int(c.config_operation) == SET else None
                else:  # the given set replaces the topic's overrides
                    current = services.topics.describe_configs(ctx, r.resource_name).configs
                    changes = {**{k: None for k in current}, **{c.name: c.value for c in r.configs}}
                if request.validate_only:
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
