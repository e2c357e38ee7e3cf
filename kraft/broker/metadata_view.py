"""The broker's metadata cache: the one place the latest `MetadataImage` this node applied lives
(Kafka's `KRaftMetadataCache`). `BrokerMetadataPublisher` sets it first on every delta; the
replica manager, the group coordinator and the metrics read `cache.image` rather than keep
copies. `BrokerMetadataView` is the cache as the services read it (`kraft.server.metadata.MetadataView`:
answer-shaped values).
"""

from __future__ import annotations

import asyncio
from typing import Callable, Mapping, TypeVar

from kraft.metadata.image import MetadataImage, TopicImage
from kraft.server.metadata import BrokerDescription, ClusterDescription, PartitionDescription, TopicDescription

T = TypeVar("T")


def describe_topic(topic: TopicImage, configs: Mapping[str, str]) -> TopicDescription:
    return TopicDescription(
        name=topic.name,
        topic_id=topic.topic_id,
        internal=topic.internal,
        partitions=tuple(
            PartitionDescription(i, p.leader, p.leader_epoch, p.replicas, p.isr)
            for i, p in sorted(topic.partitions.items())
        ),
        configs=dict(sorted(configs.items())),
    )


class MetadataCache:
    """Holds the broker's current image; only the metadata publisher sets it. `wait_for` lets a
    request wait for an image it needs (a partition's leader) without polling."""

    def __init__(self) -> None:
        self.image = MetadataImage.EMPTY
        self._waiters: list[asyncio.Future[None]] = []

    def set_image(self, image: MetadataImage) -> None:
        self.image = image
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait_for(self, condition: Callable[[MetadataImage], T | None], timeout_s: float) -> T | None:
        """`condition(image)` once it is not None, asked again after each new image (once the
        publisher has handed it to everyone); None after `timeout_s`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while (found := condition(self.image)) is None:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout(remaining):
                    await waiter
            except TimeoutError:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        return found


class BrokerMetadataView(MetadataCache):
    def __init__(self, cluster_id: Callable[[], str], topic_defaults: Mapping[str, str]) -> None:
        """`cluster_id()`: the node's cluster id ("" until it knows it)."""
        super().__init__()
        self.cluster_id = cluster_id
        self._topic_defaults = dict(topic_defaults)

    # -- MetadataView -------------------------------------------------------------------------

    def cluster(self, listener: str | None = None) -> ClusterDescription:
        brokers = []
        for b in self.image.live_brokers():
            endpoint = b.endpoint(listener)
            if endpoint is not None:
                brokers.append(BrokerDescription(b.broker_id, endpoint.host, endpoint.port, b.rack))
        controller_id = self.image.controller_id
        return ClusterDescription(
            self.cluster_id(), -1 if controller_id is None else controller_id, tuple(brokers)
        )

    def topics(self) -> list[TopicDescription]:
        """By name: the image's maps iterate in hash order, which differs between processes, and
        every node must give the same answer (kafka-topics lists sorted too)."""
        return [self._describe(t) for _, t in sorted(self.image.topics.by_name.items())]

    def topic(self, name: str) -> TopicDescription | None:
        t = self.image.topic_by_name(name)
        return None if t is None else self._describe(t)

    def topic_defaults(self) -> Mapping[str, str]:
        return self._topic_defaults

    def _describe(self, topic: TopicImage) -> TopicDescription:
        return describe_topic(topic, self.image.topic_configs(topic.name))
