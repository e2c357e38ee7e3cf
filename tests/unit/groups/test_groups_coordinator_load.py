"""Loading a `__consumer_offsets` partition trusts only records below the high watermark: the
tail a previous leader wrote is replayed once the high watermark passes it (Kafka's loader). The
coordinator reads through `CoordinatorReplicas` (offsets, committed reads), never a replica, and
waits while the partition is not readable yet."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from kraft.api.errors import KraftError
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
from kraft.server.records import FetchPartitionResult, PartitionOffsets

GROUP = "g"


@dataclass
class FakeReplicas:
    """`CoordinatorReplicas` over one log led here: a read at the high watermark waits for it to
    advance (`waiting` is set meanwhile); `not_ready` answers that many retriable errors first."""

    log: PartitionLog
    not_ready: int = 0
    waiting: asyncio.Event = field(default_factory=asyncio.Event)
    advanced: asyncio.Event = field(default_factory=asyncio.Event)

    async def offsets(self, topic: str, partition: int) -> PartitionOffsets:
        assert (topic, partition) == (OFFSETS_TOPIC, 0)
        if self.not_ready:
            self.not_ready -= 1
            raise KraftError("NOT_LEADER_OR_FOLLOWER", "the role is not applied yet")
        return PartitionOffsets(self.log.log_start_offset, self.log.high_watermark,
                                self.log.log_end_offset)

    async def read_committed(self, topic: str, partition: int, offset: int, max_bytes: int,
                             max_wait_ms: int) -> FetchPartitionResult:
        if offset >= self.log.high_watermark:
            self.advanced.clear()
            self.waiting.set()
            try:
                await asyncio.wait_for(self.advanced.wait(), max_wait_ms / 1000)
            except asyncio.TimeoutError:
                pass
        info = self.log.read(offset, max_bytes, max_offset=self.log.high_watermark)
        return FetchPartitionResult(topic, partition, info.high_watermark, info.log_start_offset, -1, info.records)

    def advance_high_watermark(self, offset: int) -> None:
        self.log.high_watermark = offset
        self.waiting.clear()
        self.advanced.set()


def commit(plog: PartitionLog, offset: int) -> None:
    value = offset_value(OffsetAndMetadata(offset, "", 0))
    plog.append_as_leader(build_batch([(offset_key(GROUP, "t", 0), value, (), 0)]), 0, 0)


def led_image() -> MetadataImage:
    records = [ClaimController(node_id=1, controller_epoch=1),
               Topic(name=OFFSETS_TOPIC, topic_id="offsets-id", controller_epoch=1),
               Partition(topic_id="offsets-id", partition=0, replicas=(1, 2), isr=(1, 2), leader=1,
                         controller_epoch=1)]
    return apply_records(MetadataImage.EMPTY, enumerate(records))[1]


def coordinator_of(replicas: FakeReplicas) -> GroupCoordinator:
    coordinator = GroupCoordinator(1, replicas, admin=None,  # type: ignore[arg-type]
                                   settings=CoordinatorSettings(num_partitions=1, replication_factor=2))
    coordinator.metadata_cache.set_image(led_image())
    return coordinator


async def test_load_waits_for_the_high_watermark(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / f"{OFFSETS_TOPIC}-0", LogConfig(), 0)
    commit(plog, 10)
    plog.high_watermark = 1
    commit(plog, 20)  # the previous leader's tail, not yet in the whole ISR
    replicas = FakeReplicas(plog)
    coordinator = coordinator_of(replicas)
    try:
        coordinator.runtime.on_election(0, 0)
        await asyncio.wait_for(replicas.waiting.wait(), 5)
        loading = asyncio.create_task(coordinator.fetch_offsets(GROUP, None))
        await asyncio.sleep(0.05)  # a window: the fetch must go on waiting
        assert not loading.done()  # offset 1 is above the high watermark: still loading
        replicas.advance_high_watermark(2)
        answer = await asyncio.wait_for(loading, 5)
        assert [o.offset for o in answer.offsets] == [20]
    finally:
        await coordinator.close()
        plog.close()


async def test_load_waits_until_the_partition_is_readable(tmp_path: Path) -> None:
    """Elected before the replica manager applied the role: the load asks again, not gives up."""
    plog = PartitionLog.open(tmp_path / f"{OFFSETS_TOPIC}-0", LogConfig(), 0)
    commit(plog, 7)
    plog.high_watermark = 1
    replicas = FakeReplicas(plog, not_ready=3)
    coordinator = coordinator_of(replicas)
    try:
        coordinator.runtime.on_election(0, 0)
        answer = await asyncio.wait_for(coordinator.fetch_offsets(GROUP, None), 5)
        assert [o.offset for o in answer.offsets] == [7] and replicas.not_ready == 0
    finally:
        await coordinator.close()
        plog.close()
