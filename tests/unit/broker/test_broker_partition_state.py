"""The broker's PartitionStateReader (issue 13): the metrics read frozen views of the local
replicas, so a scrape costs the partitions this broker holds, never the whole image; the replica
manager's views say what its replicas hold."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

from kraft.server.records import FetchEntry, ProduceEntry
from kraft.broker.partition_state import PartitionView
from kraft.broker.replica_manager import ReplicaManager
from kraft.log.batch import build_batch
from kraft.log.config import LogConfig
from kraft.metadata.delta import apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import ClaimController, Endpoint, Partition, RegisterBroker, Topic, UnfenceBroker
from kraft.metrics import ReplicaManagerCollector

NODE = 1


class CountingReader:
    """A PartitionStateReader over fixed views, counting the views it hands out."""

    def __init__(self, views: dict[tuple[str, int], PartitionView]) -> None:
        self.views = views
        self.handed_out = 0

    def local_partitions(self) -> Iterator[tuple[str, int, PartitionView]]:
        for (topic, partition), view in self.views.items():
            self.handed_out += 1
            yield topic, partition, view

    def partition_state(self, topic: str, partition: int) -> PartitionView | None:
        self.handed_out += 1
        return self.views.get((topic, partition))


class LargeImage:
    """An image of 100,000 topics of 10 partitions that counts lookups and refuses walks."""

    offset = 123_456

    def __init__(self) -> None:
        self.lookups = 0
        self.cluster = SimpleNamespace(live_brokers=lambda: [object()] * 3)
        refuse = self._refuse
        self.topics = SimpleNamespace(by_name=SimpleNamespace(values=refuse, items=refuse, keys=refuse,
                                                              __iter__=refuse),
                                      by_id=SimpleNamespace(values=refuse, items=refuse))

    @staticmethod
    def _refuse(*_: Any) -> Any:
        raise AssertionError("the scrape walked the whole image")

    def topic_by_name(self, name: str) -> Any:
        self.lookups += 1
        return SimpleNamespace(name=name, internal=False, partitions=dict.fromkeys(range(10)))

    def partition(self, topic: str, partition: int) -> Any:
        self.lookups += 1
        return SimpleNamespace(replicas=(NODE,), isr=(NODE,), leader=NODE)


def view(leader: int, replicas: tuple[int, ...], isr: tuple[int, ...], **log: int) -> PartitionView:
    return PartitionView(leader, 3, replicas, isr, leader == NODE, False, 2, True, **log)


def test_a_scrape_reads_the_local_partitions_only() -> None:
    reader = CountingReader({
        ("t5", 0): view(NODE, (1, 2, 3), (1, 2), log_start_offset=2, log_end_offset=90,
                        high_watermark=80, size_in_bytes=4096, segment_count=2, max_follower_lag=10),
        ("t9", 4): view(NODE, (1, 2), (1, 2), log_end_offset=5, high_watermark=5),
        ("t77", 1): view(2, (2, 1), (2, 1), log_end_offset=7, high_watermark=7, size_in_bytes=10),
    })
    image = LargeImage()
    families = {f.name: f for f in ReplicaManagerCollector(NODE, reader, lambda: image, True).collect()}
    assert reader.handed_out == 3
    assert image.lookups == 1  # the partition count of t5, whose partition 0 is led here

    def sample(name: str, **labels: str) -> float:
        return next(s.value for s in families[name].samples if s.labels == labels)

    rm = "kafka_server_replicamanager_"
    assert sample(rm + "partitioncount") == 3 and sample(rm + "leadercount") == 2
    assert sample(rm + "underreplicatedpartitions") == 1 and sample(rm + "atminisrpartitioncount") == 2
    assert sample("kafka_server_replicafetchermanager_maxlag", clientid="Replica") == 10
    assert sample("kafka_log_log_size", topic="t77", partition="1") == 10
    assert sample("kafka_topic_partitions", topic="t5") == 10
    assert sample("kafka_topic_partition_current_offset", topic="t5", partition="0") == 80
    assert sample("kafka_server_brokermetadatametrics_last_applied_record_offset") == 123_456
    assert sample("kafka_brokers") == 3


def led_image() -> MetadataImage:
    records = [ClaimController(node_id=NODE, controller_epoch=1)]
    for b in (1, 2):
        records += [RegisterBroker(broker_id=b, incarnation_id=f"i{b}", broker_epoch=10 + b,
                                   endpoints=(Endpoint("HTTP", "127.0.0.1", 1),), controller_epoch=1),
                    UnfenceBroker(broker_id=b, broker_epoch=10 + b, controller_epoch=1)]
    records += [Topic(name="t", topic_id="T", controller_epoch=1),
                Partition(topic_id="T", partition=0, replicas=(1, 2), isr=(1, 2), leader=1,
                          controller_epoch=1),
                Partition(topic_id="T", partition=1, replicas=(2, 1), isr=(2, 1), leader=2,
                          controller_epoch=1)]
    return apply_records(MetadataImage.EMPTY, enumerate(records))[1]


async def test_the_replica_managers_views(tmp_path: Path) -> None:
    manager = ReplicaManager(NODE, tmp_path, LogConfig(min_insync_replicas=2), 3_600_000, 1 << 20)
    manager.on_metadata_update(None, led_image())
    for p in (0, 1):
        await manager.replica("t", p).wait_ready()
    try:
        batch = build_batch([(None, b"v", (), 1)] * 4)
        [result] = await manager.produce([ProduceEntry("t", 0, batch)], acks=1, timeout_ms=1000)
        assert result.error_code is None
        # follower 2 fetches from offset 1: the high watermark moves to 1, its lag is 3
        await manager.replica_fetch(2, -1, [FetchEntry("t", 0, 1, 1 << 20, 0)], 0, 1, 1 << 20)
        led = manager.partition_state("t", 0)
        assert (led.leader, led.leader_epoch, led.replicas, led.isr) == (1, 0, (1, 2), (1, 2))
        assert led.is_leader and not led.offline and led.min_insync_replicas == 2
        assert (led.log_start_offset, led.high_watermark, led.log_end_offset) == (0, 1, 4)
        assert led.size_in_bytes > 0 and led.segment_count == 1 and led.quarantined_count == 0
        assert led.max_follower_lag == 3
        followed = manager.partition_state("t", 1)
        assert not followed.is_leader and followed.leader == 2 and followed.log_end_offset == 0
        assert manager.partition_state("t", 2) is None
        assert [(t, p) for t, p, _ in manager.local_partitions()] == [("t", 0), ("t", 1)]
    finally:
        await manager.close()
