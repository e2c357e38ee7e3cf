"""ControllerService: the active controller's asyncio shell around the pure handlers.

Requests run one at a time (an asyncio lock): wait until the image holds everything committed so
far, validate against it (`handlers.py`), stamp the records with this controller's epoch and the
request id (both in a thread: placing 1,000 partitions is CPU work the loop must not wait on),
propose them, wait until they are committed and published by the loader, answer. State changes only through replay, so the same
code serves the active controller and a standby that takes over.

The quorum makes a node the active controller by committing its `ClaimController` record; the
service acts only once that claim is in its image too, stamps records with that epoch (the log
admits no batch of an older epoch, `metadata/log_rules.py`), and gives every broker a fresh session when it becomes active. A request
id seen in the image is a retry: the remembered answer is returned and nothing is written again.

Broker liveness is soft state (`heartbeats.py`): a background task fences brokers whose session
expired; `check_sessions(now_ms)` does one pass (tests call it with their own clock).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections import OrderedDict
from typing import Any, Callable, Iterable, Mapping

from kraft.controller import acl_handlers, handlers
from kraft.controller.errors import NotControllerError
from kraft.controller.handlers import ConfigValidator, ControllerResult, ControllerSettings
from kraft.controller.heartbeats import BrokerHeartbeatManager
from kraft.controller.metadata_loader import MetadataLoader
from kraft.controller.quorum import Quorum
from kraft.metadata.acl import acl_from_dict, filter_from_dict
from kraft.metadata.image import MetadataImage
from kraft.metadata.partition_change import BrokerState

log = logging.getLogger(__name__)

MAX_REMEMBERED_RESPONSES = 1000
APPLY_TIMEOUT_S = 30.0  # from a commit to its publication here (the loader's slices)


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


def _build(build: Callable[[MetadataImage], ControllerResult], image: MetadataImage, epoch: int,
           request_id: str) -> tuple[ControllerResult, list[dict[str, Any]]]:
    """A request's result and its records, stamped and in their log form (pure: runs in a thread)."""
    result = build(image)
    return result, [r.stamped(epoch, request_id).to_dict() for r in result.records]


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
    ) -> None:
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
        self._lock = asyncio.Lock()
        self._responses: OrderedDict[str, dict[str, Any]] = OrderedDict()
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
                   *, in_thread: bool = True) -> dict[str, Any]:
        async with self._lock:
            await self._loader.caught_up()
            epoch = self._active_epoch()
            if epoch is None:
                raise NotControllerError(f"node {self.node_id} is not the active controller", self.leader_id())
            image = self.image
            if request_id is not None and image.has_request(request_id):
                return self._responses.get(request_id) or {"request_id": request_id, "duplicate": True}
            request_id = request_id or uuid.uuid4().hex
            if in_thread:
                result, records = await asyncio.to_thread(_build, build, image, epoch, request_id)
            else:  # a small build that touches the service's own state
                result, records = _build(build, image, epoch, request_id)
            if records:
                offset = await self._quorum.propose(records, request_id)
                await self._loader.wait_for_offset(offset, APPLY_TIMEOUT_S)
                if self.image.controller_epoch != epoch:
                    # another controller claimed meanwhile: replay ignored our records
                    raise NotControllerError("controller epoch changed during the request", self.leader_id())
            response = result.response_from_image(self.image) if result.response_from_image else result.response
            self._responses[request_id] = response
            while len(self._responses) > MAX_REMEMBERED_RESPONSES:
                self._responses.popitem(last=False)
            return response

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
    ) -> dict[str, Any]:
        """Create one topic: {"name","topic_id","partitions","replication_factor","configs"}."""
        return await self._run(request_id, lambda image: handlers.create_topics(
            image, self.settings, self._rng, name, partitions, replication_factor, configs, validate_only,
            self._config_validator))

    async def delete_topic(self, name: str, *, request_id: str | None = None) -> dict[str, Any]:
        """{"name","topic_id"}"""
        return await self._run(request_id, lambda image: handlers.delete_topic(image, name))

    async def create_partitions(
        self, name: str, count: int, validate_only: bool = False, *, request_id: str | None = None
    ) -> dict[str, Any]:
        """Grow to `count` partitions in total: {"name","partitions"}."""
        return await self._run(request_id, lambda image: handlers.create_partitions(
            image, self.settings, self._rng, name, count, validate_only))

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
            image, self.settings, resource_type, resource_name, configs, validate_only, self._config_validator))

    async def alter_user_scram_credentials(self, upsertions: list[Any], deletions: list[Any], *,
                                           request_id: str | None = None) -> dict[str, Any]:
        return await self._run(request_id, lambda image: handlers.alter_user_scram_credentials(
            image, upsertions, deletions))

    # -- ACLs and client quotas (acl_handlers.py) -----------------------------------------------

    async def create_acls(self, acls: list[Any], *, request_id: str | None = None) -> dict[str, Any]:
        """CreateAcls: {"created": bindings}."""
        bindings = [acl_from_dict(a) for a in acls]
        return await self._run(request_id, lambda image: acl_handlers.create_acls(image, self._rng, bindings))

    async def delete_acls(self, filters: list[Any], *, request_id: str | None = None) -> dict[str, Any]:
        """DeleteAcls: {"filter_results": [{"matching_acls": bindings}]}."""
        parsed = [filter_from_dict(f) for f in filters]
        return await self._run(request_id, lambda image: acl_handlers.delete_acls(image, parsed))

    async def alter_client_quotas(self, entries: list[Any], validate_only: bool = False, *,
                                  request_id: str | None = None) -> dict[str, Any]:
        return await self._run(request_id, lambda image: acl_handlers.alter_client_quotas(
            image, entries, validate_only))

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
            image, self.settings, broker_id, incarnation_id, endpoints, rack))
        self._heartbeats.touch(broker_id, self._now(now_ms))
        return response

    async def unregister_broker(self, broker_id: int, *, request_id: str | None = None) -> dict[str, Any]:
        response = await self._run(request_id, lambda image: handlers.unregister_broker(image, self.settings, broker_id))
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
        now_ms: int | None = None,
    ) -> dict[str, Any]:
        """{"broker_id","broker_epoch","is_caught_up","is_fenced","should_shutdown"}; renews the session."""
        now = self._now(now_ms)

        def build(image: MetadataImage) -> ControllerResult:
            result = handlers.broker_heartbeat(image, self.settings, broker_id, broker_epoch,
                                               current_metadata_offset, want_fence, want_shutdown)
            self._heartbeats.touch(broker_id, now)  # only once the epoch checked out
            return result

        return await self._run(None, build, in_thread=False)

    async def check_sessions(self, now_ms: int | None = None) -> list[int]:
        """Fence every live broker whose session expired; the ids fenced."""
        if not self.is_active:
            return []
        now = self._now(now_ms)
        expired = self._heartbeats.expired([b.broker_id for b in self.image.live_brokers()], now)
        for broker_id in expired:
            log.warning("broker %d missed heartbeats for %d ms: fencing it", broker_id,
                        self.settings.broker_session_timeout_ms)
            await self._run(None, lambda image: handlers.fence_broker(image, self.settings, broker_id))
        return expired

    async def _session_loop(self) -> None:
        while True:
            await asyncio.sleep(self._session_check_interval_ms / 1000)
            try:
                await self.check_sessions()
            except Exception as e:
                if getattr(e, "error_code", None) == "NOT_CONTROLLER":
                    continue  # lost leadership meanwhile; the next active controller fences
                log.exception("broker session check failed")

    async def allocate_producer_ids(
        self, broker_id: int, broker_epoch: int, *, request_id: str | None = None
    ) -> dict[str, Any]:
        """{"producer_id_start","producer_id_len"}"""
        return await self._run(request_id, lambda image: handlers.allocate_producer_ids(
            image, self.settings, broker_id, broker_epoch))

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
            image, broker_id, broker_epoch, topic, partition, leader_epoch, partition_epoch, new_isr))

    async def elect_leaders(
        self, partitions: Iterable[tuple[str, int]] | None = None, *, request_id: str | None = None
    ) -> dict[str, Any]:
        """Preferred leader election: {"partitions":[{"topic","partition","leader","error_code"?,"message"?}]}"""
        wanted = None if partitions is None else list(partitions)
        return await self._run(request_id, lambda image: handlers.elect_leaders(image, wanted))

    async def alter_partition_reassignments(
        self, reassignments: list[dict[str, Any]], *, request_id: str | None = None
    ) -> dict[str, Any]:
        """Start ({"topic","partition","replicas"}) or cancel ("replicas": None) reassignments, all or
        none: {"partitions":[{"topic","partition","replicas","adding_replicas","removing_replicas"}]}."""
        return await self._run(request_id, lambda image: handlers.alter_partition_reassignments(image, reassignments))

    async def list_partition_reassignments(self) -> dict[str, Any]:
        """The reassignments in progress, in the same shape."""
        return await self._run(None, handlers.list_partition_reassignments)
