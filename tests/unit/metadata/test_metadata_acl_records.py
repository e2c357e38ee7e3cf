"""ACL and client-quota records in the metadata image: replayed, validated, kept in snapshots,
removed; the quota of a request resolved in Kafka's order."""

from __future__ import annotations

from kraft.metadata.acl import AclBindingFilter
from kraft.metadata.client_quotas import DEFAULT
from kraft.metadata.delta import apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import AccessControlEntry, ClientQuota, RemoveAccessControlEntry, record_from_dict


def entry(acl_id: str, name: str = "orders", op: str = "WRITE", perm: str = "ALLOW") -> AccessControlEntry:
    return AccessControlEntry(id=acl_id, resource_type="TOPIC", resource_name=name, pattern_type="LITERAL",
                              principal="User:alice", host="*", operation=op, permission_type=perm)


def test_acls_replay_survive_a_snapshot_and_are_removed() -> None:
    delta, image = apply_records(MetadataImage.EMPTY, [
        (0, entry("a")), (1, entry("b", op="READ")), (2, entry("a", op="ALTER")),  # id reused: ignored
        (3, entry("c", op="ANY")),  # not a binding: ignored
    ])
    assert [o for o, _ in delta.ignored] == [2, 3]
    assert sorted(image.acls.acls) == ["a", "b"]
    assert MetadataImage.from_snapshot(image.to_snapshot()).acls == image.acls
    assert [a.operation for _, a in image.acls.matching(AclBindingFilter())] == ["READ", "WRITE"]
    delta, image = apply_records(image, [(4, RemoveAccessControlEntry(id="a")), (5, RemoveAccessControlEntry(id="z"))])
    assert sorted(image.acls.acls) == ["b"] and [o for o, _ in delta.ignored] == [5]
    assert record_from_dict(entry("x").to_dict()) == entry("x")


def test_quotas_replay_resolve_in_kafkas_order_and_are_removed() -> None:
    delta, image = apply_records(MetadataImage.EMPTY, [
        (0, ClientQuota(user="alice", client_id=None, key="producer_byte_rate", value=1024)),
        (1, ClientQuota(user=DEFAULT, client_id=None, key="producer_byte_rate", value=10)),
        (2, ClientQuota(user="alice", client_id="app", key="producer_byte_rate", value=2048)),
        (3, ClientQuota(user=None, client_id="app", key="consumer_byte_rate", value=99)),
        (4, ClientQuota(user=None, client_id=None, key="producer_byte_rate", value=1)),  # no entity
        (5, ClientQuota(user="alice", client_id=None, key="producer_byte_rate", value=1.5)),  # not whole bytes
        (6, ClientQuota(user="alice", client_id=None, key="fly_rate", value=1)),
    ])
    assert [o for o, _ in delta.ignored] == [4, 5, 6]
    q = image.client_quotas
    assert q.quota("alice", "app", "producer_byte_rate") == 2048
    assert q.quota("alice", "other", "producer_byte_rate") == 1024
    assert q.quota("bob", "other", "producer_byte_rate") == 10
    assert q.quota("bob", "app", "consumer_byte_rate") == 99 and q.quota("bob", "x", "consumer_byte_rate") is None
    assert MetadataImage.from_snapshot(image.to_snapshot()).client_quotas == q
    _, image = apply_records(image, [(7, ClientQuota(user="alice", client_id="app", key="producer_byte_rate",
                                                     value=None))])
    assert image.client_quotas.quota("alice", "app", "producer_byte_rate") == 1024
    assert ("alice", "app") not in image.client_quotas.entities


def test_a_snapshot_without_acls_or_quotas_loads() -> None:
    snapshot = MetadataImage.EMPTY.to_snapshot()
    del snapshot["acls"], snapshot["client_quotas"]
    image = MetadataImage.from_snapshot(snapshot)
    assert not image.acls.acls and not image.client_quotas.entities
