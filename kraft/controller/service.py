"""ControllerService: the active controller's asyncio shell around the pure handlers.

Requests go through the `CommitQueue`: validated in order against the image holding everything
committed so far plus the records of the requests queued before them (`handlers.py`), stamped
with this controller's epoch and their request id, committed in groups and answered once
published by the loader. State changes only through replay, so the same code serves the active
controller and a standby that takes over.

The quorum makes a node the active controller by committing its `ClaimController` record; the
service acts only once that claim is in its image too, stamps records with that epoch (the log
admits no batch of an older epoch, `metadata/log_rules.py`), and gives every broker a fresh session when it becomes active. A request
id seen in the image is a retry: the remembered answer is returned and nothing is written again.

Broker liveness is soft state (`heartbeats.py`): a heartbeat that changes nothing (the common
case) renews the session and is answered from the image at once, never waiting behind other
requests or a commit; only one that unfences or fences its broker queues for a commit, and its
session is renewed before it does. A background task fences brokers whose session expired;
`check_sessions(now_ms)` does one pass (tests call it with their own clock). The controller
measures sessions by its own clock, and time it was not running (its event loop held up, the
process descheduled or stopped: seen as the session task waking late) does not count against
the brokers: the sessions are extended by it, so a controller that was slow itself does not
blame the brokers whose heartbeats waited for it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

from kraft.controller import acl_handlers, handlers
from kraft.controller.commit_queue import CommitQueue
from kraft.controller.errors import NotControllerError
from kraft.controller.handlers import ConfigValidator, ControllerResult, ControllerSettings
from kraft.controller.heartbeats import BrokerHeartbeatManager
from kraft.controller.metadata_loader import MetadataLoader
from kraft.controller.quorum import Quorum
from kraft.metadata.acl import acl_from_dict, filter_from_dict
from kraft.metadata.errors import MetadataError
from kraft.metadata.image import MetadataImage
from kraft.metadata.partition_change import BrokerState

log = logging.getLogger(__name__)

# a session task waking this much later than planned: the controller itself was held up
STALL_TOLERANCE_MS = 50


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class ControllerService:
    def __init__(
        self,
        node_id: int,
        quorum: Quorum,
        loader: MetadataLoader,
        settings: ControllerSettings = ControllerSettings(),
        *,
        config_validator: ConfigValidator | None = None,
        rng: random.Random | None = None,
        clock_ms: Callable[[], int] = monotonic_ms,
        session_check_interval_ms: int | None = None,
        new_request_id: Callable[[], str] | None = None,
    ) -> None:
        """`clock_ms`, `rng` and `new_request_id` (the id of a request that carries none): a
        seeded simulation passes its own."""
        self.node_id = node_id
        self.settings = settings
        self._quorum = quorum
        self._loader = loader
        self._config_validator = config_validator
        self._rng = rng or random.Random()
        self._clock_ms = clock_ms
        self._session_check_interval_ms = session_check_interval_ms or max(
            50, min(1000, settings.broker_session_timeout_ms // 4))
        self._heartbeats = BrokerHeartbeatManager(settings.broker_session_timeout_ms)
        self._commits = CommitQueue(quorum, loader, self._active_epoch, self.leader_id, node_id,
                                    new_request_id)
        self._session_epoch: int | None = None  # the epoch whose broker sessions we track
        self._session_task: asyncio.Task[None] | None = None
        loader.attach(quorum)

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the quorum (which replays the log and, when this node leads, claims the controller)."""
        await self._quorum.start()
        self._session_task = asyncio.create_task(self._session_loop())

    async def close(self) -> None:
        if self._session_task is not None:
            self._session_task.cancel()
            await asyncio.gather(self._session_task, return_exceptions=True)
        await self._commits.close()
        await self._quorum.close()

    @property
    def image(self) -> MetadataImage:
        return self._loader.image

    def _active_epoch(self) -> int | None:
        """This node's controller epoch when it is the active controller and its image has caught
        up with its claim; None otherwise."""
        if not self._quorum.is_active_controller():
            return None
        claim = self._quorum.active_controller()
        image = self.image
        if claim is None or claim != (self.node_id, image.controller_epoch) or image.controller_id != self.node_id:
            return None
        if claim[1] != self._session_epoch:
            # newly active: every broker gets a fresh session (its heartbeats went elsewhere)
            self._session_epoch = claim[1]
            self._heartbeats.reset(image.cluster.brokers, self._clock_ms())
            log.info("node %d acts as the active controller, epoch %d", self.node_id, claim[1])
        return claim[1]

    @property
    def is_active(self) -> bool:
        return self._active_epoch() is not None

    def leader_id(self) -> int | None:
        """The active controller as far as this node knows (None when unknown)."""
        if self.is_active:
            return self.node_id
        claim = self._quorum.active_controller()
        return claim[0] if claim is not None else self._quorum.leader()

    def quorum_state(self) -> dict[str, Any]:
        image = self.image
        return {"leader_id": self.leader_id(), "controller_epoch": image.controller_epoch,
                "metadata_offset": image.offset, "active": self.is_active}

    # -- request plumbing -------------------------------------------------------------------------

    async def _run(self, request_id: str | None, build: Callable[[MetadataImage], ControllerResult],
                   *, in_thread: bool = True, name: str = "request") -> dict[str, Any]:
        """`build` validated and committed in the next group (`CommitQueue`); `in_thread=False`
        for a small build that touches the service's own state."""
        return await self._commits.run(request_id, build, in_thread=in_thread, name=name)

    def _now(self, now_ms: int | None) -> int:
        return self._clock_ms() if now_ms is None else now_ms

    # -- topics -----------------------------------------------------------------------------------

    async def create_topics(
        self,
        name: str,
        partitions: int | None = None,
        replication_factor: int | None = None,
        configs: Mapping[str, Any] | None = None,
        validate_only: bool = False,
        *,
        request_id: str | None = None,
        assignments: list[list[int]] | None = None,
    ) -> dict[str, Any]:
        """Create one topic: {"name","topic_id","partitions","replication_factor","configs"}."""
        return await self._run(request_id, lambda image: handlers.create_topics(
            image, self.settings, self._rng, name, partitions, replication_factor, configs, validate_only,
            self._config_validator, assignments), name="create_topics")

    async def delete_topic(self, name: str, *, request_id: str | None = None) -> dict[str, Any]:
        """{"name","topic_id"}"""
        return await self._run(request_id, lambda image: handlers.delete_topic(image, name),
                               name="delete_topic")

    async def create_partitions(
        self, name: str, count: int, validate_only: bool = False, *, request_id: str | None = None
    ) -> dict[str, Any]:
        """Grow to `count` partitions in total: {"name","partitions"}."""
        return await self._run(request_id, lambda image: handlers.create_partitions(
            image, self.settings, self._rng, name, count, validate_only), name="create_partitions")

    async def alter_configs(
        self,
        resource_type: str,
        resource_name: str,
        configs: Mapping[str, Any],
        validate_only: bool = False,
        *,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """Set (value) / delete (None) overrides: {"configs": overrides after}."""
        return await self._run(request_id, lambda image: handlers.alter_configs(
            image, self.settings, resource_type, resource_name, configs, validate_only, self._config_validator),
            name="alter_configs")

    async def alter_user_scram_credentials(self, upsertions: list[Any], deletions: list[Any], *,
                                           request_id: str | None = None) -> dict[str, Any]:
        return await self._run(request_id, lambda image: handlers.alter_user_scram_credentials(
            image, upsertions, deletions), name="alter_scram")

    # -- ACLs and client quotas (acl_handlers.py) -----------------------------------------------

    async def create_acls(self, acls: list[Any], *, request_id: str | None = None) -> dict[str, Any]:
        """CreateAcls: {"created": bindings}."""
        bindings = [acl_from_dict(a) for a in acls]
        return await self._run(request_id, lambda image: acl_handlers.create_acls(image, self._rng, bindings),
                               name="create_acls")

    async def delete_acls(self, filters: list[Any], *, request_id: str | None = None) -> dict[str, Any]:
        """DeleteAcls: {"filter_results": [{"matching_acls": bindings}]}."""
        parsed = [filter_from_dict(f) for f in filters]
        return await self._run(request_id, lambda image: acl_handlers.delete_acls(image, parsed),
                               name="delete_acls")

    async def alter_client_quotas(self, entries: list[Any], validate_only: bool = False, *,
                                  request_id: str | None = None) -> dict[str, Any]:
        return await self._run(request_id, lambda image: acl_handlers.alter_client_quotas(
            image, entries, validate_only), name="alter_client_quotas")

    # -- brokers ----------------------------------------------------------------------------------

    async def register_broker(
        self,
        broker_id: int,
        incarnation_id: str,
        endpoints: list[dict[str, Any]],
        rack: str | None = None,
        *,
        now_ms: int | None = None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """{"broker_id","broker_epoch"}; the broker starts fenced and heartbeats to get unfenced."""
        response = await self._run(request_id, lambda image: handlers.register_broker(
            image, self.settings, broker_id, incarnation_id, endpoints, rack), name="register_broker")
        self._heartbeats.touch(broker_id, self._now(now_ms))
        return response

    async def unregister_broker(self, broker_id: int, *, request_id: str | None = None) -> dict[str, Any]:
        response = await self._run(request_id, lambda image: handlers.unregister_broker(
            image, self.settings, broker_id), name="unregister_broker")
        self._heartbeats.remove(broker_id)
        return response

    async def broker_heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        *,
        want_fence: bool = False,
        want_shutdown: bool = False,
        offline_log_dirs: Sequence[str] = (),
        offline_replicas: Sequence[tuple[str, int]] = (),
        now_ms: int | None = None,
    ) -> dict[str, Any]:
        """{"broker_id","broker_epoch","is_caught_up","is_fenced","should_shutdown"}; renews the
        session. Answered from the current image at once unless the broker's state changes (or
        a replica on an offline log directory still leads or is in an ISR)."""
        now = self._now(now_ms)

        def build(image: MetadataImage) -> ControllerResult:
            result = handlers.broker_heartbeat(image, self.settings, broker_id, broker_epoch,
                                               current_metadata_offset, want_fence, want_shutdown,
                                               offline_log_dirs, offline_replicas)
            self._heartbeats.touch(broker_id, now)  # only once the epoch checked out
            return result

        if self.is_active:
            try:
                quick = build(self.image)
            except MetadataError:  # perhaps a registration not published yet: the queue waits for it
                quick = None
            if quick is not None and not quick.records:
                return quick.response
            if quick is not None and offline_replicas:
                log.warning("broker %d reports log directories %s offline: moving leaderships and ISR "
                            "memberships off its %d replicas there", broker_id, list(offline_log_dirs),
                            len(offline_replicas))
        return await self._run(None, build, in_thread=False, name="heartbeat")

    async def check_sessions(self, now_ms: int | None = None) -> list[int]:
        """Fence every live broker whose session expired (and that did not heartbeat while the
        fence waited for its commit); the ids found expired."""
        if not self.is_active:
            return []
        now = self._now(now_ms)
        expired = self._heartbeats.expired([b.broker_id for b in self.image.live_brokers()], now)

        def fence(broker_id: int) -> Callable[[MetadataImage], ControllerResult]:
            def build(image: MetadataImage) -> ControllerResult:
                if self._heartbeats.is_alive(broker_id, self._now(now_ms)):
                    return ControllerResult((), {"broker_id": broker_id, "fenced": False})
                result = handlers.fence_broker(image, self.settings, broker_id)
                if result.records:
                    log.warning("broker %d missed heartbeats for %d ms: fencing it", broker_id,
                                self.settings.broker_session_timeout_ms)
                return result
            return build

        await asyncio.gather(*(self._run(None, fence(b), in_thread=False, name="fence") for b in expired))
        return expired

    async def _session_loop(self) -> None:
        interval_ms = self._session_check_interval_ms
        while True:
            planned = self._clock_ms() + interval_ms
            await asyncio.sleep(interval_ms / 1000)
            late_ms = self._clock_ms() - planned
            if late_ms > STALL_TOLERANCE_MS:
                # this process did not run (its loop held up, descheduled, stopped): the
                # heartbeats that arrived meanwhile wait unread, through no fault of the brokers
                self._heartbeats.credit_stall(late_ms)
                if late_ms > self.settings.broker_session_timeout_ms // 4:
                    log.warning("controller %d was held up for %d ms; broker sessions extended by as "
                                "much", self.node_id, late_ms)
            try:
                await self.check_sessions()
            except Exception as e:
                if getattr(e, "error_code", None) in ("NOT_CONTROLLER", "KAFKA_STORAGE_ERROR"):
                    # lost leadership meanwhile, or the metadata log cannot be written (the
                    # quorum logged that once, and a voter stands aside): the fence is tried
                    # again at the next check, or by the next active controller
                    continue
                log.exception("broker session check failed")

    async def allocate_producer_ids(
        self, broker_id: int, broker_epoch: int, *, request_id: str | None = None
    ) -> dict[str, Any]:
        """{"producer_id_start","producer_id_len"}"""
        return await self._run(request_id, lambda image: handlers.allocate_producer_ids(
            image, self.settings, broker_id, broker_epoch), name="allocate_producer_ids")

    # -- partitions -------------------------------------------------------------------------------

    async def alter_partition(
        self,
        broker_id: int,
        broker_epoch: int,
        topic: str,
        partition: int,
        leader_epoch: int,
        partition_epoch: int,
        new_isr: list[BrokerState],
        *,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """ISR change from the leader, each member with its broker epoch (KIP-903): {"topic",
        "topic_id","partition","leader","leader_epoch","isr","partition_epoch"} after the change."""
        return await self._run(request_id, lambda image: handlers.alter_partition(
            image, broker_id, broker_epoch, topic, partition, leader_epoch, partition_epoch, new_isr),
            name="alter_partition")

    async def elect_leaders(
        self, partitions: Iterable[tuple[str, int]] | None = None, *, request_id: str | None = None
    ) -> dict[str, Any]:
        """Preferred leader election: {"partitions":[{"topic","partition","leader","error_code"?,"message"?}]}"""
        wanted = None if partitions is None else list(partitions)
        return await self._run(request_id, lambda image: handlers.elect_leaders(image, wanted),
                               name="elect_leaders")

    async def alter_partition_reassignments(
        self, reassignments: list[dict[str, Any]], *, request_id: str | None = None
    ) -> dict[str, Any]:
        """Start ({"topic","partition","replicas"}) or cancel ("replicas": None) reassignments, all or
        none: {"partitions":[{"topic","partition","replicas","adding_replicas","removing_replicas"}]}."""
        return await self._run(request_id, lambda image: handlers.alter_partition_reassignments(
            image, reassignments), name="reassign")

    async def list_partition_reassignments(self) -> dict[str, Any]:
        """The reassignments in progress, in the same shape."""
        return await self._run(None, handlers.list_partition_reassignments, name="list_reassignments")
