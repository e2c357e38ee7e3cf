"""The interfaces the admin services call: topic changes through the active controller
(`AdminService`, implemented by `kraft/broker/admin.py`), and the controller's own API
(`ControllerApi`, implemented by `kraft/controller/endpoint.py`): Kafka's admin APIs only the
active controller answers (DescribeQuorum, ElectLeaders, the reassignments) and the inter-node
controller RPCs (registration, heartbeats, the metadata log, AlterPartition, producer-id blocks,
the changes other nodes forward). The controller's answers are its own protocol's maps."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Protocol

from kraft.metadata.partition_change import BrokerState
from kraft.server.metadata import TopicDescription


class AdminService(Protocol):
    """Each call returns once the change is committed and visible in this node's MetadataView."""

    async def create_topic(
        self, name: str, partitions: int | None, replication_factor: int | None,
        configs: Mapping[str, str], assignments: list[list[int]] | None = None,
    ) -> TopicDescription: ...

    async def delete_topic(self, name: str) -> None: ...

    async def create_partitions(self, name: str, count: int) -> None: ...

    async def alter_configs(self, name: str, changes: Mapping[str, str | None]) -> None: ...


class ControllerApi(Protocol):
    def is_active(self) -> bool: ...

    def leader_json(self) -> dict[str, Any] | None:
        """`{node_id, host, port}` of the active controller as far as this node knows."""

    def local_status(self) -> dict[str, Any]: ...

    async def describe_quorum(self) -> dict[str, Any]: ...

    async def fetch_metadata(self, broker_id: int | None, from_offset: int, max_records: int,
                             max_wait_ms: int) -> dict[str, Any]: ...

    def snapshot(self) -> Callable[[], dict[str, Any]]: ...

    async def register_broker(self, broker_id: int, incarnation_id: str, endpoints: list[dict[str, Any]],
                              rack: str | None, cluster_id: str | None, request_id: str | None) -> dict[str, Any]: ...

    async def broker_heartbeat(self, broker_id: int, broker_epoch: int, current_metadata_offset: int,
                               want_fence: bool, want_shutdown: bool, offline_log_dirs: list[str],
                               offline_replicas: list[tuple[str, int]]) -> dict[str, Any]: ...

    async def unregister_broker(self, broker_id: int, request_id: str | None) -> dict[str, Any]: ...

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int,
                                    request_id: str | None) -> dict[str, Any]: ...

    async def alter_partition(self, broker_id: int, broker_epoch: int, topic: str, partition: int,
                              leader_epoch: int, partition_epoch: int, new_isr: list[BrokerState],
                              request_id: str | None) -> dict[str, Any]: ...

    async def create_topic(self, name: str, partitions: int | None, replication_factor: int | None,
                           configs: Mapping[str, Any], validate_only: bool,
                           request_id: str | None, assignments: list[list[int]] | None = None) -> dict[str, Any]: ...

    async def delete_topic(self, name: str, request_id: str | None) -> dict[str, Any]: ...

    async def create_partitions(self, name: str, count: int, validate_only: bool,
                                request_id: str | None) -> dict[str, Any]: ...

    async def alter_configs(self, resource_type: str, resource_name: str, configs: Mapping[str, Any],
                            validate_only: bool, request_id: str | None) -> dict[str, Any]: ...

    async def elect_leaders(self, partitions: Iterable[tuple[str, int]] | None,
                            request_id: str | None) -> dict[str, Any]: ...

    async def alter_user_scram_credentials(self, upsertions: list[Any], deletions: list[Any],
                                           request_id: str | None) -> dict[str, Any]: ...

    async def alter_partition_reassignments(self, reassignments: list[dict[str, Any]],
                                            request_id: str | None) -> dict[str, Any]: ...

    async def list_partition_reassignments(self) -> dict[str, Any]: ...

    async def create_acls(self, acls: list[Any], request_id: str | None) -> dict[str, Any]: ...

    async def delete_acls(self, filters: list[Any], request_id: str | None) -> dict[str, Any]: ...

    async def alter_client_quotas(self, entries: list[Any], validate_only: bool,
                                  request_id: str | None) -> dict[str, Any]: ...
