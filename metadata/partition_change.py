"""Leader election and ISR rules, after Kafka's `PartitionChangeBuilder` and KIP-841.

- Election (ONLINE): keep the current leader while it is in the ISR and acceptable (unfenced);
  otherwise the first replica in assignment order that is in the ISR and acceptable; otherwise,
  only when unclean election is allowed, the first acceptable replica (the ISR becomes just it);
  otherwise no leader (-1). PREFERRED tries the first replica before keeping the current leader.
- Fencing a broker removes it from every ISR and moves its leaderships; the ISR never becomes
  empty: its last member stays in and the partition goes leaderless (KIP-841).
- Unfencing a broker elects leaders for leaderless partitions it can lead.
- An ISR change requested by a leader (AlterPartition) must keep the leader and stay within the
  replicas; it names each member with the broker epoch of the process whose position the leader
  counted (KIP-903), and a member it adds must be registered, unfenced and at exactly that epoch
  (INELIGIBLE_REPLICA otherwise): a broker that restarted meanwhile (an unclean shutdown may have
  cost it records it had acknowledged) joins only from positions reported under its new epoch.
- Reassignment (KIP-455): a target assignment makes the replicas target + the old ones leaving
  (`adding_replicas` = target - old, `removing_replicas` = old - target); every build completes a
  reassignment once the ISR holds all adding replicas and some target replica: replicas = target,
  ISR ∩ target, a new leader when the old one left. Cancelling reverts to the original replicas.
Pure: builders return `PartitionChange` records (or None when nothing changes).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable, Collection, Iterator, Sequence

from kraft.metadata.errors import MetadataError
from kraft.metadata.image import ClusterImage, MetadataImage, PartitionRegistration, TopicImage
from kraft.metadata.records import NO_LEADER, PartitionChange


class ElectionType(enum.Enum):
    ONLINE = "online"
    PREFERRED = "preferred"


class PartitionChangeBuilder:
    def __init__(
        self,
        topic_id: str,
        partition: int,
        registration: PartitionRegistration,
        is_acceptable_leader: Callable[[int], bool],
        *,
        unclean_allowed: bool = False,
    ) -> None:
        self.topic_id = topic_id
        self.partition = partition
        self.registration = registration
        self.is_acceptable_leader = is_acceptable_leader
        self.unclean_allowed = unclean_allowed
        self.target_isr: tuple[int, ...] = registration.isr
        self.target_replicas: tuple[int, ...] = registration.replicas
        self.adding_replicas: tuple[int, ...] = registration.adding_replicas
        self.removing_replicas: tuple[int, ...] = registration.removing_replicas
        self.election = ElectionType.ONLINE

    def set_target_isr(self, isr: Sequence[int]) -> "PartitionChangeBuilder":
        self.target_isr = tuple(isr)
        return self

    def set_election(self, election: ElectionType) -> "PartitionChangeBuilder":
        self.election = election
        return self

    def set_reassignment(self, target: Sequence[int]) -> "PartitionChangeBuilder":
        """Start moving to the `target` replicas (distinct, non-empty) from the current ones."""
        target, current = tuple(target), self.registration.replicas
        self.target_replicas = target + tuple(r for r in current if r not in target)
        self.adding_replicas = tuple(r for r in target if r not in current)
        self.removing_replicas = tuple(r for r in current if r not in target)
        return self

    def cancel_reassignment(self) -> "PartitionChangeBuilder":
        """Revert to the replicas before the reassignment; the ISR keeps only those."""
        reg = self.registration
        self.target_replicas = tuple(r for r in reg.replicas if r not in reg.adding_replicas)
        self.target_isr = tuple(r for r in self.target_isr if r in self.target_replicas)
        self.adding_replicas = self.removing_replicas = ()
        return self

    def build(self) -> PartitionChange | None:
        replicas, isr = self.target_replicas, self.target_isr
        adding, removing = self.adding_replicas, self.removing_replicas
        if (adding or removing) and set(adding) <= set(isr):
            remaining_isr = tuple(b for b in isr if b not in removing)
            if remaining_isr:  # complete: the new replicas are in sync (KIP-455)
                replicas = tuple(r for r in replicas if r not in removing)
                isr, adding, removing = remaining_isr, (), ()
        leader = self._elect_clean(replicas, isr)
        if leader == NO_LEADER and self.unclean_allowed:
            leader = next((r for r in replicas if self.is_acceptable_leader(r)), NO_LEADER)
            if leader != NO_LEADER:
                isr = (leader,)  # an unclean leader starts a new ISR of its own
        reg = self.registration
        if (isr, leader, replicas, adding, removing) == (
                reg.isr, reg.leader, reg.replicas, reg.adding_replicas, reg.removing_replicas):
            return None
        return PartitionChange(
            topic_id=self.topic_id,
            partition=self.partition,
            isr=None if isr == reg.isr else isr,
            leader=None if leader == reg.leader else leader,
            replicas=None if replicas == reg.replicas else replicas,
            adding_replicas=None if adding == reg.adding_replicas else adding,
            removing_replicas=None if removing == reg.removing_replicas else removing,
        )

    def _elect_clean(self, replicas: tuple[int, ...], isr: tuple[int, ...]) -> int:
        def valid(b: int) -> bool:
            return b != NO_LEADER and b in isr and self.is_acceptable_leader(b)

        reg = self.registration
        if self.election is ElectionType.PREFERRED and valid(reg.preferred_leader):
            return reg.preferred_leader
        if valid(reg.leader):
            return reg.leader
        return next((r for r in replicas if valid(r)), NO_LEADER)


def _partitions(image: MetadataImage) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
    for topic in image.topics.by_id.values():
        for p, reg in topic.partitions.items():
            yield topic, p, reg


def _named(image: MetadataImage, names: Collection[tuple[str, int]]
           ) -> Iterator[tuple[TopicImage, int, PartitionRegistration]]:
    """The partitions of `names` ((topic name, partition)) that exist, each once."""
    for name, p in sorted(set(names)):
        topic = image.topic_by_name(name)
        reg = None if topic is None else topic.partitions.get(p)
        if topic is not None and reg is not None:
            yield topic, p, reg


def fence_broker_changes(
    image: MetadataImage, broker_id: int, unclean_allowed: Callable[[str], bool],
    only: Collection[tuple[str, int]] | None = None,
) -> list[PartitionChange]:
    """Changes that take `broker_id` out of every ISR and move its leaderships (KIP-841); with
    `only`, of those (topic name, partition) alone: its replicas on an offline log directory
    (KIP-858), where the last ISR member stays in the ISR without leading, as a fenced one."""

    def acceptable(b: int) -> bool:
        return b != broker_id and image.cluster.is_unfenced(b)

    changes = []
    for topic, p, reg in _partitions(image) if only is None else _named(image, only):
        if broker_id not in reg.isr:
            continue  # the leader is always in the ISR, so it is not a leader here either
        isr = tuple(b for b in reg.isr if b != broker_id) or reg.isr
        change = (
            PartitionChangeBuilder(topic.topic_id, p, reg, acceptable, unclean_allowed=unclean_allowed(topic.name))
            .set_target_isr(isr)
            .build()
        )
        if change is not None:
            changes.append(change)
    return changes


def unfence_broker_changes(
    image: MetadataImage, broker_id: int, unclean_allowed: Callable[[str], bool],
    offline: Collection[tuple[str, int]] = (),
) -> list[PartitionChange]:
    """Leader elections for leaderless partitions that `broker_id`, now unfenced, can lead (not
    those of its `offline` replicas: on an offline log directory)."""

    def acceptable(b: int) -> bool:
        return b == broker_id or image.cluster.is_unfenced(b)

    changes = []
    for topic, p, reg in _partitions(image):
        if reg.leader != NO_LEADER or broker_id not in reg.replicas or (topic.name, p) in offline:
            continue
        change = PartitionChangeBuilder(
            topic.topic_id, p, reg, acceptable, unclean_allowed=unclean_allowed(topic.name)
        ).build()
        if change is not None:
            changes.append(change)
    return changes


def preferred_leader_change(
    image: MetadataImage, topic: TopicImage, partition: int
) -> PartitionChange:
    """Move leadership to the preferred replica; ELECTION_NOT_NEEDED / PREFERRED_LEADER_NOT_AVAILABLE."""
    reg = topic.partitions[partition]
    if reg.leader == reg.preferred_leader:
        raise MetadataError("ELECTION_NOT_NEEDED", f"{topic.name}-{partition}: preferred replica already leads")
    change = (
        PartitionChangeBuilder(topic.topic_id, partition, reg, image.cluster.is_unfenced)
        .set_election(ElectionType.PREFERRED)
        .build()
    )
    if change is None or change.leader != reg.preferred_leader:
        raise MetadataError(
            "PREFERRED_LEADER_NOT_AVAILABLE",
            f"{topic.name}-{partition}: preferred replica {reg.preferred_leader} is not in the ISR or is fenced",
        )
    return change


NO_BROKER_EPOCH = -1


@dataclass(frozen=True)
class BrokerState:
    """A member of the ISR an AlterPartition asks for (KIP-903's BrokerState): the broker and the
    epoch of the broker process whose position the leader counted (NO_BROKER_EPOCH: not known,
    allowed only for a member already in the ISR)."""

    broker_id: int
    broker_epoch: int = NO_BROKER_EPOCH


def check_isr_change(
    reg: PartitionRegistration, new_isr: Sequence[BrokerState], cluster: ClusterImage
) -> tuple[int, ...]:
    """Validate the ISR a leader asks for (AlterPartition); the ISR as a tuple of broker ids.
    INVALID_REQUEST for a malformed ISR; INELIGIBLE_REPLICA for a member that is not registered,
    a joining member that is fenced or named without its current broker epoch, or any member
    named with an epoch that is not the registered one (Kafka's ReplicationControlManager)."""
    isr = tuple(b.broker_id for b in new_isr)
    if len(set(isr)) != len(isr):
        raise MetadataError("INVALID_REQUEST", f"ISR {list(isr)} has duplicates")
    if reg.leader not in isr:
        raise MetadataError("INVALID_REQUEST", f"ISR {list(isr)} must contain the leader {reg.leader}")
    outside = [b for b in isr if b not in reg.replicas]
    if outside:
        raise MetadataError("INVALID_REQUEST", f"ISR members {outside} are not replicas {list(reg.replicas)}")
    ineligible = [why for why in (_ineligible(member, member.broker_id not in reg.isr, cluster)
                                  for member in new_isr) if why is not None]
    if ineligible:
        raise MetadataError("INELIGIBLE_REPLICA", f"ISR {list(isr)}: " + "; ".join(ineligible))
    return isr


def _ineligible(member: BrokerState, joining: bool, cluster: ClusterImage) -> str | None:
    """Why `member` cannot be in the new ISR, or None."""
    registration = cluster.broker(member.broker_id)
    if registration is None:
        return f"broker {member.broker_id} is not registered"
    if joining and registration.fenced:
        return f"broker {member.broker_id} is fenced"
    if member.broker_epoch == registration.broker_epoch:
        return None
    if joining or member.broker_epoch != NO_BROKER_EPOCH:
        return (f"broker {member.broker_id} is at epoch {registration.broker_epoch}, the position "
                f"counted came from epoch {member.broker_epoch}")
    return None


def reassignment_change(
    image: MetadataImage, topic: TopicImage, partition: int, target: Sequence[int] | None
) -> PartitionChange | None:
    """Start (target replicas) or cancel (None) the reassignment of one partition (KIP-455);
    None when nothing changes. INVALID_REPLICA_ASSIGNMENT for an empty, duplicated or unregistered
    target or a cancel that would empty the ISR; NO_REASSIGNMENT_IN_PROGRESS for a needless cancel."""
    reg = topic.partitions[partition]
    name = f"{topic.name}-{partition}"
    builder = PartitionChangeBuilder(topic.topic_id, partition, reg, image.cluster.is_unfenced)
    if target is None:
        if not reg.adding_replicas and not reg.removing_replicas:
            raise MetadataError("NO_REASSIGNMENT_IN_PROGRESS", f"{name} is not being reassigned")
        if not any(b in reg.isr for b in reg.replicas if b not in reg.adding_replicas):
            raise MetadataError("INVALID_REPLICA_ASSIGNMENT",
                                f"{name}: no original replica is in the ISR {list(reg.isr)}; "
                                "cancelling would lose data")
        return builder.cancel_reassignment().build()
    return builder.set_reassignment(check_replicas(image, name, target)).build()


def check_replicas(image: MetadataImage, name: str, replicas: Sequence[int]) -> tuple[int, ...]:
    """A manual replica list (a reassignment's target, a new topic's assignment) as a tuple;
    INVALID_REPLICA_ASSIGNMENT when it is empty, names a broker twice or one not registered."""
    replicas = tuple(replicas)
    if not replicas or len(set(replicas)) != len(replicas):
        raise MetadataError("INVALID_REPLICA_ASSIGNMENT",
                            f"{name}: replicas {list(replicas)} must be distinct, at least one")
    unknown = [b for b in replicas if image.cluster.broker(b) is None]
    if unknown:
        raise MetadataError("INVALID_REPLICA_ASSIGNMENT", f"{name}: brokers {unknown} are not registered")
    return replicas
