"""ZooKeeper state as the `MetadataImage` the broker code consumes (pure).

The ZooKeeper controller keeps its view of the cluster as an image and pushes it to brokers, so
the same publishers (replica manager, groups, metadata view) run unchanged. A partition's
`partition_epoch` is its state znode's version: the conditional `setData` of an ISR change or an
election moves both by one, so a leader's AlterPartition-style write names the version it read.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping

from kraft.zk.znodes import LISTENER, BrokerInfo, PartitionState, TopicAssignment
from kraft.metadata.image import (
    BrokerRegistration, ClusterImage, ConfigurationsImage, MetadataImage, PartitionRegistration,
    TopicImage, TopicsImage, frozen_map,
)
from kraft.metadata.partition_change import PartitionChangeBuilder
from kraft.metadata.records import NO_LEADER, Endpoint

EPOCH_SHIFT = 32  # image offsets: controller epoch in the high bits, so a new controller's are higher


def image_offset(controller_epoch: int, sequence: int) -> int:
    return (controller_epoch << EPOCH_SHIFT) | sequence


def broker_registration(info: BrokerInfo, broker_epoch: int) -> BrokerRegistration:
    """A registered broker is live (unfenced) for as long as its ephemeral znode exists; its
    broker epoch is the znode's creation zxid (czxid), as in Kafka."""
    return BrokerRegistration(info.broker_id, f"zk-{broker_epoch}", broker_epoch,
                              (Endpoint(LISTENER, info.host, info.port),), info.rack, False)


def partition_registration(assignment: TopicAssignment, partition: int, state: PartitionState,
                           version: int) -> PartitionRegistration:
    return PartitionRegistration(
        replicas=assignment.partitions[partition], isr=state.isr, leader=state.leader,
        leader_epoch=state.leader_epoch, partition_epoch=version,
        adding_replicas=assignment.adding_replicas.get(partition, ()),
        removing_replicas=assignment.removing_replicas.get(partition, ()),
    )


def partition_state(reg: PartitionRegistration, controller_epoch: int) -> PartitionState:
    return PartitionState(reg.leader, reg.leader_epoch, reg.isr, controller_epoch)


def initial_registration(replicas: tuple[int, ...], live: set[int]) -> PartitionRegistration:
    """A new partition's first state (Kafka's NewPartition -> OnlinePartition): the live replicas
    form the ISR and the first of them leads; with none live the ISR is all replicas, no leader."""
    isr = tuple(r for r in replicas if r in live)
    return PartitionRegistration(replicas, isr or replicas, isr[0] if isr else NO_LEADER)


def online_change(topic: TopicImage, partition: int, reg: PartitionRegistration, live: set[int],
                  unclean_allowed: bool) -> PartitionRegistration | None:
    """The registration after taking dead brokers out of the ISR (never emptying it) and electing
    a live ISR member when the leader is dead or missing; None when nothing changes."""
    isr = tuple(b for b in reg.isr if b in live) or reg.isr
    change = (PartitionChangeBuilder(topic.topic_id, partition, reg, live.__contains__,
                                     unclean_allowed=unclean_allowed)
              .set_target_isr(isr).build())
    return None if change is None else reg.merge(change)


def shutdown_change(topic: TopicImage, partition: int, reg: PartitionRegistration, live: set[int],
                    leaving: set[int], unclean_allowed: bool) -> PartitionRegistration | None:
    """`online_change` with brokers `leaving` in a controlled shutdown (Kafka's
    `KafkaController.doControlledShutdown`): in a partition of more than one replica they leave
    the ISR and the leadership goes to the first live ISR member staying
    (ControlledShutdownPartitionLeaderElectionStrategy); when no member stays (the leaving broker
    is the only in-sync replica) the partition is left as `online_change` leaves it, still led."""
    if len(reg.replicas) > 1:
        isr = tuple(b for b in reg.isr if b in live and b not in leaving)
        if isr:
            change = (PartitionChangeBuilder(topic.topic_id, partition, reg, lambda b: b in live and b not in leaving)
                      .set_target_isr(isr).build())
            return None if change is None else reg.merge(change)
    return online_change(topic, partition, reg, live, unclean_allowed)


def with_brokers(image: MetadataImage, brokers: Mapping[int, BrokerRegistration]) -> MetadataImage:
    return dataclasses.replace(image, cluster=ClusterImage(frozen_map(brokers)))


def with_topics(image: MetadataImage, changed: Iterable[TopicImage], removed: Iterable[str] = ()) -> MetadataImage:
    """`changed` topics replace those of the same name; `removed` names are dropped."""
    by_name = dict(image.topics.by_name)
    for name in removed:
        by_name.pop(name, None)
    for topic in changed:
        by_name[topic.name] = topic
    return dataclasses.replace(image, topics=TopicsImage(
        frozen_map({t.topic_id: t for t in by_name.values()}), frozen_map(by_name)))


def with_partitions(topic: TopicImage, changed: Mapping[int, PartitionRegistration]) -> TopicImage:
    return dataclasses.replace(topic, partitions=frozen_map({**topic.partitions, **changed}))


def with_topic_config(image: MetadataImage, topic: str, config: Mapping[str, str] | None) -> MetadataImage:
    resources = dict(image.configs.resources)
    if config:
        resources[("topic", topic)] = frozen_map(config)
    else:
        resources.pop(("topic", topic), None)
    return dataclasses.replace(image, configs=ConfigurationsImage(frozen_map(resources)))
