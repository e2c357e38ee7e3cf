"""kafka-python's configuration keywords that this client accepts without using them.

`KafkaProducer(**configs)` / `KafkaConsumer(*topics, **configs)` code often passes socket and
protocol tuning that has no meaning over HTTP. Those keywords are accepted with one warning naming
them (the code keeps working); anything else unknown is an INVALID_CONFIG error naming the key, so
a typo is not silently ignored. TLS/SASL settings are taken by `api/client/security.py` first.
docs/client.md lists every kafka-python keyword and what it does here.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from kraft.api.errors import KraftError

log = logging.getLogger("kraft.client")

# Connection and protocol tuning of kafka-python's own socket layer; meaningless over HTTP.
_NETWORK = frozenset({
    "reconnect_backoff_ms", "reconnect_backoff_max_ms", "max_in_flight_requests_per_connection",
    "receive_buffer_bytes", "send_buffer_bytes", "socket_options", "connections_max_idle_ms",
    "api_version", "api_version_auto_timeout_ms", "selector", "metric_reporters",
    "metrics_num_samples", "metrics_sample_window_ms", "metric_group_prefix", "metrics_enabled",
})
# Consumer settings whose job the coordinator does here (KIP-848 style heartbeats, server-side
# assignors) or that this client always does.
_CONSUMER = frozenset({
    "session_timeout_ms", "heartbeat_interval_ms", "partition_assignment_strategy", "check_crcs",
    "exclude_internal_topics",
})
# The producer's max_in_flight_requests_per_connection is its own (requests in flight per leader).
IGNORED = {"producer": _NETWORK - {"max_in_flight_requests_per_connection"}, "consumer": _NETWORK | _CONSUMER,
           "admin": _NETWORK}


def check_unused_configs(role: str, configs: dict[str, Any]) -> None:
    """Warns once about kafka-python keywords accepted without effect; raises INVALID_CONFIG for
    the rest of `configs` (the keywords the client's signature did not take)."""
    unknown = sorted(k for k in configs if k not in IGNORED[role])
    if unknown:
        raise KraftError("INVALID_CONFIG", f"unknown or unsupported {role} config: {', '.join(unknown)} "
                                           "(docs/client.md lists the kafka-python configs this client takes)")
    if configs:
        log.warning("kraft %s: ignoring kafka-python config %s (no meaning over HTTP; see docs/client.md)",
                    role, ", ".join(sorted(configs)))


def serializing(fn: Callable[[Any], Any] | None, topic: str, data: Any) -> Any:
    """kafka-python's serializer call: a plain callable gets the value, an object with
    `serialize(topic, value)` gets the topic too. None (a tombstone) is passed through as is."""
    if fn is None or data is None:
        return data
    serialize = getattr(fn, "serialize", None)
    return serialize(topic, data) if serialize is not None else fn(data)


def deserializing(fn: Callable[[Any], Any] | None, topic: str, data: bytes | None) -> Any:
    if fn is None or data is None:
        return data
    deserialize = getattr(fn, "deserialize", None)
    return deserialize(topic, data) if deserialize is not None else fn(data)
