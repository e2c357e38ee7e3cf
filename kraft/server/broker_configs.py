"""The configs of the BROKER and BROKER_LOGGER resources, as Kafka's DescribeConfigs and
(Incremental)AlterConfigs answer them (Kafka's ConfigHelper and ConfigAdminManager).

A broker resource is named by this node's id, or "" for the cluster-wide dynamic defaults. Its
configs are the node's own keys (kraft/config.py): set in the node's file or flags
(STATIC_BROKER_CONFIG) or left at their defaults (DEFAULT_CONFIG), all read-only, since kraft
changes none of them at run time (an alteration is INVALID_REQUEST, "Cannot update these configs
dynamically", as Kafka answers for a static key); password keys are sensitive and their value is
never sent. The cluster default resource has no dynamic defaults to list.

A broker logger resource (this node's id) lists the node's Python loggers (`root` and the
`kraft` ones) with their levels in Kafka's names; SET changes a logger's level at once and DELETE
returns it to its parent's (the root logger's cannot be deleted), as Kafka's Log4jController.
Describing needs DESCRIBE_CONFIGS on the cluster, altering ALTER_CONFIGS, as in Kafka.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from kraft.config import CONFIG_KEYS, KraftConfig
from kraft.errors import KraftError
from kraft.metadata.acl import CLUSTER as CLUSTER_TYPE
from kraft.server.access import CLUSTER, Rule
from kraft.server.authorization import Authorization
from kraft.server.request_context import RequestContext

# Kafka's ConfigSource
STATIC_BROKER_CONFIG, DEFAULT_CONFIG, DYNAMIC_BROKER_LOGGER_CONFIG = 4, 5, 6
ROOT_LOGGER = "root"
_DESCRIBE = Rule("DESCRIBE_CONFIGS", CLUSTER_TYPE, CLUSTER)
_ALTER = Rule("ALTER_CONFIGS", CLUSTER_TYPE, CLUSTER)
# Kafka's (log4j's) level names and Python's levels, both ways
_LEVELS = {"OFF": logging.CRITICAL + 10, "FATAL": logging.CRITICAL, "ERROR": logging.ERROR,
           "WARN": logging.WARNING, "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": logging.DEBUG,
           "ALL": logging.NOTSET + 1}
_NAMES = {logging.CRITICAL + 10: "OFF", logging.CRITICAL: "FATAL", logging.ERROR: "ERROR",
          logging.WARNING: "WARN", logging.INFO: "INFO", logging.DEBUG: "DEBUG", logging.NOTSET + 1: "ALL"}


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int  # Kafka's ConfigSource
    read_only: bool
    sensitive: bool = False

    @property
    def is_default(self) -> bool:
        return self.source == DEFAULT_CONFIG


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)


class BrokerConfigs:
    def __init__(self, node_id: int, config: KraftConfig, authorization: Authorization) -> None:
        self.node_id = node_id
        self.config = config
        self.authorization = authorization

    def _this_broker(self, name: str, allow_default: bool = True) -> bool:
        """True for this node's id, False for "" (the cluster default); INVALID_REQUEST otherwise."""
        if name == "" and allow_default:
            return False
        try:
            broker_id = int(name)
        except ValueError:
            raise KraftError("INVALID_REQUEST", f"Broker id must be an integer, but it is: {name}") from None
        if broker_id != self.node_id:
            expected = f"{self.node_id} or empty string" if allow_default else str(self.node_id)
            raise KraftError("INVALID_REQUEST", f"Unexpected broker id, expected {expected}, but received {name}")
        return True

    # -- BROKER -------------------------------------------------------------------------------------

    def describe_broker(self, ctx: RequestContext, name: str, keys: Iterable[str] | None) -> list[ConfigEntry]:
        self.authorization.require(ctx, _DESCRIBE)
        if not self._this_broker(name):
            return []  # no dynamic cluster-wide defaults
        entries = []
        for key in sorted(CONFIG_KEYS) if keys is None else [k for k in keys if k in CONFIG_KEYS]:
            sensitive = CONFIG_KEYS[key].type == "password"
            entries.append(ConfigEntry(
                key, None if sensitive else _text(self.config[key]),
                STATIC_BROKER_CONFIG if key in self.config.values else DEFAULT_CONFIG, True, sensitive))
        return entries

    def alter_broker(self, ctx: RequestContext, name: str, changes: Mapping[str, str | None]) -> None:
        """Every key is static here: INVALID_REQUEST naming them (after authorization and the name)."""
        self.authorization.require(ctx, _ALTER)
        self._this_broker(name)
        if changes:
            raise KraftError("INVALID_REQUEST",
                             f"Cannot update these configs dynamically: {', '.join(sorted(changes))}")

    # -- BROKER_LOGGER ------------------------------------------------------------------------------

    def describe_loggers(self, ctx: RequestContext, name: str, keys: Iterable[str] | None) -> list[ConfigEntry]:
        self.authorization.require(ctx, _DESCRIBE)
        self._this_broker(name, allow_default=False)
        loggers = _loggers()
        names = sorted(loggers) if keys is None else [k for k in keys if k in loggers]
        return [ConfigEntry(n, _level_name(loggers[n].getEffectiveLevel()), DYNAMIC_BROKER_LOGGER_CONFIG, False)
                for n in names]

    def alter_loggers(self, ctx: RequestContext, name: str, changes: Mapping[str, str | None],
                      validate_only: bool = False) -> None:
        """Levels SET (a level name) or DELETE (None); INVALID_CONFIG for an unknown logger or level."""
        self.authorization.require(ctx, _ALTER)
        self._this_broker(name, allow_default=False)
        loggers = _loggers()
        levels: dict[str, int] = {}
        for logger, level in changes.items():
            if logger not in loggers:
                raise KraftError("INVALID_CONFIG", f"Logger {logger} does not exist!")
            if level is None:
                if logger == ROOT_LOGGER:
                    raise KraftError("INVALID_REQUEST", f"Removing the log level of the {ROOT_LOGGER} logger "
                                                        "is not allowed")
                levels[logger] = logging.NOTSET
            elif level.upper() not in _LEVELS:
                raise KraftError("INVALID_CONFIG", f"Cannot set the log level of {logger} to {level} as it is not "
                                                   f"a supported log level. Valid log levels are "
                                                   f"{', '.join(_LEVELS)}")
            else:
                levels[logger] = _LEVELS[level.upper()]
        if not validate_only:
            for logger, value in levels.items():
                loggers[logger].setLevel(value)


def _loggers() -> dict[str, logging.Logger]:
    """The node's loggers that exist (a client never creates one): root and the `kraft` tree."""
    found = {n: lg for n, lg in logging.Logger.manager.loggerDict.items()
             if isinstance(lg, logging.Logger) and (n == "kraft" or n.startswith("kraft."))}
    return {ROOT_LOGGER: logging.getLogger(), **found}


def _level_name(level: int) -> str:
    for value in sorted(_NAMES, reverse=True):
        if level >= value:
            return _NAMES[value]
    return "ALL"
