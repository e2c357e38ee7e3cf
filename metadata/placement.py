"""Replica placement: Kafka's round-robin assignment (`AdminUtils.assignReplicasToBrokers`).

Replicas of partition p start at broker `(p + start_index) % n` (that one is the preferred leader,
so leaders spread evenly) and the followers are shifted by `replica_shift`, which grows every n
partitions so follower pairs vary too. When every broker has a rack, the broker list alternates
racks and a partition takes a second replica from a rack it already uses only when every rack has
one (Kafka's rack-aware variant). Pure: the caller draws `start_index`/`replica_shift` from its
random source, so the records (not the replay) carry the randomness.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from kraft.metadata.errors import MetadataError


@dataclass(frozen=True)
class BrokerPlacement:
    broker_id: int
    rack: str | None = None


def place_replicas(
    num_partitions: int,
    replication_factor: int,
    brokers: Sequence[BrokerPlacement],
    *,
    start_index: int,
    replica_shift: int,
    start_partition_id: int = 0,
) -> list[tuple[int, ...]]:
    """Replica lists for partitions `start_partition_id ..` (+num_partitions), first = leader.

    `brokers` are the usable (unfenced) brokers; raises INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR.
    """
    if num_partitions <= 0:
        raise MetadataError("INVALID_PARTITIONS", f"number of partitions must be larger than 0, got {num_partitions}")
    if replication_factor <= 0:
        raise MetadataError(
            "INVALID_REPLICATION_FACTOR", f"replication factor must be larger than 0, got {replication_factor}"
        )
    if replication_factor > len(brokers):
        raise MetadataError(
            "INVALID_REPLICATION_FACTOR",
            f"replication factor: {replication_factor} larger than available brokers: {len(brokers)}",
        )
    assert len({b.broker_id for b in brokers}) == len(brokers), "duplicate broker ids"
    if all(b.rack is not None for b in brokers):
        return _rack_aware(num_partitions, replication_factor, brokers, start_index, replica_shift, start_partition_id)
    ordered = sorted(b.broker_id for b in brokers)
    n = len(ordered)
    start_index %= n
    result = []
    for partition in range(start_partition_id, start_partition_id + num_partitions):
        if partition > 0 and partition % n == 0:
            replica_shift += 1
        first = (partition + start_index) % n
        replicas = [ordered[first]]
        replicas += [ordered[_replica_index(first, replica_shift, j, n)] for j in range(replication_factor - 1)]
        result.append(tuple(replicas))
    return result


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def _rack_alternated(brokers: Sequence[BrokerPlacement]) -> list[BrokerPlacement]:
    """Brokers ordered rack by rack in turn: r1b1, r2b1, r3b1, r1b2, ..."""
    by_rack: dict[str, list[BrokerPlacement]] = {}
    for b in sorted(brokers, key=lambda b: b.broker_id):
        by_rack.setdefault(b.rack or "", []).append(b)
    queues = [by_rack[r] for r in sorted(by_rack)]
    result: list[BrokerPlacement] = []
    depth = 0
    while len(result) < len(brokers):
        result += [q[depth] for q in queues if depth < len(q)]
        depth += 1
    return result


def _rack_aware(
    num_partitions: int,
    replication_factor: int,
    brokers: Sequence[BrokerPlacement],
    start_index: int,
    replica_shift: int,
    start_partition_id: int,
) -> list[tuple[int, ...]]:
    arranged = _rack_alternated(brokers)
    n = len(arranged)
    num_racks = len({b.rack for b in brokers})
    start_index %= n
    result = []
    for partition in range(start_partition_id, start_partition_id + num_partitions):
        if partition > 0 and partition % n == 0:
            replica_shift += 1
        first = (partition + start_index) % n
        leader = arranged[first]
        replicas = [leader.broker_id]
        racks = {leader.rack}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                b = arranged[_replica_index(first, replica_shift * num_racks, k, n)]
                k += 1
                # a rack (or broker) gets a second replica only when every rack (broker) has one
                if (b.rack not in racks or len(racks) == num_racks) and (
                    b.broker_id not in replicas or len(replicas) == n
                ):
                    replicas.append(b.broker_id)
                    racks.add(b.rack)
                    break
        result.append(tuple(replicas))
    return result
