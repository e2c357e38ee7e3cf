"""Which broker coordinates a key (a group id, a transactional id), for a coordinator on the
runtime: Kafka's `abs(key.hashCode()) % partitions` of its internal topic (created on first use,
as Kafka's FindCoordinator does), and the loaded shard when this broker leads that partition.

`shard(key)` waits (up to `wait_s`) for the partition's leader to be known and its load to end;
it answers NOT_COORDINATOR naming the coordinator elsewhere (`coordinator`: node id, host, port,
what clients look up) or COORDINATOR_NOT_AVAILABLE while there is none.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict
from typing import Any, Callable, Generic, Mapping, Protocol, TypeVar

from kraft.broker.groups.hashing import coordinator_partition
from kraft.broker.metadata_view import MetadataCache
from kraft.coordinator.result import CoordinatorShard
from kraft.coordinator.runtime import CoordinatorRuntime
from kraft.errors import KraftError
from kraft.metadata.image import MetadataImage
from kraft.server.groups import NodeEndpoint

log = logging.getLogger("kraft.coordinator")

S = TypeVar("S", bound=CoordinatorShard)


class TopicCreator(Protocol):
    async def create_topic(self, name: str, partitions: int | None, replication_factor: int | None,
                           configs: Mapping[str, str]) -> Any: ...


class _Here:
    """This broker coordinates the partition (as `_where` answers)."""


_HERE = _Here()


class CoordinatorRouter(Generic[S]):
    def __init__(self, node_id: int, runtime: CoordinatorRuntime[S], metadata_cache: MetadataCache,
                 admin: TopicCreator, num_partitions: int, replication_factor: int,
                 configs: Callable[[int], Mapping[str, str]], wait_s: float) -> None:
        """`configs(replication_factor)`: the internal topic's, when it is created (with
        `num_partitions`, and the replication factor capped at the live brokers)."""
        self.node_id = node_id
        self.runtime = runtime
        self.topic = runtime.topic
        self.metadata_cache = metadata_cache
        self.admin = admin
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.configs = configs
        self.wait_s = wait_s
        self._create_lock = asyncio.Lock()

    @property
    def image(self) -> MetadataImage:
        return self.metadata_cache.image

    def exists(self) -> bool:
        return self.image.topic_by_name(self.topic) is not None

    def partition_for(self, key: str) -> int:
        topic = self.image.topic_by_name(self.topic)
        count = len(topic.partitions) if topic is not None else self.num_partitions
        return coordinator_partition(key, count)

    async def ensure_topic(self) -> None:
        if self.exists():
            return
        async with self._create_lock:
            if self.exists():
                return
            rf = max(1, min(self.replication_factor, len(self.image.live_brokers())))
            try:
                await self.admin.create_topic(self.topic, self.num_partitions, rf, self.configs(rf))
                log.info("created %s with %d partitions, replication factor %d", self.topic,
                         self.num_partitions, rf)
            except KraftError as e:
                if e.error_code != "TOPIC_ALREADY_EXISTS":
                    raise

    def coordinator(self, partition: int, image: MetadataImage) -> NodeEndpoint | None:
        reg = image.partition(self.topic, partition)
        endpoint = image.leader_endpoint(self.topic, partition)
        if reg is None or endpoint is None:
            return None
        return NodeEndpoint(reg.leader, endpoint.host, endpoint.port)

    async def find(self, key: str) -> tuple[int, NodeEndpoint]:
        """Kafka's FindCoordinator: the key's partition and its leader (creating the topic)."""
        await self.ensure_topic()
        partition = self.partition_for(key)
        coordinator = await self.metadata_cache.wait_for(
            lambda image: self.coordinator(partition, image), self.wait_s)
        if coordinator is None:
            raise KraftError("COORDINATOR_NOT_AVAILABLE", f"{self.topic}-{partition} has no leader")
        return partition, coordinator

    def _where(self, partition: int, image: MetadataImage) -> _Here | NodeEndpoint | None:
        """Here, the coordinator elsewhere, or None while there is none (or this broker's
        election is on its way)."""
        if self.runtime.is_coordinator(partition):
            return _HERE
        coordinator = self.coordinator(partition, image)
        if coordinator is not None and coordinator.node_id != self.node_id:
            return coordinator
        return None

    async def shard(self, key: str, what: str) -> tuple[int, S]:
        """The partition of `key` and its loaded shard (`what` names the key in errors)."""
        if not self.exists():  # created by FindCoordinator (and InitProducerId): no key lives here yet
            raise KraftError("COORDINATOR_NOT_AVAILABLE", f"{self.topic} does not exist yet: find the coordinator first")
        partition = self.partition_for(key)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_s
        while True:
            where = await self.metadata_cache.wait_for(lambda image: self._where(partition, image),
                                                       deadline - loop.time())
            if where is None:
                raise KraftError("COORDINATOR_NOT_AVAILABLE", f"{self.topic}-{partition} has no leader yet")
            if not isinstance(where, _Here):
                raise KraftError("NOT_COORDINATOR", f"node {where.node_id} coordinates {what}",
                                 coordinator=asdict(where))
            try:
                return partition, await self.runtime.active(partition, deadline - loop.time())
            except KraftError as e:
                if e.error_code != "NOT_COORDINATOR" or self.runtime.is_coordinator(partition):
                    raise
                # resigned while it loaded: the next image names the new leader
