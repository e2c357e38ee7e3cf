"""Loading a `__consumer_offsets` partition trusts only records below the high watermark: the
tail a previous leader wrote is replayed once the high watermark passes it (Kafka's loader)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from kraft.broker.groups.coordinator import CoordinatorSettings, GroupCoordinator
from kraft.broker.groups.hashing import OFFSETS_TOPIC
from kraft.broker.groups.membership import OffsetAndMetadata
from kraft.broker.groups.records import offset_key, offset_value
from kraft.log.batch import build_batch
from kraft.log.config import LogConfig
from kraft.log.partition_log import PartitionLog
from kraft.metadata.delta import apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import ClaimController, Partition, Topic

GROUP = "g"


@dataclass
class FakeReplica:
    """The part of `kraft.broker.replica.Replica` the loader uses; `waiting` is set while it
    waits for the high watermark."""

    log: PartitionLog
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    waiting: asyncio.Event = field(default_factory=asyncio.Event)
    waiters: list[asyncio.Future[None]] = field(default_factory=list)

    def wait_for_data(self, future: asyncio.Future[None]) -> None:
        self.waiters.append(future)
        self.waiting.set()

    def forget_waiter(self, future: asyncio.Future[None]) -> None:
        self.waiters.remove(future)

    def advance_high_watermark(self, offset: int) -> None:
        self.log.high_watermark = offset
        self.waiting.clear()
        for future in self.waiters:
            future.set_result(None)


@dataclass
class FakeReplicas:
    replica_: FakeReplica

    def replica(self, topic: str, partition: int) -> FakeReplica | None:
        return self.replica_ if (topic, partition) == (OFFSETS_TOPIC, 0) else None


def commit(plog: PartitionLog, offset: int) -> None:
    value = offset_value(OffsetAndMetadata(offset, "", 0))
    plog.append_as_leader(build_batch([(offset_key(GROUP, "t", 0), value, (), 0)]), 0, 0)


def led_image() -> MetadataImage:
    records = [ClaimController(node_id=1, controller_epoch=1),
               Topic(name=OFFSETS_TOPIC, topic_id="offsets-id", controller_epoch=1),
               Partition(topic_id="offsets-id", partition=0, replicas=(1, 2), isr=(1, 2), leader=1,
                         controller_epoch=1)]
    return apply_records(MetadataImage.EMPTY, enumerate(records))[1]


async def test_load_waits_for_the_high_watermark(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / f"{OFFSETS_TOPIC}-0", LogConfig(), 0)
    commit(plog, 10)
    plog.high_watermark = 1
    commit(plog, 20)  # the previous leader's tail, not yet in the whole ISR
    replica = FakeReplica(plog)
    replica.ready.set()
    coordinator = GroupCoordinator(1, FakeReplicas(replica), admin=None,  # type: ignore[arg-type]
                                   settings=CoordinatorSettings(num_partitions=1, replication_factor=2))
    try:
        coordinator.metadata_cache.set_image(led_image())
        coordinator.on_election(0, 0)
        await asyncio.wait_for(replica.waiting.wait(), 5)
        loading = asyncio.create_task(coordinator.fetch_offsets(GROUP, None))
        await asyncio.wait_for(replica.waiting.wait(), 5)
        assert not loading.done()  # offset 1 is above the high watermark: still loading
        replica.advance_high_watermark(2)
        answer = await asyncio.wait_for(loading, 5)
        assert [o["offset"] for o in answer["offsets"]] == [20]
    finally:
        await coordinator.close()
        plog.close()
