"""`TopicPartitionCounts`: the image's topics as the membership state machine reads them (name →
partition count), looked up by name so a heartbeat or a session timeout costs the topics its
group names, not the cluster."""

from __future__ import annotations

from typing import Iterator, Mapping

from kraft.metadata.image import MetadataImage


class TopicPartitionCounts(Mapping[str, int]):
    """The partition counts of the image's topics a subscription may name (internal topics are
    left out), looked up by name. Only iteration walks every topic (regexes are resolved
    beforehand, `regex_resolver`)."""

    __slots__ = ("_image",)

    def __init__(self, image: MetadataImage) -> None:
        self._image = image

    def __getitem__(self, name: str) -> int:
        topic = self._image.topic_by_name(name)
        if topic is None or topic.internal:
            raise KeyError(name)
        return len(topic.partitions)

    def __iter__(self) -> Iterator[str]:
        return (name for name, t in self._image.topics.by_name.items() if not t.internal)

    def __len__(self) -> int:
        return sum(1 for _ in self)
