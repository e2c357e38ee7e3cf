"""MetadataDelta replay/apply and the image it builds: validation, trusted claims and request ids,
local changes. (Fencing and dedup are the log's admission rule: test_metadata_log_rules.py.)"""

from __future__ import annotations

import pytest
from metadata_testing import EPOCH, build, cluster_records, replay, topic_records

from kraft.metadata.delta import MetadataDelta
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import (
    ClaimController, Config, FenceBroker, NoOp, Partition, PartitionChange, ProducerIds, RegisterBroker, RemoveTopic,
    Topic, UnregisterBroker,
)

E = EPOCH


@pytest.fixture
def image() -> MetadataImage:
    return build(cluster_records([1, 2, 3]) + topic_records("t", "tid", [[1, 2, 3], [2, 3, 1]]))


def test_cluster_and_topic_are_built(image: MetadataImage) -> None:
    assert image.offset == 9 and image.controller_id == 1 and image.controller_epoch == E
    assert [b.broker_id for b in image.live_brokers()] == [1, 2, 3]
    assert image.cluster.broker(2).broker_epoch == 3  # the offset of its RegisterBroker record
    p1 = image.partition("t", 1)
    assert (p1.replicas, p1.isr, p1.leader, p1.leader_epoch, p1.partition_epoch) == ((2, 3, 1), (2, 3, 1), 2, 0, 0)
    assert image.leader_endpoint("t", 1).port == 9002
    assert image.topic_by_id("tid") is image.topic_by_name("t")
    assert image.partition("t", 2) is None and image.partition("nope", 0) is None


def test_to_dict_has_the_metadata_route_fields(image: MetadataImage) -> None:
    d = image.to_dict(cluster_id="c1", topics=["t", "missing"])
    assert d["cluster_id"] == "c1" and d["controller_id"] == 1
    assert d["brokers"][0] == {"node_id": 1, "host": "127.0.0.1", "port": 9001, "rack": None}
    (t,) = d["topics"]
    assert (t["name"], t["topic_id"], t["internal"]) == ("t", "tid", False)
    assert t["partitions"][0] == {"partition": 0, "leader": 1, "leader_epoch": 0, "replicas": [1, 2, 3],
                                  "isr": [1, 2, 3]}


def test_partition_change_bumps_epochs(image: MetadataImage) -> None:
    _, after = replay([PartitionChange(topic_id="tid", partition=0, isr=(1, 2), controller_epoch=E)], image)
    p = after.partition("t", 0)
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1, 2), 1, 0, 1)
    _, after = replay([PartitionChange(topic_id="tid", partition=0, leader=2, isr=(2,), controller_epoch=E)], after)
    p = after.partition("t", 0)
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((2,), 2, 1, 2)
    assert p.replicas == (1, 2, 3)  # absent = unchanged


def test_unchanged_topics_are_shared(image: MetadataImage) -> None:
    two = build([])  # sanity: empty replay is EMPTY
    assert two == MetadataImage.EMPTY
    base = replay(topic_records("u", "uid", [[1]]), image)[1]
    _, after = replay([PartitionChange(topic_id="uid", partition=0, isr=(1,), controller_epoch=E)], base)
    assert after.topic_by_name("t") is base.topic_by_name("t")
    assert after.cluster is base.cluster and after.configs is base.configs
    assert after.topic_by_name("u") is not base.topic_by_name("u")


@pytest.mark.parametrize("record, reason", [
    (Topic(name="t", topic_id="other", controller_epoch=E), "already exists"),
    (Topic(name="bad name", topic_id="x", controller_epoch=E), "INVALID_TOPIC_EXCEPTION"),
    (Topic(name="u", topic_id="tid", controller_epoch=E), "already used"),
    (Partition(topic_id="tid", partition=5, replicas=(1,), isr=(1,), leader=1, controller_epoch=E), "next partition is 2"),
    (Partition(topic_id="nope", partition=0, replicas=(1,), isr=(1,), leader=1, controller_epoch=E), "unknown topic id"),
    (Partition(topic_id="tid", partition=2, replicas=(1, 1), isr=(1,), leader=1, controller_epoch=E), "distinct"),
    (Partition(topic_id="tid", partition=2, replicas=(1, 2), isr=(3,), leader=3, controller_epoch=E), "isr"),
    (PartitionChange(topic_id="tid", partition=0, leader=3, isr=(1, 2), controller_epoch=E), "leader 3 must be in isr"),
    (PartitionChange(topic_id="tid", partition=9, isr=(1,), controller_epoch=E), "unknown partition"),
    (FenceBroker(broker_id=1, broker_epoch=99, controller_epoch=E), "stale"),
    (FenceBroker(broker_id=9, broker_epoch=1, controller_epoch=E), "not registered"),
    (Config(resource_type="topic", resource_name="nope", name="a", value="b", controller_epoch=E), "unknown topic"),
    (Config(resource_type="group", resource_name="t", name="a", value="b", controller_epoch=E), "resource type"),
    (ProducerIds(broker_id=1, broker_epoch=1, next_producer_id=0, controller_epoch=E), "not after"),
    (RegisterBroker(broker_id=1, incarnation_id="x", endpoints=(), controller_epoch=E), "no endpoint"),
    ({"type": "Topic"}, "missing field"),
    ({"type": "Unknown"}, "unknown record type"),
])
def test_invalid_records_are_no_ops_with_a_reason(image: MetadataImage, record, reason: str) -> None:
    delta = MetadataDelta(image)
    assert delta.replay(record, image.offset + 1) is False
    assert reason in delta.ignored[-1][1]
    after = delta.apply()
    assert after.offset == image.offset + 1
    assert after.topics is image.topics and after.cluster is image.cluster and after.configs is image.configs


def test_non_increasing_offset_is_ignored(image: MetadataImage) -> None:
    delta = MetadataDelta(image)
    assert delta.replay(NoOp(controller_epoch=E), image.offset) is False
    assert delta.apply().offset == image.offset


def test_replay_trusts_admitted_records_claims_and_epochs(image: MetadataImage) -> None:
    """Records with offsets were admitted by the log's rule (log_rules.admit) before they got
    them: replay applies a claim as the new active controller and does not fence again."""
    delta, after = replay([
        ClaimController(node_id=2, controller_epoch=E + 1),
        Topic(name="new", topic_id="new-id", controller_epoch=E + 1),
    ], image)
    assert (after.controller_id, after.controller_epoch) == (2, E + 1)
    assert after.topic_by_name("new") is not None and not delta.ignored


def test_request_ids_are_remembered_per_request_with_its_last_offset(image: MetadataImage) -> None:
    request = [r.stamped(E, "req-1") for r in topic_records("u", "uid", [[1], [2]])]
    delta, after = replay(request + [NoOp(controller_epoch=E), NoOp(controller_epoch=E, request_id="req-2")], image)
    assert dict(after.request_ids) == {"req-1": image.offset + len(request), "req-2": image.offset + len(request) + 2}
    assert list(after.request_ids) == ["req-1", "req-2"] and after.has_request("req-1")
    # a record replay ignores still belongs to its request (the rule admitted its batch whole)
    bad = replay([Topic(name="u", topic_id="x", controller_epoch=E, request_id="req-3")], after)
    assert bad[0].ignored and bad[1].request_ids["req-3"] == after.offset + 1


def test_remove_topic_drops_partitions_and_configs_and_frees_the_name(image: MetadataImage) -> None:
    with_config = replay([Config(resource_type="topic", resource_name="t", name="retention.ms", value="5",
                                 controller_epoch=E)], image)[1]
    assert dict(with_config.topic_configs("t")) == {"retention.ms": "5"}
    delta, after = replay([
        RemoveTopic(topic_id="tid", controller_epoch=E),
        *topic_records("t", "tid2", [[3]]),
    ], with_config)
    assert after.topic_by_name("t").topic_id == "tid2" and after.topic_by_id("tid") is None
    assert not after.topic_configs("t")
    changes = delta.local_changes(3)
    assert changes.deletes == {("t", 0), ("t", 1)}  # the old topic's replicas; apply deletes first
    assert set(changes.leaders) == {("t", 0)} and changes.topic_ids == {"t": "tid2"}


def test_local_changes(image: MetadataImage) -> None:
    delta, _ = replay([
        PartitionChange(topic_id="tid", partition=0, leader=2, isr=(2, 3), controller_epoch=E),
        PartitionChange(topic_id="tid", partition=1, replicas=(2, 3), isr=(2, 3), controller_epoch=E),
    ], image)
    one = delta.local_changes(1)
    assert set(one.followers) == {("t", 0)} and one.leaders == {} and one.deletes == {("t", 1)}
    two = delta.local_changes(2)
    assert set(two.leaders) == {("t", 0), ("t", 1)} and two.leaders[("t", 0)].leader_epoch == 1
    assert delta.local_changes(7) == type(one)()


def test_broker_lifecycle(image: MetadataImage) -> None:
    epoch = image.cluster.broker(3).broker_epoch
    delta, after = replay([
        FenceBroker(broker_id=3, broker_epoch=epoch, controller_epoch=E),
        RegisterBroker(broker_id=4, incarnation_id="x", endpoints=image.cluster.broker(1).endpoints, rack="r",
                       controller_epoch=E),
        UnregisterBroker(broker_id=2, broker_epoch=image.cluster.broker(2).broker_epoch, controller_epoch=E),
    ], image)
    assert after.cluster.broker(3).fenced and after.cluster.broker(4).fenced
    assert after.cluster.broker(4).broker_epoch == image.offset + 2
    assert after.cluster.broker(2) is None
    assert [b.broker_id for b in after.live_brokers()] == [1]
    assert delta.changed_brokers[2] is None and set(delta.changed_brokers) == {2, 3, 4}
    # re-registering needs a newer epoch: the same (explicit) epoch is stale
    stale = RegisterBroker(broker_id=4, incarnation_id="y", endpoints=image.cluster.broker(1).endpoints,
                           broker_epoch=image.offset + 2, controller_epoch=E)
    assert replay([stale], after)[0].ignored


def test_snapshot_round_trip_and_snapshot_delta(image: MetadataImage) -> None:
    full = replay([Config(resource_type="topic", resource_name="t", name="a", value="b", controller_epoch=E),
                   ProducerIds(broker_id=1, broker_epoch=1, next_producer_id=2000, controller_epoch=E, request_id="r")],
                  image)[1]
    assert MetadataImage.from_snapshot(full.to_snapshot()) == full
    import pickle
    assert pickle.loads(pickle.dumps(full)) == full
    older = build(cluster_records([1, 2, 3]) + topic_records("gone", "gid", [[1]]))
    delta = MetadataDelta.from_snapshot(older, full)
    assert delta.apply() is full
    changes = delta.local_changes(1)
    assert changes.deletes == {("gone", 0)} and set(changes.leaders) == {("t", 0)} and set(changes.followers) == {("t", 1)}


@pytest.mark.parametrize("bad", [None, {}, {"format": 99}, {"format": 1, "offset": 1},
                                 {**MetadataImage.EMPTY.to_snapshot(), "topics": [["t", "id", [[0, [], [], 1, 0, 0, [], []]]]]}])
def test_malformed_snapshot_raises_value_error(bad) -> None:
    with pytest.raises(ValueError):
        MetadataImage.from_snapshot(bad)


def test_a_topic_record_named_after_the_metadata_log_is_ignored() -> None:
    # Written by an older node that let clients create it: replay must not make it a partition.
    image = build(cluster_records([1]) + topic_records("__cluster_metadata", "cm", [[1]])
                  + topic_records("t", "tid", [[1]]))
    assert image.topic_by_name("__cluster_metadata") is None and image.topic_by_id("cm") is None
    assert image.partition("t", 0) is not None


def test_the_first_claim_that_names_a_cluster_names_it_for_good() -> None:
    """Issue 22 item 10: the log records the cluster id with its first controller's claim; later
    claims (another controller's idea of it, e.g. before it replayed the log) change nothing."""
    unnamed = build([ClaimController(node_id=1, controller_epoch=1)])  # a log written before ids were recorded
    assert unnamed.cluster_id is None
    _, named = replay([ClaimController(node_id=2, controller_epoch=2, cluster_id="first")], unnamed)
    assert named.cluster_id == "first"
    _, later = replay([ClaimController(node_id=3, controller_epoch=3, cluster_id="second"),
                       ClaimController(node_id=1, controller_epoch=4)], named)
    assert later.cluster_id == "first" and later.controller_id == 1
    # snapshots carry it; one written before cluster ids has none
    assert MetadataImage.from_snapshot(later.to_snapshot()).cluster_id == "first"
    old = {k: v for k, v in later.to_snapshot().items() if k != "cluster_id"}
    assert MetadataImage.from_snapshot(old).cluster_id is None
