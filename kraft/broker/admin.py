"""`AdminService` for the HTTP routes: every node accepts admin requests and sends them to the
active controller through its `ControllerChannel` (its own controller when that is the active
one, otherwise forwarded over HTTP; design §7).

A change is answered once committed and visible here: the channel returns only after this node's
metadata loader (and so its view) reached the offset the change was committed at.
"""

from __future__ import annotations

from typing import Mapping

from kraft.api.errors import KraftError
from kraft.api.routes.services import TopicDescription
from kraft.broker.metadata_view import BrokerMetadataView
from kraft.controller.channel import ControllerChannel


class LocalAdmin:
    def __init__(
        self, controller: ControllerChannel, view: BrokerMetadataView, delete_topic_enable: bool,
        max_partitions: int,
    ) -> None:
        self.controller = controller
        self.view = view
        self.delete_topic_enable = delete_topic_enable
        self.max_partitions = max_partitions

    def _check_partition_budget(self, added: int, replication_factor: int | None) -> None:
        """Every partition replica holds open files on its broker; past the budget a broker would
        run out of file descriptors and stop accepting connections, so the request is refused
        instead. Placement spreads replicas evenly over the live brokers, so each broker's share
        of the cluster's replicas, with the new ones, is what is held against this node's budget."""
        image = self.view.image
        brokers = max(1, len(image.live_brokers()))
        rf = replication_factor if replication_factor not in (None, -1) else (
            self.controller.settings.default_replication_factor)
        replicas = sum(len(p.replicas) for t in image.topics.by_name.values() for p in t.partitions.values())
        share = -(-(replicas + added * max(1, rf)) // brokers)  # ceiling
        if share > self.max_partitions:
            raise KraftError(
                "POLICY_VIOLATION",
                f"{replicas} partition replicas exist on {brokers} broker(s); with {added} more "
                f"partitions each broker would hold about {share} and this node can hold "
                f"{self.max_partitions} (raise the open-files limit, ulimit -n, or add brokers)",
            )

    async def create_topic(
        self, name: str, partitions: int | None, replication_factor: int | None,
        configs: Mapping[str, str],
    ) -> TopicDescription:
        self._check_partition_budget(partitions or self.controller.settings.num_partitions, replication_factor)
        await self.controller.create_topics(name, partitions, replication_factor, dict(configs))
        return self._visible(name)

    async def delete_topic(self, name: str) -> None:
        if not self.delete_topic_enable:
            raise KraftError("TOPIC_DELETION_DISABLED", "delete.topic.enable is false on this cluster")
        await self.controller.delete_topic(name)

    async def create_partitions(self, name: str, count: int) -> None:
        topic = self.view.topic(name)
        rf = len(topic.partitions[0].replicas) if topic and topic.partitions else None
        self._check_partition_budget(count - (len(topic.partitions) if topic else 0), rf)
        await self.controller.create_partitions(name, count)

    async def alter_configs(self, name: str, changes: Mapping[str, str | None]) -> None:
        await self.controller.alter_configs("topic", name, dict(changes))

    def _visible(self, name: str) -> TopicDescription:
        topic = self.view.topic(name)
        if topic is None:  # deleted again between commit and answer
            raise KraftError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
        return topic
