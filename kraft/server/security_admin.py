"""The interfaces of security administration and their typed answers: ACLs and client quotas
(`AclService`, implemented by `kraft/broker/acl_admin.py`) and SCRAM credentials
(`UserService`, `kraft/security/users.py`), read from this node's metadata image and changed
through the active controller (Kafka's DescribeAcls / CreateAcls / DeleteAcls,
DescribeClientQuotas / AlterClientQuotas, Describe- / AlterUserScramCredentials)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping, Protocol

from kraft.metadata.acl import AclBindingFilter, StandardAcl


@dataclass(frozen=True)
class QuotaDescription:
    user: str | None  # None: any user; "<default>": the default user
    client_id: str | None
    quotas: Mapping[str, float]


QUOTA_DEFAULT = "<default>"  # the default user or client id (Kafka's ConfigEntityName.DEFAULT)
USER, CLIENT_ID = "user", "client-id"  # Kafka's quota entity types


@dataclass(frozen=True)
class QuotaComponent:
    """Kafka's ClientQuotaFilterComponent: entities whose `entity_type` part is `match` (exact),
    the default (default), or any name (any)."""

    entity_type: str  # USER or CLIENT_ID
    match_type: Literal["exact", "default", "any"]
    match: str | None = None

    def matches(self, name: str | None) -> bool:
        if self.match_type == "exact":
            return name is not None and name != QUOTA_DEFAULT and name == self.match
        if self.match_type == "default":
            return name == QUOTA_DEFAULT
        return name is not None


@dataclass(frozen=True)
class QuotaFilter:
    """Kafka's ClientQuotaFilter: every component matches; `strict`, and the entity has no other part."""

    components: tuple[QuotaComponent, ...] = ()
    strict: bool = False

    def matches(self, quota: QuotaDescription) -> bool:
        parts = {USER: quota.user, CLIENT_ID: quota.client_id}
        if not all(c.matches(parts[c.entity_type]) for c in self.components):
            return False
        listed = {c.entity_type for c in self.components}
        return not self.strict or all(name is None for kind, name in parts.items() if kind not in listed)


@dataclass(frozen=True)
class ScramCredentialInfo:
    mechanism: str
    iterations: int


@dataclass(frozen=True)
class UserScramCredentials:
    name: str
    credentials: tuple[ScramCredentialInfo, ...]


@dataclass(frozen=True)
class ScramResult:
    name: str
    mechanism: str


class AclService(Protocol):
    def describe_acls(self, flt: AclBindingFilter) -> list[StandardAcl]: ...

    async def create_acls(self, acls: list[StandardAcl]) -> list[StandardAcl]:
        """The bindings created."""

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[StandardAcl]]:
        """Per filter, the bindings it removed."""

    def describe_client_quotas(self) -> list[QuotaDescription]: ...

    async def alter_client_quotas(self, entries: list[dict[str, Any]], validate_only: bool) -> int:
        """How many entries were changed; `entries` are {entity: {user, client_id}, ops: [{key,
        value} | {key, remove: true}]}."""


class UserService(Protocol):
    def describe(self, user: str | None) -> list[UserScramCredentials]: ...

    async def alter(self, upsertions: list[dict[str, Any]], deletions: list[dict[str, Any]]) -> list[ScramResult]:
        """All or none; `upsertions` {name, mechanism, iterations?, salt, salted_password} (base64),
        `deletions` {name, mechanism}."""
