"""The authorizer core (metadata/acl.py): Kafka's StandardAuthorizer rules, case by case and as a
property against a plain reading of the rules that scans every ACL."""

from __future__ import annotations

from types import MappingProxyType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraft.metadata.acl import (
    ALLOW, DENY, LITERAL, OPERATIONS, PREFIXED, AclBindingFilter, AclIndex, AclsImage, AuthorizerSettings,
    StandardAcl, acl_from_dict, authorize, filter_from_dict, operation_name, parse_operation,
)
from kraft.metadata.errors import MetadataError

HOST = "10.0.0.1"
DEFAULT = AuthorizerSettings()


def acl(name: str, op: str = "WRITE", perm: str = ALLOW, pattern: str = LITERAL, principal: str = "User:alice",
        host: str = "*", rtype: str = "TOPIC") -> StandardAcl:
    return StandardAcl(rtype, name, pattern, principal, host, op, perm)


def allowed(acls: list[StandardAcl], op: str, name: str, principal: str = "User:alice", host: str = HOST,
            settings: AuthorizerSettings = DEFAULT, rtype: str = "TOPIC") -> bool:
    return authorize(AclIndex(acls), settings, principal, host, op, rtype, name)


def test_write_allows_write_and_implies_describe_only() -> None:
    acls = [acl("orders")]
    assert allowed(acls, "WRITE", "orders")
    assert allowed(acls, "DESCRIBE", "orders")
    assert not allowed(acls, "READ", "orders")
    assert not allowed(acls, "WRITE", "orders", principal="User:bob")
    assert not allowed(acls, "WRITE", "orders2")  # literal is exact


def test_alter_configs_implies_describe_configs_but_deny_is_not_widened() -> None:
    assert allowed([acl("t", "ALTER_CONFIGS")], "DESCRIBE_CONFIGS", "t")
    # a DENY of READ does not deny DESCRIBE (implications apply to ALLOW only)
    assert allowed([acl("t", "ALL"), acl("t", "READ", DENY)], "DESCRIBE", "t")
    assert not allowed([acl("t", "ALL"), acl("t", "READ", DENY)], "READ", "t")


def test_deny_beats_allow_from_any_pattern() -> None:
    acls = [acl("*", "ALL"), acl("secret-", "READ", DENY, PREFIXED)]
    assert allowed(acls, "READ", "orders")
    assert not allowed(acls, "READ", "secret-keys")
    assert allowed(acls, "WRITE", "secret-keys")
    assert not allowed([acl("orders"), acl("orders", "WRITE", DENY, principal="User:*")], "WRITE", "orders")


def test_prefixed_matches_names_starting_with_it() -> None:
    acls = [acl("ord", pattern=PREFIXED)]
    assert allowed(acls, "WRITE", "orders") and allowed(acls, "WRITE", "ord")
    assert not allowed(acls, "WRITE", "or") and not allowed(acls, "WRITE", "xorders")


def test_host_and_wildcard_principal() -> None:
    assert allowed([acl("t", host=HOST)], "WRITE", "t")
    assert not allowed([acl("t", host="10.0.0.2")], "WRITE", "t")
    assert allowed([acl("t", principal="User:*")], "WRITE", "t", principal="User:zed")


def test_no_acl_default_and_super_users() -> None:
    assert not allowed([], "READ", "t")
    everyone = AuthorizerSettings(allow_everyone_if_no_acl_found=True)
    assert allowed([], "READ", "t", settings=everyone)
    # an ACL on the resource for someone else: no longer "no ACL found"
    assert not allowed([acl("t", principal="User:bob")], "READ", "t", settings=everyone)
    assert allowed([acl("t", "READ", DENY)], "READ", "t", settings=AuthorizerSettings(frozenset({"User:alice"})))


def test_resource_types_are_separate() -> None:
    assert not allowed([acl("g", "READ")], "READ", "g", rtype="GROUP")
    assert allowed([acl("g", "READ", rtype="GROUP")], "READ", "g", rtype="GROUP")


def test_operation_names_as_kafka_acls_takes_them() -> None:
    assert parse_operation("Read") == "READ"
    assert parse_operation("DescribeConfigs") == parse_operation("describe_configs") == "DESCRIBE_CONFIGS"
    assert parse_operation("IdempotentWrite") == "IDEMPOTENT_WRITE"
    assert operation_name("CLUSTER_ACTION") == "ClusterAction"
    with pytest.raises(ValueError):
        parse_operation("Fly")


@pytest.mark.parametrize("bad", [
    {"resource_type": "TOPIC", "resource_name": "t", "pattern_type": "MATCH", "principal": "User:a",
     "operation": "READ", "permission_type": "ALLOW"},
    {"resource_type": "TOPIC", "resource_name": "t", "pattern_type": "LITERAL", "principal": "alice",
     "operation": "READ", "permission_type": "ALLOW"},
    {"resource_type": "CLUSTER", "resource_name": "c", "pattern_type": "LITERAL", "principal": "User:a",
     "operation": "ALTER", "permission_type": "ALLOW"},
    {"resource_type": "TOPIC", "resource_name": "t", "pattern_type": "LITERAL", "principal": "User:a",
     "operation": "ANY", "permission_type": "ALLOW"},
    {"resource_type": "TOPIC", "resource_name": "", "pattern_type": "LITERAL", "principal": "User:a",
     "operation": "READ", "permission_type": "ALLOW"},
    {"resource_type": "TOPIC", "resource_name": "t", "pattern_type": "LITERAL", "principal": "User:a",
     "operation": "READ", "permission_type": 1},
])
def test_invalid_bindings_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(MetadataError) as e:
        acl_from_dict(bad)
    assert e.value.error_code == "INVALID_REQUEST"


def test_filters_as_kafka_describes_them() -> None:
    a, b, c = acl("orders"), acl("ord", pattern=PREFIXED), acl("*", "READ")
    image = AclsImage(MappingProxyType({"1": a, "2": b, "3": c}))
    names = lambda f: [x.resource_name for _, x in image.matching(f)]  # noqa: E731
    assert names(AclBindingFilter()) == ["*", "ord", "orders"]
    assert names(AclBindingFilter("TOPIC", "orders", "ANY")) == ["orders"]
    assert names(AclBindingFilter("TOPIC", "orders", "MATCH")) == ["*", "ord", "orders"]
    assert names(AclBindingFilter("TOPIC", "ord", "PREFIXED")) == ["ord"]
    assert names(filter_from_dict({"operation": "Read"})) == ["*"]
    assert image.find(acl("orders")) == "1" and image.find(acl("orders", "READ")) is None


# -- property: the index answers what a scan of every ACL answers ----------------------------------

NAMES = ["a", "ab", "abc", "b", "*"]
PRINCIPALS = ["User:alice", "User:bob", "User:*"]
HOSTS = ["*", "h1", "h2"]
OPS = [o for o in OPERATIONS]

acls_strategy = st.lists(st.builds(
    StandardAcl, st.sampled_from(["TOPIC", "GROUP"]), st.sampled_from(NAMES), st.sampled_from([LITERAL, PREFIXED]),
    st.sampled_from(PRINCIPALS), st.sampled_from(HOSTS), st.sampled_from(OPS), st.sampled_from([ALLOW, DENY]),
), max_size=12)


def reference(acls: list[StandardAcl], settings: AuthorizerSettings, principal: str, host: str, op: str,
              rtype: str, name: str) -> bool:
    """The rules as the docs state them, by scanning every ACL."""
    if principal in settings.super_users:
        return True

    def covers(a: StandardAcl) -> bool:
        if a.resource_type != rtype:
            return False
        if a.pattern_type == LITERAL:
            return a.resource_name == name or a.resource_name == "*"
        return name.startswith(a.resource_name)

    def applies(a: StandardAcl) -> bool:
        return a.principal in (principal, "User:*") and a.host in ("*", host)

    on_resource = [a for a in acls if covers(a)]
    if any(applies(a) and a.permission_type == DENY and a.operation in (op, "ALL") for a in on_resource):
        return False
    implied = {"DESCRIBE": {"READ", "WRITE", "DELETE", "ALTER"}, "DESCRIBE_CONFIGS": {"ALTER_CONFIGS"}}.get(op, set())
    if any(applies(a) and a.permission_type == ALLOW and a.operation in {op, "ALL", *implied} for a in on_resource):
        return True
    return not on_resource and settings.allow_everyone_if_no_acl_found


@given(acls_strategy, st.sampled_from(["User:alice", "User:bob"]), st.sampled_from(["h1", "h2"]),
       st.sampled_from([o for o in OPS if o != "ALL"]), st.sampled_from(["TOPIC", "GROUP"]),
       st.sampled_from(["a", "ab", "abc", "abd", "b", "c"]), st.booleans(), st.booleans())
def test_index_agrees_with_a_scan_of_every_acl(acls, principal, host, op, rtype, name, everyone, alice_super) -> None:
    settings = AuthorizerSettings(frozenset({"User:alice"} if alice_super else ()), everyone)
    assert authorize(AclIndex(acls), settings, principal, host, op, rtype, name) == \
        reference(acls, settings, principal, host, op, rtype, name)
