"""Builders shared by the metadata tests: records for a cluster and topics, replayed into images."""

from __future__ import annotations

from typing import Iterable, Sequence

from kraft.metadata.delta import MetadataDelta, apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import (
    ClaimController, Endpoint, MetadataRecord, Partition, RegisterBroker, Topic, UnfenceBroker,
)

EPOCH = 1


def endpoint(broker_id: int) -> tuple[Endpoint, ...]:
    return (Endpoint("HTTP", "127.0.0.1", 9000 + broker_id),)


def cluster_records(broker_ids: Iterable[int], racks: dict[int, str] | None = None) -> list[MetadataRecord]:
    """A claim, then each broker registered and unfenced (broker epoch = its record's offset)."""
    records: list[MetadataRecord] = [ClaimController(node_id=1, controller_epoch=EPOCH)]
    for b in broker_ids:
        records.append(RegisterBroker(broker_id=b, incarnation_id=f"inc-{b}", endpoints=endpoint(b),
                                      rack=(racks or {}).get(b), controller_epoch=EPOCH))
        records.append(UnfenceBroker(broker_id=b, broker_epoch=len(records) - 1, controller_epoch=EPOCH))
    return records


def topic_records(name: str, topic_id: str, assignments: Sequence[Sequence[int]]) -> list[MetadataRecord]:
    records: list[MetadataRecord] = [Topic(name=name, topic_id=topic_id, controller_epoch=EPOCH)]
    for p, replicas in enumerate(assignments):
        records.append(Partition(topic_id=topic_id, partition=p, replicas=tuple(replicas), isr=tuple(replicas),
                                 leader=replicas[0], controller_epoch=EPOCH))
    return records


def replay(records: Iterable[MetadataRecord | dict], image: MetadataImage = MetadataImage.EMPTY
           ) -> tuple[MetadataDelta, MetadataImage]:
    """Replay records at the offsets after `image.offset`."""
    return apply_records(image, ((image.offset + 1 + i, r) for i, r in enumerate(records)))


def build(records: Iterable[MetadataRecord | dict]) -> MetadataImage:
    return replay(records)[1]
