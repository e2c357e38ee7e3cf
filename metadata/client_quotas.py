"""Client quotas in the metadata image (Kafka's ClientQuotasImage) and the rule that picks the quota
of a connection, pure.

An entity is (user, client_id): either part may be absent (None) or the default (`<default>`,
Kafka's ConfigEntityName.DEFAULT). The quota of a request from `user` with `client_id` is the one
of the most specific entity that sets it, in Kafka's order (DefaultQuotaCallback):
user+client, user+default client, user, default user+client, default user+default client,
default user, client, default client.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable, Mapping

from kraft.metadata.errors import MetadataError
from kraft.metadata.persistent import frozen_map, with_changes

DEFAULT = "<default>"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)
MAX_NAME_CHARS = 1024

Entity = tuple[str | None, str | None]  # (user, client_id)


def check_entity(user: str | None, client_id: str | None) -> None:
    if user is None and client_id is None:
        raise MetadataError("INVALID_REQUEST", "a quota entity names a user, a client id, or both")
    for what, name in (("user", user), ("client id", client_id)):
        if name is not None and not 0 < len(name) <= MAX_NAME_CHARS:
            raise MetadataError("INVALID_REQUEST", f"the {what} of a quota entity must have 1 to {MAX_NAME_CHARS} characters")


def check_quota(key: str, value: float | None) -> None:
    """Kafka's QuotaConfigs: byte rates are whole numbers, request_percentage any number; both
    positive here (a zero rate would throttle forever)."""
    if key not in QUOTA_KEYS:
        raise MetadataError("INVALID_REQUEST", f"unknown quota {key!r} (one of {', '.join(QUOTA_KEYS)})")
    if value is None:
        return
    if not math.isfinite(value) or value <= 0:
        raise MetadataError("INVALID_REQUEST", f"{key} must be a positive number, got {value!r}")
    if key != REQUEST_PERCENTAGE and value != int(value):
        raise MetadataError("INVALID_REQUEST", f"{key} must be a whole number of bytes per second, got {value!r}")


def resolution_order(user: str, client_id: str) -> tuple[Entity, ...]:
    return (
        (user, client_id), (user, DEFAULT), (user, None),
        (DEFAULT, client_id), (DEFAULT, DEFAULT), (DEFAULT, None),
        (None, client_id), (None, DEFAULT),
    )


@dataclass(frozen=True)
class ClientQuotasImage:
    """entity -> {quota key: value}; only entities with at least one quota."""

    entities: Mapping[Entity, Mapping[str, float]] = field(default_factory=frozen_map)
    EMPTY: ClassVar["ClientQuotasImage"]

    def quota(self, user: str, client_id: str, key: str) -> float | None:
        """The quota `key` of a request from `user` (the principal's name) with `client_id`."""
        found = self.quota_entity(user, client_id, key)
        return None if found is None else found[1]

    def quota_entity(self, user: str, client_id: str, key: str) -> tuple[Entity, float] | None:
        """The entity whose quota `key` applies, and its value: requests that resolve to the same
        entity share one rate (Kafka's quota sensors are per quota entity)."""
        if not self.entities:
            return None
        for entity in resolution_order(user, client_id):
            values = self.entities.get(entity)
            if values is not None and key in values:
                return entity, values[key]
        return None

    def with_changes(self, changes: Mapping[Entity, Mapping[str, float | None]]) -> "ClientQuotasImage":
        if not changes:
            return self
        updated: dict[Entity, Mapping[str, float] | None] = {}
        for entity, updates in changes.items():
            values = dict(self.entities.get(entity, {}))
            for key, value in updates.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
            updated[entity] = frozen_map(values) if values else None
        return ClientQuotasImage(with_changes(self.entities, updated))  # persistent: shares the rest

    def describe(self) -> list[dict[str, Any]]:
        """Every entity and its quotas, for /v1/client-quotas."""
        return [{"user": u, "client_id": c, "quotas": dict(v)}
                for (u, c), v in sorted(self.entities.items(), key=lambda e: (str(e[0][0]), str(e[0][1])))]

    def to_snapshot(self) -> list[list[Any]]:
        return [[u, c, dict(v)] for (u, c), v in sorted(self.entities.items(), key=lambda e: (str(e[0][0]), str(e[0][1])))]

    @classmethod
    def from_snapshot(cls, rows: Iterable[Any]) -> "ClientQuotasImage":
        return cls(frozen_map({
            (None if u is None else str(u), None if c is None else str(c)):
                frozen_map({str(k): float(v) for k, v in values.items()})
            for u, c, values in rows
        }))


ClientQuotasImage.EMPTY = ClientQuotasImage()
