"""ControllerService partition reassignments (KIP-455) over a FakeQuorum: start, complete on the
leader's AlterPartition, list, cancel, and plans rejected whole."""

from __future__ import annotations

from test_controller_service import add_brokers, ctl, error_of  # noqa: F401 (ctl is a fixture)

from kraft.metadata.partition_change import BrokerState


async def test_reassignment_completes_when_the_new_replica_joins_the_isr(ctl) -> None:  # noqa: F811
    epochs = await add_brokers(ctl, [1, 2, 3])
    await ctl.create_topics("t", partitions=1, replication_factor=2)
    before = ctl.image.partition("t", 0)
    kept = next(b for b in before.replicas if b != before.leader)
    added = next(b for b in (1, 2, 3) if b not in before.replicas)
    answer = await ctl.alter_partition_reassignments([{"topic": "t", "partition": 0, "replicas": [kept, added]}])
    assert answer["partitions"] == [{"topic": "t", "partition": 0, "replicas": [kept, added, before.leader],
                                     "adding_replicas": [added], "removing_replicas": [before.leader]}]
    assert (await ctl.list_partition_reassignments())["partitions"] == answer["partitions"]
    reg = ctl.image.partition("t", 0)
    r = await ctl.alter_partition(before.leader, epochs[before.leader], "t", 0, reg.leader_epoch,
                                  reg.partition_epoch, [BrokerState(b, epochs[b]) for b in (*reg.isr, added)])
    done = ctl.image.partition("t", 0)
    assert (done.replicas, set(done.isr), done.leader) == ((kept, added), {kept, added}, kept)
    assert r["leader"] == kept and r["leader_epoch"] == before.leader_epoch + 1
    assert (await ctl.list_partition_reassignments())["partitions"] == []


async def test_cancel_and_bad_plans_change_nothing(ctl) -> None:  # noqa: F811
    await add_brokers(ctl, [1, 2, 3])
    await ctl.create_topics("t", partitions=2, replication_factor=2)
    offset = ctl.image.offset
    for plan, code in [
        ([{"topic": "x", "partition": 0, "replicas": [1]}], "UNKNOWN_TOPIC_OR_PARTITION"),
        ([{"topic": "t", "partition": 0, "replicas": [3]}, {"topic": "t", "partition": 1, "replicas": [1, 9]}],
         "INVALID_REPLICA_ASSIGNMENT"),
        ([{"topic": "t", "partition": 0, "replicas": [3]}, {"topic": "t", "partition": 0, "replicas": [2]}],
         "INVALID_REPLICA_ASSIGNMENT"),
        ([{"topic": "t", "partition": 0, "replicas": None}], "NO_REASSIGNMENT_IN_PROGRESS"),
        ([{"topic": "t", "partition": 0}], "INVALID_REQUEST"),
    ]:
        assert await error_of(ctl.alter_partition_reassignments(plan)) == code
    assert ctl.image.offset == offset
    original = ctl.image.partition("t", 0)
    target = [b for b in (1, 2, 3) if b not in original.replicas]
    await ctl.alter_partition_reassignments([{"topic": "t", "partition": 0, "replicas": target}])
    answer = await ctl.alter_partition_reassignments([{"topic": "t", "partition": 0, "replicas": None}])
    assert answer["partitions"][0]["replicas"] == list(original.replicas)
    assert ctl.image.partition("t", 0).isr == original.isr
