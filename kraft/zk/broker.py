"""The broker side of ZooKeeper mode.

- `ZkBrokerRegistration`: the ephemeral `/brokers/ids/<id>` znode (its czxid is the broker
  epoch), registered again after a session expiry.
- `ZkMetadataReceiver`: applies the controller's UpdateMetadata pushes (a whole image) to the
  node's `MetadataLoader`, refusing any push whose controller epoch is below the highest seen
  (STALE_CONTROLLER_EPOCH): a controller that was paused past its session cannot steer brokers.
- `ZkAdmin`: what `ControllerChannel` is in KRaft mode, on znodes (Kafka's AdminZkClient and the
  leader's ISR writes): topic create/delete/partitions/configs validated by the same pure rules
  (`kraft.controller.handlers`) then written to ZooKeeper, answered once this node's metadata
  shows the change; ISR changes as a conditional `setData` on the partition state znode plus an
  `isr_change_notification`; producer id blocks from `/latest_producer_id_block`.
- `update_metadata_route`: `POST /v1/zk/update-metadata` (msgpack) for the controller's pushes.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import Any, Callable, Mapping

import msgpack
from aiohttp import web
from kazoo.exceptions import (
    BadVersionError, ConnectionClosedError, ConnectionLoss, NodeExistsError, NoNodeError, OperationTimeoutError,
    SessionExpiredError,
)

from kraft.errors import KraftError
from kraft.controller import handlers
from kraft.controller.handlers import ConfigValidator, ControllerSettings
from kraft.controller.metadata_loader import MetadataLoader
from kraft.zk import znodes
from kraft.zk.image import partition_state
from kraft.zk.session import ZkSession
from kraft.metadata.errors import MetadataError
from kraft.metadata.image import MetadataImage
from kraft.metadata.partition_change import BrokerState
from kraft.metadata.records import Partition

log = logging.getLogger("kraft.zk.broker")

UPDATE_METADATA_PATH = "/v1/zk/update-metadata"
VISIBLE_TIMEOUT_S = 30.0
ZK_UNAVAILABLE = (ConnectionLoss, ConnectionClosedError, SessionExpiredError, OperationTimeoutError)
REGISTRATION_RETRY_S = 0.2


class ImageWaiter:
    """A metadata publisher that wakes callers waiting for a condition on the image."""

    def __init__(self, loader: MetadataLoader) -> None:
        self.loader = loader
        self._waiters: list[tuple[Callable[[MetadataImage], bool], asyncio.Future[None]]] = []

    def on_metadata_update(self, delta: object, image: MetadataImage) -> None:
        for entry in list(self._waiters):
            if not entry[1].done() and entry[0](image):
                entry[1].set_result(None)

    async def wait(self, condition: Callable[[MetadataImage], bool], what: str,
                   timeout_s: float = VISIBLE_TIMEOUT_S) -> None:
        if condition(self.loader.image):
            return
        entry = (condition, asyncio.get_running_loop().create_future())
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(entry[1], timeout_s)
        except asyncio.TimeoutError:
            raise KraftError("REQUEST_TIMED_OUT", f"written to ZooKeeper, but {what} not seen by this "
                                                  f"broker within {timeout_s:g} s (is a controller up?)") from None
        finally:
            self._waiters.remove(entry)


class ZkBrokerRegistration:
    def __init__(self, session: ZkSession, broker_id: int, rack: str | None, *,
                 protocol: str = znodes.SECURITY_PROTOCOL, listener: str | None = None) -> None:
        self.session = session
        self.broker_id = broker_id
        self.rack = rack
        self.protocol = protocol  # the client listener's security protocol, and its name if any
        self.listener = listener or None
        self.endpoint: tuple[str, int] = ("", 0)
        self.broker_epoch = -1
        self._registered = False  # once registered, a new session registers again
        self._task: asyncio.Task[None] | None = None

    @property
    def state(self) -> str:
        return "RUNNING" if self.broker_epoch >= 0 else "STARTING"

    async def register(self) -> None:
        """Creates the ephemeral znode. One left by this broker's previous process (kill -9)
        lives until that session expires: wait for it rather than fail."""
        deadline = time.monotonic() + 2 * self.session.settings.session_timeout_ms / 1000 + 5
        path = znodes.broker_path(self.broker_id)
        host, port = self.endpoint
        while True:
            try:
                await asyncio.to_thread(self.session.client.create, path,
                                        znodes.encode_broker(host, port, self.rack, protocol=self.protocol,
                                                             listener=self.listener), ephemeral=True)
                break
            except NodeExistsError:
                stat = await asyncio.to_thread(self.session.client.exists, path)
                if stat is not None and stat.ephemeralOwner == self.session.session_id:
                    break  # ours (a retried create)
                if time.monotonic() > deadline:
                    raise RuntimeError(f"broker id {self.broker_id} is registered in ZooKeeper by another "
                                       f"live session ({path}): is another broker using this id?") from None
                await asyncio.sleep(REGISTRATION_RETRY_S)
        stat = await asyncio.to_thread(self.session.client.exists, path)
        self.broker_epoch = stat.czxid
        self._registered = True
        log.info("registered broker %d in ZooKeeper at %s (epoch %d)", self.broker_id, path, self.broker_epoch)

    def on_session_state(self, state: str) -> None:
        if state == "LOST":
            self.broker_epoch = -1
        elif (state == "CONNECTED" and self._registered and self.broker_epoch < 0
              and (self._task is None or self._task.done())):
            self._task = asyncio.get_running_loop().create_task(self._register_again())

    async def _register_again(self) -> None:
        try:
            await self.register()
        except Exception as e:
            log.error("broker %d could not register again after its session expired: %s", self.broker_id, e)

    async def report_log_dir_failure(self, partitions: list[tuple[str, int]]) -> None:
        """Kafka's LogDirFailureHandler: a log directory went offline; the controller moves the
        leaderships and ISR memberships of `partitions` (this broker's replicas there) elsewhere."""
        try:
            await asyncio.to_thread(
                self.session.client.create, f"{znodes.LOG_DIR_EVENT}/{znodes.LOG_DIR_EVENT_PREFIX}",
                znodes.encode_log_dir_event(self.broker_id, self.broker_epoch, partitions), sequence=True)
        except Exception as e:  # the replicas stay offline here either way
            log.error("broker %d could not report its offline log directory to the controller: %s",
                      self.broker_id, e)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


class ZkMetadataReceiver:
    def __init__(self, node_id: int, loader: MetadataLoader, cluster_id: Callable[[], str]) -> None:
        self.node_id = node_id
        self.loader = loader
        self.cluster_id = cluster_id
        self.controller_epoch = 0  # the highest this broker has seen
        self.refused = 0  # pushes refused as stale

    def update_metadata(self, cluster_id: Any, controller_id: Any, controller_epoch: Any,
                        snapshot: Any) -> dict[str, Any]:
        if cluster_id != self.cluster_id():
            raise KraftError("INCONSISTENT_CLUSTER_ID",
                             f"push for cluster {cluster_id!r}, this broker is in {self.cluster_id()!r}")
        if not isinstance(controller_epoch, int) or not isinstance(controller_id, int):
            raise KraftError("INVALID_REQUEST", "controller_id and controller_epoch must be integers")
        if controller_epoch < self.controller_epoch:
            self.refused += 1
            log.warning("refused metadata from controller %d: its epoch %d is older than %d",
                        controller_id, controller_epoch, self.controller_epoch)
            raise KraftError("STALE_CONTROLLER_EPOCH",
                             f"controller epoch {controller_epoch} is older than {self.controller_epoch}, "
                             f"the latest this broker has seen", controller_epoch=self.controller_epoch)
        try:
            image = MetadataImage.from_snapshot(snapshot)
        except ValueError as e:
            raise KraftError("INVALID_REQUEST", f"metadata image: {e}") from None
        if image.controller_epoch != controller_epoch or image.controller_id != controller_id:
            raise KraftError("INVALID_REQUEST", "the image's controller differs from the push's")
        self.controller_epoch = controller_epoch
        if image.offset > self.loader.offset:  # else a late copy of an older push
            self.loader.load_snapshot(image)
        return {"broker_id": self.node_id, "metadata_offset": self.loader.offset,
                "controller_epoch": self.controller_epoch}


def update_metadata_route(receiver: ZkMetadataReceiver) -> web.RouteDef:
    async def handle(request: web.Request) -> web.Response:
        try:
            body = msgpack.unpackb(await request.read(), raw=False, strict_map_key=False)
        except (ValueError, msgpack.UnpackException, TypeError) as e:
            raise KraftError("INVALID_REQUEST", f"body is not msgpack: {e}") from None
        if not isinstance(body, dict):
            raise KraftError("INVALID_REQUEST", "body must be a map")
        answer = receiver.update_metadata(body.get("cluster_id"), body.get("controller_id"),
                                          body.get("controller_epoch"), body.get("image"))
        return web.json_response(answer)

    return web.post(UPDATE_METADATA_PATH, handle)


class ZkAdmin:
    def __init__(self, session: ZkSession, loader: MetadataLoader, waiter: ImageWaiter,
                 settings: ControllerSettings, config_validator: ConfigValidator | None) -> None:
        self.session = session
        self.loader = loader
        self.waiter = waiter
        self.settings = settings  # LocalAdmin reads num_partitions
        self.config_validator = config_validator
        self._rng = random.Random()

    @property
    def _zk(self) -> Any:
        return self.session.client

    async def _zk_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Runs a blocking ZooKeeper step; ZooKeeper being away is a retriable NETWORK_EXCEPTION
        (nothing was written, or the write's outcome is re-checked by the retry's validation)."""
        if not self._zk.connected:
            raise KraftError("NETWORK_EXCEPTION", f"ZooKeeper {self.session.settings.connect} is unreachable: retry")
        try:
            return await asyncio.to_thread(fn, *args)
        except ZK_UNAVAILABLE as e:
            raise KraftError("NETWORK_EXCEPTION", f"ZooKeeper {self.session.settings.connect}: "
                                                  f"{type(e).__name__}: retry") from None

    # -- topics (AdminZkClient) -------------------------------------------------------------------

    async def create_topics(self, name: str, partitions: int | None = None, replication_factor: int | None = None,
                            configs: Mapping[str, Any] | None = None, validate_only: bool = False,
                            assignments: list[list[int]] | None = None) -> dict[str, Any]:
        result = handlers.create_topics(self.loader.image, self.settings, self._rng, name, partitions,
                                        replication_factor, configs, validate_only, self.config_validator,
                                        assignments)
        if validate_only:
            return result.response
        topic_id = result.response["topic_id"]
        assignment = {r.partition: r.replicas for r in result.records if isinstance(r, Partition)}
        await self._zk_call(self._create_topic, name, topic_id, assignment, result.response["configs"])
        await self.waiter.wait(
            lambda image: (t := image.topic_by_name(name)) is not None and t.topic_id == topic_id
            and len(t.partitions) == len(assignment), f"topic {name!r}")
        return result.response

    def _create_topic(self, name: str, topic_id: str, assignment: Mapping[int, tuple[int, ...]],
                      config: Mapping[str, str]) -> None:
        if self._zk.exists(znodes.topic_path(name)) is not None:
            raise MetadataError("TOPIC_ALREADY_EXISTS", f"topic {name!r} already exists")
        if self._zk.exists(znodes.delete_topic_path(name)) is not None:
            raise MetadataError("TOPIC_ALREADY_EXISTS", f"topic {name!r} is marked for deletion")
        self._set_config(name, config)  # before the topic, as Kafka's AdminZkClient does
        try:
            self._zk.create(znodes.topic_path(name), znodes.encode_topic(topic_id, assignment))
        except NodeExistsError:
            raise MetadataError("TOPIC_ALREADY_EXISTS", f"topic {name!r} already exists") from None

    def _set_config(self, name: str, config: Mapping[str, str]) -> None:
        path = znodes.topic_config_path(name)
        try:
            self._zk.set(path, znodes.encode_config(config))
        except NoNodeError:
            self._zk.create(path, znodes.encode_config(config), makepath=True)

    async def delete_topic(self, name: str) -> dict[str, Any]:
        result = handlers.delete_topic(self.loader.image, name)
        topic_id = result.response["topic_id"]
        try:
            await self._zk_call(self._zk.create, znodes.delete_topic_path(name))
        except NodeExistsError:
            pass  # already marked
        await self.waiter.wait(lambda image: image.topic_by_id(topic_id) is None, f"the deletion of {name!r}")
        return result.response

    async def create_partitions(self, name: str, count: int, validate_only: bool = False) -> dict[str, Any]:
        image = self.loader.image
        result = handlers.create_partitions(image, self.settings, self._rng, name, count, validate_only)
        if validate_only:
            return result.response
        added = {r.partition: r.replicas for r in result.records if isinstance(r, Partition)}
        await self._zk_call(self._add_partitions, name, added)
        await self.waiter.wait(
            lambda image: (t := image.topic_by_name(name)) is not None and len(t.partitions) >= count,
            f"{count} partitions of {name!r}")
        return result.response

    def _add_partitions(self, name: str, added: Mapping[int, tuple[int, ...]]) -> None:
        path = znodes.topic_path(name)
        try:
            data, stat = self._zk.get(path)
        except NoNodeError:
            raise MetadataError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist") from None
        current = znodes.decode_topic(name, data)
        if len(current.partitions) != min(added):
            raise MetadataError("INVALID_UPDATE_VERSION", f"topic {name!r} changed meanwhile: retry")
        try:
            self._zk.set(path, znodes.encode_topic(current.topic_id, {**current.partitions, **added},
                                                   current.adding_replicas, current.removing_replicas),
                         version=stat.version)
        except BadVersionError:
            raise MetadataError("INVALID_UPDATE_VERSION", f"topic {name!r} changed meanwhile: retry") from None

    async def alter_configs(self, resource_type: str, resource_name: str, configs: Mapping[str, Any],
                            validate_only: bool = False) -> dict[str, Any]:
        result = handlers.alter_configs(self.loader.image, self.settings, resource_type, resource_name, configs,
                                        validate_only, self.config_validator)
        if validate_only or not result.records:
            return result.response
        merged = result.response["configs"]
        await self._zk_call(self._alter_config, resource_name, merged)
        await self.waiter.wait(lambda image: dict(image.topic_configs(resource_name)) == merged,
                               f"the configs of {resource_name!r}")
        return result.response

    def _alter_config(self, name: str, config: Mapping[str, str]) -> None:
        self._set_config(name, config)
        self._zk.create(f"{znodes.CONFIG_CHANGES}/{znodes.CONFIG_CHANGE_PREFIX}", znodes.encode_config_change(name),
                        sequence=True)

    # -- the partition leader's ISR changes (ReplicaManager in Kafka's ZooKeeper mode) ------------

    async def alter_partition(self, broker_id: int, broker_epoch: int, topic: str, partition: int,
                              leader_epoch: int, partition_epoch: int, new_isr: list[BrokerState], *,
                              request_id: str | None = None) -> dict[str, Any]:
        image = self.loader.image
        result = handlers.alter_partition(image, broker_id, broker_epoch, topic, partition, leader_epoch,
                                          partition_epoch, new_isr)
        if not result.records:
            return result.response
        reg = image.partition(topic, partition)
        assert reg is not None  # alter_partition checked it
        after = reg.merge(result.records[0])
        await self._zk_call(self._write_isr, topic, partition, reg.partition_epoch,
                                znodes.encode_partition_state(partition_state(after, image.controller_epoch)))
        return result.response

    def _write_isr(self, topic: str, partition: int, version: int, data: bytes) -> None:
        try:
            self._zk.set(znodes.partition_state_path(topic, partition), data, version=version)
        except BadVersionError:
            raise MetadataError("INVALID_UPDATE_VERSION",
                                f"{topic}-{partition}: the state znode moved past version {version}") from None
        except NoNodeError:
            raise MetadataError("UNKNOWN_TOPIC_OR_PARTITION", f"{topic}-{partition} does not exist") from None
        self._zk.create(f"{znodes.ISR_CHANGE}/{znodes.ISR_CHANGE_PREFIX}",
                        znodes.encode_isr_change([(topic, partition)]), sequence=True)

    # -- producer ids ------------------------------------------------------------------------------

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> dict[str, Any]:
        start = await self._zk_call(self._claim_producer_ids, broker_id)
        return {"producer_id_start": start, "producer_id_len": znodes.PRODUCER_ID_BLOCK_SIZE}

    def _claim_producer_ids(self, broker_id: int) -> int:
        size = znodes.PRODUCER_ID_BLOCK_SIZE
        while True:
            try:
                data, stat = self._zk.get(znodes.PRODUCER_ID_BLOCK)
            except NoNodeError:
                try:
                    self._zk.create(znodes.PRODUCER_ID_BLOCK, znodes.encode_producer_id_block(broker_id, 0, size - 1))
                    return 0
                except NodeExistsError:
                    continue
            # Kafka creates the znode empty: then the first block starts at 0
            _, end = znodes.decode_producer_id_block(data) if data else (0, -1)
            try:
                self._zk.set(znodes.PRODUCER_ID_BLOCK,
                             znodes.encode_producer_id_block(broker_id, end + 1, end + size), version=stat.version)
                return end + 1
            except BadVersionError:
                continue  # another broker took a block meanwhile
