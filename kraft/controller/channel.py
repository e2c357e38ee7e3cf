"""`ControllerChannel`: the active controller as every component of a node sees it.

When this node's own `ControllerService` is the active controller, calls go to it directly;
otherwise they go to the active controller's HTTP API (`ControllerClient`, which follows
NOT_CONTROLLER). One request id per call makes a retry after an unknown outcome harmless.
A change is answered only once this node's metadata reached the offset the controller committed
it at (read-your-writes on every node), unless the channel is made without it (`read_your_writes`:
the broker lifecycle's thread, which waits on nothing of the node's loop). The method names and answers are `ControllerService`'s,
so the admin service, the broker lifecycle and the replica manager use either alike.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Awaitable, Callable, Mapping, Sequence

from kraft.errors import KraftError
from kraft.controller.client import ControllerClient
from kraft.controller.errors import NotControllerError
from kraft.controller.handlers import ControllerSettings
from kraft.controller.metadata_loader import MetadataLoader
from kraft.controller.service import ControllerService
from kraft.metadata.errors import MetadataError
from kraft.metadata.partition_change import BrokerState

SCRAM_CREDENTIALS_PATH = "/v1/controller/users/scram-credentials"

LocalCall = Callable[[ControllerService, str], Awaitable[dict[str, Any]]]
REMOTE_SLICE_S = 2.0  # re-check between remote attempts whether this node became the controller


class ControllerChannel:
    def __init__(self, local: ControllerService | None, client: ControllerClient, loader: MetadataLoader,
                 settings: ControllerSettings, *, timeout_s: float = 30.0, read_your_writes: bool = True) -> None:
        self.local = local
        self.client = client
        self.loader = loader
        self.settings = settings
        self.timeout_s = timeout_s
        self.read_your_writes = read_your_writes

    async def _call(self, local: LocalCall, method: str, path: str, body: dict[str, Any],
                    timeout_s: float | None = None, request_id: str | None = None) -> dict[str, Any]:
        request_id = request_id or uuid.uuid4().hex
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            if self.local is not None and self.local.is_active:
                try:
                    return await local(self.local, request_id)
                except NotControllerError:
                    pass  # deposed meanwhile: the new controller is elsewhere
                except MetadataError as e:
                    # The remote path answers KraftError; the local one must too, or a caller that
                    # catches KraftError (a lost creation race: TOPIC_ALREADY_EXISTS) sees it leak.
                    raise KraftError(e.error_code, e.message) from None
            remaining = deadline - time.monotonic()
            try:
                # absent and null mean the same to the controller API ("the default")
                wire = {k: v for k, v in body.items() if v is not None}
                answer = await self.client.call(method, path, {**wire, "request_id": request_id},
                                                timeout_s=min(remaining, REMOTE_SLICE_S)
                                                if self.local is not None else remaining)
            except KraftError as e:
                if e.error_code in ("NOT_CONTROLLER", "NETWORK_EXCEPTION") and time.monotonic() < deadline:
                    continue
                raise
            offset = answer.get("metadata_offset") if isinstance(answer, dict) else None
            if isinstance(offset, int) and self.read_your_writes:
                await self.loader.wait_for_offset(offset, max(0.0, deadline - time.monotonic()))
            return answer

    # -- topics -----------------------------------------------------------------------------------

    async def create_topics(self, name: str, partitions: int | None = None, replication_factor: int | None = None,
                            configs: Mapping[str, Any] | None = None, validate_only: bool = False,
                            assignments: list[list[int]] | None = None) -> dict[str, Any]:
        return await self._call(
            lambda c, rid: c.create_topics(name, partitions, replication_factor, configs, validate_only,
                                           request_id=rid, assignments=assignments),
            "POST", "/v1/controller/topics",
            {"name": name, "partitions": partitions, "replication_factor": replication_factor,
             "configs": dict(configs or {}), "validate_only": validate_only, "assignments": assignments})

    async def delete_topic(self, name: str) -> dict[str, Any]:
        return await self._call(lambda c, rid: c.delete_topic(name, request_id=rid),
                                "POST", "/v1/controller/topics/delete", {"name": name})

    async def create_partitions(self, name: str, count: int, validate_only: bool = False) -> dict[str, Any]:
        return await self._call(
            lambda c, rid: c.create_partitions(name, count, validate_only, request_id=rid),
            "POST", "/v1/controller/topics/partitions",
            {"name": name, "count": count, "validate_only": validate_only})

    async def alter_configs(self, resource_type: str, resource_name: str, configs: Mapping[str, Any],
                            validate_only: bool = False) -> dict[str, Any]:
        return await self._call(
            lambda c, rid: c.alter_configs(resource_type, resource_name, configs, validate_only, request_id=rid),
            "POST", "/v1/controller/configs",
            {"resource_type": resource_type, "resource_name": resource_name, "configs": dict(configs),
             "validate_only": validate_only})

    async def alter_user_scram_credentials(self, upsertions: list[Any], deletions: list[Any]) -> dict[str, Any]:
        return await self._call(
            lambda c, rid: c.alter_user_scram_credentials(upsertions, deletions, request_id=rid),
            "POST", SCRAM_CREDENTIALS_PATH, {"upsertions": upsertions, "deletions": deletions})

    # -- ACLs and client quotas ------------------------------------------------------------------

    async def create_acls(self, acls: list[dict[str, Any]]) -> dict[str, Any]:
        return await self._call(lambda c, rid: c.create_acls(acls, request_id=rid),
                                "POST", "/v1/controller/acls", {"acls": acls})

    async def delete_acls(self, filters: list[dict[str, Any]]) -> dict[str, Any]:
        return await self._call(lambda c, rid: c.delete_acls(filters, request_id=rid),
                                "POST", "/v1/controller/acls/delete", {"filters": filters})

    async def alter_client_quotas(self, entries: list[dict[str, Any]], validate_only: bool = False) -> dict[str, Any]:
        return await self._call(lambda c, rid: c.alter_client_quotas(entries, validate_only, request_id=rid),
                                "POST", "/v1/controller/client-quotas",
                                {"entries": entries, "validate_only": validate_only})

    # -- brokers ----------------------------------------------------------------------------------

    async def register_broker(self, broker_id: int, incarnation_id: str, endpoints: list[dict[str, Any]],
                              rack: str | None = None, *, cluster_id: str | None = None,
                              timeout_s: float | None = None) -> dict[str, Any]:
        return await self._call(
            lambda c, rid: c.register_broker(broker_id, incarnation_id, endpoints, rack, request_id=rid),
            "POST", "/v1/controller/brokers/register",
            {"broker_id": broker_id, "incarnation_id": incarnation_id, "endpoints": endpoints, "rack": rack,
             "cluster_id": cluster_id}, timeout_s)

    async def broker_heartbeat(self, broker_id: int, broker_epoch: int, current_metadata_offset: int, *,
                               want_fence: bool = False, want_shutdown: bool = False,
                               offline_log_dirs: Sequence[str] = (),
                               offline_replicas: Sequence[tuple[str, int]] = (),
                               timeout_s: float | None = None) -> dict[str, Any]:
        return await self._call(
            lambda c, rid: c.broker_heartbeat(broker_id, broker_epoch, current_metadata_offset,
                                              want_fence=want_fence, want_shutdown=want_shutdown,
                                              offline_log_dirs=offline_log_dirs,
                                              offline_replicas=offline_replicas),
            "POST", "/v1/controller/brokers/heartbeat",
            {"broker_id": broker_id, "broker_epoch": broker_epoch,
             "current_metadata_offset": current_metadata_offset, "want_fence": want_fence,
             "want_shutdown": want_shutdown, "offline_log_dirs": list(offline_log_dirs) or None,
             "offline_replicas": [list(r) for r in offline_replicas] or None}, timeout_s)

    async def unregister_broker(self, broker_id: int) -> dict[str, Any]:
        return await self._call(lambda c, rid: c.unregister_broker(broker_id, request_id=rid),
                                "POST", "/v1/controller/brokers/unregister", {"broker_id": broker_id})

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> dict[str, Any]:
        return await self._call(lambda c, rid: c.allocate_producer_ids(broker_id, broker_epoch, request_id=rid),
                                "POST", "/v1/controller/producer-ids",
                                {"broker_id": broker_id, "broker_epoch": broker_epoch})

    # -- partitions -------------------------------------------------------------------------------

    async def alter_partition(self, broker_id: int, broker_epoch: int, topic: str, partition: int,
                              leader_epoch: int, partition_epoch: int, new_isr: list[BrokerState], *,
                              request_id: str | None = None) -> dict[str, Any]:
        """AlterPartition (ISR change) from a partition leader: the answer is the partition's state
        after the change, `{"topic","topic_id","partition","leader","leader_epoch","isr",
        "partition_epoch"}`; errors as KraftError/MetadataError (FENCED_LEADER_EPOCH,
        INVALID_UPDATE_VERSION, NOT_LEADER_OR_FOLLOWER, STALE_BROKER_EPOCH, INELIGIBLE_REPLICA, ...)."""
        return await self._call(
            lambda c, rid: c.alter_partition(broker_id, broker_epoch, topic, partition, leader_epoch,
                                             partition_epoch, list(new_isr), request_id=rid),
            "POST", "/v1/controller/alter-partition",
            {"broker_id": broker_id, "broker_epoch": broker_epoch, "topic": topic, "partition": partition,
             "leader_epoch": leader_epoch, "partition_epoch": partition_epoch,
             "new_isr_with_epochs": [{"broker_id": m.broker_id, "broker_epoch": m.broker_epoch} for m in new_isr]},
            request_id=request_id)
