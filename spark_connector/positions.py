"""Turns a subscription and an offset spec into concrete partitions and offsets (driver side).

Asks the brokers for partitions (metadata), log start offsets, high watermarks (last stable
offsets for read_committed: `kraft.isolation.level`) and timestamp lookups. Rules follow Spark's Kafka source: specific offsets must name every subscribed partition,
-2/-1 mean earliest/latest, timestamps map to the first offset at or after them.
"""

from __future__ import annotations

from kraft.api.errors import KraftError
from kraft.spark_connector.broker import BrokerClient
from kraft.spark_connector.offsets import EARLIEST, LATEST, PartitionOffsets, TopicPartition
from kraft.spark_connector.options import OffsetSpec, Subscription


def subscribed_partitions(client: BrokerClient, subscription: Subscription) -> list[TopicPartition]:
    """The current partitions of the subscription, from fresh metadata (new partitions included).

    A named topic (subscribe, assign) or assigned partition that does not exist is an error; a
    pattern may match nothing."""
    view = client.metadata(refresh=True)
    if subscription.pattern is not None:
        topics = [t for t in view.topics if t not in view.internal and subscription.matches(t)]
        return sorted((t, p.partition) for t in topics for p in view.partitions(t))
    if subscription.assign:
        missing = [tp for tp in subscription.assign
                   if tp[1] not in {p.partition for p in view.partitions(tp[0])}]
        if missing:
            raise KraftError("UNKNOWN_TOPIC_OR_PARTITION",
                             "assigned partition(s) do not exist: " + ", ".join(f"{t}-{p}" for t, p in missing))
        return list(subscription.assign)
    missing_topics = [t for t in subscription.topics if t not in view.topics]
    if missing_topics:
        raise KraftError("UNKNOWN_TOPIC_OR_PARTITION",
                         f"subscribed topic(s) do not exist: {', '.join(missing_topics)}")
    return sorted((t, p.partition) for t in subscription.topics for p in view.partitions(t))


def earliest(client: BrokerClient, partitions: list[TopicPartition]) -> PartitionOffsets:
    return {tp: client.list_offsets(tp).log_start_offset for tp in partitions}


def latest(client: BrokerClient, partitions: list[TopicPartition]) -> PartitionOffsets:
    return {tp: client.list_offsets(tp).end_offset for tp in partitions}


def resolve(
    client: BrokerClient,
    spec: OffsetSpec,
    partitions: list[TopicPartition],
    option: str,
    timestamp_strategy: str = "error",
) -> PartitionOffsets:
    """Concrete offsets of `partitions` for `spec`; `option` names the option in errors."""
    if spec.kind == "earliest":
        return earliest(client, partitions)
    if spec.kind == "latest":
        return latest(client, partitions)
    if spec.kind == "offsets":
        given = spec.offsets or {}
        _must_cover(given, partitions, option)
        out: PartitionOffsets = {}
        for tp in partitions:
            offset = given[tp]
            if offset in (EARLIEST, LATEST):
                listed = client.list_offsets(tp)
                offset = listed.log_start_offset if offset == EARLIEST else listed.end_offset
            out[tp] = offset
        return out
    stamps = {tp: spec.timestamp for tp in partitions} if spec.kind == "timestamp" else dict(spec.offsets or {})
    _must_cover(stamps, partitions, option)  # type: ignore[arg-type]
    out = {}
    for tp in partitions:
        listed = client.list_offsets(tp, timestamp=stamps[tp])
        if listed.offset is not None:
            out[tp] = listed.offset
        elif timestamp_strategy == "latest" or option.startswith("ending"):
            out[tp] = listed.end_offset
        else:
            raise KraftError(
                "OFFSET_NOT_AVAILABLE",
                f"{option}: no record of {tp[0]}-{tp[1]} has a timestamp at or after {stamps[tp]}; "
                "set startingOffsetsByTimestampStrategy=latest to start at the end instead",
            )
    return out


def _must_cover(given: PartitionOffsets, partitions: list[TopicPartition], option: str) -> None:
    missing = sorted(set(partitions) - set(given))
    extra = sorted(set(given) - set(partitions))
    if missing or extra:
        raise KraftError(
            "INVALID_CONFIG",
            f"{option} must name every subscribed partition and no other (use -2 for earliest, "
            f"-1 for latest); missing: {[f'{t}-{p}' for t, p in missing]}, "
            f"not subscribed: {[f'{t}-{p}' for t, p in extra]}",
        )
