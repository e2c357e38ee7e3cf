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
5. the metrics get the delta.
Every step costs what the delta holds, never the size of the cluster.
"""

from __future__ import annotations

from typing import Mapping, Protocol

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


class _Metrics(Protocol):
    def on_delta(self, delta: MetadataDelta) -> None: ...


class BrokerMetadataPublisher:
    def __init__(self, node_id: int, cache: _Cache, replica_manager: _Replicas,
                 coordinators: Mapping[str, _Coordinator], metrics: _Metrics) -> None:
        """`coordinators`: internal topic → the coordinator of its partitions."""
        self.node_id = node_id
        self.cache = cache
        self.replica_manager = replica_manager
        self.coordinators = dict(coordinators)
        self.metrics = metrics

    def on_metadata_update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self.cache.set_image(image)
        changes = delta.local_changes(self.node_id)
        self.replica_manager.apply_delta(changes, image)
        self._update_coordinators(changes)
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
