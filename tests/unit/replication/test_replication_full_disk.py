"""A full disk during a leadership change (found by `kraft-bench chaos`): becoming leader writes the
leader-epoch checkpoint, and an ENOSPC there used to escape `ReplicaManager.apply_delta`, so every
partition after it in that metadata update kept its old role (a deposed leader went on leading).
Now the partition that cannot write goes offline (KAFKA_STORAGE_ERROR, Kafka's offline replica),
the others change role, and the offline one takes its role once space returns. (A log with no
file yet, a partition never written, keeps its epochs in memory: its leadership changes write
nothing, and its first produce writes the checkpoint.) ENOSPC is injected at the file layer
(`log.fault_injection`'s disk-full hook, as `kraft-bench chaos` uses it)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kraft.server.records import ProduceEntry
from kraft.broker.replica_manager import ReplicaManager, ReplicationSettings
from kraft.log import fault_injection
from kraft.log.batch import build_batch
from kraft.log.config import LogConfig
from kraft.log.epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from kraft.metadata.delta import apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import (
    ClaimController, Endpoint, MetadataRecord, Partition, PartitionChange, RegisterBroker, Topic,
    UnfenceBroker,
)


def _image(records: list[MetadataRecord], image: MetadataImage = MetadataImage.EMPTY):
    stamped = [r.stamped(1, "rid") for r in records]
    return apply_records(image, ((image.offset + 1 + i, r) for i, r in enumerate(stamped)))


def _closed_port() -> int:
    with socket.socket() as s:  # followers' fetchers find nobody there and back off
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _batch(value: bytes) -> bytes:
    return build_batch([(None, value, [], 1_700_000_000_000)])


async def _produce(manager: ReplicaManager, partition: int) -> str | None:
    [result] = await manager.produce([ProduceEntry("t", partition, _batch(b"v"))], 1, 1000)
    return result.error_code


@pytest.fixture
def full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    flag = tmp_path / "disk-full"
    flag.write_text("0")
    monkeypatch.setattr(fault_injection, "_DISK_FULL_FILE", str(flag))
    return flag


async def test_enospc_on_one_leader_change_takes_only_that_partition_offline_until_space_returns(
    tmp_path: Path, full_disk: Path,
) -> None:
    port = _closed_port()
    records: list[MetadataRecord] = [ClaimController(node_id=1, controller_epoch=1)]
    for b in (1, 2, 3):
        records += [RegisterBroker(broker_id=b, incarnation_id=f"inc-{b}",
                                   endpoints=(Endpoint("HTTP", "127.0.0.1", port),), broker_epoch=10 + b),
                    UnfenceBroker(broker_id=b, broker_epoch=10 + b)]
    records.append(Topic(name="t", topic_id="tid"))
    for p in range(3):  # led here first, so each log holds a record (and files)
        records.append(Partition(topic_id="tid", partition=p, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1))
    _, image = _image(records)
    data = tmp_path / "data"
    data.mkdir()
    manager = ReplicaManager(1, data, LogConfig(), 3_600_000, 1 << 20,
                             replication=ReplicationSettings(offline_retry_ms=3_600_000))
    manager.on_metadata_update(None, image)
    for p in range(3):
        await manager.replica("t", p).wait_ready()
    try:
        for p in range(3):
            assert await _produce(manager, p) is None
        # broker 1 follows partitions 0 and 1 (led by 2 at epoch 1) and leads partition 2
        delta, image = _image([PartitionChange(topic_id="tid", partition=0, leader=2),
                               PartitionChange(topic_id="tid", partition=1, leader=2)], image)
        manager.on_metadata_update(delta, image)
        assert manager.replica("t", 2).is_leader and not manager.replica("t", 0).is_leader

        # the disk fills; then broker 2 fails: broker 1 leads 0 and 1, broker 3 leads 2
        full_disk.write_text("1")
        delta, image = _image([PartitionChange(topic_id="tid", partition=0, leader=1),
                               PartitionChange(topic_id="tid", partition=1, leader=1),
                               PartitionChange(topic_id="tid", partition=2, leader=3)], image)
        manager.on_metadata_update(delta, image)  # raised ENOSPC before the fix

        deposed = manager.replica("t", 2)  # needed no write: changed despite the others
        assert not deposed.is_leader and deposed.core.is_following(1) and not deposed.offline
        assert await _produce(manager, 2) == "NOT_LEADER_OR_FOLLOWER"
        for p in (0, 1):
            replica = manager.replica("t", p)
            assert replica.offline and not replica.is_leader and replica.core.leader_epoch == 2
            assert replica.storage_error is not None and "No space left" in str(replica.storage_error)
            assert await _produce(manager, p) == "KAFKA_STORAGE_ERROR"
            # epoch 2 was not recorded, not in memory either, so the retry writes it
            assert replica.log.leader_epoch_cache.latest_epoch == 0

        await manager.retry_offline()  # still full: still offline
        assert all(manager.replica("t", p).offline for p in (0, 1))

        full_disk.write_text("0")  # space returns
        await manager.retry_offline()
        for p in (0, 1):
            replica = manager.replica("t", p)
            assert replica.is_leader and not replica.offline and replica.core.leader_epoch == 2
            assert await _produce(manager, p) is None
            on_disk = LeaderEpochFileCache.load(data / f"t-{p}")
            assert (data / f"t-{p}" / LEADER_EPOCH_CHECKPOINT).exists()
            assert [(e.epoch, e.start_offset) for e in on_disk.entries] == [(0, 0), (2, 1)]
    finally:
        full_disk.write_text("0")
        await manager.close()


async def test_a_later_metadata_change_also_brings_an_offline_replica_back(
    tmp_path: Path, full_disk: Path,
) -> None:
    records: list[MetadataRecord] = [ClaimController(node_id=1, controller_epoch=1)]
    for b in (1, 2):
        records += [RegisterBroker(broker_id=b, incarnation_id=f"inc-{b}",
                                   endpoints=(Endpoint("HTTP", "127.0.0.1", _closed_port()),),
                                   broker_epoch=10 + b),
                    UnfenceBroker(broker_id=b, broker_epoch=10 + b)]
    records += [Topic(name="t", topic_id="tid"),
                Partition(topic_id="tid", partition=0, replicas=(1, 2), isr=(1, 2), leader=1)]
    _, image = _image(records)
    manager = ReplicaManager(1, tmp_path / "data", LogConfig(), 3_600_000, 1 << 20,
                             replication=ReplicationSettings(offline_retry_ms=3_600_000))
    (tmp_path / "data").mkdir()
    manager.on_metadata_update(None, image)
    replica = manager.replica("t", 0)
    await replica.wait_ready()
    try:
        assert await _produce(manager, 0) is None  # the log has files: its epochs are written
        delta, image = _image([PartitionChange(topic_id="tid", partition=0, leader=2)], image)
        manager.on_metadata_update(delta, image)
        full_disk.write_text("1")
        delta, image = _image([PartitionChange(topic_id="tid", partition=0, leader=1)], image)
        manager.on_metadata_update(delta, image)
        assert replica.offline and await _produce(manager, 0) == "KAFKA_STORAGE_ERROR"
        full_disk.write_text("0")
        delta, image = _image([PartitionChange(topic_id="tid", partition=0, isr=(1,))], image)
        manager.on_metadata_update(delta, image)
        assert replica.is_leader and not replica.offline and await _produce(manager, 0) is None
    finally:
        full_disk.write_text("0")
        await manager.close()


async def test_a_new_partition_led_here_on_a_full_disk_takes_writes_when_space_returns(
    tmp_path: Path, full_disk: Path,
) -> None:
    """Its log writes nothing until its first produce (no file, the epoch in memory), so it leads
    at once; produces answer KAFKA_STORAGE_ERROR while the disk is full, then succeed and write
    the epoch checkpoint, with no restart or retry."""
    records: list[MetadataRecord] = [
        ClaimController(node_id=1, controller_epoch=1),
        RegisterBroker(broker_id=1, incarnation_id="inc-1",
                       endpoints=(Endpoint("HTTP", "127.0.0.1", _closed_port()),), broker_epoch=11),
        UnfenceBroker(broker_id=1, broker_epoch=11),
        Topic(name="t", topic_id="tid"),
        Partition(topic_id="tid", partition=0, replicas=(1,), isr=(1,), leader=1),
    ]
    _, image = _image(records)
    (tmp_path / "data").mkdir()
    manager = ReplicaManager(1, tmp_path / "data", LogConfig(), 3_600_000, 1 << 20,
                             replication=ReplicationSettings(offline_retry_ms=3_600_000))
    full_disk.write_text("1")
    manager.on_metadata_update(None, image)
    replica = manager.replica("t", 0)
    await replica.wait_ready()
    try:
        assert replica.is_leader and not replica.offline
        assert await _produce(manager, 0) == "KAFKA_STORAGE_ERROR"
        assert replica.log.leader_epoch_cache.deferred
        full_disk.write_text("0")
        assert await _produce(manager, 0) is None
        assert LeaderEpochFileCache.load(tmp_path / "data" / "t-0").entries == replica.log.leader_epoch_cache.entries
        assert [(e.epoch, e.start_offset) for e in replica.log.leader_epoch_cache.entries] == [(0, 0)]
    finally:
        full_disk.write_text("0")
        await manager.close()
