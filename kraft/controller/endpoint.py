"""`ControllerEndpoint`: what this node answers on `/v1/controller/...` (the routes' `ControllerApi`).

On the active controller it runs the request on the `ControllerService` and adds the metadata
offset the change was committed at; everywhere else it raises NOT_CONTROLLER naming the active
controller's `{node_id, host, port}` as far as this node knows it. It also serves the metadata
log to brokers (long poll from an offset, or "snapshot needed" and the image snapshot) and keeps,
as soft state, what kafka-metadata-quorum reports: every observer's fetch position and times,
and the voters' positions (asked of each voter when the status is described).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from kraft.errors import KraftError
from kraft.controller.client import ControllerClient, ControllerDirectory
from kraft.controller.metadata_loader import MetadataLoader, SnapshotNeededError
from kraft.controller.quorum import Quorum
from kraft.controller.service import ControllerService
from kraft.metadata.partition_change import BrokerState

log = logging.getLogger("kraft.controller.endpoint")

VOTER_STATUS_TIMEOUT_S = 0.5
MAX_ANSWER_RECORDS = 2_000  # records per metadata fetch answer


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class ReplicaState:
    """A metadata log replica as the active controller last saw it (Kafka's ReplicaState)."""

    log_end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1

    def update(self, log_end_offset: int, high_watermark: int, now_ms: int) -> None:
        self.log_end_offset = log_end_offset
        self.last_fetch_ms = now_ms
        if log_end_offset >= high_watermark:
            self.last_caught_up_ms = now_ms


class ControllerEndpoint:
    def __init__(
        self,
        node_id: int,
        controller: ControllerService | None,
        quorum: Quorum | None,
        loader: MetadataLoader,
        directory: ControllerDirectory,
        client: ControllerClient,
        cluster_id: Callable[[], str],
        *,
        clock_ms: Callable[[], int] = wall_ms,
    ) -> None:
        self.node_id = node_id
        self.controller = controller
        self.quorum = quorum
        self.loader = loader
        self.directory = directory
        self.client = client
        self.cluster_id = cluster_id
        self.clock_ms = clock_ms
        self._observers: dict[int, ReplicaState] = {}
        self._voters: dict[int, ReplicaState] = {}

    # -- who is the controller --------------------------------------------------------------------

    def refresh_directory(self) -> None:
        """Pull what this node knows into the directory: the voters' endpoints and the leader
        from its quorum, or (a broker) the controller of its metadata image when it has no
        better idea (a NOT_CONTROLLER answer is fresher than the image)."""
        endpoints = getattr(self.quorum, "controller_endpoints", None)
        if endpoints is not None:
            for node_id, (host, port) in endpoints().items():
                self.directory.learn(node_id, host, port)
        if self.controller is not None:
            leader = self.controller.leader_id()
            if leader is not None:
                self.directory.leader_id = leader
        elif self.directory.leader_id is None:
            self.directory.leader_id = self.loader.image.controller_id

    def leader_id(self) -> int | None:
        """The active controller as far as this node knows."""
        if self.controller is not None:
            known = self.controller.leader_id()
            if known is not None:
                return known
        image_leader = self.loader.image.controller_id
        return image_leader if image_leader is not None else self.directory.leader_id

    def is_active(self) -> bool:
        return self.controller is not None and self.controller.is_active

    def leader_json(self) -> dict[str, Any] | None:
        self.refresh_directory()
        return self.directory.leader_json(self.leader_id())

    def _active(self) -> ControllerService:
        if self.controller is not None and self.controller.is_active:
            return self.controller
        leader = self.leader_json()
        extra = {} if leader is None else {"leader": leader}
        where = "unknown" if leader is None else f"node {leader['node_id']} at {leader['host']}:{leader['port']}"
        raise KraftError("NOT_CONTROLLER", f"node {self.node_id} is not the active controller ({where})", **extra)

    def _committed(self, answer: dict[str, Any]) -> dict[str, Any]:
        return {**answer, "metadata_offset": self.loader.offset}

    # -- ACLs and client quotas ------------------------------------------------------------------

    async def create_acls(self, acls: list[Any], request_id: str | None) -> dict[str, Any]:
        return self._committed(await self._active().create_acls(acls, request_id=request_id))

    async def delete_acls(self, filters: list[Any], request_id: str | None) -> dict[str, Any]:
        return self._committed(await self._active().delete_acls(filters, request_id=request_id))

    async def alter_client_quotas(self, entries: list[Any], validate_only: bool,
                                  request_id: str | None) -> dict[str, Any]:
        return self._committed(await self._active().alter_client_quotas(entries, validate_only,
                                                                        request_id=request_id))

    # -- brokers ----------------------------------------------------------------------------------

    async def register_broker(self, broker_id: int, incarnation_id: str, endpoints: list[dict[str, Any]],
                              rack: str | None, cluster_id: str | None, request_id: str | None) -> dict[str, Any]:
        controller = self._active()
        ours = self.cluster_id()  # the active controller's image has it: its claim recorded it
        if cluster_id and ours and cluster_id != ours:
            raise KraftError("INCONSISTENT_CLUSTER_ID",
                             f"broker {broker_id} belongs to cluster {cluster_id}, this controller to cluster {ours}")
        return self._committed(await controller.register_broker(broker_id, incarnation_id, endpoints, rack,
                                                                 request_id=request_id))

    async def broker_heartbeat(self, broker_id: int, broker_epoch: int, current_metadata_offset: int,
                               want_fence: bool, want_shutdown: bool, offline_log_dirs: list[str],
                               offline_replicas: list[tuple[str, int]]) -> dict[str, Any]:
        return self._committed(await self._active().broker_heartbeat(
            broker_id, broker_epoch, current_metadata_offset, want_fence=want_fence, want_shutdown=want_shutdown,
            offline_log_dirs=offline_log_dirs, offline_replicas=offline_replicas))

    async def unregister_broker(self, broker_id: int, request_id: str | None) -> dict[str, Any]:
        return self._committed(await self._active().unregister_broker(broker_id, request_id=request_id))

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int, request_id: str | None) -> dict[str, Any]:
        return self._committed(await self._active().allocate_producer_ids(broker_id, broker_epoch,
                                                                          request_id=request_id))

    async def alter_partition(self, broker_id: int, broker_epoch: int, topic: str, partition: int,
                              leader_epoch: int, partition_epoch: int, new_isr: list[BrokerState],
                              request_id: str | None) -> dict[str, Any]:
        return self._committed(await self._active().alter_partition(
            broker_id, broker_epoch, topic, partition, leader_epoch, partition_epoch, new_isr,
            request_id=request_id))

    # -- topics -----------------------------------------------------------------------------------

    async def create_topic(self, name: str, partitions: int | None, replication_factor: int | None,
                           configs: Mapping[str, Any], validate_only: bool, request_id: str | None,
                           assignments: list[list[int]] | None = None) -> dict[str, Any]:
        return self._committed(await self._active().create_topics(
            name, partitions, replication_factor, configs, validate_only, request_id=request_id,
            assignments=assignments))

    async def delete_topic(self, name: str, request_id: str | None) -> dict[str, Any]:
        return self._committed(await self._active().delete_topic(name, request_id=request_id))

    async def create_partitions(self, name: str, count: int, validate_only: bool,
                                request_id: str | None) -> dict[str, Any]:
        return self._committed(await self._active().create_partitions(name, count, validate_only,
                                                                      request_id=request_id))

    async def alter_configs(self, resource_type: str, resource_name: str, configs: Mapping[str, Any],
                            validate_only: bool, request_id: str | None) -> dict[str, Any]:
        return self._committed(await self._active().alter_configs(
            resource_type, resource_name, configs, validate_only, request_id=request_id))

    async def alter_user_scram_credentials(self, upsertions: list[Any], deletions: list[Any],
                                           request_id: str | None) -> dict[str, Any]:
        return self._committed(await self._active().alter_user_scram_credentials(
            upsertions, deletions, request_id=request_id))

    async def elect_leaders(self, partitions: Iterable[tuple[str, int]] | None,
                            request_id: str | None) -> dict[str, Any]:
        return self._committed(await self._active().elect_leaders(partitions, request_id=request_id))

    async def alter_partition_reassignments(self, reassignments: list[dict[str, Any]],
                                            request_id: str | None) -> dict[str, Any]:
        return self._committed(await self._active().alter_partition_reassignments(
            reassignments, request_id=request_id))

    async def list_partition_reassignments(self) -> dict[str, Any]:
        return await self._active().list_partition_reassignments()

    # -- the metadata log for observers -----------------------------------------------------------

    async def fetch_metadata(self, broker_id: int | None, from_offset: int, max_records: int,
                             max_wait_ms: int) -> dict[str, Any]:
        """Records from `from_offset` (long poll up to `max_wait_ms` when there are none yet), or
        `snapshot_needed` when they are no longer retained. Whole batches only (a broker applies
        a request's records together), as many as fit in `max_records` and at most
        `MAX_ANSWER_RECORDS` whatever is asked, so encoding one stays a bounded piece of the
        loop's work; a batch larger than that comes alone."""
        self._active()
        loader = self.loader
        if broker_id is not None:
            self._observers.setdefault(broker_id, ReplicaState()).update(
                from_offset, loader.retained_offset + 1, self.clock_ms())
        if from_offset > loader.retained_offset and max_wait_ms > 0:
            await loader.wait_for_records(from_offset, max_wait_ms / 1000)
        answer: dict[str, Any] = {"cluster_id": self.cluster_id(), "leader": self.leader_json(),
                                  "controllers": self._controllers_json()}
        high_watermark = loader.retained_offset + 1
        try:
            records = loader.read(from_offset, min(max_records, MAX_ANSWER_RECORDS))
        except SnapshotNeededError as e:
            return {**answer, "snapshot_needed": True, "first_available": e.first_available, "records": [],
                    "high_watermark": high_watermark}
        return {**answer, "snapshot_needed": False, "records": records, "high_watermark": high_watermark}

    def snapshot(self) -> Callable[[], dict[str, Any]]:
        """The whole image at the last applied offset, for a broker too far behind: a function
        building its snapshot form, safe to run in a thread (the image is immutable), since at
        100k partitions that takes longer than the loop may stall."""
        self._active()
        return self.loader.image.to_snapshot

    def _controllers_json(self) -> list[dict[str, Any]]:
        return [{"node_id": n, "host": h, "port": p} for n, (h, p) in sorted(self.directory.endpoints.items())]

    # -- quorum status ----------------------------------------------------------------------------

    def local_status(self) -> dict[str, Any]:
        """This node's own view, answered by every node."""
        status = getattr(self.quorum, "status", None)
        raft = None
        if status is not None:
            s = status()
            raft = {"raft_state": s.raft_state, "leader_id": s.leader_id, "leader_epoch": s.leader_epoch,
                    "high_watermark": s.high_watermark, "last_applied_index": s.last_applied_index,
                    "has_quorum": s.has_quorum}
        leader = self.leader_id()
        return {"node_id": self.node_id, "metadata_offset": self.loader.offset, "active": self.is_active(),
                "controller_id": -1 if leader is None else leader,
                "controller_epoch": self.loader.image.controller_epoch, "raft": raft}

    def _voter_ids(self) -> list[int]:
        config = getattr(self.quorum, "config", None)
        voters = getattr(config, "voters", None)
        return sorted(voters) if voters else [self.node_id]

    async def _ask_voter(self, node_id: int) -> int | None:
        address = self.directory.endpoints.get(node_id)
        if address is None:
            return None
        try:
            answer = await self.client.request_at(address, "GET", "/v1/controller/quorum/local",
                                                  timeout_s=VOTER_STATUS_TIMEOUT_S)
        except Exception as e:  # a voter that is down is reported with its last known position
            log.debug("voter %d did not answer its status: %s", node_id, e)
            return None
        offset = answer.get("metadata_offset") if isinstance(answer, dict) else None
        return offset if isinstance(offset, int) else None

    async def describe_quorum(self) -> dict[str, Any]:
        """kafka-metadata-quorum's --status and --replication, in metadata offsets."""
        self._active()
        self.refresh_directory()
        now = self.clock_ms()
        high_watermark = self.loader.offset + 1
        others = [v for v in self._voter_ids() if v != self.node_id]
        offsets = await asyncio.gather(*(self._ask_voter(v) for v in others))
        for voter, offset in zip(others, offsets):
            state = self._voters.setdefault(voter, ReplicaState())
            if offset is not None:
                state.update(offset + 1, high_watermark, now)
        rows = [self._row(self.node_id, ReplicaState(high_watermark, now, now), high_watermark, "Leader")]
        rows += [self._row(v, self._voters[v], high_watermark, "Follower") for v in others]
        rows += [self._row(b, s, high_watermark, "Observer") for b, s in sorted(self._observers.items())]
        followers = rows[1:]
        quorum_status = getattr(self.quorum, "status", None)
        leader_epoch = quorum_status().leader_epoch if quorum_status is not None else self.loader.image.controller_epoch
        return {
            "cluster_id": self.cluster_id(),
            "leader_id": self.node_id,
            "leader_epoch": leader_epoch,
            "controller_epoch": self.loader.image.controller_epoch,
            "high_watermark": high_watermark,
            "max_follower_lag": max((r["lag"] for r in followers if r["lag"] >= 0), default=0),
            "max_follower_lag_time_ms": max(
                (now - r["last_caught_up_timestamp"] for r in followers if r["last_caught_up_timestamp"] >= 0),
                default=0),
            "current_voters": self._voter_ids(),
            "current_observers": sorted(self._observers),
            "replication": rows,
        }

    @staticmethod
    def _row(node_id: int, state: ReplicaState, high_watermark: int, status: str) -> dict[str, Any]:
        known = state.log_end_offset >= 0
        return {"node_id": node_id, "log_end_offset": state.log_end_offset,
                "lag": high_watermark - state.log_end_offset if known else -1,
                "last_fetch_timestamp": state.last_fetch_ms, "last_caught_up_timestamp": state.last_caught_up_ms,
                "status": status}
