"""Metadata records: builtins round trip (JSON/msgpack), and clear ValueErrors for bad dicts."""

from __future__ import annotations

import json

import msgpack
import pytest

from kraft.metadata.records import (
    RECORD_TYPES, ClaimController, Config, Endpoint, FenceBroker, NoOp, Partition, PartitionChange, ProducerIds,
    RegisterBroker, RemoveTopic, Topic, UnfenceBroker, UnregisterBroker, record_from_dict,
    RemoveUserScramCredential, UserScramCredential, AccessControlEntry, RemoveAccessControlEntry, ClientQuota,
)

EXAMPLES = [
    RegisterBroker(broker_id=1, incarnation_id="i", endpoints=(Endpoint("HTTP", "h", 1),), rack="r1"),
    UnregisterBroker(broker_id=1, broker_epoch=3),
    FenceBroker(broker_id=1, broker_epoch=3, controller_epoch=2),
    UnfenceBroker(broker_id=1, broker_epoch=3, request_id="req"),
    Topic(name="t", topic_id="id"),
    RemoveTopic(topic_id="id"),
    Partition(topic_id="id", partition=0, replicas=(1, 2), isr=(1,), leader=1, leader_epoch=4, partition_epoch=5),
    PartitionChange(topic_id="id", partition=0, isr=(1, 2)),
    PartitionChange(topic_id="id", partition=0, leader=-1, replicas=(2, 1)),
    Config(resource_type="topic", resource_name="t", name="retention.ms", value="1"),
    Config(resource_type="topic", resource_name="t", name="retention.ms", value=None),
    ProducerIds(broker_id=1, broker_epoch=3, next_producer_id=1000),
    NoOp(),
    ClaimController(node_id=3, controller_epoch=7),
    UserScramCredential(name="alice", mechanism="SCRAM-SHA-256", salt="c2FsdA==", stored_key="c3Q=",
                        server_key="c2U=", iterations=8192),
    RemoveUserScramCredential(name="alice", mechanism="SCRAM-SHA-256"),
    AccessControlEntry(id="a1", resource_type="TOPIC", resource_name="orders", pattern_type="PREFIXED",
                       principal="User:alice", host="*", operation="WRITE", permission_type="ALLOW"),
    RemoveAccessControlEntry(id="a1"),
    ClientQuota(user="alice", client_id=None, key="producer_byte_rate", value=1024.0),
    ClientQuota(user=None, client_id="<default>", key="request_percentage", value=None),
]


def test_every_record_type_has_an_example() -> None:
    assert {type(r) for r in EXAMPLES} == set(RECORD_TYPES.values())


@pytest.mark.parametrize("record", EXAMPLES, ids=lambda r: r.type)
def test_round_trip_through_json_and_msgpack(record) -> None:
    d = record.to_dict()
    assert d["type"] == record.type and d["version"] == 0
    assert record_from_dict(json.loads(json.dumps(d))) == record
    assert record_from_dict(msgpack.unpackb(msgpack.packb(d), raw=False)) == record


def test_stamped_sets_epoch_and_request() -> None:
    r = Topic(name="t", topic_id="id").stamped(4, "req-1")
    assert (r.controller_epoch, r.request_id, r.name) == (4, "req-1", "t")


@pytest.mark.parametrize("bad, reason", [
    ([], "must be a dict"),
    ({}, "unknown record type None"),
    ({"type": "Nope"}, "unknown record type 'Nope'"),
    ({"type": "Topic", "name": "t"}, "missing field 'topic_id'"),
    ({"type": "Topic", "name": 1, "topic_id": "x"}, "Topic.name: expected a string"),
    ({"type": "Topic", "name": "t", "topic_id": "x", "extra": 1}, "unknown fields ['extra']"),
    ({"type": "Topic", "name": "t", "topic_id": "x", "version": 9}, "unsupported version 9"),
    ({"type": "FenceBroker", "broker_id": True, "broker_epoch": 1}, "expected an int"),
    ({"type": "Partition", "topic_id": "x", "partition": 0, "replicas": "12", "isr": [], "leader": 1},
     "Partition.replicas: expected a list"),
    ({"type": "Partition", "topic_id": "x", "partition": 0, "replicas": [1, None], "isr": [], "leader": 1},
     "Partition.replicas[1]: expected an int"),
    ({"type": "RegisterBroker", "broker_id": 1, "incarnation_id": "i", "endpoints": [{"name": "a"}]},
     "endpoint lacks field 'host'"),
    ({"type": "ClaimController", "node_id": 1, "controller_epoch": "2"}, "expected an int"),
])
def test_malformed_dicts_raise_a_clear_value_error(bad, reason) -> None:
    with pytest.raises(ValueError) as e:
        record_from_dict(bad)
    assert reason in str(e.value)
