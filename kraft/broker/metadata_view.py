"""The broker's metadata cache: the one place the latest `MetadataImage` this node applied lives
(Kafka's `KRaftMetadataCache`). `BrokerMetadataPublisher` sets it first on every delta; the
replica manager, the group coordinator and the metrics read `cache.image` rather than keep
copies. `BrokerMetadataView` is the cache as the services read it (`kraft.server.metadata.MetadataView`:
answer-shaped values).
"""

from __future__ import annotations

from typing import Callable, Mapping

from kraft.metadata.image import MetadataImage, TopicImage
from kraft.server.metadata import BrokerDescription, ClusterDescription, PartitionDescription, TopicDescription


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
    """Holds the broker's current image; only the metadata publisher sets it."""

    def __init__(self) -> None:
        self.image = MetadataImage.EMPTY

    def set_image(self, image: MetadataImage) -> None:
        self.image = image


class BrokerMetadataView(MetadataCache):
    def __init__(self, cluster_id: Callable[[], str], topic_defaults: Mapping[str, str]) -> None:
        """`cluster_id()`: the node's cluster id ("" until it knows it)."""
        super().__init__()
        self.cluster_id = cluster_id
        self._topic_defaults = dict(topic_defaults)

    # -- MetadataView -------------------------------------------------------------------------

    def cluster(self) -> ClusterDescription:
        brokers = []
        for b in self.image.live_brokers():
            endpoint = b.endpoint()
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
