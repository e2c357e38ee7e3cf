"""Property tests of replay: deterministic, batch-size independent, snapshot-faithful, never raising."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft.metadata.delta import MetadataDelta, apply_records
from kraft.metadata.image import MetadataImage
from kraft.metadata.records import RECORD_TYPES

ids = st.integers(-1, 4)
small_lists = st.lists(st.integers(-1, 4), max_size=4)
topic_ids = st.sampled_from(["a", "b", "c"])
epochs = st.integers(0, 3)
endpoints = st.lists(st.fixed_dictionaries({"name": st.just("HTTP"), "host": st.just("h"),
                                            "port": st.integers(1, 3)}), max_size=2)


def rec(kind: str, **fields: Any) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"type": st.just(kind), "controller_epoch": epochs,
                                  "request_id": st.one_of(st.none(), st.sampled_from(["r1", "r2"])), **fields})


# records drawn from small domains, so many are valid and many collide or break rules
plausible = st.one_of(
    rec("ClaimController", node_id=ids),
    rec("RegisterBroker", broker_id=ids, incarnation_id=st.just("i"), endpoints=endpoints,
        rack=st.one_of(st.none(), st.just("r")), broker_epoch=st.integers(-1, 20), fenced=st.booleans()),
    rec("FenceBroker", broker_id=ids, broker_epoch=st.integers(-1, 20)),
    rec("UnfenceBroker", broker_id=ids, broker_epoch=st.integers(-1, 20)),
    rec("UnregisterBroker", broker_id=ids, broker_epoch=st.integers(-1, 20)),
    rec("Topic", name=st.sampled_from(["x", "y", "bad name"]), topic_id=topic_ids),
    rec("RemoveTopic", topic_id=topic_ids),
    rec("Partition", topic_id=topic_ids, partition=st.integers(-1, 3), replicas=small_lists, isr=small_lists,
        leader=ids),
    rec("PartitionChange", topic_id=topic_ids, partition=st.integers(0, 3),
        isr=st.one_of(st.none(), small_lists), leader=st.one_of(st.none(), ids)),
    rec("Config", resource_type=st.sampled_from(["topic", "broker", "x"]), resource_name=st.sampled_from(["x", "1"]),
        name=st.sampled_from(["a", "b"]), value=st.one_of(st.none(), st.just("v"))),
    rec("ProducerIds", broker_id=ids, broker_epoch=st.integers(-1, 20), next_producer_id=st.integers(-5, 5000)),
    rec("NoOp"),
)
junk_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5), st.binary(max_size=5), st.floats()),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8,
)
junk = st.one_of(
    junk_values,
    st.dictionaries(st.sampled_from(["type", "topic_id", "partition", "isr", "broker_id", "name", "replicas",
                                     "controller_epoch", "version", "request_id"]),
                    st.one_of(junk_values, st.sampled_from(sorted(RECORD_TYPES))), max_size=6),
)
records = st.lists(st.one_of(plausible, plausible, junk), max_size=40)


def replay_one_delta(entries: list[Any]) -> tuple[MetadataDelta, MetadataImage]:
    return apply_records(MetadataImage.EMPTY, enumerate(entries))


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(records, st.integers(1, 7))
def test_replay_is_deterministic_and_independent_of_batching(entries: list[Any], batch: int) -> None:
    _, image = replay_one_delta(entries)
    assert replay_one_delta(entries)[1] == image
    stepped = MetadataImage.EMPTY
    for start in range(0, len(entries), batch):
        stepped = apply_records(stepped, ((start + i, r) for i, r in enumerate(entries[start:start + batch])))[1]
    assert stepped == image
    assert image.offset == len(entries) - 1
    assert MetadataImage.from_snapshot(image.to_snapshot()) == image
    for topic in image.topics.by_id.values():
        assert sorted(topic.partitions) == list(range(len(topic.partitions)))
        assert image.topics.by_name[topic.name] is topic


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(junk, max_size=20))
def test_garbage_never_raises_and_changes_nothing_but_the_offset(entries: list[Any]) -> None:
    delta, image = replay_one_delta(entries)
    valid = len(entries) - len(delta.ignored)
    if valid == 0:
        assert image.topics is MetadataImage.EMPTY.topics and image.cluster is MetadataImage.EMPTY.cluster
