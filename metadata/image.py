"""The metadata image: the whole cluster metadata at one offset, immutable, after Kafka's `image/`.

`MetadataImage` is made of per-concern images (`ClusterImage`, `TopicsImage`,
`ConfigurationsImage`, `ProducerIdsImage`), each with an `EMPTY`. Nothing mutates an image: a
`MetadataDelta` builds the next one, sharing every unchanged part. Maps are persistent HAMTs
(`frozen_map`, `immutables.Map`): immutable, so a publisher cannot corrupt a shared image, and a
new image shares all but the O(log n) nodes its delta changed, so changing one partition of a
100k-partition topic costs a few node copies, not a copy of the topic or of the topic maps.
Derived counts a per-delta caller needs (`TopicsImage.partition_count`) are kept running by the
delta, never rescanned.

Also here: the read helpers brokers and the HTTP layer need, `to_dict()` for `/v1/metadata`, and
`to_snapshot()`/`from_snapshot()` (builtins only) for snapshots and for brokers too far behind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterable, Mapping

from kraft.metadata.acl import AclsImage
from kraft.metadata.client_quotas import ClientQuotasImage
from kraft.metadata.log_rules import RequestWindow
from kraft.metadata.persistent import frozen_map
from kraft.metadata.records import NO_LEADER, Endpoint, PartitionChange
from kraft.metadata.topic_name import is_internal

__all__ = ["frozen_map"]  # re-exported: the image's one map constructor

SNAPSHOT_FORMAT = 1


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    incarnation_id: str
    broker_epoch: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None
    fenced: bool

    def endpoint(self, listener: str | None = None) -> Endpoint | None:
        """The endpoint of `listener`, or the first one when no listener is named."""
        for e in self.endpoints:
            if listener is None or e.name == listener:
                return e
        return None


@dataclass(frozen=True)
class ClusterImage:
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=frozen_map)
    EMPTY: ClassVar["ClusterImage"]

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        return self.brokers.get(broker_id)

    def is_unfenced(self, broker_id: int) -> bool:
        b = self.brokers.get(broker_id)
        return b is not None and not b.fenced

    def live_brokers(self) -> list[BrokerRegistration]:
        """Registered, unfenced brokers by id."""
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]


ClusterImage.EMPTY = ClusterImage()


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        # The invariants (leader ∈ ISR ⊆ replicas, no duplicates, epochs >= 0) are checked on every
        # construction, not with `assert` (stripped by -O): replay turns the ValueError into a no-op.
        replicas = set(self.replicas)
        if not self.replicas or len(replicas) != len(self.replicas) or min(replicas) < 0:
            raise ValueError(f"replicas {list(self.replicas)} must be distinct broker ids, at least one")
        if len(set(self.isr)) != len(self.isr) or not replicas.issuperset(self.isr):
            raise ValueError(f"isr {list(self.isr)} must be distinct members of replicas {list(self.replicas)}")
        if self.leader != NO_LEADER and self.leader not in self.isr:
            raise ValueError(f"leader {self.leader} must be in isr {list(self.isr)} (or {NO_LEADER})")
        if self.leader_epoch < 0 or self.partition_epoch < 0:
            raise ValueError("epochs must not be negative")
        if not replicas.issuperset(self.adding_replicas) or not replicas.issuperset(self.removing_replicas):
            raise ValueError("adding/removing replicas must be replicas")

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0]

    def merge(self, change: PartitionChange) -> "PartitionRegistration":
        """The registration after `change`: partition_epoch + 1, leader_epoch + 1 on a new leader."""
        leader = self.leader if change.leader is None else change.leader
        return PartitionRegistration(
            replicas=self.replicas if change.replicas is None else change.replicas,
            isr=self.isr if change.isr is None else change.isr,
            leader=leader,
            leader_epoch=self.leader_epoch + (leader != self.leader),
            partition_epoch=self.partition_epoch + 1,
            adding_replicas=self.adding_replicas if change.adding_replicas is None else change.adding_replicas,
            removing_replicas=(
                self.removing_replicas if change.removing_replicas is None else change.removing_replicas
            ),
        )

    def to_dict(self, partition: int) -> dict[str, Any]:
        return {
            "partition": partition,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "replicas": list(self.replicas),
            "isr": list(self.isr),
        }


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: str
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=frozen_map)

    @property
    def internal(self) -> bool:
        return is_internal(self.name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "topic_id": self.topic_id,
            "internal": self.internal,
            "partitions": [self.partitions[p].to_dict(p) for p in sorted(self.partitions)],
        }


@dataclass(frozen=True)
class TopicsImage:
    by_id: Mapping[str, TopicImage] = field(default_factory=frozen_map)
    by_name: Mapping[str, TopicImage] = field(default_factory=frozen_map)
    # partitions of all topics: kept running by the delta (counted here only when not given)
    partition_count: int = field(default=-1, compare=False)
    EMPTY: ClassVar["TopicsImage"]

    def __post_init__(self) -> None:
        if len(self.by_id) != len(self.by_name):
            raise ValueError("topic names and ids must match one to one")
        if self.partition_count < 0:
            object.__setattr__(self, "partition_count", sum(len(t.partitions) for t in self.by_id.values()))


TopicsImage.EMPTY = TopicsImage()


@dataclass(frozen=True)
class ConfigurationsImage:
    """Config overrides per resource: (resource_type, resource_name) -> {name: value}."""

    resources: Mapping[tuple[str, str], Mapping[str, str]] = field(default_factory=frozen_map)
    EMPTY: ClassVar["ConfigurationsImage"]

    def get(self, resource_type: str, resource_name: str) -> Mapping[str, str]:
        return self.resources.get((resource_type, resource_name), frozen_map())


ConfigurationsImage.EMPTY = ConfigurationsImage()


@dataclass(frozen=True)
class ScramCredentialData:
    """A user's SCRAM credential as Kafka's image keeps it (base64 fields, as the record has them)."""

    salt: str
    stored_key: str
    server_key: str
    iterations: int


@dataclass(frozen=True)
class ScramImage:
    """SCRAM credentials: (user name, mechanism) -> credential."""

    credentials: Mapping[tuple[str, str], ScramCredentialData] = field(default_factory=frozen_map)
    EMPTY: ClassVar["ScramImage"]

    def get(self, name: str, mechanism: str) -> ScramCredentialData | None:
        return self.credentials.get((name, mechanism))

    def users(self) -> dict[str, dict[str, int]]:
        """name -> {mechanism: iterations}, for describing without the keys."""
        out: dict[str, dict[str, int]] = {}
        for (name, mechanism), c in sorted(self.credentials.items()):
            out.setdefault(name, {})[mechanism] = c.iterations
        return out


ScramImage.EMPTY = ScramImage()


@dataclass(frozen=True)
class ProducerIdsImage:
    next_producer_id: int = 0
    EMPTY: ClassVar["ProducerIdsImage"]


ProducerIdsImage.EMPTY = ProducerIdsImage()


@dataclass(frozen=True)
class MetadataImage:
    """The state after applying every record up to `offset` (-1: nothing applied)."""

    offset: int = -1
    controller_epoch: int = 0
    controller_id: int | None = None
    # the cluster id the log's first claim recorded (None: a log written before ids were recorded,
    # or none claimed yet); `ClaimController` says how it is chosen
    cluster_id: str | None = None
    cluster: ClusterImage = ClusterImage.EMPTY
    topics: TopicsImage = TopicsImage.EMPTY
    configs: ConfigurationsImage = ConfigurationsImage.EMPTY
    producer_ids: ProducerIdsImage = ProducerIdsImage.EMPTY
    scram: ScramImage = ScramImage.EMPTY
    acls: AclsImage = AclsImage.EMPTY
    client_quotas: ClientQuotasImage = ClientQuotasImage.EMPTY
    # recent request ids -> offset of their last record, oldest first (bounded): the window the
    # log's admission rule reads (`log_rules`), at this image's offset
    request_ids: RequestWindow = RequestWindow.EMPTY
    EMPTY: ClassVar["MetadataImage"]

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled (e.g. in a Raft snapshot) as its compact snapshot form: builtins only, so a dump
        # does not depend on the maps' implementation
        return (MetadataImage.from_snapshot, (self.to_snapshot(),))

    # -- reads ----------------------------------------------------------------------------------

    def topic_by_name(self, name: str) -> TopicImage | None:
        return self.topics.by_name.get(name)

    def topic_by_id(self, topic_id: str) -> TopicImage | None:
        return self.topics.by_id.get(topic_id)

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        t = self.topics.by_name.get(topic)
        return None if t is None else t.partitions.get(partition)

    def leader_endpoint(self, topic: str, partition: int, listener: str | None = None) -> Endpoint | None:
        """Where the leader of a partition listens, or None (unknown partition, no leader)."""
        p = self.partition(topic, partition)
        if p is None or p.leader == NO_LEADER:
            return None
        b = self.cluster.broker(p.leader)
        return None if b is None else b.endpoint(listener)

    def live_brokers(self) -> list[BrokerRegistration]:
        return self.cluster.live_brokers()

    def topic_configs(self, topic: str) -> Mapping[str, str]:
        return self.configs.get("topic", topic)

    def has_request(self, request_id: str) -> bool:
        return request_id in self.request_ids

    # -- views ----------------------------------------------------------------------------------

    def to_dict(
        self, cluster_id: str | None = None, topics: Iterable[str] | None = None, listener: str | None = None
    ) -> dict[str, Any]:
        """The `/v1/metadata` answer (internals.md §5): live brokers and the topics asked for
        (all when `topics` is None; unknown names are left out)."""
        brokers = []
        for b in self.cluster.live_brokers():
            e = b.endpoint(listener)
            if e is not None:
                brokers.append({"node_id": b.broker_id, "host": e.host, "port": e.port, "rack": b.rack})
        names = sorted(self.topics.by_name) if topics is None else [t for t in topics if t in self.topics.by_name]
        return {
            "cluster_id": cluster_id,
            "controller_id": -1 if self.controller_id is None else self.controller_id,
            "brokers": brokers,
            "topics": [self.topics.by_name[n].to_dict() for n in names],
        }

    def to_snapshot(self) -> dict[str, Any]:
        """The full state as builtins (compact lists), for snapshot files and lagging brokers."""
        return {
            "format": SNAPSHOT_FORMAT,
            "offset": self.offset,
            "controller_epoch": self.controller_epoch,
            "controller_id": self.controller_id,
            "cluster_id": self.cluster_id,
            "brokers": [
                [b.broker_id, b.incarnation_id, b.broker_epoch, [[e.name, e.host, e.port, e.security_protocol] for e in b.endpoints],
                 b.rack, b.fenced]
                for _, b in sorted(self.cluster.brokers.items())
            ],
            "topics": [  # partitions are 0..n-1: read in order, not sorted; tuples pack as arrays
                [t.name, t.topic_id, [
                    [i, p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch, p.adding_replicas,
                     p.removing_replicas]
                    for i, p in enumerate(map(t.partitions.__getitem__, range(len(t.partitions))))
                ]]
                for _, t in sorted(self.topics.by_name.items())
            ],
            "configs": [[rt, rn, dict(c)] for (rt, rn), c in sorted(self.configs.resources.items())],
            "next_producer_id": self.producer_ids.next_producer_id,
            "scram": [[n, m, c.salt, c.stored_key, c.server_key, c.iterations]
                      for (n, m), c in sorted(self.scram.credentials.items())],
            "acls": self.acls.to_snapshot(),
            "client_quotas": self.client_quotas.to_snapshot(),
            "request_ids": [[r, o] for r, o in self.request_ids.items()],
        }

    @classmethod
    def from_snapshot(cls, d: Any) -> "MetadataImage":
        """Parse `to_snapshot()` output; ValueError when it is malformed. Maps are built in bulk."""
        try:
            return cls._from_snapshot(d)
        except ValueError:
            raise
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"malformed snapshot: {type(e).__name__}: {e}") from None

    @classmethod
    def _from_snapshot(cls, d: Any) -> "MetadataImage":
        if not isinstance(d, dict) or d.get("format") != SNAPSHOT_FORMAT:
            raise ValueError(f"unsupported snapshot format {d.get('format') if isinstance(d, dict) else d!r}")
        brokers = {
            int(bid): BrokerRegistration(
                # a snapshot written before endpoints had a protocol lists [name, host, port]
                int(bid), str(inc), int(epoch), tuple(Endpoint(str(e[0]), str(e[1]), int(e[2]), *map(str, e[3:4]))
                                                      for e in eps),
                None if rack is None else str(rack), bool(fenced),
            )
            for bid, inc, epoch, eps, rack, fenced in d["brokers"]
        }
        registration = _registration_parser()
        topics = [TopicImage(str(name), str(tid), _partitions_from_snapshot(parts, registration))
                  for name, tid, parts in d["topics"]]
        controller_id = d["controller_id"]
        cluster_id = d.get("cluster_id")  # absent from snapshots older than recorded cluster ids
        return cls(
            offset=int(d["offset"]),
            controller_epoch=int(d["controller_epoch"]),
            controller_id=None if controller_id is None else int(controller_id),
            cluster_id=None if cluster_id is None else str(cluster_id),
            cluster=ClusterImage(frozen_map(brokers)),
            topics=TopicsImage(
                frozen_map({t.topic_id: t for t in topics}), frozen_map({t.name: t for t in topics}),
                sum(len(t.partitions) for t in topics),
            ),
            configs=ConfigurationsImage(frozen_map({
                (str(rt), str(rn)): frozen_map({str(k): str(v) for k, v in c.items()})
                for rt, rn, c in d["configs"]
            })),
            producer_ids=ProducerIdsImage(int(d["next_producer_id"])),
            scram=ScramImage(frozen_map({  # absent from snapshots older than SCRAM
                (str(n), str(m)): ScramCredentialData(str(salt), str(stored), str(server), int(it))
                for n, m, salt, stored, server, it in d.get("scram", ())
            })),
            acls=AclsImage.from_snapshot(d.get("acls", ())),  # absent from snapshots older than ACLs
            client_quotas=ClientQuotasImage.from_snapshot(d.get("client_quotas", ())),
            request_ids=RequestWindow.from_items(d["request_ids"]),
        )


MetadataImage.EMPTY = MetadataImage()


def _registration_parser() -> Callable[[Any, Any, Any, Any, Any, Any, Any], PartitionRegistration]:
    """Parses a snapshot's partition rows into registrations, one shared object per distinct
    registration (they are immutable): most partitions of a large cluster repeat an assignment
    and epochs, so a load checks and keeps each distinct one once."""
    seen: dict[tuple[Any, ...], PartitionRegistration] = {}

    def parse(rep: Any, isr: Any, leader: Any, le: Any, pe: Any, add: Any, rem: Any) -> PartitionRegistration:
        key = (tuple(rep), tuple(isr), leader, le, pe, tuple(add), tuple(rem))
        reg = seen.get(key)
        if reg is None:
            reg = seen[key] = PartitionRegistration(
                tuple(map(int, rep)), tuple(map(int, isr)), int(leader), int(le), int(pe),
                tuple(map(int, add)), tuple(map(int, rem)),
            )
        return reg

    return parse


def _partitions_from_snapshot(
    rows: Any, registration: Callable[..., PartitionRegistration]
) -> Mapping[int, PartitionRegistration]:
    """One topic's partition map, built in bulk; ValueError unless its indexes are 0..n-1."""
    partitions = {int(i): registration(rep, isr, leader, le, pe, add, rem)
                  for i, rep, isr, leader, le, pe, add, rem in rows}
    if len(partitions) != len(rows) or (partitions and (min(partitions), max(partitions)) != (0, len(rows) - 1)):
        raise ValueError("a topic's partitions must be numbered 0..n-1")
    return frozen_map(partitions)
