"""MetadataDelta: replays records on top of an image and builds the next image (Kafka's `MetadataDelta`).

Records with metadata offsets are those of batches the log's one admission rule applied
(`kraft.metadata.log_rules.admit`: fencing and request dedup, decided per batch by the Raft state
machine), so replay trusts them: a `ClaimController` makes its node the active controller, and
every record's request id goes into the image's `RequestWindow` with the same `remembered` the
rule's own window uses. `replay(record, offset)` never raises: a record that is malformed, refers
to something that does not exist or breaks an invariant is a no-op whose reason is logged and kept
in `ignored`. The offset still advances.

`apply()` builds the next `MetadataImage` from persistent maps (`frozen_map`): the work is
O(changes · log n), never a copy of a topic's partitions or of the topic, broker or config maps,
and `TopicsImage.partition_count` is carried forward from the delta. `local_changes(broker_id)`
says which partitions a broker now leads, follows or must delete (Kafka's
`TopicsDelta.localChanges`). `MetadataDelta.from_snapshot` gives the same view for a snapshot
installed over an older image.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from kraft.metadata.acl import StandardAcl
from kraft.metadata.client_quotas import Entity, check_entity, check_quota
from kraft.metadata.errors import MetadataError
from kraft.metadata.image import (
    BrokerRegistration, ClusterImage, ConfigurationsImage, MetadataImage, PartitionRegistration,
    ProducerIdsImage, ScramCredentialData, ScramImage, TopicImage, TopicsImage, frozen_map,
)
from kraft.metadata.log_rules import RequestWindow, request_runs
from kraft.metadata.persistent import with_changes
from kraft.metadata.records import (
    AccessControlEntry, ClaimController, ClientQuota, Config, FenceBroker, MetadataRecord, NoOp, Partition,
    PartitionChange, ProducerIds, RegisterBroker, RemoveAccessControlEntry, RemoveTopic, RemoveUserScramCredential,
    Topic, UnfenceBroker, UnregisterBroker,
    UserScramCredential, record_from_dict,
)
from kraft.metadata.topic_name import validate_topic_name

log = logging.getLogger(__name__)

MAX_IGNORED = 100
RESOURCE_TYPES = ("topic", "broker")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class LocalReplicaChanges:
    """What one broker must do after a delta; apply `deletes` first (a name may be re-created)."""

    leaders: dict[TopicPartition, PartitionRegistration] = field(default_factory=dict)
    followers: dict[TopicPartition, PartitionRegistration] = field(default_factory=dict)
    deletes: set[TopicPartition] = field(default_factory=set)
    topic_ids: dict[str, str] = field(default_factory=dict)  # name -> id, for leaders and followers
    config_topics: set[str] = field(default_factory=set)  # live topics whose configs changed
    # other brokers this delta registered or unfenced and that are now unfenced: a leader
    # proposes a caught-up one for the ISR at once (no partition of its changed)
    unfenced_brokers: set[int] = field(default_factory=set)

    def __len__(self) -> int:
        return (len(self.leaders) + len(self.followers) + len(self.deletes) + len(self.config_topics)
                + len(self.unfenced_brokers))


class _Invalid(Exception):
    pass


@dataclass
class _TopicChange:
    name: str
    created: bool  # by this delta: no partitions in the base image
    count: int  # partitions after the delta
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=dict)  # new or changed


class MetadataDelta:
    def __init__(self, image: MetadataImage) -> None:
        self.image = image  # the base image
        self.offset = image.offset
        self.ignored: list[tuple[int, str]] = []  # (offset, reason) of records replayed as no-ops
        self._controller_epoch = image.controller_epoch
        self._controller_id = image.controller_id
        self._cluster_id = image.cluster_id
        self._brokers: dict[int, BrokerRegistration | None] = {}
        self._topics: dict[str, _TopicChange] = {}  # by topic id
        self._deleted: dict[str, TopicImage] = {}  # base topics removed, by topic id
        self._names: dict[str, str | None] = {}  # name -> topic id (None: removed) for changed names
        self._configs: dict[tuple[str, str], dict[str, str]] = {}  # whole new maps of changed resources
        self._next_producer_id: int | None = None
        self._scram: dict[tuple[str, str], ScramCredentialData | None] = {}  # changed credentials (None: removed)
        self._acls: dict[str, StandardAcl | None] = {}  # changed ACLs by id (None: removed)
        self._quotas: dict[Entity, dict[str, float | None]] = {}  # changed client quotas (None: removed)
        self._request_ids: list[tuple[str, int]] = []  # (request id, last offset) per run of records
        self._replacement: MetadataImage | None = None
        self._handlers: dict[type, Callable[[Any, int], None]] = {
            RegisterBroker: self._register_broker,
            UnregisterBroker: self._unregister_broker,
            FenceBroker: self._fence_broker,
            UnfenceBroker: self._fence_broker,
            Topic: self._topic,
            RemoveTopic: self._remove_topic,
            Partition: self._partition_record,
            PartitionChange: self._partition_change,
            Config: self._config,
            ProducerIds: self._producer_ids,
            NoOp: lambda rec, offset: None,
            ClaimController: self._claim_controller,
            UserScramCredential: self._scram_credential,
            RemoveUserScramCredential: self._remove_scram_credential,
            AccessControlEntry: self._acl,
            RemoveAccessControlEntry: self._remove_acl,
            ClientQuota: self._client_quota,
        }

    @classmethod
    def from_snapshot(cls, previous: MetadataImage, snapshot: MetadataImage) -> "MetadataDelta":
        """The delta from `previous` to a whole new image, as a snapshot install presents it."""
        delta = cls(previous)
        delta._replacement = snapshot
        delta.offset = snapshot.offset
        for tid, t in snapshot.topics.by_id.items():
            delta._topics[tid] = _TopicChange(t.name, tid not in previous.topics.by_id, len(t.partitions),
                                              t.partitions)  # read only: no copy
        delta._deleted = {tid: t for tid, t in previous.topics.by_id.items() if tid not in snapshot.topics.by_id}
        delta._brokers = {b: snapshot.cluster.brokers.get(b) for b in {*previous.cluster.brokers,
                                                                        *snapshot.cluster.brokers}}
        return delta

    # -- what changed -----------------------------------------------------------------------------

    @property
    def changed_brokers(self) -> Mapping[int, BrokerRegistration | None]:
        """Brokers (re)registered, fenced, unfenced (their new registration) or removed (None)."""
        return self._brokers

    @property
    def changed_topic_ids(self) -> set[str]:
        return set(self._topics)

    def changed_partitions(self) -> Iterable[tuple[str, int, PartitionRegistration | None, PartitionRegistration]]:
        """(topic name, partition, registration before or None, after) for every partition this
        delta created or changed: work ∝ the delta, never the image."""
        for topic_id, tc in self._topics.items():
            base = None if tc.created else self.image.topics.by_id.get(topic_id)
            for p, reg in tc.partitions.items():
                before = None if base is None or base.topic_id != topic_id else base.partitions.get(p)
                yield tc.name, p, before, reg

    @property
    def deleted_topics(self) -> Mapping[str, TopicImage]:
        """Topics of the base image removed by this delta, by topic id."""
        return self._deleted

    # -- replay -----------------------------------------------------------------------------------

    def replay(self, record: MetadataRecord | dict[str, Any], offset: int) -> bool:
        """Apply one record at `offset`; False (a no-op, reason in `ignored`) when it is invalid."""
        assert self._replacement is None, "a snapshot delta takes no more records"
        if offset <= self.offset:
            self._ignore(offset, f"offset {offset} is not after {self.offset}")
            return False
        # the record belongs to its request whether or not it is valid, as the admission rule sees it
        self._remember_request(record, offset)
        try:
            rec = record if isinstance(record, MetadataRecord) else record_from_dict(record)
            self._handlers[type(rec)](rec, offset)
            ok = True
        except (_Invalid, ValueError, MetadataError) as e:
            self._ignore(offset, str(e))
            ok = False
        except Exception as e:  # a bug: stay deterministic and alive on every voter, but shout
            log.exception("metadata record at offset %d: unexpected error", offset)
            self._ignore(offset, f"internal error: {type(e).__name__}: {e}")
            ok = False
        self.offset = offset
        return ok

    def _ignore(self, offset: int, reason: str) -> None:
        log.warning("metadata record at offset %d ignored: %s", offset, reason)
        self.ignored.append((offset, reason))
        del self.ignored[:-MAX_IGNORED]

    def _remember_request(self, record: Any, offset: int) -> None:
        if isinstance(record, MetadataRecord):
            request_id = record.request_id
        else:
            request_id = record.get("request_id") if isinstance(record, dict) else None
        runs = self._request_ids
        if runs and runs[-1][0] == request_id:
            runs[-1] = (request_id, offset)
        else:
            runs.extend(request_runs(offset, (request_id,)))

    # -- per record type --------------------------------------------------------------------------

    def _broker(self, broker_id: int) -> BrokerRegistration | None:
        if broker_id in self._brokers:
            return self._brokers[broker_id]
        return self.image.cluster.brokers.get(broker_id)

    def _claim_controller(self, rec: ClaimController, offset: int) -> None:
        # admitted by the log's rule (exactly the next epoch), so it is the active controller now
        self._controller_epoch = rec.controller_epoch
        self._controller_id = rec.node_id
        if self._cluster_id is None:  # the first claim that names a cluster names it for good
            self._cluster_id = rec.cluster_id

    def _register_broker(self, rec: RegisterBroker, offset: int) -> None:
        if rec.broker_id < 0:
            raise _Invalid(f"broker id {rec.broker_id} is negative")
        if not rec.endpoints:
            raise _Invalid(f"broker {rec.broker_id} registers no endpoint")
        epoch = offset if rec.broker_epoch < 0 else rec.broker_epoch
        old = self._broker(rec.broker_id)
        if old is not None and epoch <= old.broker_epoch:
            raise _Invalid(f"broker {rec.broker_id} epoch {epoch} is not after {old.broker_epoch}")
        self._brokers[rec.broker_id] = BrokerRegistration(
            rec.broker_id, rec.incarnation_id, epoch, rec.endpoints, rec.rack, rec.fenced
        )

    def _registered(self, broker_id: int, broker_epoch: int) -> BrokerRegistration:
        b = self._broker(broker_id)
        if b is None:
            raise _Invalid(f"broker {broker_id} is not registered")
        if b.broker_epoch != broker_epoch:
            raise _Invalid(f"broker {broker_id} epoch {broker_epoch} is stale (current {b.broker_epoch})")
        return b

    def _unregister_broker(self, rec: UnregisterBroker, offset: int) -> None:
        self._registered(rec.broker_id, rec.broker_epoch)
        self._brokers[rec.broker_id] = None

    def _fence_broker(self, rec: FenceBroker | UnfenceBroker, offset: int) -> None:
        b = self._registered(rec.broker_id, rec.broker_epoch)
        self._brokers[rec.broker_id] = BrokerRegistration(
            b.broker_id, b.incarnation_id, b.broker_epoch, b.endpoints, b.rack, isinstance(rec, FenceBroker)
        )

    def _topic_id(self, name: str) -> str | None:
        if name in self._names:
            return self._names[name]
        t = self.image.topics.by_name.get(name)
        return None if t is None else t.topic_id

    def _base_topic(self, topic_id: str) -> TopicImage | None:
        if topic_id in self._deleted:
            return None
        return self.image.topics.by_id.get(topic_id)

    def _topic_change(self, topic_id: str) -> _TopicChange:
        """The change record of a live topic (a fresh one, not yet kept, for an untouched base
        topic, so an invalid record leaves no trace); _Invalid when unknown."""
        tc = self._topics.get(topic_id)
        if tc is None:
            base = self._base_topic(topic_id)
            if base is None:
                raise _Invalid(f"unknown topic id {topic_id}")
            tc = _TopicChange(base.name, False, len(base.partitions))
        return tc

    def _topic(self, rec: Topic, offset: int) -> None:
        validate_topic_name(rec.name)
        if not rec.topic_id:
            raise _Invalid("empty topic id")
        if self._topic_id(rec.name) is not None:
            raise _Invalid(f"topic {rec.name!r} already exists")
        if rec.topic_id in self._topics or rec.topic_id in self.image.topics.by_id:
            raise _Invalid(f"topic id {rec.topic_id} is already used")
        self._topics[rec.topic_id] = _TopicChange(rec.name, True, 0)
        self._names[rec.name] = rec.topic_id

    def _remove_topic(self, rec: RemoveTopic, offset: int) -> None:
        tc = self._topic_change(rec.topic_id)
        self._topics.pop(rec.topic_id, None)
        if not tc.created:
            self._deleted[rec.topic_id] = self.image.topics.by_id[rec.topic_id]
        self._names[tc.name] = None
        self._configs[("topic", tc.name)] = {}

    def _partition_record(self, rec: Partition, offset: int) -> None:
        tc = self._topic_change(rec.topic_id)
        if rec.partition != tc.count:
            raise _Invalid(f"partition {rec.partition} of {tc.name!r}: the next partition is {tc.count}")
        tc.partitions[rec.partition] = PartitionRegistration(
            rec.replicas, rec.isr, rec.leader, rec.leader_epoch, rec.partition_epoch,
            rec.adding_replicas, rec.removing_replicas,
        )
        tc.count += 1
        self._topics[rec.topic_id] = tc

    def _partition_change(self, rec: PartitionChange, offset: int) -> None:
        tc = self._topic_change(rec.topic_id)
        reg = tc.partitions.get(rec.partition)
        if reg is None and not tc.created:
            reg = self.image.topics.by_id[rec.topic_id].partitions.get(rec.partition)
        if reg is None:
            raise _Invalid(f"unknown partition {tc.name}-{rec.partition}")
        tc.partitions[rec.partition] = reg.merge(rec)
        self._topics[rec.topic_id] = tc

    def _config(self, rec: Config, offset: int) -> None:
        if rec.resource_type not in RESOURCE_TYPES:
            raise _Invalid(f"unknown config resource type {rec.resource_type!r}")
        if not rec.name:
            raise _Invalid("empty config name")
        if rec.resource_type == "topic" and self._topic_id(rec.resource_name) is None:
            raise _Invalid(f"config for unknown topic {rec.resource_name!r}")
        key = (rec.resource_type, rec.resource_name)
        configs = self._configs.get(key)
        if configs is None:
            configs = self._configs[key] = dict(self.image.configs.get(*key))
        if rec.value is None:
            configs.pop(rec.name, None)
        else:
            configs[rec.name] = rec.value

    def _producer_ids(self, rec: ProducerIds, offset: int) -> None:
        current = self.image.producer_ids.next_producer_id if self._next_producer_id is None else self._next_producer_id
        if rec.next_producer_id <= current:
            raise _Invalid(f"next producer id {rec.next_producer_id} is not after {current}")
        self._next_producer_id = rec.next_producer_id

    def _scram_credential(self, rec: UserScramCredential, offset: int) -> None:
        if not rec.name or rec.mechanism not in SCRAM_MECHANISMS:
            raise _Invalid(f"SCRAM credential of {rec.name!r} for unknown mechanism {rec.mechanism!r}")
        self._scram[(rec.name, rec.mechanism)] = ScramCredentialData(rec.salt, rec.stored_key, rec.server_key,
                                                                     rec.iterations)

    def _remove_scram_credential(self, rec: RemoveUserScramCredential, offset: int) -> None:
        key = (rec.name, rec.mechanism)
        current = self._scram[key] if key in self._scram else self.image.scram.get(*key)
        if current is None:
            raise _Invalid(f"no {rec.mechanism} credential of {rec.name!r}")
        self._scram[key] = None

    def _acl_by_id(self, acl_id: str) -> StandardAcl | None:
        return self._acls[acl_id] if acl_id in self._acls else self.image.acls.acls.get(acl_id)

    def _acl(self, rec: AccessControlEntry, offset: int) -> None:
        if not rec.id or self._acl_by_id(rec.id) is not None:
            raise _Invalid(f"ACL id {rec.id!r} is empty or already used")
        acl = StandardAcl(rec.resource_type, rec.resource_name, rec.pattern_type, rec.principal, rec.host,
                          rec.operation, rec.permission_type)
        acl.validate()
        self._acls[rec.id] = acl

    def _remove_acl(self, rec: RemoveAccessControlEntry, offset: int) -> None:
        if self._acl_by_id(rec.id) is None:
            raise _Invalid(f"no ACL with id {rec.id!r}")
        self._acls[rec.id] = None

    def _client_quota(self, rec: ClientQuota, offset: int) -> None:
        check_entity(rec.user, rec.client_id)
        check_quota(rec.key, rec.value)
        self._quotas.setdefault((rec.user, rec.client_id), {})[rec.key] = rec.value

    # -- results ----------------------------------------------------------------------------------

    def apply(self) -> MetadataImage:
        """The image after every replayed record."""
        if self._replacement is not None:
            return self._replacement
        image = self.image
        return MetadataImage(
            offset=self.offset,
            controller_epoch=self._controller_epoch,
            controller_id=self._controller_id,
            cluster_id=self._cluster_id,
            cluster=self._apply_cluster(image.cluster),
            topics=self._apply_topics(image.topics),
            configs=self._apply_configs(image.configs),
            producer_ids=(
                image.producer_ids if self._next_producer_id is None else ProducerIdsImage(self._next_producer_id)
            ),
            scram=self._apply_scram(image.scram),
            acls=image.acls.with_changes(self._acls),
            client_quotas=image.client_quotas.with_changes(self._quotas),
            request_ids=self._apply_request_ids(image.request_ids),
        )

    def _apply_scram(self, scram: ScramImage) -> ScramImage:
        if not self._scram:
            return scram
        return ScramImage(with_changes(scram.credentials, self._scram))

    def _apply_cluster(self, cluster: ClusterImage) -> ClusterImage:
        if not self._brokers:
            return cluster
        return ClusterImage(with_changes(cluster.brokers, self._brokers))

    def _apply_topics(self, topics: TopicsImage) -> TopicsImage:
        if not self._topics and not self._deleted:
            return topics
        by_id = frozen_map(topics.by_id).mutate()
        by_name = frozen_map(topics.by_name).mutate()
        count = topics.partition_count
        for topic_id, t in self._deleted.items():
            del by_id[topic_id]
            del by_name[t.name]
            count -= len(t.partitions)
        for topic_id, tc in self._topics.items():
            if tc.created:
                partitions = frozen_map(tc.partitions)
            else:
                base = topics.by_id[topic_id].partitions
                partitions = frozen_map(base).update(tc.partitions)  # O(changes · log n), shares the rest
                count -= len(base)
            # partitions are 0..n-1: a new one is always the next, a change needs an existing one
            assert len(partitions) == tc.count and all(0 <= p < tc.count for p in tc.partitions), \
                "partitions must be 0..n-1"
            count += tc.count
            by_id[topic_id] = by_name[tc.name] = TopicImage(tc.name, topic_id, partitions)
        return TopicsImage(by_id.finish(), by_name.finish(), count)

    def _apply_configs(self, configs: ConfigurationsImage) -> ConfigurationsImage:
        if not self._configs:
            return configs
        return ConfigurationsImage(with_changes(
            configs.resources, {key: frozen_map(values) if values else None for key, values in self._configs.items()}))

    def _apply_request_ids(self, request_ids: RequestWindow) -> RequestWindow:
        return request_ids.remembered(self._request_ids) if self._request_ids else request_ids

    def local_changes(self, broker_id: int) -> LocalReplicaChanges:
        """Partitions `broker_id` now leads or follows (changed by this delta), or must delete."""
        changes = LocalReplicaChanges()
        for t in self._deleted.values():
            changes.deletes.update((t.name, p) for p, reg in t.partitions.items() if broker_id in reg.replicas)
        for topic_id, tc in self._topics.items():
            base = None if tc.created else self.image.topics.by_id.get(topic_id)
            for p, reg in tc.partitions.items():
                if broker_id in reg.replicas:
                    target = changes.leaders if reg.leader == broker_id else changes.followers
                    target[(tc.name, p)] = reg
                    changes.topic_ids[tc.name] = topic_id
                elif base is not None and p in base.partitions and broker_id in base.partitions[p].replicas:
                    changes.deletes.add((tc.name, p))
        changes.config_topics.update(name for kind, name in self._configs
                                     if kind == "topic" and self._topic_id(name) is not None)
        changes.unfenced_brokers.update(b for b, reg in self._brokers.items()
                                        if b != broker_id and reg is not None and not reg.fenced)
        return changes


def apply_records(
    image: MetadataImage, entries: Iterable[tuple[int, MetadataRecord | dict[str, Any]]]
) -> tuple[MetadataDelta, MetadataImage]:
    """Replay (offset, record) pairs on `image`: the delta and the next image."""
    delta = MetadataDelta(image)
    for offset, record in entries:
        delta.replay(record, offset)
    return delta, delta.apply()
