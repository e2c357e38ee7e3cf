"""ACLs and the authorizer core: Kafka's `StandardAuthorizer` rules, pure (no I/O, no clock).

An ACL binding (`StandardAcl`) is a resource pattern (resource type, name, pattern type LITERAL or
PREFIXED; the LITERAL name `*` matches every resource of its type) plus an entry (principal, host,
operation, ALLOW or DENY). `authorize()` answers one action the way Kafka's
`StandardAuthorizerData.authorize` does:
- a super user is allowed everything;
- among the ACLs whose pattern matches the resource, one DENY that matches the principal (or
  `User:*`), the host (or `*`) and the operation (or ALL) denies, whatever ALLOWs say;
- else a matching ALLOW allows; an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and
  one of ALTER_CONFIGS allows DESCRIBE_CONFIGS (implications never widen a DENY);
- else, when no ACL at all matched the resource, `allow.everyone.if.no.acl.found` decides;
  otherwise the action is denied.
`AclIndex` finds the ACLs of a resource without scanning the others: a dict by (type, literal
name) and one by (type, prefix), probed only at the prefix lengths that exist. `AclsImage` (the
image's ACLs by id) builds its index once. `AclBindingFilter` is Kafka's filter for describe and
delete (ANY / MATCH pattern types, absent fields match everything).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Iterable, Mapping

from kraft.metadata.errors import MetadataError
from kraft.metadata.persistent import frozen_map, with_changes

TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"
RESOURCE_TYPES = (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID)
LITERAL, PREFIXED = "LITERAL", "PREFIXED"
PATTERN_TYPES = (LITERAL, PREFIXED)
ALLOW, DENY = "ALLOW", "DENY"
PERMISSION_TYPES = (ALLOW, DENY)
OPERATIONS = (
    "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS", "IDEMPOTENT_WRITE",
)
ANY, MATCH = "ANY", "MATCH"  # filter-only values
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource

# Kafka's AclEntry.supportedOperations (ALL is valid everywhere): what kafka-acls accepts per type
SUPPORTED_OPERATIONS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    TOPIC: ("READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"),
    GROUP: ("READ", "DESCRIBE", "DELETE"),
    CLUSTER: ("CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER",
              "DESCRIBE"),
    TRANSACTIONAL_ID: ("DESCRIBE", "WRITE"),
})
IMPLIES_DESCRIBE = frozenset({"DESCRIBE", "READ", "WRITE", "DELETE", "ALTER"})
IMPLIES_DESCRIBE_CONFIGS = frozenset({"DESCRIBE_CONFIGS", "ALTER_CONFIGS"})

MAX_NAME_CHARS = 4096


def _camel_to_upper(text: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", text.strip()).upper()


def parse_operation(text: str) -> str:
    """Kafka's operation names as kafka-acls takes them: `Read`, `DescribeConfigs`, `READ`,
    `describe_configs`; ValueError for anything else."""
    name = _camel_to_upper(text)
    if name not in OPERATIONS:
        raise ValueError(f"unknown operation {text!r}")
    return name


def operation_name(operation: str) -> str:
    """`DESCRIBE_CONFIGS` -> `DescribeConfigs` (Kafka's SecurityUtils.operationName)."""
    return "".join(part.capitalize() for part in operation.split("_"))


def principal_type(principal: str) -> str:
    return principal.split(":", 1)[0]


@dataclass(frozen=True, order=True)
class StandardAcl:
    """One ACL binding, with Kafka's enum names as strings (`TOPIC`, `PREFIXED`, `READ`, `ALLOW`)."""

    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str  # "User:alice", "User:*"
    host: str  # an IP address or "*"
    operation: str
    permission_type: str

    FIELDS: ClassVar[tuple[str, ...]] = (
        "resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission_type",
    )

    def to_dict(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in self.FIELDS}

    def validate(self) -> None:
        """MetadataError INVALID_REQUEST unless this is a binding Kafka's CreateAcls accepts."""
        def bad(message: str) -> MetadataError:
            return MetadataError("INVALID_REQUEST", message)

        if self.resource_type not in RESOURCE_TYPES:
            raise bad(f"invalid resource type {self.resource_type!r} (one of {', '.join(RESOURCE_TYPES)})")
        if self.pattern_type not in PATTERN_TYPES:
            raise bad(f"invalid pattern type {self.pattern_type!r} (LITERAL or PREFIXED)")
        if self.operation not in OPERATIONS:
            raise bad(f"invalid operation {self.operation!r}")
        if self.permission_type not in PERMISSION_TYPES:
            raise bad(f"invalid permission type {self.permission_type!r} (ALLOW or DENY)")
        if not self.resource_name or len(self.resource_name) > MAX_NAME_CHARS:
            raise bad("the resource name must have 1 to 4096 characters")
        if self.resource_type == CLUSTER and self.resource_name != CLUSTER_NAME:
            raise bad(f"the only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        kind, _, name = self.principal.partition(":")
        if not kind or not name or len(self.principal) > MAX_NAME_CHARS:
            raise bad(f"invalid principal {self.principal!r}: expected principalType:name, e.g. User:alice")
        if not self.host or len(self.host) > MAX_NAME_CHARS:
            raise bad("the host must be an address or *")


def acl_from_dict(d: Any) -> StandardAcl:
    """A binding from its dict form (names as Kafka spells them, any case); MetadataError INVALID_REQUEST."""
    if not isinstance(d, Mapping):
        raise MetadataError("INVALID_REQUEST", "an ACL binding must be an object")
    values = {}
    for name in StandardAcl.FIELDS:
        value = d.get(name, WILDCARD if name == "host" else None)
        if not isinstance(value, str):
            raise MetadataError("INVALID_REQUEST", f"ACL binding field {name!r} must be a string")
        values[name] = value if name in ("resource_name", "principal", "host") else _camel_to_upper(value)
    acl = StandardAcl(**values)
    acl.validate()
    return acl


# -- filters (describe, delete) ------------------------------------------------------------------


@dataclass(frozen=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter: None / ANY match everything; pattern type MATCH matches every
    pattern that applies to `resource_name` (literal, `*`, and prefixes of it)."""

    resource_type: str = ANY
    resource_name: str | None = None
    pattern_type: str = ANY
    principal: str | None = None
    host: str | None = None
    operation: str = ANY
    permission_type: str = ANY

    def validate(self) -> None:
        def check(value: str, allowed: Iterable[str], what: str) -> None:
            if value != ANY and value not in allowed:
                raise MetadataError("INVALID_REQUEST", f"invalid {what} {value!r} in an ACL filter")

        check(self.resource_type, RESOURCE_TYPES, "resource type")
        if self.pattern_type != MATCH:
            check(self.pattern_type, PATTERN_TYPES, "pattern type")
        check(self.operation, OPERATIONS, "operation")
        check(self.permission_type, PERMISSION_TYPES, "permission type")

    def matches(self, acl: StandardAcl) -> bool:
        if self.resource_type not in (ANY, acl.resource_type):
            return False
        if self.pattern_type == MATCH:
            if self.resource_name is not None and not _pattern_applies(acl, self.resource_name):
                return False
        else:
            if self.pattern_type not in (ANY, acl.pattern_type):
                return False
            if self.resource_name is not None and self.resource_name != acl.resource_name:
                return False
        return (self.principal in (None, acl.principal) and self.host in (None, acl.host)
                and self.operation in (ANY, acl.operation) and self.permission_type in (ANY, acl.permission_type))


def filter_from_dict(d: Any) -> AclBindingFilter:
    if not isinstance(d, Mapping):
        raise MetadataError("INVALID_REQUEST", "an ACL filter must be an object")
    values: dict[str, Any] = {}
    for name in StandardAcl.FIELDS:
        value = d.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise MetadataError("INVALID_REQUEST", f"ACL filter field {name!r} must be a string or null")
        values[name] = value if name in ("resource_name", "principal", "host") else _camel_to_upper(value)
    flt = AclBindingFilter(**values)
    flt.validate()
    return flt


def _pattern_applies(acl: StandardAcl, resource_name: str) -> bool:
    """Whether the ACL's resource pattern covers the (literal) resource `resource_name`."""
    if acl.pattern_type == LITERAL:
        return acl.resource_name in (resource_name, WILDCARD)
    return resource_name.startswith(acl.resource_name)


# -- the authorizer ------------------------------------------------------------------------------


class AclIndex:
    """The ACLs of each resource pattern, so one check looks at the few ACLs of its resource."""

    def __init__(self, acls: Iterable[StandardAcl]) -> None:
        literal: dict[tuple[str, str], list[StandardAcl]] = {}
        prefixed: dict[tuple[str, str], list[StandardAcl]] = {}
        lengths: dict[str, set[int]] = {}
        for acl in acls:
            key = (acl.resource_type, acl.resource_name)
            if acl.pattern_type == LITERAL:
                literal.setdefault(key, []).append(acl)
            else:
                prefixed.setdefault(key, []).append(acl)
                lengths.setdefault(acl.resource_type, set()).add(len(acl.resource_name))
        self._literal = {k: tuple(v) for k, v in literal.items()}
        self._prefixed = {k: tuple(v) for k, v in prefixed.items()}
        self._prefix_lengths = {t: tuple(sorted(ls)) for t, ls in lengths.items()}

    def matching(self, resource_type: str, resource_name: str) -> Iterable[StandardAcl]:
        """Every ACL whose pattern covers the resource (literal, `*`, prefixes)."""
        yield from self._literal.get((resource_type, resource_name), ())
        if resource_name != WILDCARD:
            yield from self._literal.get((resource_type, WILDCARD), ())
        for n in self._prefix_lengths.get(resource_type, ()):
            if n > len(resource_name):
                break
            yield from self._prefixed.get((resource_type, resource_name[:n]), ())


def _result(acl: StandardAcl, principal: str, host: str, operation: str) -> bool | None:
    """ALLOW (True), DENY (False) or no opinion (None) of one ACL whose pattern matches (Kafka's
    findResult)."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation != "ALL":
        if acl.permission_type == ALLOW:
            if operation == "DESCRIBE":
                if acl.operation not in IMPLIES_DESCRIBE:
                    return None
            elif operation == "DESCRIBE_CONFIGS":
                if acl.operation not in IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif operation != acl.operation:
                return None
        elif operation != acl.operation:
            return None
    return acl.permission_type == ALLOW


@dataclass(frozen=True)
class AuthorizerSettings:
    """`super.users` and `allow.everyone.if.no.acl.found` (false by default, as with Kafka's
    StandardAuthorizer)."""

    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False


def authorize(index: AclIndex, settings: AuthorizerSettings, principal: str, host: str, operation: str,
              resource_type: str, resource_name: str) -> bool:
    """Kafka's StandardAuthorizer decision for one action on one literal resource."""
    assert operation in OPERATIONS and operation != "ALL", operation
    if principal in settings.super_users:
        return True
    found_resource_acl = False
    allowed = False
    for acl in index.matching(resource_type, resource_name):
        found_resource_acl = True
        result = _result(acl, principal, host, operation)
        if result is False:
            return False
        if result:
            allowed = True
    if allowed:
        return True
    return not found_resource_acl and settings.allow_everyone_if_no_acl_found


# -- the image -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AclsImage:
    """The cluster's ACLs by id (Kafka's AclsImage); `index` is built once per image."""

    acls: Mapping[str, StandardAcl] = field(default_factory=frozen_map)
    EMPTY: ClassVar["AclsImage"]

    @functools.cached_property
    def index(self) -> AclIndex:
        return AclIndex(self.acls.values())

    def find(self, acl: StandardAcl) -> str | None:
        """The id of an identical binding, if there is one."""
        for acl_id in self._ids_by_binding.get(acl, ()):
            return acl_id
        return None

    @functools.cached_property
    def _ids_by_binding(self) -> Mapping[StandardAcl, tuple[str, ...]]:
        out: dict[StandardAcl, list[str]] = {}
        for acl_id, acl in self.acls.items():
            out.setdefault(acl, []).append(acl_id)
        return {k: tuple(v) for k, v in out.items()}

    def matching(self, flt: AclBindingFilter) -> list[tuple[str, StandardAcl]]:
        """(id, binding) of every ACL the filter matches, in binding order."""
        return sorted(((i, a) for i, a in self.acls.items() if flt.matches(a)), key=lambda ia: (ia[1], ia[0]))

    def with_changes(self, changes: Mapping[str, StandardAcl | None]) -> "AclsImage":
        """The image after adding (binding) / removing (None) ACLs by id."""
        if not changes:
            return self
        return AclsImage(with_changes(self.acls, changes))  # persistent: O(changes · log n), shares the rest

    def to_snapshot(self) -> list[list[str]]:
        return [[acl_id, *(getattr(acl, f) for f in StandardAcl.FIELDS)] for acl_id, acl in sorted(self.acls.items())]

    @classmethod
    def from_snapshot(cls, rows: Iterable[Any]) -> "AclsImage":
        return cls(frozen_map({str(row[0]): StandardAcl(*map(str, row[1:8])) for row in rows}))


AclsImage.EMPTY = AclsImage()
