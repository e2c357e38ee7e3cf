"""BrokerMetadataPublisher: the broker's one metadata publisher (Kafka's
`BrokerMetadataPublisher.publish`).

For every (delta, image) the loader applies, in this order:
1. the image goes to the metadata cache, the broker's only image (routes, the replica manager,
   the group coordinator and the metrics read it there);
2. `delta.local_changes(node_id)`: the partitions this broker now leads, follows or must delete;
3. the replica manager applies those (`apply_delta`);
4. each coordinator runtime is told about the partitions of its internal topic among them
   (`on_election` for the ones led here, `on_resignation` for the others), through one table:
   internal topic → coordinator (`__consumer_offsets` → the group coordinator's runtime;
   `__transaction_state` → the transaction coordinator's, when there is one);
5. the leader watchers (the transaction coordinator) get the partitions whose leader epoch the
   delta changed: KIP-890's verification follows the leadership;
6. the metrics get the delta.
Every step costs what the delta holds, never the size of the cluster (a watcher looks at its
open transactions only when the delta moved a leader).
"""

from __future__ import annotations

from typing import Iterable, Mapping, Protocol, Sequence

from kraft.metadata.delta import LocalReplicaChanges, MetadataDelta
from kraft.metadata.image import MetadataImage


class _Cache(Protocol):
    def set_image(self, image: MetadataImage) -> None: ...


class _Replicas(Protocol):
    def apply_delta(self, changes: LocalReplicaChanges, image: MetadataImage) -> None: ...


class _Coordinator(Protocol):
    """A coordinator runtime (`kraft.coordinator.runtime.CoordinatorRuntime`)."""

    def on_election(self, partition: int, leader_epoch: int) -> None: ...

    def on_resignation(self, partition: int) -> None: ...


class _LeaderWatcher(Protocol):
    def on_leaders_changed(self, partitions: Iterable[tuple[str, int]]) -> None: ...


class _Metrics(Protocol):
    def on_delta(self, delta: MetadataDelta) -> None: ...


class BrokerMetadataPublisher:
    def __init__(self, node_id: int, cache: _Cache, replica_manager: _Replicas,
                 coordinators: Mapping[str, _Coordinator], metrics: _Metrics,
                 leader_watchers: Sequence[_LeaderWatcher] = ()) -> None:
        """`coordinators`: internal topic → the coordinator of its partitions."""
        self.node_id = node_id
        self.cache = cache
        self.replica_manager = replica_manager
        self.coordinators = dict(coordinators)
        self.metrics = metrics
        self.leader_watchers = tuple(leader_watchers)

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self.cache.set_image(image)
        changes = delta.local_changes(self.node_id)
        self.replica_manager.apply_delta(changes, image)
        self._update_coordinators(changes)
        if self.leader_watchers:
            moved = [(topic, p) for topic, p, before, after in delta.changed_partitions()
                     if after.leader >= 0 and (before is None or before.leader_epoch != after.leader_epoch)]
            if moved:
                for watcher in self.leader_watchers:
                    watcher.on_leaders_changed(moved)
        self.metrics.on_delta(delta)

    def _update_coordinators(self, changes: LocalReplicaChanges) -> None:
        # A deletion first: a re-created internal topic then elects on its new partitions.
        for topic, partition in changes.deletes:
            if (coordinator := self.coordinators.get(topic)) is not None:
                coordinator.on_resignation(partition)
        for (topic, partition), reg in changes.leaders.items():
            if (coordinator := self.coordinators.get(topic)) is not None:
                coordinator.on_election(partition, reg.leader_epoch)
        for topic, partition in changes.followers:
            if (coordinator := self.coordinators.get(topic)) is not None:
                coordinator.on_resignation(partition)
