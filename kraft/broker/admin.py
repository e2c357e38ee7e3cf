"""`AdminService` (kraft/server/admin.py): every node accepts admin requests and sends them to the
active controller through its `ControllerChannel` (its own controller when that is the active
one, otherwise forwarded over HTTP; design §7).

A change is answered once committed and visible here: the channel returns only after this node's
metadata loader (and so its view) reached the offset the change was committed at.
"""

from __future__ import annotations

from typing import Mapping

from kraft.errors import KraftError
from kraft.broker.metadata_view import BrokerMetadataView
from kraft.controller.channel import ControllerChannel
from kraft.server.metadata import TopicDescription


class LocalAdmin:
    def __init__(self, controller: ControllerChannel, view: BrokerMetadataView, delete_topic_enable: bool) -> None:
        self.controller = controller
        self.view = view
        self.delete_topic_enable = delete_topic_enable

    async def create_topic(
        self, name: str, partitions: int | None, replication_factor: int | None,
        configs: Mapping[str, str], assignments: list[list[int]] | None = None,
    ) -> TopicDescription:
        await self.controller.create_topics(name, partitions, replication_factor, dict(configs),
                                            assignments=assignments)
        return self._visible(name)

    async def delete_topic(self, name: str) -> None:
        if not self.delete_topic_enable:
            raise KraftError("TOPIC_DELETION_DISABLED", "delete.topic.enable is false on this cluster")
        await self.controller.delete_topic(name)

    async def create_partitions(self, name: str, count: int) -> None:
        await self.controller.create_partitions(name, count)

    async def alter_configs(self, name: str, changes: Mapping[str, str | None]) -> None:
        await self.controller.alter_configs("topic", name, dict(changes))

    def _visible(self, name: str) -> TopicDescription:
        topic = self.view.topic(name)
        if topic is None:  # deleted again between commit and answer
            raise KraftError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
        return topic
