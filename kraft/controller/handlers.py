"""Controller request handlers: pure functions of the current image → `ControllerResult`.

Each handler validates a request against the image (raising `MetadataError` with a Kafka error
code) and answers with the records to commit plus the response (Kafka's `ControllerResult`);
nothing changes until the records are replayed. Randomness (replica placement start, topic ids)
comes from the `random.Random` passed in and ends up in the records, so replay stays deterministic.
"""

from __future__ import annotations

import base64
import hashlib
import random
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from kraft.metadata.errors import MetadataError
from kraft.metadata.image import BrokerRegistration, MetadataImage, PartitionRegistration, TopicImage
from kraft.metadata.partition_change import (
    BrokerState, PartitionChangeBuilder, check_isr_change, check_replicas, fence_broker_changes, preferred_leader_change,
    reassignment_change, unfence_broker_changes,
)
from kraft.metadata.placement import BrokerPlacement, place_replicas
from kraft.metadata.records import (
    Config, Endpoint, FenceBroker, MetadataRecord, Partition, PartitionChange, ProducerIds, RegisterBroker,
    RemoveTopic, RemoveUserScramCredential, Topic, UnfenceBroker, UnregisterBroker, UserScramCredential,
)
from kraft.metadata.topic_name import collision_key, validate_topic_name
from kraft.security import scram

ConfigValidator = Callable[[Mapping[str, str]], None]  # raises ValueError for a bad value
UNCLEAN_KEY = "unclean.leader.election.enable"


@dataclass(frozen=True)
class ControllerSettings:
    num_partitions: int = 1
    default_replication_factor: int = 1
    unclean_leader_election_enable: bool = False
    broker_session_timeout_ms: int = 9000
    producer_id_block_size: int = 1000
    max_partitions_per_topic: int = 100_000
    topic_config_keys: frozenset[str] = frozenset({"min.insync.replicas", UNCLEAN_KEY})


@dataclass(frozen=True)
class ControllerResult:
    """Records to commit and the answer; `response_from_image`, when set, builds the answer from
    the image after the commit instead (e.g. a broker epoch is the offset of its record)."""

    records: tuple[MetadataRecord, ...]
    response: dict[str, Any] = field(default_factory=dict)
    response_from_image: Callable[[MetadataImage], dict[str, Any]] | None = None


# -- helpers ------------------------------------------------------------------------------------


def _int(value: Any, what: str, error_code: str = "INVALID_REQUEST") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MetadataError(error_code, f"{what} must be an integer, got {value!r}")
    return value


def _topic(image: MetadataImage, name: Any) -> TopicImage:
    topic = image.topic_by_name(name) if isinstance(name, str) else None
    if topic is None:
        raise MetadataError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
    return topic


def _partition(image: MetadataImage, topic: Any, partition: Any) -> tuple[TopicImage, PartitionRegistration]:
    t = _topic(image, topic)
    reg = t.partitions.get(partition) if isinstance(partition, int) else None
    if reg is None:
        raise MetadataError("UNKNOWN_TOPIC_OR_PARTITION", f"partition {topic}-{partition} does not exist")
    return t, reg


def _registered(image: MetadataImage, broker_id: Any, broker_epoch: Any) -> BrokerRegistration:
    b = image.cluster.broker(broker_id) if isinstance(broker_id, int) else None
    if b is None or b.broker_epoch != broker_epoch:
        current = None if b is None else b.broker_epoch
        raise MetadataError(
            "STALE_BROKER_EPOCH", f"broker {broker_id} epoch {broker_epoch} is not the registered one ({current})"
        )
    return b


def unclean_allowed(image: MetadataImage, settings: ControllerSettings) -> Callable[[str], bool]:
    """Per topic: its unclean.leader.election.enable override, else the broker default."""

    def allowed(topic: str) -> bool:
        value = image.topic_configs(topic).get(UNCLEAN_KEY)
        return settings.unclean_leader_election_enable if value is None else value.lower() == "true"

    return allowed


def _check_configs(
    settings: ControllerSettings,
    current: Mapping[str, str],
    changes: Mapping[str, Any],
    validator: ConfigValidator | None,
    *,
    allow_delete: bool,
) -> dict[str, str | None]:
    """Normalised changes (str values, None = delete) after checking keys and the merged values."""
    if not isinstance(changes, Mapping):
        raise MetadataError("INVALID_REQUEST", "configs must be an object of name -> value")
    normalised: dict[str, str | None] = {}
    for key, value in changes.items():
        if key not in settings.topic_config_keys:
            raise MetadataError("INVALID_CONFIG", f"unknown topic config {key!r}")
        if value is None:
            if not allow_delete:
                raise MetadataError("INVALID_CONFIG", f"config {key!r} needs a value")
            normalised[key] = None
        elif isinstance(value, bool):
            normalised[key] = "true" if value else "false"
        elif isinstance(value, (str, int, float)):
            normalised[key] = str(value)
        else:
            raise MetadataError("INVALID_CONFIG", f"config {key!r} has an invalid value {value!r}")
    merged = {k: v for k, v in {**current, **normalised}.items() if v is not None}
    if validator is not None:
        try:
            validator(merged)
        except ValueError as e:
            raise MetadataError("INVALID_CONFIG", str(e)) from None
    return normalised


def _placements(image: MetadataImage) -> list[BrokerPlacement]:
    return [BrokerPlacement(b.broker_id, b.rack) for b in image.live_brokers()]


def _assign(
    image: MetadataImage, rng: random.Random, count: int, replication_factor: int, start_partition_id: int = 0
) -> list[tuple[int, ...]]:
    brokers = _placements(image)
    n = max(1, len(brokers))
    return place_replicas(
        count, replication_factor, brokers,
        start_index=rng.randrange(n), replica_shift=rng.randrange(n), start_partition_id=start_partition_id,
    )


def _new_partitions(
    image: MetadataImage, topic_id: str, assignments: Sequence[tuple[int, ...]], first: int
) -> list[Partition]:
    """New partitions with their unfenced replicas in sync, the first of them leading (placed
    replicas are all unfenced; a manual assignment may name fenced ones)."""
    partitions = []
    for i, replicas in enumerate(assignments):
        isr = tuple(b for b in replicas if image.cluster.is_unfenced(b))
        partitions.append(Partition(topic_id=topic_id, partition=first + i, replicas=replicas, isr=isr,
                                    leader=isr[0]))
    return partitions


def _manual_assignments(image: MetadataImage, name: str, assignments: Sequence[Sequence[int]]) -> list[tuple[int, ...]]:
    if not isinstance(assignments, (list, tuple)) or not assignments:
        raise MetadataError("INVALID_REPLICA_ASSIGNMENT", "a manual assignment needs at least one partition")
    placed = []
    for i, replicas in enumerate(assignments):
        if not isinstance(replicas, (list, tuple)) or not all(type(b) is int for b in replicas):
            raise MetadataError("INVALID_REPLICA_ASSIGNMENT", f"{name}-{i}: replicas must be broker ids")
        placed.append(check_replicas(image, f"{name}-{i}", replicas))
        if not any(image.cluster.is_unfenced(b) for b in placed[-1]):
            raise MetadataError("INVALID_REPLICA_ASSIGNMENT", f"{name}-{i}: every broker of the manual assignment "
                                                              f"{list(placed[-1])} is fenced")
    if len({len(r) for r in placed}) != 1:
        raise MetadataError("INVALID_REPLICA_ASSIGNMENT", "every partition of a manual assignment must have the "
                                                          "same number of replicas")
    return placed


def _partition_count(value: Any, settings: ControllerSettings) -> int:
    count = _int(value, "partitions", "INVALID_PARTITIONS")
    if count > settings.max_partitions_per_topic:
        raise MetadataError(
            "INVALID_PARTITIONS", f"{count} partitions exceed the limit of {settings.max_partitions_per_topic}"
        )
    return count


# -- topics -------------------------------------------------------------------------------------


def create_topics(
    image: MetadataImage,
    settings: ControllerSettings,
    rng: random.Random,
    name: Any,
    partitions: int | None = None,
    replication_factor: int | None = None,
    configs: Mapping[str, Any] | None = None,
    validate_only: bool = False,
    config_validator: ConfigValidator | None = None,
    assignments: Sequence[Sequence[int]] | None = None,
) -> ControllerResult:
    """Create one topic (Kafka's CreateTopics for one entry); -1 or None means the broker default.
    `assignments` (partition i's replicas at i) places the replicas by hand instead, as Kafka's
    manual assignment: registered brokers, distinct, the same count for every partition; the ISR
    is the unfenced replicas (none: INVALID_REPLICA_ASSIGNMENT), led by the first of them."""
    validate_topic_name(name)
    if image.topic_by_name(name) is not None:
        raise MetadataError("TOPIC_ALREADY_EXISTS", f"topic {name!r} already exists")
    key = collision_key(name)
    clash = next((t for t in image.topics.by_name if collision_key(t) == key), None)
    if clash is not None:
        raise MetadataError("INVALID_TOPIC_EXCEPTION", f"topic {name!r} collides with existing topic {clash!r}")
    if assignments is not None:
        if partitions not in (None, -1) or replication_factor not in (None, -1):
            raise MetadataError("INVALID_REQUEST", "both a partition count or replication factor and a manual "
                                                   "replica assignment were given: give one of them")
        placed = _manual_assignments(image, name, assignments)
        count, rf = _partition_count(len(placed), settings), len(placed[0])
    else:
        count = _partition_count(settings.num_partitions if partitions in (None, -1) else partitions, settings)
        rf = _int(
            settings.default_replication_factor if replication_factor in (None, -1) else replication_factor,
            "replication_factor", "INVALID_REPLICATION_FACTOR",
        )
    changes = _check_configs(settings, {}, configs or {}, config_validator, allow_delete=False)
    if assignments is None:
        placed = _assign(image, rng, count, rf)
    topic_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    topic_configs = {k: v for k, v in changes.items() if v is not None}
    response = {
        "name": name, "topic_id": topic_id, "partitions": count, "replication_factor": rf, "configs": topic_configs,
    }
    if validate_only:
        return ControllerResult((), response)
    records: list[MetadataRecord] = [Topic(name=name, topic_id=topic_id)]
    records += _new_partitions(image, topic_id, placed, 0)
    records += [
        Config(resource_type="topic", resource_name=name, name=k, value=v) for k, v in sorted(topic_configs.items())
    ]
    return ControllerResult(tuple(records), response)


def delete_topic(image: MetadataImage, name: Any) -> ControllerResult:
    topic = _topic(image, name)
    return ControllerResult((RemoveTopic(topic_id=topic.topic_id),), {"name": topic.name, "topic_id": topic.topic_id})


def create_partitions(
    image: MetadataImage,
    settings: ControllerSettings,
    rng: random.Random,
    name: Any,
    count: Any,
    validate_only: bool = False,
) -> ControllerResult:
    """Grow a topic to `count` partitions in total (Kafka's CreatePartitions)."""
    topic = _topic(image, name)
    total = _partition_count(count, settings)
    current = len(topic.partitions)
    if total == current:
        raise MetadataError("INVALID_PARTITIONS", f"topic {name!r} already has {current} partitions")
    if total < current:
        raise MetadataError(
            "INVALID_PARTITIONS",
            f"topic {name!r} currently has {current} partitions, which is higher than the requested {total}",
        )
    rf = len(topic.partitions[0].replicas) if topic.partitions else settings.default_replication_factor
    assignments = _assign(image, rng, total - current, rf, start_partition_id=current)
    response = {"name": topic.name, "partitions": total}
    if validate_only:
        return ControllerResult((), response)
    return ControllerResult(tuple(_new_partitions(image, topic.topic_id, assignments, current)), response)


def alter_configs(
    image: MetadataImage,
    settings: ControllerSettings,
    resource_type: str,
    resource_name: Any,
    configs: Mapping[str, Any],
    validate_only: bool = False,
    config_validator: ConfigValidator | None = None,
) -> ControllerResult:
    """Set (value) or delete (None) config overrides of a topic; answers the overrides after."""
    if resource_type != "topic":
        raise MetadataError("INVALID_REQUEST", f"unsupported config resource type {resource_type!r}")
    topic = _topic(image, resource_name)
    current = dict(image.topic_configs(topic.name))
    changes = _check_configs(settings, current, configs, config_validator, allow_delete=True)
    merged = {k: v for k, v in {**current, **changes}.items() if v is not None}
    records = tuple(
        Config(resource_type="topic", resource_name=topic.name, name=k, value=v)
        for k, v in sorted(changes.items())
        if current.get(k) != v
    )
    return ControllerResult(() if validate_only else records, {"configs": merged})


# -- users (kafka-configs --entity-type users) ---------------------------------------------------


def _b64(value: Any, what: str) -> bytes:
    if not isinstance(value, str):
        raise MetadataError("INVALID_REQUEST", f"{what} must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:
        raise MetadataError("INVALID_REQUEST", f"{what} must be base64") from None


def _scram_user(entry: Any, what: str) -> tuple[str, str]:
    # type checks before any lookup: a dict or list in a field must not reach `in` on a dict
    if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str) or not entry["name"]:
        raise MetadataError("INVALID_REQUEST", f"{what}: a user name is required")
    mechanism = entry.get("mechanism")
    if not isinstance(mechanism, str) or mechanism not in scram.MECHANISMS:
        raise MetadataError("UNSUPPORTED_SASL_MECHANISM", f"{what}: mechanism must be one of "
                                                          f"{', '.join(scram.MECHANISMS)}")
    return entry["name"], mechanism


def alter_user_scram_credentials(image: MetadataImage, upsertions: Sequence[Any],
                                 deletions: Sequence[Any]) -> ControllerResult:
    """Kafka's AlterUserScramCredentials, all or nothing: upsertions {name, mechanism, iterations,
    salt, salted_password} (base64; the client salts, so the password never reaches the cluster)
    become StoredKey/ServerKey records; deletions {name, mechanism} remove existing credentials."""
    if not isinstance(upsertions, (list, tuple)) or not isinstance(deletions, (list, tuple)):
        raise MetadataError("INVALID_REQUEST", "upsertions and deletions must be lists")
    records: list[MetadataRecord] = []
    seen: set[tuple[str, str]] = set()
    for i, entry in enumerate(deletions):
        name, mechanism = _scram_user(entry, f"deletions[{i}]")
        if image.scram.get(name, mechanism) is None:
            raise MetadataError("INVALID_REQUEST", f"user {name!r} has no {mechanism} credential")
        seen.add((name, mechanism))
        records.append(RemoveUserScramCredential(name=name, mechanism=mechanism))
    for i, entry in enumerate(upsertions):
        name, mechanism = _scram_user(entry, f"upsertions[{i}]")
        if (name, mechanism) in seen:
            raise MetadataError("INVALID_REQUEST", f"user {name!r} {mechanism} appears twice")
        seen.add((name, mechanism))
        iterations = entry.get("iterations", scram.DEFAULT_ITERATIONS)
        if (isinstance(iterations, bool) or not isinstance(iterations, int)
                or not scram.MIN_ITERATIONS <= iterations <= scram.MAX_ITERATIONS):
            raise MetadataError("INVALID_REQUEST", f"upsertions[{i}]: iterations must be in "
                                                   f"[{scram.MIN_ITERATIONS}, {scram.MAX_ITERATIONS}]")
        salt = _b64(entry.get("salt"), f"upsertions[{i}].salt")
        salted = _b64(entry.get("salted_password"), f"upsertions[{i}].salted_password")
        if not salt or len(salted) != hashlib.new(scram.MECHANISMS[mechanism]).digest_size:
            raise MetadataError("INVALID_REQUEST", f"upsertions[{i}]: a salt and the {mechanism} salted password "
                                                   "are required")
        c = scram.from_salted_password(mechanism, salted, salt, iterations)
        records.append(UserScramCredential(
            name=name, mechanism=mechanism, salt=base64.b64encode(c.salt).decode(), iterations=iterations,
            stored_key=base64.b64encode(c.stored_key).decode(), server_key=base64.b64encode(c.server_key).decode()))
    return ControllerResult(tuple(records), {"results": [{"name": n, "mechanism": m} for n, m in sorted(seen)]})


# -- brokers ------------------------------------------------------------------------------------


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _endpoints(endpoints: Any) -> tuple[Endpoint, ...]:
    if not isinstance(endpoints, (list, tuple)) or not endpoints:
        raise MetadataError("INVALID_REQUEST", "a broker registers at least one endpoint")
    result = []
    for e in endpoints:
        try:
            endpoint = e if isinstance(e, Endpoint) else Endpoint.from_dict(e)
        except ValueError as err:
            raise MetadataError("INVALID_REQUEST", str(err)) from None
        if not 0 < endpoint.port < 65536 or not endpoint.host or endpoint.security_protocol not in SECURITY_PROTOCOLS:
            raise MetadataError("INVALID_REQUEST", f"invalid endpoint {endpoint}")
        result.append(endpoint)
    return tuple(result)


def register_broker(
    image: MetadataImage,
    settings: ControllerSettings,
    broker_id: Any,
    incarnation_id: Any,
    endpoints: Any,
    rack: Any = None,
) -> ControllerResult:
    """(Re)register a broker, fenced; its broker epoch is the offset of the record. A re-registering
    broker (a restart) loses its leaderships and ISR memberships first, as when it is fenced."""
    if _int(broker_id, "broker_id") < 0:
        raise MetadataError("INVALID_REQUEST", f"broker id {broker_id} is negative")
    if not isinstance(incarnation_id, str) or not incarnation_id:
        raise MetadataError("INVALID_REQUEST", "incarnation_id must be a non-empty string")
    if rack is not None and not isinstance(rack, str):
        raise MetadataError("INVALID_REQUEST", f"rack must be a string, got {rack!r}")
    record = RegisterBroker(broker_id=broker_id, incarnation_id=incarnation_id, endpoints=_endpoints(endpoints),
                            rack=rack)
    changes = fence_broker_changes(image, broker_id, unclean_allowed(image, settings))

    def response(after: MetadataImage) -> dict[str, Any]:
        b = after.cluster.broker(broker_id)
        return {"broker_id": broker_id, "broker_epoch": -1 if b is None else b.broker_epoch}

    return ControllerResult((record, *changes), response_from_image=response)


def fence_broker(image: MetadataImage, settings: ControllerSettings, broker_id: int) -> ControllerResult:
    """Fence a live broker (session expired or asked to): out of every ISR, leaderships moved."""
    b = image.cluster.broker(broker_id)
    if b is None or b.fenced:
        return ControllerResult((), {"broker_id": broker_id, "fenced": b is not None})
    changes = fence_broker_changes(image, broker_id, unclean_allowed(image, settings))
    return ControllerResult(
        (FenceBroker(broker_id=broker_id, broker_epoch=b.broker_epoch), *changes),
        {"broker_id": broker_id, "fenced": True},
    )


def unregister_broker(image: MetadataImage, settings: ControllerSettings, broker_id: Any) -> ControllerResult:
    b = image.cluster.broker(broker_id) if isinstance(broker_id, int) else None
    if b is None:
        raise MetadataError("INVALID_REQUEST", f"broker {broker_id} is not registered")
    changes = fence_broker_changes(image, broker_id, unclean_allowed(image, settings))
    return ControllerResult(
        (*changes, UnregisterBroker(broker_id=broker_id, broker_epoch=b.broker_epoch)), {"broker_id": broker_id}
    )


def broker_heartbeat(
    image: MetadataImage,
    settings: ControllerSettings,
    broker_id: Any,
    broker_epoch: Any,
    current_metadata_offset: Any,
    want_fence: bool = False,
    want_shutdown: bool = False,
    offline_log_dirs: Sequence[str] = (),
    offline_replicas: Sequence[tuple[str, int]] = (),
) -> ControllerResult:
    """A broker heartbeat's state changes: unfence once caught up with its own registration,
    fence on request or controlled shutdown, and move leaderships and ISR memberships off its
    replicas on offline log directories (KIP-858: Kafka's handleDirectoriesOffline; the broker
    names them, see `kraft/broker/log_dirs.py`). Answers Kafka's isCaughtUp/isFenced/shouldShutDown."""
    b = _registered(image, broker_id, broker_epoch)
    offset = _int(current_metadata_offset, "current_metadata_offset")
    caught_up = offset >= b.broker_epoch
    offline = {(topic, p) for topic, p in offline_replicas}
    records: tuple[MetadataRecord, ...] = ()
    fenced = b.fenced
    if b.fenced and caught_up and not want_fence and not want_shutdown:
        changes = unfence_broker_changes(image, broker_id, unclean_allowed(image, settings), offline)
        records = (UnfenceBroker(broker_id=broker_id, broker_epoch=b.broker_epoch), *changes)
        fenced = False
    elif not b.fenced and (want_fence or want_shutdown):
        records = fence_broker(image, settings, broker_id).records
        fenced = True
    elif not b.fenced and offline:
        records = tuple(fence_broker_changes(image, broker_id, unclean_allowed(image, settings), offline))
    return ControllerResult(records, {
        "broker_id": broker_id,
        "broker_epoch": b.broker_epoch,
        "is_caught_up": caught_up,
        "is_fenced": fenced,
        "should_shutdown": bool(want_shutdown) and fenced,
    })


def allocate_producer_ids(
    image: MetadataImage, settings: ControllerSettings, broker_id: Any, broker_epoch: Any
) -> ControllerResult:
    _registered(image, broker_id, broker_epoch)
    start = image.producer_ids.next_producer_id
    size = settings.producer_id_block_size
    return ControllerResult(
        (ProducerIds(broker_id=broker_id, broker_epoch=broker_epoch, next_producer_id=start + size),),
        {"producer_id_start": start, "producer_id_len": size},
    )


# -- partitions ---------------------------------------------------------------------------------


def _partition_state(topic: TopicImage, partition: int, reg: PartitionRegistration) -> dict[str, Any]:
    return {
        "topic": topic.name, "topic_id": topic.topic_id, "partition": partition, "leader": reg.leader,
        "leader_epoch": reg.leader_epoch, "isr": list(reg.isr), "partition_epoch": reg.partition_epoch,
    }


def alter_partition(
    image: MetadataImage,
    broker_id: Any,
    broker_epoch: Any,
    topic: Any,
    partition: Any,
    leader_epoch: Any,
    partition_epoch: Any,
    new_isr: Sequence[BrokerState],
) -> ControllerResult:
    """An ISR change asked by the partition leader (Kafka's AlterPartition v3): `new_isr` names
    every member with the broker epoch the leader knows it by (KIP-903, see `check_isr_change`)."""
    _registered(image, broker_id, broker_epoch)
    t, reg = _partition(image, topic, partition)
    if reg.leader != broker_id:
        raise MetadataError(
            "NOT_LEADER_OR_FOLLOWER", f"broker {broker_id} is not the leader of {t.name}-{partition} ({reg.leader})"
        )
    if leader_epoch != reg.leader_epoch:
        raise MetadataError(
            "FENCED_LEADER_EPOCH", f"{t.name}-{partition}: leader epoch {leader_epoch}, current {reg.leader_epoch}"
        )
    if partition_epoch != reg.partition_epoch:
        raise MetadataError(
            "INVALID_UPDATE_VERSION",
            f"{t.name}-{partition}: partition epoch {partition_epoch}, current {reg.partition_epoch}",
        )
    if not isinstance(new_isr, (list, tuple)) or not all(isinstance(b, BrokerState) for b in new_isr):
        raise MetadataError("INVALID_REQUEST", f"isr must be a list of broker states, got {new_isr!r}")
    isr = check_isr_change(reg, new_isr, image.cluster)
    change = PartitionChangeBuilder(t.topic_id, partition, reg, image.cluster.is_unfenced).set_target_isr(isr).build()
    if change is None:
        return ControllerResult((), _partition_state(t, partition, reg))
    return ControllerResult((change,), _partition_state(t, partition, reg.merge(change)))


def elect_leaders(image: MetadataImage, partitions: Iterable[tuple[str, int]] | None = None) -> ControllerResult:
    """Preferred leader election for the partitions given (all that need it when None); per-partition
    errors (ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION) in the answer."""
    if partitions is None:
        partitions = [
            (t.name, p) for _, t in sorted(image.topics.by_name.items())
            for p, reg in sorted(t.partitions.items()) if reg.leader != reg.preferred_leader
        ]
    wanted = []
    for entry in partitions:
        if not (isinstance(entry, (list, tuple)) and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], int) and not isinstance(entry[1], bool)):
            raise MetadataError("INVALID_REQUEST", f"partitions are [topic, partition] pairs, got {entry!r}")
        wanted.append((entry[0], entry[1]))
    records: list[PartitionChange] = []
    results = []
    for name, p in dict.fromkeys(wanted):
        try:
            t, _ = _partition(image, name, p)
            change = preferred_leader_change(image, t, p)
            records.append(change)
            results.append({"topic": name, "partition": p, "leader": change.leader})
        except MetadataError as e:
            current = image.partition(name, p)
            results.append({"topic": name, "partition": p, "leader": None if current is None else current.leader,
                            "error_code": e.error_code, "message": e.message})
    return ControllerResult(tuple(records), {"partitions": results})


# -- reassignments (KIP-455) --------------------------------------------------------------------


def _reassignment_state(name: str, partition: int, reg: PartitionRegistration) -> dict[str, Any]:
    return {"topic": name, "partition": partition, "replicas": list(reg.replicas),
            "adding_replicas": list(reg.adding_replicas), "removing_replicas": list(reg.removing_replicas)}


def _plan_entry(entry: Any) -> tuple[str, int, tuple[int, ...] | None]:
    def broker_id(b: Any) -> bool:
        return isinstance(b, int) and not isinstance(b, bool) and b >= 0

    if not (isinstance(entry, Mapping) and isinstance(entry.get("topic"), str) and "replicas" in entry
            and isinstance(entry.get("partition"), int) and not isinstance(entry.get("partition"), bool)):
        raise MetadataError("INVALID_REQUEST", f"a reassignment is {{topic, partition, replicas}}, got {entry!r}")
    replicas = entry.get("replicas")
    if replicas is not None and not (isinstance(replicas, (list, tuple)) and all(broker_id(b) for b in replicas)):
        raise MetadataError("INVALID_REPLICA_ASSIGNMENT",
                            f"{entry['topic']}-{entry['partition']}: replicas must be broker ids, got {replicas!r}")
    return entry["topic"], entry["partition"], None if replicas is None else tuple(replicas)


def alter_partition_reassignments(image: MetadataImage, reassignments: Sequence[Any]) -> ControllerResult:
    """Start (`replicas`: the target) or cancel (`replicas`: None) reassignments, all or none:
    the first invalid entry rejects the whole plan. Answers each partition's state after commit
    (a reassignment whose new replicas are already in sync completes at once)."""
    if not isinstance(reassignments, (list, tuple)):
        raise MetadataError("INVALID_REQUEST", "reassignments must be a list")
    records: list[PartitionChange] = []
    seen: set[tuple[str, int]] = set()
    for entry in reassignments:
        name, p, target = _plan_entry(entry)
        if (name, p) in seen:
            raise MetadataError("INVALID_REPLICA_ASSIGNMENT", f"{name}-{p} appears twice in the plan")
        seen.add((name, p))
        t, _ = _partition(image, name, p)
        change = reassignment_change(image, t, p, target)
        if change is not None:
            records.append(change)

    def response(after: MetadataImage) -> dict[str, Any]:
        results = []
        for name, p in seen:
            reg = after.partition(name, p)
            if reg is not None:
                results.append(_reassignment_state(name, p, reg))
        return {"partitions": sorted(results, key=lambda r: (r["topic"], r["partition"]))}

    return ControllerResult(tuple(records), response_from_image=response)


def list_partition_reassignments(image: MetadataImage) -> ControllerResult:
    """Every partition being reassigned: {"partitions": [{topic, partition, replicas,
    adding_replicas, removing_replicas}]}."""
    return ControllerResult((), {"partitions": [
        _reassignment_state(name, p, reg)
        for name, t in sorted(image.topics.by_name.items()) for p, reg in sorted(t.partitions.items())
        if reg.adding_replicas or reg.removing_replicas
    ]})
