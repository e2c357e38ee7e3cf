"""The node's `Authorizer` (api/authz.py): Kafka's StandardAuthorizer over the ACLs of this node's
metadata image (metadata/acl.py), with `super.users` and `allow.everyone.if.no.acl.found`.

Each check reads the current image, whose ACL index is built once per image that changed ACLs;
the cost of a check is a few dict lookups, whatever the number of ACLs.
"""

from __future__ import annotations

from typing import Callable

from prometheus_client import CollectorRegistry, Counter

from kraft.config import STANDARD_AUTHORIZER, KraftConfig
from kraft.metadata.acl import RESOURCE_TYPES, AuthorizerSettings, authorize
from kraft.metadata.image import MetadataImage


def authorizer_settings(config: KraftConfig) -> AuthorizerSettings | None:
    """None when no authorizer is configured (everything allowed)."""
    if config["authorizer.class.name"] != STANDARD_AUTHORIZER:
        return None
    super_users = frozenset(u.strip() for u in (config["super.users"] or "").split(";") if u.strip())
    return AuthorizerSettings(super_users, bool(config["allow.everyone.if.no.acl.found"]))


class StandardAuthorizer:
    def __init__(self, image: Callable[[], MetadataImage], settings: AuthorizerSettings,
                 registry: CollectorRegistry | None = None) -> None:
        self._image = image
        self.settings = settings
        self._denied = Counter("kraft_authorizer_denied_requests",
                               "Requests refused by the ACLs (403 *_AUTHORIZATION_FAILED), by resource type.",
                               ("resource_type",), registry=registry)
        for resource_type in RESOURCE_TYPES:
            self._denied.labels(resource_type)

    def authorize(self, principal: str, host: str, operation: str, resource_type: str, resource_name: str) -> bool:
        return authorize(self._image().acls.index, self.settings, principal, host, operation, resource_type,
                         resource_name)

    def denied(self, resource_type: str) -> None:
        self._denied.labels(resource_type).inc()
