"""Applying a delta costs what it changed, not the image (issue 13): counted, never timed.

A one-partition change to an image of 50 topics x 2,000 partitions (and of 5,000 topics x 20)
must build one partition registration and one topic, put no map through `frozen_map`'s bulk
constructor, share every other topic and partition object, and allocate a small fraction of what
copying the image's large map would (tracemalloc: bytes, not seconds)."""

from __future__ import annotations

import tracemalloc
from typing import Any, Callable

import pytest

from kraft.metadata import delta as delta_module
from kraft.metadata.delta import MetadataDelta
from kraft.metadata.image import MetadataImage, PartitionRegistration, frozen_map
from kraft.metadata.records import Partition, PartitionChange, RemoveTopic, Topic


def image_of(topics: int, per_topic: int) -> MetadataImage:
    """A large image, loaded from its snapshot form (the fast way in)."""
    snapshot = MetadataImage.EMPTY.to_snapshot()
    snapshot.update(offset=10, controller_epoch=1, controller_id=1, topics=[
        [f"t{t}", f"id{t}", [[p, [1 + p % 3, 1 + (p + 1) % 3], [1 + p % 3, 1 + (p + 1) % 3], 1 + p % 3, 0, 0, [], []]
                             for p in range(per_topic)]]
        for t in range(topics)])
    return MetadataImage.from_snapshot(snapshot)


def allocated(action: Callable[[], Any]) -> int:
    """Bytes still held by what `action` built (its result kept alive)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = action()
        size = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    del result
    return size


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    counts = {"registrations": 0, "topics": 0, "bulk_map_entries": 0}
    post_init = PartitionRegistration.__post_init__

    def counting_post_init(self: PartitionRegistration) -> None:
        counts["registrations"] += 1
        post_init(self)

    def counting_frozen_map(d: Any = None) -> Any:
        result = frozen_map(d)
        if result is not d:
            counts["bulk_map_entries"] += len(result)
        return result

    topic_image = delta_module.TopicImage

    def counting_topic(*args: Any, **kwargs: Any) -> Any:
        counts["topics"] += 1
        return topic_image(*args, **kwargs)

    monkeypatch.setattr(PartitionRegistration, "__post_init__", counting_post_init)
    monkeypatch.setattr(delta_module, "frozen_map", counting_frozen_map)
    monkeypatch.setattr(delta_module, "TopicImage", counting_topic)
    return counts


@pytest.mark.parametrize("topics, per_topic", [(50, 2000), (5000, 20)])
def test_a_one_partition_change_touches_one_partition(counts: dict[str, int], topics: int, per_topic: int) -> None:
    image = image_of(topics, per_topic)
    assert image.topics.partition_count == topics * per_topic
    changed = image.topic_by_id("id7")
    reg = changed.partitions[5]
    delta = MetadataDelta(image)
    assert delta.replay(PartitionChange(topic_id="id7", partition=5, leader=reg.isr[1], controller_epoch=1),
                        image.offset + 1)
    counts.update(registrations=0)  # count apply() alone (replay built the one new registration)
    after: list[MetadataImage] = []
    size = allocated(lambda: after.append(delta.apply()))
    new = after[0]

    assert counts == {"registrations": 0, "topics": 1, "bulk_map_entries": 0}
    assert new.partition("t7", 5).leader == reg.isr[1] and new.topics.partition_count == topics * per_topic
    # everything else is shared, not copied
    assert new.topic_by_id("id8") is image.topic_by_id("id8")
    assert new.topic_by_id("id7").partitions[4] is changed.partitions[4]
    assert new.cluster is image.cluster and new.configs is image.configs
    # and no large map was copied: copying the large one of this image (the topic's partitions,
    # or the topic maps) would allocate far more than the whole apply did
    largest_copy = max(allocated(lambda: frozen_map(dict(changed.partitions))),
                       allocated(lambda: frozen_map(dict(image.topics.by_id))))
    assert size * 8 < largest_copy, (size, largest_copy)


def test_new_topics_and_partitions_cost_what_they_add(counts: dict[str, int]) -> None:
    image = image_of(50, 2000)
    counts.update(registrations=0)
    delta = MetadataDelta(image)
    records = [Topic(name="new", topic_id="new-id", controller_epoch=1)] + [
        Partition(topic_id="new-id", partition=p, replicas=(1,), isr=(1,), leader=1, controller_epoch=1)
        for p in range(3)] + [
        Partition(topic_id="id3", partition=2000, replicas=(2,), isr=(2,), leader=2, controller_epoch=1)]
    for i, record in enumerate(records):
        assert delta.replay(record, image.offset + 1 + i)
    new = delta.apply()
    assert counts == {"registrations": 4, "topics": 2, "bulk_map_entries": 3}  # the new topic's 3 partitions
    assert new.topics.partition_count == image.topics.partition_count + 4
    assert len(new.topic_by_id("id3").partitions) == 2001 and new.topic_by_id("id4") is image.topic_by_id("id4")


def test_removing_a_topic_keeps_the_count_and_shares_the_rest() -> None:
    image = image_of(50, 2000)
    delta = MetadataDelta(image)
    assert delta.replay(RemoveTopic(topic_id="id9", controller_epoch=1), image.offset + 1)
    new = delta.apply()
    assert new.topics.partition_count == 49 * 2000 and new.topic_by_name("t9") is None
    assert new.topic_by_id("id10") is image.topic_by_id("id10")
