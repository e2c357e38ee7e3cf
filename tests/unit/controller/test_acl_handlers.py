"""The controller's ACL and client-quota handlers (kraft/controller/acl_handlers.py): records to
commit plus the answer, validated before anything is written."""

from __future__ import annotations

import random

import pytest

from kraft.controller.acl_handlers import alter_client_quotas, create_acls, delete_acls
from kraft.metadata.acl import AclBindingFilter, StandardAcl
from kraft.metadata.delta import apply_records
from kraft.metadata.errors import MetadataError
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import AccessControlEntry, ClientQuota, RemoveAccessControlEntry

READ = StandardAcl("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW")
WRITE = StandardAcl("TOPIC", "orders", "LITERAL", "User:alice", "*", "WRITE", "ALLOW")


def commit(image: MetadataImage, records) -> MetadataImage:
    return apply_records(image, [(image.offset + 1 + i, r) for i, r in enumerate(records)])[1]


def test_create_is_idempotent_and_delete_removes_what_filters_match() -> None:
    result = create_acls(MetadataImage.EMPTY, random.Random(1), [READ, WRITE, READ])
    assert [type(r) for r in result.records] == [AccessControlEntry, AccessControlEntry]  # READ once
    image = commit(MetadataImage.EMPTY, result.records)
    assert create_acls(image, random.Random(2), [READ]).records == ()  # exists already
    result = delete_acls(image, [AclBindingFilter(operation="READ"), AclBindingFilter(resource_name="orders")])
    assert [len(r["matching_acls"]) for r in result.response["filter_results"]] == [1, 2]
    assert sorted(r.id for r in result.records) == sorted(image.acls.acls)  # each removed once
    assert all(isinstance(r, RemoveAccessControlEntry) for r in result.records)
    assert not commit(image, result.records).acls.acls


def test_an_invalid_binding_writes_nothing() -> None:
    bad = StandardAcl("TOPIC", "orders", "MATCH", "User:alice", "*", "READ", "ALLOW")
    with pytest.raises(MetadataError) as e:
        create_acls(MetadataImage.EMPTY, random.Random(1), [READ, bad])
    assert e.value.error_code == "INVALID_REQUEST"


@pytest.mark.parametrize("entries", [
    [{"entity": {"user": None, "client_id": None}, "ops": [{"key": "producer_byte_rate", "value": 1}]}],
    [{"entity": {"user": "a"}, "ops": [{"key": "producer_byte_rate", "value": 0}]}],
    [{"entity": {"user": "a"}, "ops": [{"key": "producer_byte_rate", "value": True}]}],
    [{"entity": {"user": "a"}, "ops": [{"key": "fly_rate", "value": 1}]}],
    [{"entity": {"user": 5}, "ops": []}],
    ["x"],
    [{"entity": {"user": "a"}, "ops": [{"key": "producer_byte_rate", "value": 10**400}]}],  # beyond any float
    [{"entity": {"user": "a"}, "ops": [{"key": "producer_byte_rate", "remove": "no"}]}],  # truthy, not a bool
    [{"entity": {"user": "a"}, "ops": [{"key": {}, "remove": True}]}],
    [{"entity": {"user": ["a"]}, "ops": []}],
])
def test_bad_quota_entries_write_nothing(entries) -> None:
    with pytest.raises(MetadataError) as e:
        alter_client_quotas(MetadataImage.EMPTY, entries)
    assert e.value.error_code == "INVALID_REQUEST"


def test_quota_entries_become_records() -> None:
    result = alter_client_quotas(MetadataImage.EMPTY, [
        {"entity": {"user": "alice", "client_id": None},
         "ops": [{"key": "producer_byte_rate", "value": 1024}, {"key": "consumer_byte_rate", "remove": True}]}])
    assert result.records == (
        ClientQuota(user="alice", client_id=None, key="producer_byte_rate", value=1024.0),
        ClientQuota(user="alice", client_id=None, key="consumer_byte_rate", value=None))
    assert alter_client_quotas(MetadataImage.EMPTY, [
        {"entity": {"user": "alice"}, "ops": [{"key": "producer_byte_rate", "value": 1}]}], validate_only=True
    ).records == ()
